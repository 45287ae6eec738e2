"""Prove that a commit's tree has arrived in a destination namespace: metarange, ranges, data.

A mirror branch may only move to commit H once the destination holds H's metarange file, every
range file it lists, and every data object those ranges point to, with the recorded size.
:class:`Validator` checks that at a cost that follows what is new in H, not the size of the
repository:

- range IDs already validated (or shared with the base tree, a commit validated before) are
  skipped unread;
- a range that is read only needs checking for entries whose address the base tree did not hold
  over the same key span, and that the bounded object cache has not seen;
- the remaining keys are grouped by parent prefix (``data/<partition>/``); a group of at least
  ``list_threshold`` keys is checked by listing that prefix from just before its first key (up to
  1,000 keys and their sizes per request), a smaller group by one ``HEAD`` per key;
- listings of one prefix take turns in range order, and the last page listed under each prefix
  answers, without a request, for the keys it covers that the next ranges want: a partition of
  50,000 objects costs 50 listings however many ranges share it;
- every request goes through one semaphore of ``concurrency`` slots, and only a few ranges are in
  flight at once, so memory stays bounded by ranges, not by the repository.

A range found whole is recorded in ``validated`` (in batches, from a worker thread: the set may
live in a remote KV); a tree found whole is reported to it too when it bounds itself to the
ranges of retained heads (:class:`~mirror.validator.caches.RetainingRanges`).
The present objects of a range left incomplete go to the object cache, so
that the retry checks only the stragglers; those of a whole range do not, as its ID vouches for
them from then on, and the base tree does when the range changes.
"""

from __future__ import annotations

import bisect
import time
from collections import OrderedDict
from collections.abc import Callable, Collection
from dataclasses import dataclass

import anyio
import anyio.abc
import anyio.to_thread

from mirror.block.errors import BlockNotFoundError
from mirror.core.columnar import range_objects
from mirror.core.committed import METADATA_PREFIX, RangeInfo, decode_metarange
from mirror.validator.caches import (
    KVValidatedRanges,
    ObjectCache,
    RetainingRanges,
    ValidatedRanges,
)
from mirror.validator.events import NullEvents, ValidationEvents
from mirror.validator.existence import ObjectChecker
from mirror.validator.readers import AsyncObjectReader
from mirror.validator.run import Gate, RangeOutcome, Run, ValidationReport
from mirror.validator.taskgroups import in_task_group

__all__ = ["Validator"]

_METARANGE_CACHE = 4
_RANGE_CACHE = 64
_VALIDATED_BATCH = 64


@dataclass(frozen=True, slots=True)
class _RangeObjects:
    """The objects a range file points to: relative address or full URI, to recorded size."""

    relative: dict[str, int]
    external: dict[str, int]


def _range_objects(data: bytes) -> _RangeObjects:
    return _RangeObjects(*range_objects(data))


class Validator:
    """Check that trees are present in one destination namespace, remembering what it saw.

    Args:
        reader: Reads the destination namespace.
        validated: Range IDs known validated; the validator adds every range it finds whole.
        objects: Object keys known present; the present objects of ranges left incomplete are
            added to it. ``None`` caches none.
        events: Receives one call per request, object result and cache hit.
        concurrency: Requests in flight at most.
        list_threshold: Keys under one prefix from which a listing replaces one ``HEAD`` each.
        open_external: Opens a reader for the namespace of an object with a full address; without
            it, such objects are reported missing (result ``external``).

    A validator keeps a few decoded metaranges and ranges in memory, so validating the next
    commit against the last one re-reads neither. It may serve several validations at once.
    """

    def __init__(
        self,
        reader: AsyncObjectReader,
        *,
        validated: ValidatedRanges,
        objects: ObjectCache | None = None,
        events: ValidationEvents | None = None,
        concurrency: int = 32,
        list_threshold: int = 8,
        open_external: Callable[[str], AsyncObjectReader] | None = None,
    ) -> None:
        if concurrency < 1:
            raise ValueError(f"concurrency must be positive, got {concurrency}")
        if list_threshold < 1:
            raise ValueError(f"list_threshold must be positive, got {list_threshold}")
        self._reader = reader
        self._validated = validated
        self._objects = objects
        self._events: ValidationEvents = events if events is not None else NullEvents()
        self._concurrency = concurrency
        self._checker = ObjectChecker(
            reader,
            self._events,
            concurrency=concurrency,
            list_threshold=list_threshold,
            open_external=open_external,
        )
        self._metaranges: OrderedDict[str, list[RangeInfo]] = OrderedDict()
        self._ranges: OrderedDict[str, _RangeObjects] = OrderedDict()
        # enough ranges in flight to keep the request slots busy, few enough to bound memory
        self._ranges_in_flight = max(1, min(8, concurrency // 4))

    @property
    def reader(self) -> AsyncObjectReader:
        """Return the reader of the destination namespace."""
        return self._reader

    async def validate(self, metarange_id: str, base_metarange_id: str = "") -> ValidationReport:
        """Check that tree ``metarange_id`` is whole in the destination.

        Args:
            metarange_id: The tree to check; ``""`` (the empty tree) is trivially complete.
            base_metarange_id: A tree validated before in this destination, or ``""``. Ranges and
                object addresses it holds are known present and not checked again.

        Raises:
            BlockUnavailableError: the destination failed transiently; nothing was cached
                from the request that failed.
        """
        run = Run()
        if not metarange_id:
            return run.report(metarange_id)
        limiter = anyio.Semaphore(self._concurrency)
        ranges = await self._metarange(metarange_id, limiter)
        if ranges is None:
            run.miss(METADATA_PREFIX + metarange_id)
            return run.report(metarange_id)
        run.ranges_total = len(ranges)
        base: list[RangeInfo] = []
        if base_metarange_id == metarange_id:
            base = ranges
        elif base_metarange_id:
            base = await self._metarange(base_metarange_id, limiter) or []
        base_ids = {r.id for r in base}
        base_max_keys = [r.max_key for r in base]
        slots = anyio.Semaphore(self._ranges_in_flight)

        async def spawn(group: anyio.abc.TaskGroup) -> None:
            prev = anyio.Event()
            prev.set()
            for r in ranges:
                known = self._validated.contains(r.id)
                if known or r.id in base_ids:
                    if not known:  # ranges of a validated base are validated
                        run.validated.append(r.id)
                    run.ranges_skipped += 1
                    self._events.cache_hit("range")
                    continue
                await slots.acquire()
                gate = Gate(prev, anyio.Event())
                prev = gate.own
                group.start_soon(
                    self._range_task, r, base, base_max_keys, run, limiter, slots, gate
                )

        try:
            await in_task_group(spawn)
        finally:
            with anyio.CancelScope(shield=True):
                await self._remember_validated(run, 0)
        report = run.report(metarange_id)
        if report.complete and isinstance(self._validated, RetainingRanges):
            await anyio.to_thread.run_sync(
                self._validated.retain,
                metarange_id,
                base_metarange_id,
                [str(r.id) for r in ranges],
                [str(r.id) for r in base],
            )
        return report

    async def keep_only(self, trees: Collection[str], *, idle_seconds: float = 3600.0) -> int:
        """Stop retaining the ranges of heads no branch or tag of the mirror sits on any more.

        Ends every chain of retained heads whose head is none of ``trees`` (the trees of the
        mirror's branch heads and tags) and that has not moved for ``idle_seconds``, so that a
        tree validated but not yet moved to is never taken for a deleted branch's. Costs one
        read of each ended chain's kept trees (cached metaranges aside). Without retention,
        does nothing.

        Returns:
            How many range IDs left the validated set.
        """
        validated = self._validated
        if not isinstance(validated, KVValidatedRanges) or validated.retention is None:
            return 0
        retention = validated.retention
        keep = set(trees)
        cutoff = time.time() - idle_seconds
        chains = await anyio.to_thread.run_sync(retention.chains)
        limiter = anyio.Semaphore(self._concurrency)
        dropped = 0
        for chain in chains:
            if chain.head in keep or chain.moved_at > cutoff:
                continue
            ids: set[str] = set()
            for _, tree in chain.window:
                ranges = await self._metarange(tree, limiter)
                if ranges is None:
                    break  # its ranges cannot be known: keep the chain
                ids.update(str(r.id) for r in ranges)
            else:
                dropped += await anyio.to_thread.run_sync(retention.end, chain, ids)
        return dropped

    async def _remember_validated(self, run: Run, batch: int) -> None:
        """Write the range IDs found whole so far once ``batch`` of them are waiting.

        Writes go to a worker thread in batches: the set may live in a remote KV.
        """
        if run.validated and len(run.validated) >= batch:
            ids, run.validated = run.validated, []
            await anyio.to_thread.run_sync(self._validated.add_many, ids)

    # reading committed files

    async def _fetch(self, key: str, limiter: anyio.Semaphore) -> bytes | None:
        async with limiter:
            self._events.request("get")
            try:
                return await self._reader.get(key)
            except BlockNotFoundError:
                return None

    async def _metarange(self, mid: str, limiter: anyio.Semaphore) -> list[RangeInfo] | None:
        """Return the ranges of metarange ``mid``, cached or read (``None``: not there)."""
        cached = self._metaranges.get(mid)
        if cached is not None:
            self._metaranges.move_to_end(mid)
            return cached
        data = await self._fetch(METADATA_PREFIX + mid, limiter)
        if data is None:
            return None
        ranges = await anyio.to_thread.run_sync(decode_metarange, data)
        self._metaranges[mid] = ranges
        while len(self._metaranges) > _METARANGE_CACHE:
            self._metaranges.popitem(last=False)
        return ranges

    async def _range(
        self, rid: str, limiter: anyio.Semaphore, run: Run | None
    ) -> _RangeObjects | None:
        """Return the objects of range ``rid``, cached or read (``None``: not there).

        ``run`` counts the read when given (ranges of the tree validated, not of its base).
        """
        cached = self._ranges.get(rid)
        if cached is not None:
            self._ranges.move_to_end(rid)
            return cached
        data = await self._fetch(METADATA_PREFIX + rid, limiter)
        if data is None:
            return None
        if run is not None:
            run.ranges_read += 1
        objects = await anyio.to_thread.run_sync(_range_objects, data)
        self._ranges[rid] = objects
        while len(self._ranges) > _RANGE_CACHE:
            self._ranges.popitem(last=False)
        return objects

    async def _base_objects(
        self,
        r: RangeInfo,
        base: list[RangeInfo],
        base_max_keys: list[str],
        limiter: anyio.Semaphore,
    ) -> dict[str, int]:
        """Return address -> size of the base tree's ranges overlapping the key span of ``r``."""
        known: dict[str, int] = {}
        j = bisect.bisect_left(base_max_keys, r.min_key)
        while j < len(base) and base[j].min_key <= r.max_key:
            objects = await self._range(base[j].id, limiter, None)
            if objects is not None:  # a validated base is present; if not, check everything
                known.update(objects.relative)
            j += 1
        return known

    # checking one range

    async def _range_task(
        self,
        r: RangeInfo,
        base: list[RangeInfo],
        base_max_keys: list[str],
        run: Run,
        limiter: anyio.Semaphore,
        slots: anyio.Semaphore,
        gate: Gate,
    ) -> None:
        try:
            objects = await self._range(r.id, limiter, run)
            if objects is None:
                run.miss(METADATA_PREFIX + r.id)
                return
            known = await self._base_objects(r, base, base_max_keys, limiter) if base else {}
            wanted = self._wanted(objects.relative, known, run)
            outcome = RangeOutcome()
            await self._checker.check(wanted, objects.external, outcome, run, limiter, gate)
            if outcome.missing == 0:
                run.validated.append(r.id)
                await self._remember_validated(run, _VALIDATED_BATCH)
            elif self._objects is not None:
                # the range ID will vouch for the objects of a whole range; until then, retries
                # check only what was missing
                self._objects.add_many(outcome.present)
        finally:
            gate.own.set()
            slots.release()

    def _wanted(self, relative: dict[str, int], known: dict[str, int], run: Run) -> dict[str, int]:
        """Return the objects of a range that neither the base tree nor the cache vouch for."""
        cache = self._objects
        events = self._events
        wanted: dict[str, int] = {}
        for address, size in relative.items():
            if known.get(address) == size:
                events.cache_hit("base")
            elif cache is not None and cache.size_of(address) == size:
                events.cache_hit("object")
            else:
                wanted[address] = size
                continue
            run.objects_cached += 1
        return wanted
