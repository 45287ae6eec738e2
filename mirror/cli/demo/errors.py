"""Errors of ``lakemirror demo``: a step that failed, or a stop before the demo was running."""

from __future__ import annotations

from mirror.errors import LakeMirrorError

__all__ = ["DemoError", "DemoInterruptedError"]


class DemoError(LakeMirrorError):
    """A step of the demo failed: the message says which and why."""


class DemoInterruptedError(DemoError):
    """Ctrl-C or SIGTERM arrived before the demo was running."""
