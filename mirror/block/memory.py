"""An in-memory object store for unit tests, with request counters."""

from __future__ import annotations

import bisect
import hashlib
import threading
from collections import Counter
from collections.abc import Iterator
from typing import BinaryIO

from mirror.block.errors import BlockNotFoundError, InvalidRangeError
from mirror.block.protocol import ObjectInfo

__all__ = ["MemoryBlockStore", "read_all"]


def read_all(data: bytes | BinaryIO) -> bytes:
    """Return ``data`` as bytes, draining it if it is a stream."""
    if isinstance(data, bytes | bytearray | memoryview):
        return bytes(data)
    return data.read()


class MemoryBlockStore:
    """A thread-safe dictionary implementing :class:`~mirror.block.protocol.BlockStore`.

    ``requests`` counts calls by operation name (``put``, ``get``, ``head``, ``list``, …) so tests
    can assert how much I/O a piece of the core performs.
    """

    def __init__(self, namespace: str = "mem://default") -> None:
        self._namespace = namespace
        self._objects: dict[str, bytes] = {}
        self._keys: list[str] = []
        self._lock = threading.Lock()
        self.requests: Counter[str] = Counter()
        self.keys_read: list[str] = []

    @property
    def namespace(self) -> str:
        """Return the namespace URI of this store."""
        return self._namespace

    def _store(self, key: str, body: bytes) -> None:
        if key not in self._objects:
            bisect.insort(self._keys, key)
        self._objects[key] = body

    def put(self, key: str, data: bytes | BinaryIO) -> ObjectInfo:
        """Write ``data`` at ``key``."""
        body = read_all(data)
        with self._lock:
            self.requests["put"] += 1
            self._store(key, body)
        return ObjectInfo(key, len(body), hashlib.md5(body, usedforsecurity=False).hexdigest())

    def put_if_absent(self, key: str, data: bytes) -> bool:
        """Write ``data`` at ``key`` unless an object is there."""
        with self._lock:
            self.requests["put"] += 1
            if key in self._objects:
                return False
            self._store(key, bytes(data))
            return True

    def get(self, key: str, start: int = 0, end: int | None = None) -> bytes:
        """Return bytes ``[start, end)`` of the object at ``key``."""
        with self._lock:
            self.requests["get"] += 1
            self.keys_read.append(key)
            try:
                body = self._objects[key]
            except KeyError:
                raise BlockNotFoundError(key) from None
        if start < 0 or start > len(body) or (start == len(body) and len(body) > 0):
            raise InvalidRangeError(f"range start {start} beyond size {len(body)} of {key!r}")
        return body[start:end]

    def head(self, key: str) -> ObjectInfo:
        """Return the info of the object at ``key``."""
        with self._lock:
            self.requests["head"] += 1
            try:
                body = self._objects[key]
            except KeyError:
                raise BlockNotFoundError(key) from None
        return ObjectInfo(key, len(body), hashlib.md5(body, usedforsecurity=False).hexdigest())

    def exists(self, key: str) -> bool:
        """Return whether ``key`` holds an object."""
        with self._lock:
            self.requests["head"] += 1
            return key in self._objects

    def list(self, prefix: str = "", start_after: str = "") -> Iterator[ObjectInfo]:
        """Yield objects under ``prefix`` after ``start_after``, in key order."""
        with self._lock:
            self.requests["list"] += 1
            i = (
                bisect.bisect_right(self._keys, start_after)
                if start_after and start_after >= prefix
                else bisect.bisect_left(self._keys, prefix)
            )
            found = []
            for key in self._keys[i:]:
                if not key.startswith(prefix):
                    break
                body = self._objects[key]
                found.append(
                    ObjectInfo(key, len(body), hashlib.md5(body, usedforsecurity=False).hexdigest())
                )
        yield from found

    def delete(self, key: str) -> None:
        """Remove the object at ``key`` if present."""
        with self._lock:
            self.requests["delete"] += 1
            if self._objects.pop(key, None) is not None:
                del self._keys[bisect.bisect_left(self._keys, key)]

    def reset_counters(self) -> None:
        """Forget the request counts and the log of keys read."""
        with self._lock:
            self.requests.clear()
            self.keys_read.clear()
