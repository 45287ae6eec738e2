"""Errors of garbage collection, under the shared tree; messages start with lakeFS's texts.

The official lakeFS clients match on lakeFS's error texts, so each message starts with the text
lakeFS answers in the same case and puts LakeMirror's detail after it.
"""

from __future__ import annotations

from mirror.errors import InvalidValueError, NotFoundError, ReadOnlyError

__all__ = [
    "GCReadOnlyError",
    "GCRulesNotFoundError",
    "InvalidContinuationTokenError",
    "InvalidGCRulesError",
    "lakefs_message",
]


def lakefs_message(text: str, detail: str) -> str:
    """Return ``"<text>: <detail>"``, or ``detail`` alone when it starts with ``text`` already."""
    if not detail or detail == text:
        return text
    if detail.startswith(text):
        return detail
    return f"{text}: {detail}"


class GCRulesNotFoundError(NotFoundError):
    """The repository has no garbage collection rules (lakeFS: ``not found``)."""

    def __init__(self, repository: str) -> None:
        detail = f"repository {repository!r} has no garbage collection rules"
        super().__init__(lakefs_message("not found", detail))
        self.repository = repository


class InvalidGCRulesError(InvalidValueError):
    """A body of garbage collection rules is malformed; the message names the field."""


class InvalidContinuationTokenError(InvalidValueError):
    """A continuation token of ``prepare_uncommited`` is not one this server handed out."""

    def __init__(self, detail: str) -> None:
        super().__init__(lakefs_message("invalid continuation token", detail))


class GCReadOnlyError(ReadOnlyError):
    """Rules and runs of garbage collection are refused on a read-only repository (a mirror).

    A mirror's objects are deleted by replication of the source's deletions, never by a run
    of its own.
    """

    def __init__(self, repository: str, detail: str = "") -> None:
        super().__init__(
            lakefs_message(
                "read-only repository",
                detail or f"repository {repository!r} is read-only",
            )
        )
        self.repository = repository
