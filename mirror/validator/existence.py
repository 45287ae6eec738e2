"""Checking that objects exist in the destination: one ``HEAD`` each, or listings by prefix.

:class:`ObjectChecker` settles the objects one range wants: keys are grouped by parent prefix
(``data/<partition>/``); a group of at least ``list_threshold`` keys is checked by listing that
prefix from just before its first key (up to 1,000 keys and their sizes per request), a smaller
group by one ``HEAD`` per key. Listings of one prefix take turns in range order, and the last
page listed under each prefix answers, without a request, for the keys it covers that the next
ranges want. Objects with a full address are checked where they are.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

import anyio
import anyio.abc

from mirror.block.errors import BlockNotFoundError, InvalidNamespaceError
from mirror.block.resolver import split_namespace
from mirror.validator.events import ValidationEvents
from mirror.validator.readers import LIST_PAGE_SIZE, AsyncObjectReader, list_sizes
from mirror.validator.run import Gate, Page, RangeOutcome, Run
from mirror.validator.taskgroups import in_task_group

__all__ = ["ObjectChecker", "split_full_address"]


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


class ObjectChecker:
    """Check the objects of ranges in one destination namespace, sharing one request budget.

    Args:
        reader: Reads the destination namespace.
        events: Receives one call per request and object result.
        concurrency: ``HEAD`` workers a range starts at most.
        list_threshold: Keys under one prefix from which a listing replaces one ``HEAD`` each.
        open_external: Opens a reader for the namespace of an object with a full address; without
            it, such objects are reported missing (result ``external``).
    """

    def __init__(
        self,
        reader: AsyncObjectReader,
        events: ValidationEvents,
        *,
        concurrency: int,
        list_threshold: int,
        open_external: Callable[[str], AsyncObjectReader] | None,
    ) -> None:
        self._reader = reader
        self._events = events
        self._concurrency = concurrency
        self._list_threshold = list_threshold
        self._open_external = open_external
        self._externals: dict[str, AsyncObjectReader] = {}

    async def check(
        self,
        wanted: dict[str, int],
        external: dict[str, int],
        outcome: RangeOutcome,
        run: Run,
        limiter: anyio.Semaphore,
        gate: Gate,
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

        await in_task_group(spawn)

    def _settle(
        self,
        key: str,
        size: int,
        found: int | None,
        outcome: RangeOutcome,
        run: Run,
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
        outcome: RangeOutcome,
        run: Run,
        limiter: anyio.Semaphore,
    ) -> None:
        """Check the keys of ``queue`` one ``HEAD`` each, until the queue runs dry."""
        for key in queue:
            await self._head(key, sizes[key], outcome, run, limiter)

    async def _head(
        self, key: str, size: int, outcome: RangeOutcome, run: Run, limiter: anyio.Semaphore
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
        outcome: RangeOutcome,
        run: Run,
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
                j = page.covered_end(keys, i)
                self._settle_listed(page.sizes, keys[i:j], sizes, outcome, run)
                i = j
        finally:
            turns.leave(ticket)

    def _from_page(
        self,
        page: Page | None,
        keys: list[str],
        sizes: dict[str, int],
        outcome: RangeOutcome,
        run: Run,
    ) -> list[str]:
        """Settle the keys a page already listed covers; return the others."""
        if page is None:
            return keys
        covered: list[str] = []
        rest: list[str] = []
        for key in keys:
            (covered if page.covers(key) else rest).append(key)
        self._settle_listed(page.sizes, covered, sizes, outcome, run)
        return rest

    def _settle_listed(
        self,
        listed: dict[str, int],
        keys: list[str],
        sizes: dict[str, int],
        outcome: RangeOutcome,
        run: Run,
    ) -> None:
        """Settle ``keys`` by a page that covers them all: ``listed`` holds its keys and sizes."""
        present = outcome.present
        count = 0
        for key in keys:
            size = sizes[key]
            found = listed.get(key)
            if found == size:
                present.append((key, size))
                count += 1
            else:
                self._settle(key, size, found, outcome, run)
        if count:
            run.objects_checked += count
            self._events.object("present", count)

    async def _list_page(self, prefix: str, after: str, limiter: anyio.Semaphore) -> Page:
        """Return the page of keys under ``prefix`` after ``after`` (one listing request)."""
        async with limiter:
            self._events.request("list")
            sizes = await list_sizes(self._reader, prefix, after, LIST_PAGE_SIZE)
        last = next(reversed(sizes)) if len(sizes) == LIST_PAGE_SIZE else None
        return Page(after, last, sizes)

    async def _head_external(
        self, uri: str, size: int, outcome: RangeOutcome, run: Run, limiter: anyio.Semaphore
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
