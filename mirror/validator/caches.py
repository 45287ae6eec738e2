"""What the validator knows to be present in a destination namespace, kept forever or bounded.

Files under ``_lakefs/`` and ``data/`` are immutable and never reused, so once seen present they
stay present: a validated range ID never needs checking again, nor does a data key seen with its
size. Range IDs are few (about one per 500 objects) and kept whole, persisted in a KV for
restarts; object keys are many and kept in a bounded LRU.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Iterable
from typing import Protocol, runtime_checkable

from mirror.kv.protocol import KV

__all__ = [
    "KVValidatedRanges",
    "MemoryValidatedRanges",
    "ObjectCache",
    "ValidatedRanges",
]


@runtime_checkable
class ValidatedRanges(Protocol):
    """The set of range IDs whose file and every data object are known present.

    Implementations may raise :class:`~mirror.kv.errors.KVUnavailableError` when their backing
    store fails.
    """

    def contains(self, range_id: str) -> bool:
        """Return whether ``range_id`` was validated."""
        ...

    def add_many(self, range_ids: Iterable[str]) -> None:
        """Record ``range_ids`` as validated (adding a known ID is a no-op)."""
        ...


class MemoryValidatedRanges:
    """Validated range IDs in a set, lost on restart."""

    def __init__(self, range_ids: Iterable[str] = ()) -> None:
        self._ids: set[str] = set(range_ids)

    def __len__(self) -> int:
        return len(self._ids)

    def contains(self, range_id: str) -> bool:
        """Return whether ``range_id`` was validated."""
        return range_id in self._ids

    def add_many(self, range_ids: Iterable[str]) -> None:
        """Record ``range_ids`` as validated."""
        self._ids.update(range_ids)


_PRESENT = b"1"


class KVValidatedRanges:
    """Validated range IDs persisted in a KV under ``prefix`` (one key per ID), for restarts.

    The IDs are loaded with one scan on first use and kept in a set; new IDs are written through
    before they are added to it, so the set never claims what the KV did not store.
    """

    def __init__(self, kv: KV, prefix: bytes) -> None:
        self._kv = kv
        self._prefix = prefix
        self._ids: set[str] | None = None
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._loaded())

    def _loaded(self) -> set[str]:
        with self._lock:
            if self._ids is None:
                cut = len(self._prefix)
                self._ids = {key[cut:].decode() for key, _ in self._kv.scan(self._prefix)}
            return self._ids

    def contains(self, range_id: str) -> bool:
        """Return whether ``range_id`` was validated (loads the set on first use)."""
        return range_id in self._loaded()

    def add_many(self, range_ids: Iterable[str]) -> None:
        """Record ``range_ids`` as validated, writing the new ones to the KV."""
        known = self._loaded()
        new = sorted({r for r in range_ids if r not in known})
        if not new:
            return
        self._kv.set_many((self._prefix + r.encode(), _PRESENT) for r in new)
        with self._lock:
            known.update(new)


class ObjectCache:
    """A bounded LRU of object keys known present in the destination, with their sizes."""

    def __init__(self, max_keys: int = 1_000_000) -> None:
        if max_keys < 0:
            raise ValueError(f"max_keys must not be negative, got {max_keys}")
        self._max = max_keys
        self._sizes: OrderedDict[str, int] = OrderedDict()

    def __len__(self) -> int:
        return len(self._sizes)

    def __contains__(self, key: object) -> bool:
        return key in self._sizes

    @property
    def max_keys(self) -> int:
        """Return how many keys the cache holds at most."""
        return self._max

    def size_of(self, key: str) -> int | None:
        """Return the size ``key`` was seen present with, or ``None`` if not cached."""
        size = self._sizes.get(key)
        if size is not None:
            self._sizes.move_to_end(key)
        return size

    def add(self, key: str, size: int) -> None:
        """Remember ``key`` as present with ``size``, evicting the least recently used keys."""
        if self._max == 0:
            return
        self._sizes[key] = size
        self._sizes.move_to_end(key)
        while len(self._sizes) > self._max:
            self._sizes.popitem(last=False)

    def add_many(self, items: Iterable[tuple[str, int]]) -> None:
        """Remember each ``(key, size)`` as present."""
        for key, size in items:
            self.add(key, size)
