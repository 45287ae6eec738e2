"""Two-way diffs of trees, skipping every range both sides share by ID, and able to seek."""

from __future__ import annotations

import bisect
from collections.abc import Iterator

from mirror.core.committed import CommittedStore, RangeInfo, Record, WriteStats
from mirror.core.model import DiffEntry, DiffType, Entry

__all__ = ["TreeCursor", "TreeDiff", "diff_trees"]


class TreeCursor:
    """Walk a tree record by record, able to skip whole ranges at range starts (for diffs)."""

    def __init__(self, store: CommittedStore, mid: str, stats: WriteStats | None = None) -> None:
        self._store = store
        self._mid = mid
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

    def _load(self) -> list[str]:
        self._keys, self._entries = self._store.read_range(self._ranges[self._ri].id)
        self._pos = 0
        if self._stats is not None:
            self._stats.ranges_read += 1
        return self._keys

    def peek(self) -> Record | None:
        """Return the next record without consuming it, or ``None`` at the end."""
        while True:
            if self._keys is None:
                if self._ri >= len(self._ranges):
                    return None
                self._load()
            assert self._keys is not None
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

    def seek(self, key: str) -> None:
        """Move forward to the first record whose key is ``>= key`` (never backwards).

        Ranges that end before ``key`` are passed over unread; the cursor rests at the start
        of the next range (still unread, so a diff may skip it whole) unless ``key`` falls
        inside it.
        """
        if self._keys is not None:
            if self._keys and self._keys[-1] >= key:
                self._pos = max(self._pos, bisect.bisect_left(self._keys, key))
                return
            self._keys = None
            self._ri += 1
        max_keys = self._store.max_keys(self._mid, self._ranges)
        self._ri = bisect.bisect_left(max_keys, key, lo=self._ri)
        if self._ri < len(self._ranges) and self._ranges[self._ri].min_key < key:
            self._pos = bisect.bisect_left(self._load(), key)


class TreeDiff(Iterator[DiffEntry]):
    """The entries that differ between two trees, in path order; :meth:`seek` jumps ahead.

    Entries compare by identity. Ranges with equal IDs at aligned positions are skipped unread,
    so the cost grows with the ranges that differ, not with the size of the trees; a seek
    passes over whole ranges without reading them, so a listing that folds a folder into one
    row (a delimiter) need not read what the folder holds.
    """

    def __init__(
        self, store: CommittedStore, left: str, right: str, stats: WriteStats | None = None
    ) -> None:
        self._trees = (store, left, right, stats)
        self._cursors: tuple[TreeCursor, TreeCursor] | None = None
        self._done = left == right

    def __iter__(self) -> TreeDiff:
        return self

    def _open(self) -> tuple[TreeCursor, TreeCursor]:
        # the metaranges are read on first use, as a generator would, so that a missing tree
        # fails where the diff is read
        if self._cursors is None:
            store, left, right, stats = self._trees
            self._cursors = (TreeCursor(store, left, stats), TreeCursor(store, right, stats))
        return self._cursors

    def seek(self, key: str) -> None:
        """Make the next entry the first whose path is ``>= key`` (never moves backwards)."""
        if not self._done:
            for cursor in self._open():
                cursor.seek(key)

    def __next__(self) -> DiffEntry:
        if self._done:
            raise StopIteration
        lc, rc = self._open()
        while True:
            lr, rr = lc.range_start(), rc.range_start()
            if lr is not None and rr is not None and lr.id == rr.id:
                lc.skip_range()
                rc.skip_range()
                continue
            lrec, rrec = lc.peek(), rc.peek()
            if lrec is None and rrec is None:
                self._done = True
                raise StopIteration
            if rrec is None or (lrec is not None and lrec[0] < rrec[0]):
                assert lrec is not None
                lc.advance()
                return DiffEntry(lrec[0], DiffType.REMOVED, lrec[1], None)
            if lrec is None or rrec[0] < lrec[0]:
                rc.advance()
                return DiffEntry(rrec[0], DiffType.ADDED, None, rrec[1])
            lc.advance()
            rc.advance()
            if lrec[1].identity != rrec[1].identity:
                return DiffEntry(lrec[0], DiffType.CHANGED, lrec[1], rrec[1])


def diff_trees(
    store: CommittedStore, left: str, right: str, stats: WriteStats | None = None
) -> TreeDiff:
    """Return, in path order, every path whose entry differs between trees ``left`` and ``right``.

    See :class:`TreeDiff`.
    """
    return TreeDiff(store, left, right, stats)
