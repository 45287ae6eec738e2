"""A client of the lakeFS-compatible API over HTTP, configured as lakectl is.

The ``lakemirror`` client commands and the Spark helpers (:mod:`mirror.spark`) both speak to a
server through it: the client, lakectl's configuration (``~/.lakectl.yaml``, ``LAKECTL_*``),
the login token ``lakemirror login`` keeps, and the errors each answer becomes (with the exit
code the commands end with).
"""
