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


class _Seekable:
    """Sorted paths read one at a time, able to jump ahead; remembers what was read."""

    def __init__(self, paths: list[str]) -> None:
        self.paths = sorted(paths)
        self.at = 0
        self.read: list[str] = []

    def __iter__(self) -> _Seekable:
        return self

    def __next__(self) -> str:
        if self.at >= len(self.paths):
            raise StopIteration
        self.at += 1
        self.read.append(self.paths[self.at - 1])
        return self.read[-1]

    def seek(self, key: str) -> None:
        while self.at < len(self.paths) and self.paths[self.at] < key:
            self.at += 1


def test_group_paths_seeks_over_what_it_folds() -> None:
    paths = ["a", "b/1", "b/2", "b/3/x", "c", "d/e/1", "d/e/2", "d/f", "d/g"]
    source = _Seekable(paths)
    assert list(group_paths(source, str, delimiter="/", seek=source.seek)) == ["a", "b/", "c", "d/"]
    assert source.read == ["a", "b/1", "c", "d/e/1"]

    source = _Seekable(paths)
    under_d = under_prefix(source, "d/", str)
    grouped = group_paths(under_d, str, prefix="d/", delimiter="/", after="d/e/", seek=source.seek)
    assert list(grouped) == ["d/f", "d/g"]
    assert source.read == ["d/f", "d/g"]

    source = _Seekable(paths)
    assert list(group_paths(source, str, after="b/2", seek=source.seek)) == [
        "b/3/x",
        "c",
        *paths[5:],
    ]
    assert source.read[0] == "b/2"  # seeking to ``after`` itself: the equal path is skipped


_PATHS = st.lists(st.text(alphabet="ab/\U0010ffff", max_size=5), unique=True)


@given(paths=_PATHS, prefix=st.sampled_from(["", "a", "a/", "b/"]), after=_PATHS)
def test_group_paths_with_seek_lists_what_it_lists_without(
    paths: list[str], prefix: str, after: list[str]
) -> None:
    ordered = sorted(paths)
    for start in ["", *after]:
        for delimiter in ("", "/", "\U0010ffff"):
            kwargs = {"prefix": prefix, "delimiter": delimiter, "after": start}
            plain = list(group_paths(under_prefix(ordered, prefix, str), str, **kwargs))
            source = _Seekable(ordered)
            seeking = group_paths(
                under_prefix(source, prefix, str), str, seek=source.seek, **kwargs
            )
            assert list(seeking) == plain
