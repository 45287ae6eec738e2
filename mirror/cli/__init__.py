"""The ``lakemirror`` command."""
