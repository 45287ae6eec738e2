"""An in-memory KV store for unit tests."""

from __future__ import annotations

import bisect
import threading
from collections.abc import Iterable, Iterator

from mirror.kv.errors import KeyNotFoundError, KVPreconditionFailedError

__all__ = ["MemoryKV"]

_PAGE = 256


class MemoryKV:
    """A thread-safe sorted dictionary implementing :class:`~mirror.kv.protocol.KV`."""

    def __init__(self) -> None:
        self._data: dict[bytes, bytes] = {}
        self._keys: list[bytes] = []
        self._lock = threading.Lock()

    def _put(self, key: bytes, value: bytes) -> None:
        if key not in self._data:
            bisect.insort(self._keys, key)
        self._data[key] = value

    def _remove(self, key: bytes) -> None:
        if key in self._data:
            del self._data[key]
            del self._keys[bisect.bisect_left(self._keys, key)]

    def get(self, key: bytes) -> bytes:
        """Return the value of ``key`` or raise :class:`KeyNotFoundError`."""
        with self._lock:
            try:
                return self._data[key]
            except KeyError:
                raise KeyNotFoundError(key) from None

    def set(self, key: bytes, value: bytes) -> None:
        """Store ``value`` under ``key``."""
        with self._lock:
            self._put(key, bytes(value))

    def set_many(self, items: Iterable[tuple[bytes, bytes]]) -> None:
        """Store every pair of ``items``."""
        with self._lock:
            for key, value in items:
                self._put(key, bytes(value))

    def set_if(self, key: bytes, value: bytes, expected: bytes | None) -> None:
        """Store ``value`` if the current value equals ``expected`` (``None``: absent)."""
        with self._lock:
            found = self._data.get(key)
            if found != expected:
                raise KVPreconditionFailedError(key, expected, found)
            self._put(key, bytes(value))

    def delete(self, key: bytes) -> None:
        """Remove ``key`` if present."""
        with self._lock:
            self._remove(key)

    def delete_many(self, keys: Iterable[bytes]) -> None:
        """Remove every key of ``keys`` that is present."""
        with self._lock:
            for key in keys:
                self._remove(key)

    def delete_if(self, key: bytes, expected: bytes) -> None:
        """Remove ``key`` if it holds ``expected``."""
        with self._lock:
            found = self._data.get(key)
            if found != expected:
                raise KVPreconditionFailedError(key, expected, found)
            self._remove(key)

    def scan(self, prefix: bytes, start: bytes = b"") -> Iterator[tuple[bytes, bytes]]:
        """Yield pairs under ``prefix`` from ``start`` on, a page at a time."""
        cursor = max(prefix, start)
        inclusive = True
        while True:
            with self._lock:
                find = bisect.bisect_left if inclusive else bisect.bisect_right
                i = find(self._keys, cursor)
                page = [
                    (k, self._data[k]) for k in self._keys[i : i + _PAGE] if k.startswith(prefix)
                ]
                full = len(self._keys) - i > _PAGE
            yield from page
            if not page or not full or len(page) < _PAGE:
                return
            cursor, inclusive = page[-1][0], False

    def close(self) -> None:
        """Do nothing: memory needs no release."""
