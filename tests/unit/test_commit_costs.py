"""What commits, diffs and merges cost in a 200,000-object repository, counted in requests.

DESIGN.md §9: a commit changing k objects writes at most (ranges touched + 1) files, and a diff
or merge of trees that share ranges never reads the shared ones. The counts come from the
``MemoryBlockStore`` of the namespace (``requests`` and ``keys_read``) and from ``WriteStats``;
each test reads through a catalog whose range cache is off, so every range it needs is a GET.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterator
from dataclasses import dataclass

import pytest

from mirror.block.memory import MemoryBlockStore
from mirror.block.resolver import BlockResolver
from mirror.core import (
    Catalog,
    ChunkingParams,
    Commit,
    DiffType,
    Entry,
    RangeInfo,
    open_memory,
)
from mirror.core.committed import METADATA_PREFIX
from mirror.kv.protocol import KV

REPO = "costs"
NAMESPACE = "mem://costs"
SIZE = 200_000
MTIME = 1_700_000_000
PARAMS = ChunkingParams()


def key_of(n: int) -> str:
    return f"tables/events/part-{n // 1000:03d}/file-{n:06d}.parquet"


def entry_of(n: int, version: int = 0) -> Entry:
    return Entry(
        address=f"data/x/{n}-{version}",
        size=100 + n % 7 + version,
        checksum=f"{n:024x}{version:08x}",
        mtime=MTIME,
    )


def bulk() -> Iterator[tuple[str, Entry | None]]:
    for n in range(SIZE):
        yield key_of(n), entry_of(n)


@dataclass(frozen=True)
class BigRepo:
    kv: KV
    blocks: BlockResolver
    base: Commit
    ranges: list[RangeInfo]

    def cold(self) -> Catalog:
        """Return a catalog over the same stores with no range cache."""
        return Catalog(self.kv, self.blocks, range_cache_size=0)

    def store(self) -> MemoryBlockStore:
        store = self.blocks.open(NAMESPACE)
        assert isinstance(store, MemoryBlockStore)
        return store

    def branch(self, catalog: Catalog, name: str) -> str:
        catalog.create_branch(REPO, name, self.base.id)
        return name


@pytest.fixture(scope="module")
def big() -> BigRepo:
    catalog = open_memory()
    catalog.create_repository(REPO, NAMESPACE)
    result = catalog.commit_tree(REPO, "main", bulk(), "bulk load", date=MTIME)
    assert result.stats.added == SIZE
    ranges = catalog.committed(catalog.get_repository(REPO)).read_metarange(
        result.commit.metarange_id
    )
    assert len(ranges) > 100, "the tree must span many ranges for the counts to mean anything"
    assert isinstance(catalog.blocks, BlockResolver)
    return BigRepo(catalog.kv, catalog.blocks, result.commit, ranges)


def range_holding(ranges: list[RangeInfo], key: str) -> RangeInfo:
    i = bisect.bisect_left([r.max_key for r in ranges], key)
    assert i < len(ranges) and ranges[i].min_key <= key, key
    return ranges[i]


def ranges_of(catalog: Catalog, metarange: str) -> list[RangeInfo]:
    return catalog.committed(catalog.get_repository(REPO)).read_metarange(metarange)


def lakefs_keys(store: MemoryBlockStore) -> set[str]:
    return {o.key for o in store.list(METADATA_PREFIX)}


def split_reads(store: MemoryBlockStore, metaranges: set[str]) -> tuple[list[str], list[str]]:
    """Return the metarange and range IDs read since the last counter reset, in read order."""
    meta: list[str] = []
    ranges: list[str] = []
    for key in store.keys_read:
        if not key.startswith(METADATA_PREFIX):
            continue
        ident = key[len(METADATA_PREFIX) :]
        (meta if ident in metaranges else ranges).append(ident)
    return meta, ranges


def inner_index(ranges: list[RangeInfo], near: int) -> int:
    """Return the index of an existing key near ``near`` that is neither a range's first nor last
    key nor a boundary key, so changing it cannot move a boundary."""
    ends = {r.min_key for r in ranges} | {r.max_key for r in ranges}
    n = near
    while key_of(n) in ends or PARAMS.is_boundary_key(key_of(n)):
        n += 1
    return n


def test_commit_of_one_object_writes_one_range_and_one_metarange(big: BigRepo) -> None:
    catalog = big.cold()
    branch = big.branch(catalog, "one-object")
    store = big.store()
    # a key in the middle of its range, not a boundary key: the boundaries stay where they are
    n = inner_index(big.ranges, 123_456)
    key = key_of(n)
    touched = range_holding(big.ranges, key)
    before = lakefs_keys(store)
    store.reset_counters()

    catalog.upload_object(REPO, branch, key, b"new contents")
    result = catalog.commit(REPO, branch, "change one object")

    puts = store.requests["put"]
    meta_read, ranges_read = split_reads(store, {big.base.metarange_id})
    written = lakefs_keys(store) - before
    assert result.stats.ranges_written == 1
    assert result.stats.metaranges_written == 1
    assert result.stats.files_written == 2
    assert puts == 3, "the data object, one range and one metarange"
    assert written == set(result.stats.written_keys)
    assert len(written) == 2
    assert METADATA_PREFIX + result.commit.metarange_id in written
    assert ranges_read == [touched.id], "only the range holding the changed key is read"
    assert meta_read == [big.base.metarange_id]

    new_ranges = ranges_of(catalog, result.commit.metarange_id)
    assert len(new_ranges) == len(big.ranges)
    differing = [old.id for old, new in zip(big.ranges, new_ranges, strict=True) if old != new]
    assert differing == [touched.id]
    assert catalog.read_object(REPO, result.commit.id, key) == b"new contents"


@pytest.mark.parametrize("k", [2, 100, 2_500])
def test_commit_of_clustered_objects_writes_touched_ranges_plus_one(big: BigRepo, k: int) -> None:
    catalog = big.cold()
    branch = big.branch(catalog, f"cluster-{k}")
    store = big.store()
    first = inner_index(big.ranges, 60_000)
    changed = [key_of(n) for n in range(first, first + k)]
    touched = [r for r in big.ranges if r.min_key <= changed[-1] and r.max_key >= changed[0]]
    catalog.stage_objects(
        REPO, branch, [(key_of(n), entry_of(n, version=1)) for n in range(first, first + k)]
    )
    store.reset_counters()

    result = catalog.commit(REPO, branch, f"change {k} clustered objects")

    _, ranges_read = split_reads(store, {big.base.metarange_id})
    assert result.stats.changed == k
    assert result.stats.files_written <= len(touched) + 1
    assert result.stats.ranges_written == len(touched)
    assert sorted(ranges_read) == sorted(r.id for r in touched)
    assert store.requests["put"] == result.stats.files_written
    untouched = {r.id for r in big.ranges} - {r.id for r in touched}
    new_ids = {r.id for r in ranges_of(catalog, result.commit.metarange_id)}
    assert untouched <= new_ids


def test_deleting_a_boundary_key_joins_two_ranges_into_one(big: BigRepo) -> None:
    catalog = big.cold()
    branch = big.branch(catalog, "boundary-delete")
    store = big.store()
    i = len(big.ranges) // 2
    while not PARAMS.is_boundary_key(big.ranges[i].max_key) or big.ranges[i].count < 2:
        i += 1
    left, right = big.ranges[i], big.ranges[i + 1]
    catalog.delete_object(REPO, branch, left.max_key)
    store.reset_counters()

    result = catalog.commit(REPO, branch, "delete a boundary key")

    _, ranges_read = split_reads(store, {big.base.metarange_id})
    assert sorted(ranges_read) == sorted([left.id, right.id])
    assert result.stats.ranges_written == 1
    assert result.stats.files_written == 2
    new_ranges = ranges_of(catalog, result.commit.metarange_id)
    assert len(new_ranges) == len(big.ranges) - 1
    joined = range_holding(new_ranges, left.min_key)
    assert (joined.min_key, joined.max_key) == (left.min_key, right.max_key)
    assert joined.count == left.count + right.count - 1


def test_diff_reads_only_the_differing_range_on_each_side(big: BigRepo) -> None:
    catalog = big.cold()
    branch = big.branch(catalog, "diff-one")
    store = big.store()
    n = inner_index(big.ranges, 77_777)
    catalog.stage_object(REPO, branch, key_of(n), entry_of(n, version=1))
    after = catalog.commit(REPO, branch, "one change").commit
    left = range_holding(big.ranges, key_of(n))
    right = range_holding(ranges_of(catalog, after.metarange_id), key_of(n))
    assert left.id != right.id
    store.reset_counters()

    diff = list(catalog.diff(REPO, big.base.id, after.id))

    meta_read, ranges_read = split_reads(store, {big.base.metarange_id, after.metarange_id})
    assert [(d.path, d.type) for d in diff] == [(key_of(n), DiffType.CHANGED)]
    assert sorted(ranges_read) == sorted([left.id, right.id])
    assert sorted(meta_read) == sorted([big.base.metarange_id, after.metarange_id])


def test_merge_reads_only_the_ranges_either_side_touched(big: BigRepo) -> None:
    catalog = big.cold()
    source = big.branch(catalog, "merge-source")
    dest = big.branch(catalog, "merge-dest")
    store = big.store()
    a = inner_index(big.ranges, 1_500)
    b = inner_index(big.ranges, 190_000)
    catalog.stage_object(REPO, source, key_of(a), entry_of(a, version=1))
    src = catalog.commit(REPO, source, "change near the start").commit
    catalog.stage_object(REPO, dest, key_of(b), entry_of(b, version=1))
    dst = catalog.commit(REPO, dest, "change near the end").commit
    expected = {
        range_holding(big.ranges, key_of(a)).id,
        range_holding(big.ranges, key_of(b)).id,
        range_holding(ranges_of(catalog, src.metarange_id), key_of(a)).id,
        range_holding(ranges_of(catalog, dst.metarange_id), key_of(b)).id,
    }
    assert len(expected) == 4
    store.reset_counters()

    result = catalog.merge(REPO, source, dest)

    known = {big.base.metarange_id, src.metarange_id, dst.metarange_id}
    meta_read, ranges_read = split_reads(store, known | {result.commit.metarange_id})
    assert set(ranges_read) == expected
    assert set(meta_read) <= known
    # the merged range holding ``a`` has the records of the source's: same ID, nothing to write
    merged = ranges_of(catalog, result.commit.metarange_id)
    assert range_holding(merged, key_of(a)) == range_holding(
        ranges_of(catalog, src.metarange_id), key_of(a)
    )
    assert range_holding(merged, key_of(b)) == range_holding(
        ranges_of(catalog, dst.metarange_id), key_of(b)
    )
    assert result.stats.files_written <= 2
    assert result.stats.metaranges_written == 1
    assert catalog.stat_object(REPO, result.commit.id, key_of(a)).entry == entry_of(a, 1)
    assert catalog.stat_object(REPO, result.commit.id, key_of(b)).entry == entry_of(b, 1)


def new_boundary_key(near: int) -> str:
    i = 0
    while not PARAMS.is_boundary_key(key := f"{key_of(near)}.extra-{i}"):
        i += 1
    return key


def test_same_content_through_different_histories_has_the_same_metarange(big: BigRepo) -> None:
    catalog = big.cold()
    boundary = next(r.max_key for r in big.ranges[40:] if PARAMS.is_boundary_key(r.max_key))
    added_boundary = new_boundary_key(150_000)
    mod1, mod2, temp = 10_000, 99_999, 170_000
    plain_delete = inner_index(big.ranges, 120_000)
    final: list[tuple[str, Entry | None]] = [
        (key_of(mod1), entry_of(mod1, 2)),
        (key_of(mod2), entry_of(mod2, 2)),
        (boundary, None),
        (key_of(plain_delete), None),
        (added_boundary, entry_of(SIZE, 2)),
    ]
    assert len({path for path, _ in final} | {key_of(temp)}) == len(final) + 1

    one = big.branch(catalog, "canon-one")
    for path, value in final:
        if value is None:
            catalog.delete_object(REPO, one, path)
        else:
            catalog.stage_object(REPO, one, path, value)
    tree_one = catalog.commit(REPO, one, "all at once").commit.metarange_id

    many = big.branch(catalog, "canon-many")
    catalog.stage_object(REPO, many, added_boundary, entry_of(SIZE, 1))
    catalog.stage_object(REPO, many, key_of(temp), entry_of(temp, 5))
    catalog.delete_object(REPO, many, key_of(mod2))
    catalog.commit(REPO, many, "first step")
    catalog.delete_object(REPO, many, boundary)
    catalog.stage_object(REPO, many, key_of(mod2), entry_of(mod2, 2))
    catalog.commit(REPO, many, "second step")
    catalog.stage_object(REPO, many, key_of(temp), entry_of(temp))
    catalog.stage_object(REPO, many, added_boundary, entry_of(SIZE, 2))
    catalog.delete_object(REPO, many, key_of(plain_delete))
    catalog.commit(REPO, many, "third step")
    catalog.stage_object(REPO, many, key_of(mod1), entry_of(mod1, 2))
    tree_many = catalog.commit(REPO, many, "fourth step").commit.metarange_id

    assert tree_one != big.base.metarange_id
    assert tree_one == tree_many

    scratch = open_memory()
    scratch.create_repository("scratch", "mem://scratch")
    content = ((s.path, s.entry) for s in catalog.iter_objects(REPO, many))
    rebuilt = scratch.commit_tree("scratch", "main", content, "from scratch")
    assert rebuilt.commit.metarange_id == tree_one
