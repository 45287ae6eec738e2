"""Errors raised by object stores."""

from __future__ import annotations

from mirror.errors import (
    AlreadyExistsError,
    InvalidValueError,
    NotFoundError,
    UnavailableError,
)

__all__ = [
    "BlockNotFoundError",
    "BlockObjectExistsError",
    "BlockUnavailableError",
    "InvalidNamespaceError",
    "InvalidRangeError",
]


class BlockNotFoundError(NotFoundError):
    """The object does not exist in the store."""

    def __init__(self, key: str) -> None:
        super().__init__(f"object not found: {key!r}")
        self.key = key


class BlockObjectExistsError(AlreadyExistsError):
    """A write-if-absent found the object already present."""

    def __init__(self, key: str) -> None:
        super().__init__(f"object already exists: {key!r}")
        self.key = key


class InvalidRangeError(InvalidValueError):
    """A byte range lies outside the object."""


class InvalidNamespaceError(InvalidValueError):
    """A storage namespace URI is malformed or of an unsupported scheme."""


class BlockUnavailableError(UnavailableError):
    """The object store failed in a way that may succeed on retry."""
