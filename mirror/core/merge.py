"""Three-way merge of trees by whole object, with lakeFS's conflict strategies."""

from __future__ import annotations

from collections.abc import Iterator
from enum import StrEnum

from mirror.core.committed import ChunkingParams, CommittedStore, WriteStats
from mirror.core.diff import diff_trees
from mirror.core.errors import InvalidMergeStrategyError, MergeConflictError
from mirror.core.ids import MetaRangeID
from mirror.core.model import DiffEntry, Entry
from mirror.core.tree_writer import apply_changes

__all__ = ["MergeStrategy", "merge_changes", "merge_trees"]


class MergeStrategy(StrEnum):
    """How conflicts are resolved: fail (``NONE``), or take one side for every conflict."""

    NONE = "default"
    SOURCE_WINS = "source-wins"
    DEST_WINS = "dest-wins"

    @classmethod
    def parse(cls, value: str | MergeStrategy | None) -> MergeStrategy:
        """Return the strategy named ``value`` (``None`` or ``""``: fail on conflict).

        Raises:
            InvalidMergeStrategyError: unknown strategy name.
        """
        if value is None or value == "":
            return cls.NONE
        if isinstance(value, MergeStrategy):
            return value
        for s in cls:
            if s.value == value:
                return s
        raise InvalidMergeStrategyError(f"{value!r}: use 'source-wins' or 'dest-wins'")


def _same(a: Entry | None, b: Entry | None) -> bool:
    if a is None or b is None:
        return a is None and b is None
    return a.identity == b.identity


def _zip_diffs(
    src: Iterator[DiffEntry], dst: Iterator[DiffEntry]
) -> Iterator[tuple[str, DiffEntry | None, DiffEntry | None]]:
    s, d = next(src, None), next(dst, None)
    while s is not None or d is not None:
        if d is None or (s is not None and s.path < d.path):
            assert s is not None
            yield s.path, s, None
            s = next(src, None)
        elif s is None or d.path < s.path:
            yield d.path, None, d
            d = next(dst, None)
        else:
            yield s.path, s, d
            s, d = next(src, None), next(dst, None)


def merge_changes(
    store: CommittedStore,
    base: str,
    source: str,
    dest: str,
    strategy: MergeStrategy,
    stats: WriteStats | None = None,
) -> list[tuple[str, Entry | None]]:
    """Return the sorted changes that turn ``dest`` into the merge of ``source`` into it.

    Follows the three-way table: a path changed on one side only takes that side; the same
    change on both sides is kept; different changes (including change vs. delete) conflict.

    Raises:
        MergeConflictError: conflicts exist and ``strategy`` is ``NONE``; lists every path.
    """
    changes: list[tuple[str, Entry | None]] = []
    conflicts: list[str] = []
    src_diff = diff_trees(store, base, source, stats)
    dst_diff = diff_trees(store, base, dest, stats)
    for path, s, d in _zip_diffs(src_diff, dst_diff):
        if s is None:
            continue  # changed only in the destination: keep it
        if d is None:
            changes.append((path, s.right))  # changed only in the source: take it
            continue
        if _same(s.right, d.right):
            continue  # same change on both sides
        if strategy is MergeStrategy.SOURCE_WINS:
            changes.append((path, s.right))
        elif strategy is MergeStrategy.NONE:
            conflicts.append(path)
    if conflicts:
        raise MergeConflictError(conflicts)
    return changes


def merge_trees(
    store: CommittedStore,
    params: ChunkingParams,
    base: str,
    source: str,
    dest: str,
    strategy: MergeStrategy,
) -> tuple[MetaRangeID, WriteStats]:
    """Merge tree ``source`` into tree ``dest`` over common ancestor tree ``base``."""
    stats = WriteStats()
    if dest == base:
        return MetaRangeID(source), stats
    changes = merge_changes(store, base, source, dest, strategy, stats)
    return apply_changes(store, params, dest, changes, stats)
