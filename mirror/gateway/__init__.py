"""The S3-compatible gateway: bucket = repository, key = ``<ref>/<path>`` (DESIGN.md §8a).

A sibling of :mod:`mirror.api` over the same catalog and auth store, served by
``lakemirror server`` on the API's own listener: requests addressed to a gateway host name, or
carrying an AWS signature, reach the gateway; the rest reach ``/api/v1``.
"""
