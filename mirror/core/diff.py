"""Two-way diffs of trees, skipping every range both sides share by ID."""

from __future__ import annotations

from collections.abc import Iterator

from mirror.core.committed import CommittedStore, TreeCursor, WriteStats
from mirror.core.model import DiffEntry, DiffType

__all__ = ["diff_trees"]


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
