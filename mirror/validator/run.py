"""The bookkeeping of one validation: its counters, its sample of missing keys, its pages.

A :class:`Run` lives for one :meth:`~mirror.validator.validator.Validator.validate` call; the
checks of every range of the tree record into it, and it becomes the
:class:`ValidationReport`.
"""

from __future__ import annotations

from bisect import bisect_right
from collections import OrderedDict, deque
from dataclasses import dataclass, field

import anyio

__all__ = [
    "MISSING_SAMPLE_SIZE",
    "Gate",
    "Page",
    "RangeOutcome",
    "Run",
    "Turns",
    "ValidationReport",
]

MISSING_SAMPLE_SIZE = 100
"""Missing keys a report names at most (its count covers them all)."""

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
class Page:
    """One listing request's answer: every key under a prefix in ``(after, last]``, with sizes.

    ``last`` is ``None`` when the listing ended there: the page covers everything after ``after``.
    """

    after: str
    last: str | None
    sizes: dict[str, int]

    def covers(self, key: str) -> bool:
        """Return whether the page answers for ``key`` (listed it, or shows it absent)."""
        return key > self.after and (self.last is None or key <= self.last)

    def covered_end(self, keys: list[str], start: int) -> int:
        """Return the end of the run of sorted ``keys`` from ``start`` that the page covers."""
        if start >= len(keys) or not self.covers(keys[start]):
            return start
        if self.last is None:
            return len(keys)
        return bisect_right(keys, self.last, start)


class Turns:
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
class Gate:
    """A range's place in line: it queues its listings after ``prev`` has, then opens ``own``."""

    prev: anyio.Event
    own: anyio.Event


@dataclass(slots=True)
class Run:
    """The counters, missing sample and range IDs to record of one validation."""

    missing_count: int = 0
    missing: list[str] = field(default_factory=list)
    ranges_total: int = 0
    ranges_read: int = 0
    ranges_skipped: int = 0
    objects_checked: int = 0
    objects_cached: int = 0
    validated: list[str] = field(default_factory=list)
    pages: OrderedDict[str, Page] = field(default_factory=OrderedDict)
    turns: dict[str, Turns] = field(default_factory=dict)

    def miss(self, key: str) -> None:
        """Count ``key`` missing, naming it while the sample has room."""
        self.missing_count += 1
        if len(self.missing) < MISSING_SAMPLE_SIZE:
            self.missing.append(key)

    def turns_of(self, prefix: str) -> Turns:
        """Return the queue of the listings of ``prefix``."""
        turns = self.turns.get(prefix)
        if turns is None:
            turns = self.turns[prefix] = Turns()
        return turns

    def page(self, prefix: str) -> Page | None:
        """Return the last page listed under ``prefix``, if it is still remembered."""
        return self.pages.get(prefix)

    def remember_page(self, prefix: str, page: Page) -> None:
        """Keep ``page`` as the last one listed under ``prefix`` (a few prefixes at most)."""
        self.pages[prefix] = page
        self.pages.move_to_end(prefix)
        while len(self.pages) > _PAGE_MEMO:
            self.pages.popitem(last=False)

    def report(self, metarange_id: str) -> ValidationReport:
        """Return what the run found about tree ``metarange_id``."""
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
class RangeOutcome:
    """What checking one range's objects found: present namespace keys and a missing count."""

    present: list[tuple[str, int]] = field(default_factory=list)
    missing: int = 0
