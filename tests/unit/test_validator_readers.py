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
