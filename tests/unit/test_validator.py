"""The validator against real trees: a source repository, and a destination holding a subset.

Each test builds committed trees with the core (``Catalog.commit_tree`` on memory stores), copies
a chosen subset of the source namespace's files into a second ``MemoryBlockStore`` standing in
for region B, and validates there.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

import anyio
import anyio.lowlevel
import pytest

import mirror.validator
from mirror.block import BlockUnavailableError, MemoryBlockStore, ObjectInfo
from mirror.core import AddressType, Catalog, ChunkingParams, Commit, Entry, open_memory
from mirror.core.committed import (
    METADATA_PREFIX,
    CommittedStore,
    decode_metarange,
    decode_range,
)
from mirror.kv import MemoryKV, SqliteKV
from mirror.validator import (
    CountingEvents,
    CountingReader,
    KVValidatedRanges,
    MemoryValidatedRanges,
    NaiveChecker,
    ObjectCache,
    ThreadedObjectReader,
    Validator,
    split_full_address,
)

pytestmark = pytest.mark.anyio

REPO = "repo"
MTIME = 1_700_000_000


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def body_of(n: int) -> bytes:
    return f"object {n}\n".encode() * (1 + n % 5)


@dataclass
class Source:
    """A repository in an in-memory catalog whose data objects are written where addressed."""

    catalog: Catalog
    store: MemoryBlockStore
    commits: list[Commit] = field(default_factory=list)

    @classmethod
    def create(cls, raggedness: int = 64) -> Source:
        catalog = open_memory(chunking=ChunkingParams(raggedness=raggedness))
        repo = catalog.create_repository(REPO, "mem://src")
        store = catalog.block_store(repo)
        assert isinstance(store, MemoryBlockStore)
        return cls(catalog, store)

    def commit(self, objects: dict[str, tuple[str, bytes]]) -> Commit:
        """Commit path -> (address, body), writing each body at its address."""
        changes = []
        for path in sorted(objects):
            address, body = objects[path]
            self.store.put(address, body)
            entry = Entry(address, len(body), hashlib.md5(body).hexdigest(), MTIME)
            changes.append((path, entry))
        commit = self.catalog.commit_tree(REPO, "main", changes, f"c{len(self.commits)}").commit
        self.commits.append(commit)
        return commit

    def commit_entries(self, changes: Iterable[tuple[str, Entry]]) -> Commit:
        commit = self.catalog.commit_tree(REPO, "main", sorted(changes), "entries").commit
        self.commits.append(commit)
        return commit

    @property
    def committed(self) -> CommittedStore:
        return self.catalog.committed(self.catalog.get_repository(REPO))

    def keys(self, prefix: str = "") -> list[str]:
        return [o.key for o in self.store.list(prefix)]

    def range_ids(self, commit: Commit) -> list[str]:
        return [r.id for r in self.committed.read_metarange(commit.metarange_id)]

    def replica(self, skip: Iterable[str] = ()) -> MemoryBlockStore:
        """Return a destination holding every source file but ``skip``."""
        dst = MemoryBlockStore("mem://dst")
        skipped = set(skip)
        for key in self.keys():
            if key not in skipped:
                dst.put(key, self.store.get(key))
        return dst


def objects(count: int, *, start: int = 0, partition: str = "p0") -> dict[str, tuple[str, bytes]]:
    return {
        f"tables/t/part-{n:06d}": (f"data/{partition}/{n:08d}", body_of(n))
        for n in range(start, start + count)
    }


def validator(
    dst: MemoryBlockStore, events: CountingEvents | None = None, **options: object
) -> Validator:
    options.setdefault("validated", MemoryValidatedRanges())
    return Validator(ThreadedObjectReader(dst), events=events, **options)  # type: ignore[arg-type]


async def test_empty_tree_is_complete_without_requests() -> None:
    events = CountingEvents()
    report = await validator(MemoryBlockStore(), events).validate("")
    assert report.complete and report.missing_count == 0 and report.ranges_total == 0
    assert events.total_requests == 0


async def test_everything_present_is_complete() -> None:
    src = Source.create()
    commit = src.commit(objects(300))
    events = CountingEvents()
    validated = MemoryValidatedRanges()
    report = await validator(src.replica(), events, validated=validated).validate(
        commit.metarange_id
    )
    ranges = src.range_ids(commit)
    assert len(ranges) > 1
    assert report.complete and report.missing == () and report.missing_count == 0
    assert report.ranges_total == report.ranges_read == len(ranges)
    assert report.objects_checked == 300 and report.objects_cached == 0
    assert all(validated.contains(r) for r in ranges)
    assert events.objects == {"present": 300}
    assert events.requests["get"] == 1 + len(ranges)


async def test_missing_metarange() -> None:
    src = Source.create()
    commit = src.commit(objects(20))
    dst = src.replica(skip=[METADATA_PREFIX + commit.metarange_id])
    report = await validator(dst).validate(commit.metarange_id)
    assert not report.complete
    assert report.missing == (METADATA_PREFIX + commit.metarange_id,)
    assert report.missing_count == 1 and report.ranges_total == 0


async def test_missing_range_fails_only_that_range() -> None:
    src = Source.create()
    commit = src.commit(objects(300))
    ranges = src.range_ids(commit)
    gone = ranges[1]
    validated = MemoryValidatedRanges()
    dst = src.replica(skip=[METADATA_PREFIX + gone])
    report = await validator(dst, validated=validated).validate(commit.metarange_id)
    assert not report.complete
    assert report.missing == (METADATA_PREFIX + gone,)
    assert report.ranges_read == len(ranges) - 1
    assert not validated.contains(gone)
    assert all(validated.contains(r) for r in ranges if r != gone)


async def test_missing_and_wrong_size_objects() -> None:
    src = Source.create()
    commit = src.commit(objects(50))
    dst = src.replica(skip=["data/p0/00000007"])
    dst.put("data/p0/00000011", b"truncated")
    events = CountingEvents()
    validated = MemoryValidatedRanges()
    report = await validator(dst, events, validated=validated).validate(commit.metarange_id)
    assert not report.complete
    assert sorted(report.missing) == ["data/p0/00000007", "data/p0/00000011"]
    assert report.missing_count == 2
    assert events.objects == {"present": 48, "missing": 1, "size_mismatch": 1}
    entries = dict(src.committed.iterate(commit.metarange_id))
    bad_ranges = {
        r.id
        for r in src.committed.read_metarange(commit.metarange_id)
        if r.min_key <= "tables/t/part-000007" <= r.max_key
        or r.min_key <= "tables/t/part-000011" <= r.max_key
    }
    assert entries["tables/t/part-000007"].address == "data/p0/00000007"
    assert not any(validated.contains(r) for r in bad_ranges)


async def test_second_validation_reads_no_range() -> None:
    src = Source.create()
    commit = src.commit(objects(300))
    dst = src.replica()
    validated = MemoryValidatedRanges()
    assert (await validator(dst, validated=validated).validate(commit.metarange_id)).complete
    events = CountingEvents()
    again = await validator(dst, events, validated=validated).validate(commit.metarange_id)
    assert again.complete and again.ranges_read == 0 and again.objects_checked == 0
    assert again.ranges_skipped == again.ranges_total == len(src.range_ids(commit))
    assert events.requests == {"get": 1}  # the metarange, read by a fresh validator
    assert events.cache_hits == {"range": again.ranges_total}


async def test_same_validator_remembers_the_metarange() -> None:
    src = Source.create()
    commit = src.commit(objects(30))
    events = CountingEvents()
    check = validator(src.replica(), events)
    await check.validate(commit.metarange_id)
    events.reset()
    assert (await check.validate(commit.metarange_id)).complete
    assert events.total_requests == 0


async def test_base_tree_limits_checks_to_new_objects() -> None:
    src = Source.create(raggedness=512)
    base = src.commit(objects(5_000))
    head = src.commit(objects(1, start=5_000, partition="p1"))
    dst = src.replica()
    validated = MemoryValidatedRanges()
    assert (await validator(dst, validated=validated).validate(base.metarange_id)).complete
    # a restarted validator: only the validated range IDs survive
    events = CountingEvents()
    report = await validator(dst, events, validated=validated).validate(
        head.metarange_id, base.metarange_id
    )
    assert report.complete
    assert report.objects_checked == 1
    assert report.ranges_read <= 2
    assert events.requests["head"] == 1 and events.requests["list"] == 0
    # the metaranges of head and base, the new range(s), the base range(s) under them
    assert events.total_requests <= 7, events.requests
    assert report.objects_cached == events.cache_hits["base"] > 0


async def test_base_tree_does_not_vouch_for_a_missing_new_object() -> None:
    src = Source.create()
    base = src.commit(objects(200))
    head = src.commit(objects(10, start=200, partition="p1"))
    dst = src.replica(skip=["data/p1/00000205"])
    validated = MemoryValidatedRanges(src.range_ids(base))
    report = await validator(dst, validated=validated).validate(
        head.metarange_id, base.metarange_id
    )
    assert report.missing == ("data/p1/00000205",)
    assert report.objects_checked == 10


async def test_object_cache_rechecks_only_stragglers() -> None:
    src = Source.create()
    commit = src.commit(objects(40))
    dst = src.replica(skip=["data/p0/00000013"])
    cache = ObjectCache()
    check = validator(dst, objects=cache)
    first = await check.validate(commit.metarange_id)
    assert first.missing == ("data/p0/00000013",)
    assert len(cache) == 39
    dst.put("data/p0/00000013", src.store.get("data/p0/00000013"))
    events = CountingEvents()
    second = await validator(dst, events, objects=cache).validate(commit.metarange_id)
    assert second.complete
    assert second.objects_checked == 1 and second.objects_cached == 39
    assert events.cache_hits["object"] == 39 and events.requests["head"] == 1


async def test_whole_ranges_leave_the_object_cache_alone() -> None:
    src = Source.create()
    commit = src.commit(objects(40))
    cache = ObjectCache()
    assert (await validator(src.replica(), objects=cache).validate(commit.metarange_id)).complete
    assert len(cache) == 0


async def test_one_listing_serves_neighbouring_ranges() -> None:
    src = Source.create(raggedness=1 << 20)
    base = src.commit(objects(10))
    src.catalog.chunking = ChunkingParams(raggedness=48)
    head = src.commit(objects(900, start=10, partition="p1"))
    new_ranges = [r for r in src.range_ids(head) if r not in src.range_ids(base)]
    assert len(new_ranges) > 5
    validated = MemoryValidatedRanges(src.range_ids(base))
    events = CountingEvents()
    sequential = validator(src.replica(), events, validated=validated, concurrency=1)
    report = await sequential.validate(head.metarange_id, base.metarange_id)
    assert report.complete and report.objects_checked == 900
    assert events.requests["list"] == 1 and events.requests["head"] == 0
    events = CountingEvents()
    validated = MemoryValidatedRanges(src.range_ids(base))
    report = await validator(src.replica(), events, validated=validated).validate(
        head.metarange_id, base.metarange_id
    )
    assert report.complete
    assert events.requests["list"] == 1 and events.requests["head"] == 0


@pytest.mark.parametrize(("threshold", "lists", "heads"), [(8, 1, 0), (10, 1, 0), (11, 0, 10)])
async def test_list_or_head_by_threshold(threshold: int, lists: int, heads: int) -> None:
    src = Source.create(raggedness=1 << 20)
    base = src.commit(objects(5))
    head = src.commit(objects(10, start=5, partition="p1"))
    events = CountingEvents()
    validated = MemoryValidatedRanges(src.range_ids(base))
    report = await validator(
        src.replica(), events, validated=validated, list_threshold=threshold
    ).validate(head.metarange_id, base.metarange_id)
    assert report.complete and report.objects_checked == 10
    assert events.requests["list"] == lists and events.requests["head"] == heads


async def test_listing_finds_missing_keys_anywhere_in_a_group() -> None:
    src = Source.create(raggedness=1 << 20)
    commit = src.commit(objects(30))
    gone = ["data/p0/00000000", "data/p0/00000017", "data/p0/00000029"]
    dst = src.replica(skip=gone)
    dst.put("data/p0/00000005", b"x")
    events = CountingEvents()
    report = await validator(dst, events).validate(commit.metarange_id)
    assert sorted(report.missing) == sorted([*gone, "data/p0/00000005"])
    assert events.requests["list"] == 1 and events.requests["head"] == 0


def spread(count: int, every: int, partition: str = "q") -> list[tuple[str, Entry]]:
    return [
        (f"spread/{n:06d}", Entry(f"data/{partition}/{n * every:08d}", 3, "c", MTIME))
        for n in range(count)
    ]


async def test_listing_pages_restart_at_the_next_wanted_key() -> None:
    """A group spread thinly over a crowded prefix costs at most one listing per wanted key."""
    src = Source.create(raggedness=1 << 20)
    commit = src.commit_entries(spread(12, every=1_500))
    dst = src.replica()
    for n in range(12 * 1_500):
        dst.put(f"data/q/{n:08d}", b"abc")
    events = CountingEvents()
    report = await validator(dst, events).validate(commit.metarange_id)
    assert report.complete and report.objects_checked == 12
    assert events.requests["list"] == 12  # paging through would cost 18


async def test_dense_group_costs_one_listing_per_thousand() -> None:
    src = Source.create(raggedness=1 << 20)
    commit = src.commit_entries(spread(2_500, every=1))
    dst = src.replica()
    for n in range(2_500):
        dst.put(f"data/q/{n:08d}", b"abc")
    dst.put("data/q/zzz-later-object", b"abc")
    events = CountingEvents()
    report = await validator(dst, events).validate(commit.metarange_id)
    assert report.complete and report.objects_checked == 2_500
    assert events.requests["list"] == 3


async def test_counting_reader_agrees_with_events() -> None:
    src = Source.create()
    commit = src.commit(objects(120))
    base_only = src.commit(objects(3, start=120, partition="p1"))
    seen: list[str] = []
    events = CountingEvents()
    reader = CountingReader(ThreadedObjectReader(src.replica()), seen.append)
    check = Validator(reader, validated=MemoryValidatedRanges(), events=events)
    await check.validate(commit.metarange_id)
    await check.validate(base_only.metarange_id, commit.metarange_id)
    assert {op: seen.count(op) for op in set(seen)} == dict(events.requests)


async def test_kv_validated_ranges_survive_a_restart(tmp_path: Path) -> None:
    src = Source.create()
    commit = src.commit(objects(200))
    dst = src.replica()
    kv = SqliteKV(tmp_path / "kv.sqlite")
    first = await validator(dst, validated=KVValidatedRanges(kv, b"v/m1/")).validate(
        commit.metarange_id
    )
    assert first.complete and first.ranges_read > 1
    kv.close()
    reopened = SqliteKV(tmp_path / "kv.sqlite")
    try:
        ranges = KVValidatedRanges(reopened, b"v/m1/")
        assert len(ranges) == len(src.range_ids(commit))
        again = await validator(dst, validated=ranges).validate(commit.metarange_id)
        assert again.complete and again.ranges_read == 0
        other = KVValidatedRanges(reopened, b"v/m2/")
        assert not any(other.contains(r) for r in src.range_ids(commit))
    finally:
        reopened.close()


def test_kv_validated_ranges_write_only_new_ids() -> None:
    kv = MemoryKV()
    ranges = KVValidatedRanges(kv, b"p/")
    ranges.add_many(["b", "a", "a"])
    ranges.add_many(["a"])
    assert [k for k, _ in kv.scan(b"p/")] == [b"p/a", b"p/b"]
    assert ranges.contains("a") and not ranges.contains("c")
    assert len(KVValidatedRanges(kv, b"p/")) == 2


def external_source() -> tuple[Source, MemoryBlockStore, Commit]:
    src = Source.create()
    ext = MemoryBlockStore("mem://ext")
    ext.put("imports/a.csv", b"a,b\n")
    changes = [
        (
            "imported/a.csv",
            Entry("mem://ext/imports/a.csv", 4, "x", MTIME, address_type=AddressType.FULL),
        ),
        (
            "imported/b.csv",
            Entry("mem://ext/imports/b.csv", 9, "y", MTIME, address_type=AddressType.FULL),
        ),
    ]
    src.commit(objects(5))
    return src, ext, src.commit_entries(changes)


async def test_full_addresses_without_an_opener_are_reported_external() -> None:
    src, _, commit = external_source()
    events = CountingEvents()
    report = await validator(src.replica(), events).validate(commit.metarange_id)
    assert not report.complete
    assert sorted(report.missing) == ["mem://ext/imports/a.csv", "mem://ext/imports/b.csv"]
    assert events.objects["external"] == 2 and events.objects["present"] == 5


async def test_full_addresses_are_checked_where_they_are() -> None:
    src, ext, commit = external_source()
    opened: list[str] = []

    def open_external(namespace: str) -> ThreadedObjectReader:
        opened.append(namespace)
        return ThreadedObjectReader(ext)

    events = CountingEvents()
    cache = ObjectCache()
    report = await validator(
        src.replica(), events, objects=cache, open_external=open_external
    ).validate(commit.metarange_id)
    assert report.missing == ("mem://ext/imports/b.csv",)
    assert opened == ["mem://ext"]
    assert events.objects["present"] == 6 and events.objects["missing"] == 1
    assert "mem://ext/imports/a.csv" not in cache
    ext.put("imports/b.csv", b"123456789")
    assert (
        await validator(src.replica(), open_external=open_external).validate(commit.metarange_id)
    ).complete


def test_split_full_address() -> None:
    assert split_full_address("s3://bucket/a/b.csv") == ("s3://bucket", "a/b.csv")
    assert split_full_address("local:///abs/dir/x") == ("local:///abs", "dir/x")
    with pytest.raises(ValueError):
        split_full_address("s3://bucket")


class InFlight:
    """A reader that records how many requests run at once, yielding while each is open."""

    def __init__(self, inner: ThreadedObjectReader) -> None:
        self.inner = inner
        self.now = 0
        self.peak = 0

    @property
    def namespace(self) -> str:
        return self.inner.namespace

    async def _enter(self) -> None:
        self.now += 1
        self.peak = max(self.peak, self.now)
        for _ in range(5):
            await anyio.lowlevel.checkpoint()

    async def head(self, key: str) -> ObjectInfo:
        await self._enter()
        try:
            return await self.inner.head(key)
        finally:
            self.now -= 1

    async def get(self, key: str) -> bytes:
        await self._enter()
        try:
            return await self.inner.get(key)
        finally:
            self.now -= 1

    async def list(self, prefix: str = "", start_after: str = ""):  # type: ignore[no-untyped-def]
        await self._enter()
        try:
            async for info in self.inner.list(prefix, start_after):
                yield info
        finally:
            self.now -= 1


@pytest.mark.parametrize("concurrency", [1, 3, 16])
async def test_concurrency_bound(concurrency: int) -> None:
    src = Source.create(raggedness=16)
    commit = src.commit({f"k/{n:04d}": (f"data/p{n}/x", body_of(n)) for n in range(200)})
    reader = InFlight(ThreadedObjectReader(src.replica()))
    check = Validator(reader, validated=MemoryValidatedRanges(), concurrency=concurrency)
    report = await check.validate(commit.metarange_id)
    assert report.complete and report.objects_checked == 200
    assert reader.peak == concurrency


class Failing(ThreadedObjectReader):
    async def head(self, key: str) -> ObjectInfo:
        if key.endswith("00000003"):
            raise BlockUnavailableError("throttled")
        return await super().head(key)


async def test_store_failure_propagates_as_itself() -> None:
    src = Source.create(raggedness=1 << 20)
    commit = src.commit(objects(5))
    validated = MemoryValidatedRanges()
    check = Validator(Failing(src.replica()), validated=validated)
    with pytest.raises(BlockUnavailableError, match="throttled"):
        await check.validate(commit.metarange_id)
    assert len(validated) == 0


async def test_naive_checker_heads_every_object() -> None:
    src = Source.create()
    src.commit(objects(150))
    head = src.commit(objects(1, start=150))
    events = CountingEvents()
    naive = NaiveChecker(
        ThreadedObjectReader(src.replica(skip=["data/p0/00000009"])), events=events
    )
    report = await naive.check(head.metarange_id)
    ranges = src.range_ids(head)
    assert report.missing == ("data/p0/00000009",)
    assert events.requests == {"get": 1 + len(ranges), "head": 151}
    again = await naive.check(head.metarange_id)
    assert again.ranges_read == len(ranges) and again.objects_checked == 151


def test_decoders_match_the_committed_store() -> None:
    src = Source.create()
    commit = src.commit(objects(100))
    committed = CommittedStore(src.store, cache_size=0)
    ranges = decode_metarange(src.store.get(METADATA_PREFIX + commit.metarange_id))
    assert ranges == committed.read_metarange(commit.metarange_id)
    for r in ranges:
        keys, entries = decode_range(src.store.get(METADATA_PREFIX + r.id))
        assert (keys, entries) == committed.read_range(r.id)
        assert len(keys) == r.count and keys[0] == r.min_key and keys[-1] == r.max_key


def test_public_api() -> None:
    assert sorted(mirror.validator.__all__) == sorted(set(mirror.validator.__all__))
    for name in mirror.validator.__all__:
        assert getattr(mirror.validator, name) is not None
