"""The narrow key-value interface the versioning core stands on."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Protocol, runtime_checkable

__all__ = ["KV", "reads_locally"]


@runtime_checkable
class KV(Protocol):
    """A sorted byte-keyed store with one compare-and-swap primitive.

    Keys and values are bytes; scans return keys in bytewise order. Every method may raise
    :class:`~mirror.kv.errors.KVUnavailableError` when the backend fails transiently.
    """

    def get(self, key: bytes) -> bytes:
        """Return the value of ``key``.

        Raises:
            KeyNotFoundError: ``key`` is absent.
        """
        ...

    def set(self, key: bytes, value: bytes) -> None:
        """Store ``value`` under ``key`` unconditionally."""
        ...

    def set_many(self, items: Iterable[tuple[bytes, bytes]]) -> None:
        """Store many pairs unconditionally (no atomicity promised across pairs)."""
        ...

    def set_if(self, key: bytes, value: bytes, expected: bytes | None) -> None:
        """Store ``value`` only if the current value equals ``expected``.

        ``expected=None`` means the key must be absent (create-if-absent).

        Raises:
            KVPreconditionFailedError: the stored value differs from ``expected``.
        """
        ...

    def delete(self, key: bytes) -> None:
        """Remove ``key``; removing an absent key is not an error."""
        ...

    def delete_many(self, keys: Iterable[bytes]) -> None:
        """Remove every key of ``keys``; absent keys are not an error.

        One call costs what one removal does on stores that batch (one transaction, 25 keys a
        request); no atomicity is promised across keys.
        """
        ...

    def delete_if(self, key: bytes, expected: bytes) -> None:
        """Remove ``key`` only if its current value equals ``expected``.

        Raises:
            KVPreconditionFailedError: the key is absent or holds another value.
        """
        ...

    def scan(self, prefix: bytes, start: bytes = b"") -> Iterator[tuple[bytes, bytes]]:
        """Yield ``(key, value)`` for keys starting with ``prefix`` and ``>= start``, in order.

        The scan pages through the store lazily; writes made during a scan may or may not
        be seen.
        """
        ...

    def close(self) -> None:
        """Release resources held by the store."""
        ...


def reads_locally(kv: object) -> bool:
    """Return whether ``kv`` answers reads in-process, in microseconds, never waiting for a writer.

    Such a KV says so with a ``local_reads`` attribute that is ``True`` (SQLite in WAL mode);
    callers on an event loop may then read it inline instead of on a worker thread.
    """
    return getattr(kv, "local_reads", False) is True
