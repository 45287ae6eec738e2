"""Byte ranges, chunked reads and delimiter grouping of the HTTP layer."""

from __future__ import annotations

import io

import pytest
from hypothesis import given
from hypothesis import strategies as st

from mirror.api.listing import CommonPrefix, group_paths, under_prefix
from mirror.block.errors import InvalidRangeError
from mirror.block.memory import MemoryBlockStore
from mirror.httputil.streams import BlockReader, iter_block, parse_range


@pytest.mark.parametrize(
    ("header", "size", "expected"),
    [
        (None, 10, None),
        ("bytes=0-", 10, (0, 10)),
        ("bytes=2-4", 10, (2, 5)),
        ("bytes=5-100", 10, (5, 10)),
        ("bytes=-3", 10, (7, 10)),
        ("bytes=-30", 10, (0, 10)),
        ("bytes=4-2", 10, None),
        ("bytes=0-1,4-5", 10, None),
        ("items=0-1", 10, None),
        ("bytes=-", 10, None),
    ],
)
def test_parse_range(header: str | None, size: int, expected: tuple[int, int] | None) -> None:
    assert parse_range(header, size) == expected


@pytest.mark.parametrize(("header", "size"), [("bytes=10-", 10), ("bytes=0-", 0), ("bytes=-0", 5)])
def test_unsatisfiable_ranges(header: str, size: int) -> None:
    with pytest.raises(InvalidRangeError):
        parse_range(header, size)


@given(st.binary(max_size=3000), st.integers(0, 3000), st.integers(0, 3000))
def test_ranges_slice_like_python(data: bytes, a: int, b: int) -> None:
    try:
        span = parse_range(f"bytes={a}-{b}", len(data))
    except InvalidRangeError:
        assert a >= len(data)
        return
    if b < a:
        assert span is None
        return
    assert span is not None
    assert data[span[0] : span[1]] == data[a : b + 1]


def test_iter_block_and_reader() -> None:
    store = MemoryBlockStore("mem://t")
    data = bytes(range(256)) * 9000
    store.put("k", data)
    assert b"".join(iter_block(store, "k", 10, len(data))) == data[10:]
    reader = io.BufferedReader(BlockReader(store, "k", len(data)))
    assert reader.read() == data
    assert reader.read() == b""


def test_group_paths() -> None:
    paths = ["a/1", "a/2", "b", "c/d/e", "c/x"]
    grouped = list(group_paths(paths, str, delimiter="/"))
    assert grouped == ["a/", "b", "c/"]
    assert all(isinstance(g, CommonPrefix) for g in (grouped[0], grouped[2]))
    assert list(group_paths(paths, str, delimiter="/", after="a/")) == ["b", "c/"]
    assert list(group_paths(paths, str, after="a/2")) == ["b", "c/d/e", "c/x"]
    under_c = list(under_prefix(paths, "c/", str))
    assert list(group_paths(under_c, str, prefix="c/", delimiter="/")) == ["c/d/", "c/x"]
