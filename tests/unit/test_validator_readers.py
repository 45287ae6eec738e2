"""Readers and caches of the validator: threaded access, request counting, bounded object cache."""

from __future__ import annotations

from pathlib import Path

import pytest

from mirror.block import BlockNotFoundError, LocalBlockStore, MemoryBlockStore, ObjectInfo
from mirror.validator import (
    AsyncObjectReader,
    CountingReader,
    MemoryValidatedRanges,
    ObjectCache,
    ThreadedObjectReader,
    ValidatedRanges,
)
from mirror.validator.readers import PageReader, list_sizes
from mirror.validator.run import Page

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def filled(count: int, prefix: str = "data/p/") -> MemoryBlockStore:
    store = MemoryBlockStore("mem://filled")
    for n in range(count):
        store.put(f"{prefix}{n:05d}", b"x" * (n % 3))
    store.put("other/key", b"o")
    store.reset_counters()
    return store


async def collect(reader: AsyncObjectReader, prefix: str = "", after: str = "") -> list[str]:
    return [info.key async for info in reader.list(prefix, after)]


async def test_threaded_reader_serves_the_store() -> None:
    store = filled(5)
    reader = ThreadedObjectReader(store)
    assert isinstance(reader, AsyncObjectReader)
    assert reader.namespace == "mem://filled"
    assert await reader.head("data/p/00002") == ObjectInfo(
        "data/p/00002", 2, store.head("data/p/00002").etag
    )
    assert await reader.get("data/p/00001") == b"x"
    with pytest.raises(BlockNotFoundError):
        await reader.head("data/p/nothing")
    with pytest.raises(BlockNotFoundError):
        await reader.get("data/p/nothing")
    assert await collect(reader, "data/p/", "data/p/00002") == ["data/p/00003", "data/p/00004"]


async def test_threaded_reader_pages_from_one_store_listing() -> None:
    store = filled(25)
    reader = ThreadedObjectReader(store, page_size=10)
    assert await collect(reader, "data/") == [f"data/p/{n:05d}" for n in range(25)]
    assert store.requests["list"] == 1


async def test_threaded_reader_on_local_store_stops_when_the_consumer_does(tmp_path: Path) -> None:
    store = LocalBlockStore(tmp_path, "local://t")
    for n in range(30):
        store.put(f"data/a/{n:03d}", b"z")
    reader = ThreadedObjectReader(store, page_size=7)
    seen = []
    async for info in reader.list("data/a/", "data/a/004"):
        seen.append(info.key)
        if len(seen) == 9:
            break
    assert seen == [f"data/a/{n:03d}" for n in range(5, 14)]


@pytest.mark.parametrize(("count", "pages"), [(0, 1), (1, 1), (1_000, 1), (1_001, 2), (2_500, 3)])
async def test_counting_reader_counts_a_list_per_thousand_keys(count: int, pages: int) -> None:
    ops: list[str] = []
    reader = CountingReader(ThreadedObjectReader(filled(count)), ops.append)
    assert len(await collect(reader, "data/p/")) == count
    assert ops == ["list"] * pages


async def test_counting_reader_counts_only_pages_it_delivers() -> None:
    ops: list[str] = []
    reader = CountingReader(ThreadedObjectReader(filled(3_000)), ops.append)
    n = 0
    async for _ in reader.list("data/"):
        n += 1
        if n == 1_000:
            break
    await reader.head("data/p/00001")
    await reader.get("data/p/00002")
    with pytest.raises(BlockNotFoundError):
        await reader.head("missing")
    assert ops == ["list", "head", "get", "head"]
    assert reader.namespace == "mem://filled"


class ListingOnly:
    """A reader without a page listing of its own: it lists one object at a time."""

    def __init__(self, inner: ThreadedObjectReader) -> None:
        self.inner = inner
        self.pulled = 0
        self.closed = False

    @property
    def namespace(self) -> str:
        return self.inner.namespace

    async def head(self, key: str) -> ObjectInfo:
        return await self.inner.head(key)

    async def get(self, key: str) -> bytes:
        return await self.inner.get(key)

    async def list(self, prefix: str = "", start_after: str = ""):  # type: ignore[no-untyped-def]
        try:
            async for info in self.inner.list(prefix, start_after):
                self.pulled += 1
                yield info
        finally:
            self.closed = True


@pytest.mark.parametrize("limit", [0, 1, 7, 25, 40])
@pytest.mark.parametrize("after", ["", "data/p/00003", "data/p/00024", "data/q"])
async def test_pages_of_sizes_equal_the_listing_whoever_lists(limit: int, after: str) -> None:
    store = filled(25)
    threaded = ThreadedObjectReader(store, page_size=10)
    expected = {i.key: i.size for i in [i async for i in threaded.list("data/", after)][:limit]}
    assert isinstance(threaded, PageReader)
    store.reset_counters()
    assert list((await list_sizes(threaded, "data/", after, limit)).items()) == list(
        expected.items()
    )
    assert store.requests["list"] == (limit > 0)  # one worker-thread call, one store listing
    plain = ListingOnly(ThreadedObjectReader(store))
    assert not isinstance(plain, PageReader)
    assert list((await list_sizes(plain, "data/", after, limit)).items()) == list(expected.items())
    assert plain.pulled == len(expected)
    assert plain.closed == (limit > 0)


@pytest.mark.parametrize(("count", "pages"), [(0, 1), (1, 1), (1_000, 1), (1_001, 2), (2_500, 3)])
async def test_counting_reader_counts_pages_of_sizes_as_its_listing(count: int, pages: int) -> None:
    for inner in (
        ThreadedObjectReader(filled(count)),
        ListingOnly(ThreadedObjectReader(filled(count))),
    ):
        ops: list[str] = []
        reader = CountingReader(inner, ops.append)
        assert len(await reader.list_sizes("data/p/", "", 5_000)) == count
        assert ops == ["list"] * pages


def test_a_page_covers_a_run_of_sorted_keys() -> None:
    keys = ["a", "b", "c", "d", "e"]
    assert Page("a", "c", {}).covered_end(keys, 0) == 0  # "a" is not after "a"
    assert Page("a", "c", {}).covered_end(keys, 1) == 3
    assert Page("a", "cc", {}).covered_end(keys, 1) == 3
    assert Page("", None, {}).covered_end(keys, 2) == 5
    assert Page("", "z", {}).covered_end(keys, 5) == 5
    for after in ("", "a", "b", "bb"):
        for last in (None, "a", "c", "e", "z"):
            page = Page(after, last, {})
            for start in range(len(keys) + 1):
                end = start
                while end < len(keys) and page.covers(keys[end]):
                    end += 1
                assert page.covered_end(keys, start) == end


def test_object_cache_is_a_bounded_lru() -> None:
    cache = ObjectCache(max_keys=3)
    cache.add_many([("a", 1), ("b", 2), ("c", 3)])
    assert cache.size_of("a") == 1  # now the most recently used
    cache.add("d", 4)
    assert "b" not in cache and len(cache) == 3
    assert cache.size_of("b") is None
    assert [cache.size_of(k) for k in "acd"] == [1, 3, 4]
    assert cache.max_keys == 3


def test_object_cache_of_size_zero_keeps_nothing() -> None:
    cache = ObjectCache(max_keys=0)
    cache.add("a", 1)
    assert len(cache) == 0
    with pytest.raises(ValueError):
        ObjectCache(max_keys=-1)


def test_memory_validated_ranges() -> None:
    ranges = MemoryValidatedRanges(["r1"])
    assert isinstance(ranges, ValidatedRanges)
    ranges.add_many(["r2", "r2"])
    assert ranges.contains("r1") and ranges.contains("r2") and not ranges.contains("r3")
    assert len(ranges) == 2
