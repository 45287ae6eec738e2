"""The repositories ``bench.ui`` browses, written through the core before the server starts.

Three kinds, in one embedded data directory (SQLite KV + ``local://`` namespaces under it), so
that ``lakemirror server --data-dir`` then serves them as any repository it created:

- ``objects-<n>``: ``n`` objects in ``bench.core``'s layout
  (``tables/<table>/date=YYYY-MM-DD/part-NNNNN.parquet``, 8 tables, 100 parts a date), committed
  in one :meth:`~mirror.core.Catalog.commit_tree` (no million uploads), plus a ``feature`` branch
  with one new date partition of 10 objects and a tag ``v1`` at ``main``. Every size has the
  same top folders and the same first date partition of each table, so the pages compared
  across sizes list the same rows;
- ``history``: ``main`` with a history of ``commits`` commits: the repository's initial commit,
  a base of 100 objects, then commits whose trees alternate between the base and the base with
  one object changed, so each commit's diff against its parent is one changed object. The
  records are made with :func:`~mirror.core.commits.new_commit` and added with
  :meth:`~mirror.core.Catalog.import_commit` (which checks each ID against its content and
  that its parent exists), then ``main`` is moved to the last one: a commit costs one KV
  write, not a tree write.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from bench.core import CONTENT_TYPE, TABLES, Layout
from mirror.core import Catalog, Entry, open_embedded
from mirror.core.commits import new_commit

__all__ = [
    "FEATURE_OBJECTS",
    "HISTORY",
    "Built",
    "ObjectsRepository",
    "build",
    "deep_folder",
    "objects_repository",
    "table_folder",
]

HISTORY = "history"
FEATURE_OBJECTS = 10
_HISTORY_BASE = 100
_EPOCH = 1_700_000_000


def objects_repository(n: int) -> str:
    """Return the name of the ``n``-object repository."""
    return f"objects-{n}"


def table_folder() -> str:
    """Return the folder of the first table: its date partitions (1,250 at 1,000,000 objects)."""
    return f"tables/{TABLES[0]}/"


def deep_folder() -> str:
    """Return the first date partition of the first table: 100 objects at every size >= 800."""
    return f"{table_folder()}date=2020-01-01/"


@dataclass(frozen=True, slots=True)
class ObjectsRepository:
    """An ``objects-<n>`` repository: its size, its bulk commit, and how long it took to build."""

    name: str
    objects: int
    bulk_commit: str
    seconds: float


@dataclass(frozen=True, slots=True)
class Built:
    """What :func:`build` wrote."""

    repositories: list[ObjectsRepository]
    commits: int
    middle_commit: str
    history_seconds: float


def _feature(n: int) -> Iterator[tuple[str, Entry | None]]:
    # a date after the last one of the first table at any size: a partition of its own
    for part in range(FEATURE_OBJECTS):
        key = Layout.key(TABLES[0], 9_000, part)
        yield key, Entry(f"data/feature/{part:05d}", 1_000 + part, f"{part:032x}", _EPOCH)


def _objects(catalog: Catalog, n: int) -> ObjectsRepository:
    name = objects_repository(n)
    started = time.perf_counter()
    catalog.create_repository(name, f"local://{name}")
    bulk = catalog.commit_tree(
        name, "main", Layout(n).records(), f"{n:,} objects", committer="bench"
    )
    catalog.create_branch(name, "feature", "main")
    catalog.commit_tree(name, "feature", _feature(n), "one new partition", committer="bench")
    catalog.create_tag(name, "v1", "main")
    return ObjectsRepository(name, n, bulk.commit.id, time.perf_counter() - started)


def _history(catalog: Catalog, commits: int) -> tuple[str, float]:
    """Write ``HISTORY`` with ``commits`` commits on main; return the middle one's ID."""
    if commits < 3:
        raise ValueError("a history needs at least 3 commits (initial, base, one change)")
    started = time.perf_counter()
    catalog.create_repository(HISTORY, f"local://{HISTORY}")
    layout = Layout(_HISTORY_BASE)
    base = catalog.commit_tree(HISTORY, "main", layout.records(), "base", committer="bench").commit
    # the changed tree: written once on a scratch branch, its metarange reused by every other commit
    catalog.create_branch(HISTORY, "scratch", "main")
    key = layout.key_at(0)
    changed = Entry("data/changed", 7, "0" * 32, _EPOCH, CONTENT_TYPE)
    other = catalog.commit_tree(HISTORY, "scratch", [(key, changed)], "changed", committer="bench")
    catalog.delete_branch(HISTORY, "scratch")
    trees = (other.commit.metarange_id, base.metarange_id)
    parent, middle = base, ""
    for k in range(commits - 2):
        commit = new_commit(
            "bench",
            f"change {k}: {key}",
            trees[k % 2],
            _EPOCH + k,
            {"sequence": str(k)},
            (parent.id,),
            parent.generation + 1,
        )
        catalog.import_commit(HISTORY, commit)
        parent = commit
        if k == (commits - 2) // 2:
            middle = commit.id
    catalog.set_branch_head(HISTORY, "main", parent.id, base.id)
    return middle, time.perf_counter() - started


def build(data_dir: Path, sizes: list[int], commits: int) -> Built:
    """Write the ``objects-<n>`` repositories and the history into ``data_dir``."""
    catalog = open_embedded(data_dir)
    try:
        repositories = [_objects(catalog, n) for n in sizes]
        middle, seconds = _history(catalog, commits)
    finally:
        catalog.kv.close()
    return Built(repositories, commits, middle, seconds)
