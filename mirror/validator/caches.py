"""What the validator knows to be present in a destination namespace, kept forever or bounded.

Files under ``_lakefs/`` and ``data/`` are immutable and never reused, so once seen present they
stay present: a validated range ID never needs checking again, nor does a data key seen with its
size. Range IDs are few (about one per 500 objects), persisted in a KV for restarts and bounded
by :class:`~mirror.validator.retention.RangeRetention` to the ranges of the heads a mirror keeps;
object keys are many and kept in a bounded LRU.
"""

from __future__ import annotations

import logging
import threading
from collections import OrderedDict
from collections.abc import Iterable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Protocol, runtime_checkable

from mirror.kv.protocol import KV
from mirror.validator.retention import RangeRetention

__all__ = [
    "KVValidatedRanges",
    "MemoryValidatedRanges",
    "ObjectCache",
    "RetainingRanges",
    "ValidatedRanges",
]

_log = logging.getLogger(__name__)


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


@runtime_checkable
class RetainingRanges(Protocol):
    """A validated set bounded to the ranges of retained heads: told of every tree found whole."""

    def retain(
        self, metarange_id: str, base_metarange_id: str, ids: list[str], base_ids: list[str]
    ) -> None:
        """Record tree ``metarange_id`` (ranges ``ids``), validated whole against its base."""
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

    Args:
        kv: Where the IDs live.
        prefix: The key prefix of this mirror's IDs.
        retention_prefix: Where :class:`RangeRetention` keeps its state; ``None`` keeps every
            ID forever.
        heads_kept: Heads each chain of advances keeps (see :class:`RangeRetention`).

    With retention, each tree found whole is recorded (:meth:`retain`) and the ranges that left
    every retained head are pruned in a background thread, one prune at a time.
    """

    def __init__(
        self,
        kv: KV,
        prefix: bytes,
        *,
        retention_prefix: bytes | None = None,
        heads_kept: int = 3,
    ) -> None:
        self._kv = kv
        self._prefix = prefix
        self._ids: set[str] | None = None
        self._lock = threading.Lock()
        self._retention: RangeRetention | None = None
        self._pruner: ThreadPoolExecutor | None = None
        self._pending: list[Future[int]] = []
        if retention_prefix is not None:
            self._retention = RangeRetention(
                kv, retention_prefix, heads_kept, add=self._write_back, drop=self._drop
            )

    def __len__(self) -> int:
        return len(self._loaded())

    @property
    def retention(self) -> RangeRetention | None:
        """Return the retention bounding the set, if any."""
        return self._retention

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

    def _write_back(self, range_ids: Iterable[str]) -> None:
        """Write IDs unconditionally: another process may have pruned what this one still knows."""
        ids = sorted(set(range_ids))
        if not ids:
            return
        self._kv.set_many((self._prefix + r.encode(), _PRESENT) for r in ids)
        known = self._loaded()
        with self._lock:
            known.update(ids)

    def _drop(self, range_id: str) -> None:
        known = self._loaded()
        with self._lock:
            known.discard(range_id)
        self._kv.delete(self._prefix + range_id.encode())

    def retain(
        self, metarange_id: str, base_metarange_id: str, ids: list[str], base_ids: list[str]
    ) -> None:
        """Record tree ``metarange_id`` validated whole, then prune its chain in the background.

        Without retention, does nothing.
        """
        if self._retention is None:
            return
        chain = self._retention.record(metarange_id, base_metarange_id, ids, base_ids)
        if chain is None:
            return
        with self._lock:
            if self._pruner is None:
                self._pruner = ThreadPoolExecutor(1, thread_name_prefix="range-prune")
            self._pending = [f for f in self._pending if not f.done()]
            self._pending.append(self._pruner.submit(self._prune, chain))

    def _prune(self, chain: str) -> int:
        assert self._retention is not None
        try:
            return self._retention.prune(chain)
        except Exception:
            # a failed prune only leaves IDs behind: the chain's next advance prunes them
            _log.warning("pruning validated ranges failed", exc_info=True)
            return 0

    def drain(self) -> int:
        """Wait for the prunes under way; return how many IDs they removed."""
        with self._lock:
            pending, self._pending = self._pending, []
        return sum(f.result() for f in pending)

    def close(self) -> None:
        """Finish the prunes under way and stop the pruning thread."""
        self.drain()
        with self._lock:
            pruner, self._pruner = self._pruner, None
        if pruner is not None:
            pruner.shutdown(wait=True)


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
