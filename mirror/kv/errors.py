"""Errors raised by KV stores."""

from __future__ import annotations

from mirror.errors import NotFoundError, PreconditionFailedError, UnavailableError

__all__ = ["KVPreconditionFailedError", "KVUnavailableError", "KeyNotFoundError"]


class KeyNotFoundError(NotFoundError):
    """The key is not in the store."""

    def __init__(self, key: bytes) -> None:
        super().__init__(f"key not found: {key!r}")
        self.key = key


class KVPreconditionFailedError(PreconditionFailedError):
    """A conditional write found a different value than expected.

    Attributes:
        key: The key of the conditional write.
        expected: The value the caller expected (``None``: expected absent).
        found: The value actually stored (``None``: absent).
    """

    def __init__(self, key: bytes, expected: bytes | None, found: bytes | None) -> None:
        want = "absent" if expected is None else f"{len(expected)} bytes"
        got = "absent" if found is None else f"{len(found)} bytes"
        super().__init__(f"precondition failed on {key!r}: expected {want}, found {got}")
        self.key = key
        self.expected = expected
        self.found = found


class KVUnavailableError(UnavailableError):
    """The KV backend failed in a way that may succeed on retry."""
