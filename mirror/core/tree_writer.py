"""Writing trees: records and reused ranges into ranges and a metarange, and changes onto a tree.

:class:`MetaRangeWriter` splits a sorted stream of records and runs of existing ranges into
ranges by :class:`~mirror.core.committed.ChunkingParams`; :func:`apply_changes` feeds it a base
tree and sorted changes, reusing every range no change falls in by ID.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable

import numpy as np

from mirror.core.columnar import RangeData, Run
from mirror.core.committed import (
    Change,
    ChunkingParams,
    CommittedStore,
    MetaRangeRows,
    RangeInfo,
    Record,
    WriteStats,
    _RowRun,
)
from mirror.core.encoding import estimate
from mirror.core.ids import MetaRangeID
from mirror.core.model import Entry

__all__ = ["MetaRangeWriter", "apply_changes"]


class MetaRangeWriter:
    """Build a tree from sorted records and reused ranges, split by :class:`ChunkingParams`.

    The open range is a list of pieces: runs of records of existing ranges (added with
    :meth:`add_run`, never decoded into entries) and lists of new records (:meth:`add`).
    """

    def __init__(self, store: CommittedStore, params: ChunkingParams, stats: WriteStats) -> None:
        self._store = store
        self._params = params
        self.stats = stats
        self._ranges: list[_RowRun | list[RangeInfo]] = []
        self._pieces: list[Run | list[Record]] = []
        self._buf_bytes = 0

    @property
    def at_boundary(self) -> bool:
        """Return whether no range is open, so an existing range may be appended whole."""
        return not self._pieces

    def add(self, key: str, entry: Entry) -> None:
        """Append one record; keys must strictly increase."""
        pieces = self._pieces
        if pieces and isinstance(pieces[-1], list):
            pieces[-1].append((key, entry))
        else:
            pieces.append([(key, entry)])
        self._buf_bytes += estimate(key, entry)
        if self._buf_bytes >= self._params.max_bytes or self._params.is_boundary_key(key):
            self._flush()

    def add_run(self, rows: RangeData, start: int, stop: int) -> None:
        """Append records ``start`` to ``stop`` (excluded) of an existing range, unchanged.

        The range ends where :meth:`add` of each record would have ended it: after a boundary
        key of the hash rule, or at the record that brings the open range to ``max_bytes``.
        """
        if start >= stop:
            return
        boundaries = rows.boundaries(self._params.raggedness)
        sums = rows.sizes()
        while start < stop:
            b = bisect.bisect_left(boundaries, start)
            end = boundaries[b] if b < len(boundaries) else stop
            # the first record with which the open range reaches max_bytes
            need = self._params.max_bytes - self._buf_bytes + int(sums[start])
            reach = start + 1 + int(np.searchsorted(sums[start + 1 :], need, "left"))
            end = min(end, reach - 1)
            if end >= stop:
                self._pieces.append((rows, start, stop))
                self._buf_bytes += int(sums[stop] - sums[start])
                return
            self._pieces.append((rows, start, end + 1))
            self._buf_bytes += int(sums[end + 1] - sums[start])
            self._flush()
            start = end + 1

    def add_ranges(self, infos: list[RangeInfo]) -> None:
        """Append existing ranges unchanged; only allowed at a boundary."""
        if self._pieces:
            raise AssertionError("add_ranges with an open range")
        self._add_info(*infos)
        self.stats.ranges_reused += len(infos)

    def reuse_ranges(self, rows: MetaRangeRows, start: int, stop: int) -> None:
        """Append ranges ``start`` to ``stop`` (excluded) of a metarange unchanged."""
        if self._pieces:
            raise AssertionError("reuse_ranges with an open range")
        if stop > start:
            self._ranges.append((rows, start, stop))
            self.stats.ranges_reused += stop - start

    def _add_info(self, *infos: RangeInfo) -> None:
        if self._ranges and isinstance(self._ranges[-1], list):
            self._ranges[-1].extend(infos)
        elif infos:
            self._ranges.append(list(infos))

    def _flush(self) -> None:
        pieces = self._pieces
        if not pieces:
            return
        # every key but the last was checked by the hash rule while the range was open
        raggedness = self._params.raggedness
        if len(pieces) == 1 and isinstance(pieces[0], list):
            info = self._store.write_range(pieces[0], self.stats, self._buf_bytes, raggedness)
        else:
            info = self._store.write_pieces(pieces, self.stats, raggedness)
        self._add_info(info)
        self._pieces = []
        self._buf_bytes = 0

    def close(self) -> MetaRangeID:
        """Write the last range and the metarange; return the metarange ID.

        An empty tree gets a written metarange and a real ID too; only a repository's initial
        commit has the ID ``""`` (as in lakeFS, whose clients tell the two apart).
        """
        self._flush()
        pieces = self._ranges
        if all(isinstance(p, list) for p in pieces):
            infos = [r for p in pieces if isinstance(p, list) for r in p]
            return self._store.write_metarange(infos, self.stats)
        return self._store.write_metarange_pieces(pieces, self.stats)


class _Peekable:
    """The sorted changes still to apply, looked at one ahead.

    A change is a ``(key, entry or None)`` pair or a run of new records (a :data:`Run` of
    rows holding entries to set, keys ascending); :meth:`take_until` splits a run.
    """

    __slots__ = ("_head", "_it")

    def __init__(self, it: Iterable[Change | Run]) -> None:
        self._it = iter(it)
        self._head: Change | Run | None = next(self._it, None)

    def peek(self) -> Change | Run | None:
        return self._head

    def pop(self) -> Change | Run:
        head = self._head
        assert head is not None
        self._head = next(self._it, None)
        return head

    def take_until(self, run: Run, max_key: str) -> Run:
        """Pop the part of ``run`` (the head) with keys up to ``max_key``."""
        rows, start, stop = run
        end = bisect.bisect_right(rows.keys, max_key, start, stop)
        if end < stop:
            self._head = (rows, end, stop)
            return rows, start, end
        self._head = next(self._it, None)
        return run


def _first_key(change: Change | Run) -> str:
    if len(change) == 3:
        return change[0].keys[change[1]]
    return change[0]


def _merge_run(
    writer: MetaRangeWriter, rows: RangeData, pos: int, run: Run, stats: WriteStats
) -> int:
    """Write records of ``rows`` from ``pos`` interleaved with the new records of ``run``.

    Each new record does what a ``(key, entry)`` change does: it is added, replaces the record
    of its key, or (same identity) leaves that record as it is. Return where ``rows`` is at.
    """
    new, t, stop = run
    new_keys = new.keys
    keys = rows.keys
    n = len(keys)
    while t < stop:
        key = new_keys[t]
        j = bisect.bisect_left(keys, key, pos)
        writer.add_run(rows, pos, j)
        pos = j
        if j < n and keys[j] == key:
            pos = j + 1
            if new.identity(t) != rows.identity(j):
                writer.add_run(new, t, t + 1)
                stats.changed += 1
            else:
                writer.add_run(rows, j, j + 1)
            t += 1
            continue
        # every new record before the next existing key is added, as one run
        end = stop if j == n else bisect.bisect_left(new_keys, keys[j], t, stop)
        writer.add_run(new, t, end)
        stats.added += end - t
        t = end
    return pos


def apply_changes(
    store: CommittedStore,
    params: ChunkingParams,
    base: str,
    changes: Iterable[Change | Run],
    stats: WriteStats | None = None,
) -> tuple[MetaRangeID, WriteStats]:
    """Apply sorted ``changes`` (``None`` deletes) onto tree ``base``; return the new tree.

    A change is a ``(key, entry or None)`` pair, or a run of new records (rows of
    :func:`~mirror.core.record_columns.rows_of_columns`, say) that acts as one ``(key, entry)``
    change per record, at the cost of slicing columns rather than encoding each entry.
    A change whose entry has the same identity as the base record keeps the base record.
    Ranges with no change in their key span are reused unread whenever the writer is at a
    boundary, which is the case after every range that ended by rule. A range a change falls
    in is rewritten as runs of its unchanged records around the changes (see
    :meth:`MetaRangeWriter.add_run`), so its cost follows the changes more than its size.
    """
    stats = stats or WriteStats()
    writer = MetaRangeWriter(store, params, stats)
    pending = _Peekable(changes)
    meta = store.metarange_rows(base)
    ranges = meta.ranges
    max_keys = store.max_keys(base, ranges)
    i = 0
    while i < len(ranges):
        if writer.at_boundary:
            # every range before the first one whose span holds the next change is untouched:
            # reuse the run whole; all but the tree's last range ended by rule
            nxt = pending.peek()
            j = len(ranges) if nxt is None else bisect.bisect_left(max_keys, _first_key(nxt), i)
            if j > i:
                r = ranges[j - 1]
                tail_ok = params.ends_range(r) or (j == len(ranges) and nxt is None)
                reuse = j if tail_ok else j - 1
                writer.reuse_ranges(meta, i, reuse)
                i = reuse
                if i == j:
                    continue
        r = ranges[i]
        i += 1
        rows = store.read_rows(r.id)
        stats.ranges_read += 1
        keys = rows.keys
        pos = 0
        while (c := pending.peek()) is not None and _first_key(c) <= r.max_key:
            if len(c) == 3:
                run = pending.take_until(c, r.max_key)
                pos = _merge_run(writer, rows, pos, run, stats)
                continue
            pending.pop()
            key, entry = c
            j = bisect.bisect_left(keys, key, pos)
            writer.add_run(rows, pos, j)
            pos = j
            if j < len(keys) and keys[j] == key:
                pos = j + 1
                if entry is None:
                    stats.removed += 1
                elif entry.identity != rows.identity(j):
                    writer.add(key, entry)
                    stats.changed += 1
                else:
                    writer.add_run(rows, j, j + 1)
            elif entry is not None:
                writer.add(key, entry)
                stats.added += 1
        writer.add_run(rows, pos, len(keys))
    while (c := pending.peek()) is not None:
        pending.pop()
        if len(c) == 3:
            new, start, stop = c
            writer.add_run(new, start, stop)
            stats.added += stop - start
        elif c[1] is not None:
            writer.add(c[0], c[1])
            stats.added += 1
    return writer.close(), stats
