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
from collections import OrderedDict, deque
from collections.abc import Callable, Collection, Coroutine, Iterator
from dataclasses import dataclass, field
from typing import Any

import anyio
import anyio.abc
import anyio.to_thread

from mirror.block.errors import BlockNotFoundError, InvalidNamespaceError
from mirror.block.resolver import split_namespace
from mirror.core.committed import METADATA_PREFIX, RangeInfo, decode_metarange, decode_range
from mirror.core.model import AddressType
from mirror.validator.caches import (
    KVValidatedRanges,
    ObjectCache,
    RetainingRanges,
    ValidatedRanges,
)
from mirror.validator.events import NullEvents, ValidationEvents
from mirror.validator.readers import LIST_PAGE_SIZE, AsyncObjectReader, aclose_listing

__all__ = [
    "MISSING_SAMPLE_SIZE",
    "ValidationReport",
    "Validator",
    "split_full_address",
]

MISSING_SAMPLE_SIZE = 100
"""Missing keys a report names at most (its count covers them all)."""

_METARANGE_CACHE = 4
_RANGE_CACHE = 64
_VALIDATED_BATCH = 64
_PAGE_MEMO = 64


@dataclass(frozen=True, slots=True)
class ValidationReport:
    """What one validation found.

    Attributes:
        metarange_id: The tree validated.
        complete: Whether the metarange, every range and every object are present.
        missing_count: Files missing or of the wrong size (metarange, ranges, objects).
        missing: A sample of them, at most :data:`MISSING_SAMPLE_SIZE`: keys relative to the
            namespace, or full URIs for objects outside it.
        ranges_total: Ranges the metarange lists.
        ranges_read: Range files of the tree fetched from the destination.
        ranges_skipped: Ranges known validated, not read.
        objects_checked: Objects that needed a request (``HEAD`` or part of a listing).
        objects_cached: Objects known present from the base tree or the object cache.
    """

    metarange_id: str
    complete: bool
    missing_count: int
    missing: tuple[str, ...]
    ranges_total: int
    ranges_read: int
    ranges_skipped: int
    objects_checked: int
    objects_cached: int


@dataclass(frozen=True, slots=True)
class _RangeObjects:
    """The objects a range file points to: relative address or full URI, to recorded size."""

    relative: dict[str, int]
    external: dict[str, int]


def _range_objects(data: bytes) -> _RangeObjects:
    _, entries = decode_range(data)
    relative: dict[str, int] = {}
    external: dict[str, int] = {}
    for e in entries:
        (external if e.address_type is AddressType.FULL else relative)[e.address] = e.size
    return _RangeObjects(relative, external)


def split_full_address(uri: str) -> tuple[str, str]:
    """Split the full address of an object into its namespace (``scheme://root``) and key.

    Raises:
        InvalidNamespaceError: ``uri`` is not a ``scheme://root/key`` URI.
    """
    scheme, rest = split_namespace(uri)
    lead = "/" if rest.startswith("/") else ""
    root, _, key = rest.lstrip("/").partition("/")
    if not root or not key:
        raise InvalidNamespaceError(f"address {uri!r} names no object")
    return f"{scheme}://{lead}{root}", key


def _before(key: str) -> str:
    """Return a string just below ``key``: no fixed-alphabet key lies between the two.

    Used as a listing's exclusive ``start_after`` so that the listing starts at ``key``.
    """
    if not key:
        return ""
    code = ord(key[-1]) - 1
    if code < 0:
        return key[:-1]
    if 0xD800 <= code <= 0xDFFF:  # surrogates do not encode; jump below them
        code = 0xD7FF
    return key[:-1] + chr(code) + "\U0010ffff"


def _first_error(group: BaseExceptionGroup[BaseException]) -> BaseException:
    exc: BaseException = group
    while isinstance(exc, BaseExceptionGroup):
        exc = exc.exceptions[0]
    return exc


async def _in_task_group(spawn: Callable[[anyio.abc.TaskGroup], Coroutine[Any, Any, None]]) -> None:
    """Run ``spawn(group)`` inside a task group; raise the first failure of a task as it is.

    Callers of the validator (the replicant) tell transient store errors apart by type, which an
    exception group would hide.
    """
    try:
        async with anyio.create_task_group() as group:
            await spawn(group)
    except BaseExceptionGroup as exc:
        if exc.subgroup(lambda e: not isinstance(e, Exception)) is not None:
            raise
        raise _first_error(exc) from None


@dataclass(frozen=True, slots=True)
class _Page:
    """One listing request's answer: every key under a prefix in ``(after, last]``, with sizes.

    ``last`` is ``None`` when the listing ended there: the page covers everything after ``after``.
    """

    after: str
    last: str | None
    sizes: dict[str, int]

    def covers(self, key: str) -> bool:
        return key > self.after and (self.last is None or key <= self.last)


class _Turns:
    """Let the listings of one prefix run one at a time, in the order they queued."""

    __slots__ = ("_queue",)

    def __init__(self) -> None:
        self._queue: deque[anyio.Event] = deque()

    @property
    def busy(self) -> bool:
        """Return whether a listing holds or awaits its turn."""
        return bool(self._queue)

    def enqueue(self) -> anyio.Event:
        """Return a ticket, set when its turn comes."""
        ticket = anyio.Event()
        if not self._queue:
            ticket.set()
        self._queue.append(ticket)
        return ticket

    def leave(self, ticket: anyio.Event) -> None:
        """Give up a ticket, whether its turn came or not, and wake the next one."""
        head = self._queue[0] is ticket
        self._queue.remove(ticket)
        if head and self._queue:
            self._queue[0].set()


@dataclass(frozen=True, slots=True)
class _Gate:
    """A range's place in line: it queues its listings after ``prev`` has, then opens ``own``."""

    prev: anyio.Event
    own: anyio.Event


@dataclass(slots=True)
class _Run:
    """The counters, missing sample and range IDs to record of one validation."""

    missing_count: int = 0
    missing: list[str] = field(default_factory=list)
    ranges_total: int = 0
    ranges_read: int = 0
    ranges_skipped: int = 0
    objects_checked: int = 0
    objects_cached: int = 0
    validated: list[str] = field(default_factory=list)
    pages: OrderedDict[str, _Page] = field(default_factory=OrderedDict)
    turns: dict[str, _Turns] = field(default_factory=dict)

    def miss(self, key: str) -> None:
        self.missing_count += 1
        if len(self.missing) < MISSING_SAMPLE_SIZE:
            self.missing.append(key)

    def turns_of(self, prefix: str) -> _Turns:
        turns = self.turns.get(prefix)
        if turns is None:
            turns = self.turns[prefix] = _Turns()
        return turns

    def page(self, prefix: str) -> _Page | None:
        return self.pages.get(prefix)

    def remember_page(self, prefix: str, page: _Page) -> None:
        self.pages[prefix] = page
        self.pages.move_to_end(prefix)
        while len(self.pages) > _PAGE_MEMO:
            self.pages.popitem(last=False)

    def report(self, metarange_id: str) -> ValidationReport:
        return ValidationReport(
            metarange_id=metarange_id,
            complete=self.missing_count == 0,
            missing_count=self.missing_count,
            missing=tuple(self.missing),
            ranges_total=self.ranges_total,
            ranges_read=self.ranges_read,
            ranges_skipped=self.ranges_skipped,
            objects_checked=self.objects_checked,
            objects_cached=self.objects_cached,
        )


@dataclass(slots=True)
class _RangeOutcome:
    """What checking one range's objects found: present namespace keys and a missing count."""

    present: list[tuple[str, int]] = field(default_factory=list)
    missing: int = 0


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
        self._list_threshold = list_threshold
        self._open_external = open_external
        self._externals: dict[str, AsyncObjectReader] = {}
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
        run = _Run()
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
                gate = _Gate(prev, anyio.Event())
                prev = gate.own
                group.start_soon(
                    self._range_task, r, base, base_max_keys, run, limiter, slots, gate
                )

        try:
            await _in_task_group(spawn)
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

    async def _remember_validated(self, run: _Run, batch: int) -> None:
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
        self, rid: str, limiter: anyio.Semaphore, run: _Run | None
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
        run: _Run,
        limiter: anyio.Semaphore,
        slots: anyio.Semaphore,
        gate: _Gate,
    ) -> None:
        try:
            objects = await self._range(r.id, limiter, run)
            if objects is None:
                run.miss(METADATA_PREFIX + r.id)
                return
            known = await self._base_objects(r, base, base_max_keys, limiter) if base else {}
            wanted = self._wanted(objects.relative, known, run)
            outcome = _RangeOutcome()
            await self._check(wanted, objects.external, outcome, run, limiter, gate)
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

    def _wanted(self, relative: dict[str, int], known: dict[str, int], run: _Run) -> dict[str, int]:
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

    async def _check(
        self,
        wanted: dict[str, int],
        external: dict[str, int],
        outcome: _RangeOutcome,
        run: _Run,
        limiter: anyio.Semaphore,
        gate: _Gate,
    ) -> None:
        """Check every wanted object, listing the prefixes where enough of them share one."""
        groups: dict[str, list[str]] = {}
        for address in wanted:
            groups.setdefault(address.rpartition("/")[0] + "/", []).append(address)
        # listings queue in range order, so that the page one range lists serves the next
        await gate.prev.wait()
        listings = []
        small = []
        for prefix, keys in groups.items():
            turns = run.turns_of(prefix)
            if len(keys) >= self._list_threshold:
                keys.sort()
                listings.append((prefix, keys, turns.enqueue(), False))
            elif turns.busy:  # a page on its way may cover these keys: wait for it
                listings.append((prefix, keys, turns.enqueue(), True))
            else:
                small.append((prefix, keys))
        gate.own.set()

        async def spawn(group: anyio.abc.TaskGroup) -> None:
            for prefix, keys, ticket, few in listings:
                group.start_soon(
                    self._list_group, prefix, keys, wanted, outcome, run, limiter, ticket, few
                )
            heads: list[str] = []
            for prefix, keys in small:
                heads.extend(self._from_page(run.page(prefix), keys, wanted, outcome, run))
            # a few workers pull from one queue of keys: no task per object
            queue = iter(heads)
            for _ in range(min(len(heads), self._concurrency)):
                group.start_soon(self._head_worker, queue, wanted, outcome, run, limiter)
            for uri, size in external.items():
                group.start_soon(self._head_external, uri, size, outcome, run, limiter)

        await _in_task_group(spawn)

    def _settle(
        self,
        key: str,
        size: int,
        found: int | None,
        outcome: _RangeOutcome,
        run: _Run,
        cache: bool = True,
    ) -> None:
        """Record the result of checking one object: ``found`` is its size there, if there."""
        run.objects_checked += 1
        if found is None:
            result = "missing"
        elif found != size:
            result = "size_mismatch"
        else:
            self._events.object("present")
            if cache:
                outcome.present.append((key, size))
            return
        self._events.object(result)
        outcome.missing += 1
        run.miss(key)

    async def _head_worker(
        self,
        queue: Iterator[str],
        sizes: dict[str, int],
        outcome: _RangeOutcome,
        run: _Run,
        limiter: anyio.Semaphore,
    ) -> None:
        """Check the keys of ``queue`` one ``HEAD`` each, until the queue runs dry."""
        for key in queue:
            await self._head(key, sizes[key], outcome, run, limiter)

    async def _head(
        self, key: str, size: int, outcome: _RangeOutcome, run: _Run, limiter: anyio.Semaphore
    ) -> None:
        async with limiter:
            self._events.request("head")
            try:
                found: int | None = (await self._reader.head(key)).size
            except BlockNotFoundError:
                found = None
        self._settle(key, size, found, outcome, run)

    async def _list_group(
        self,
        prefix: str,
        keys: list[str],
        sizes: dict[str, int],
        outcome: _RangeOutcome,
        run: _Run,
        limiter: anyio.Semaphore,
        ticket: anyio.Event,
        few: bool,
    ) -> None:
        """Check sorted ``keys`` under ``prefix`` by listing, one page per request.

        A page starts just before the first key not yet resolved, so it never covers only keys
        that are not wanted. The last page listed under each prefix is kept for the rest of the
        validation: objects written together end up in neighbouring ranges, and the page one
        range listed often answers for the next one without a request. Listings of one prefix
        take turns (``ticket``) in range order, so that each can use the page of the one before.
        ``few`` keys (under ``list_threshold``) take their turn only to use that page: those it
        does not cover get a ``HEAD`` each.
        """
        turns = run.turns_of(prefix)
        try:
            await ticket.wait()
            if few:
                for key in self._from_page(run.page(prefix), keys, sizes, outcome, run):
                    await self._head(key, sizes[key], outcome, run, limiter)
                return
            i, n = 0, len(keys)
            while i < n:
                page = run.page(prefix)
                if page is None or not page.covers(keys[i]):
                    page = await self._list_page(prefix, _before(keys[i]), limiter)
                    run.remember_page(prefix, page)
                j = i
                while j < n and page.covers(keys[j]):
                    j += 1
                self._from_page(page, keys[i:j], sizes, outcome, run)
                i = j
        finally:
            turns.leave(ticket)

    def _from_page(
        self,
        page: _Page | None,
        keys: list[str],
        sizes: dict[str, int],
        outcome: _RangeOutcome,
        run: _Run,
    ) -> list[str]:
        """Settle the keys a page already listed covers; return the others."""
        if page is None:
            return keys
        rest = []
        for key in keys:
            if page.covers(key):
                self._settle(key, sizes[key], page.sizes.get(key), outcome, run)
            else:
                rest.append(key)
        return rest

    async def _list_page(self, prefix: str, after: str, limiter: anyio.Semaphore) -> _Page:
        """Return the page of keys under ``prefix`` after ``after`` (one listing request)."""
        sizes: dict[str, int] = {}
        last = None
        async with limiter:
            self._events.request("list")
            items = self._reader.list(prefix, after)
            try:
                async for info in items:
                    sizes[info.key] = info.size
                    if len(sizes) == LIST_PAGE_SIZE:
                        last = info.key
                        break
            finally:
                await aclose_listing(items)
        return _Page(after, last, sizes)

    async def _head_external(
        self, uri: str, size: int, outcome: _RangeOutcome, run: _Run, limiter: anyio.Semaphore
    ) -> None:
        """Check an object outside the namespace where it is (never cached: it may change)."""
        try:
            namespace, key = split_full_address(uri)
        except InvalidNamespaceError:
            namespace, key = "", ""
        if self._open_external is None or not namespace:
            run.objects_checked += 1
            self._events.object("external")
            outcome.missing += 1
            run.miss(uri)
            return
        reader = self._externals.get(namespace)
        if reader is None:
            reader = self._externals[namespace] = self._open_external(namespace)
        async with limiter:
            self._events.request("head")
            try:
                found: int | None = (await reader.head(key)).size
            except BlockNotFoundError:
                found = None
        self._settle(uri, size, found, outcome, run, cache=False)
