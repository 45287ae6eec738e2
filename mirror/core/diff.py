"""Two-way diffs of trees, skipping every range both sides share by ID."""

from __future__ import annotations

from collections.abc import Iterator

from mirror.core.committed import CommittedStore, RangeInfo, Record, WriteStats
from mirror.core.model import DiffEntry, DiffType, Entry

__all__ = ["TreeCursor", "diff_trees"]


class TreeCursor:
    """Walk a tree record by record, able to skip whole ranges at range starts (for diffs)."""

    def __init__(self, store: CommittedStore, mid: str, stats: WriteStats | None = None) -> None:
        self._store = store
        self._ranges = store.read_metarange(mid)
        self._ri = 0
        self._keys: list[str] | None = None
        self._entries: list[Entry] = []
        self._pos = 0
        self._stats = stats

    def range_start(self) -> RangeInfo | None:
        """Return the next range if the cursor sits at its start, else ``None``."""
        if self._keys is None and self._ri < len(self._ranges):
            return self._ranges[self._ri]
        return None

    def skip_range(self) -> None:
        """Skip the range the cursor sits at the start of, without reading it."""
        self._ri += 1

    def peek(self) -> Record | None:
        """Return the next record without consuming it, or ``None`` at the end."""
        while True:
            if self._keys is None:
                if self._ri >= len(self._ranges):
                    return None
                self._keys, self._entries = self._store.read_range(self._ranges[self._ri].id)
                self._pos = 0
                if self._stats is not None:
                    self._stats.ranges_read += 1
            if self._pos < len(self._keys):
                return self._keys[self._pos], self._entries[self._pos]
            self._keys = None
            self._ri += 1

    def advance(self) -> None:
        """Consume the record returned by :meth:`peek`."""
        self._pos += 1
        if self._keys is not None and self._pos >= len(self._keys):
            self._keys = None
            self._ri += 1


def diff_trees(
    store: CommittedStore, left: str, right: str, stats: WriteStats | None = None
) -> Iterator[DiffEntry]:
    """Yield, in path order, every path whose entry differs between trees ``left`` and ``right``.

    Entries compare by identity. Ranges with equal IDs at aligned positions are skipped unread,
    so the cost grows with the ranges that differ, not with the size of the trees.
    """
    if left == right:
        return
    lc = TreeCursor(store, left, stats)
    rc = TreeCursor(store, right, stats)
    while True:
        lr, rr = lc.range_start(), rc.range_start()
        if lr is not None and rr is not None and lr.id == rr.id:
            lc.skip_range()
            rc.skip_range()
            continue
        lrec, rrec = lc.peek(), rc.peek()
        if lrec is None and rrec is None:
            return
        if rrec is None or (lrec is not None and lrec[0] < rrec[0]):
            assert lrec is not None
            yield DiffEntry(lrec[0], DiffType.REMOVED, lrec[1], None)
            lc.advance()
        elif lrec is None or rrec[0] < lrec[0]:
            yield DiffEntry(rrec[0], DiffType.ADDED, None, rrec[1])
            rc.advance()
        else:
            if lrec[1].identity != rrec[1].identity:
                yield DiffEntry(lrec[0], DiffType.CHANGED, lrec[1], rrec[1])
            lc.advance()
            rc.advance()
