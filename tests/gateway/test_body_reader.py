"""The bridge from an async request body to the blocking file a block store reads."""

from __future__ import annotations

import io
from collections.abc import AsyncIterator
from typing import Any

import anyio.from_thread
import anyio.to_thread
import pytest

from mirror.gateway.errors import S3Code, S3Error
from mirror.gateway.objects import BodyReader

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


async def _body(chunks: list[bytes], fail: S3Error | None = None) -> AsyncIterator[bytes]:
    for chunk in chunks:
        yield chunk
    if fail is not None:
        raise fail


def _read_all(reader: io.RawIOBase, size: int) -> list[bytes]:
    reads = []
    while piece := reader.read(size):
        reads.append(piece)
    return reads


async def test_reads_the_body_piece_by_piece() -> None:
    chunks = [b"a" * 10, b"", b"b" * 3, b"c" * 25]
    reader = BodyReader(_body(chunks), 38)
    reads = await anyio.to_thread.run_sync(_read_all, reader, 8)
    assert b"".join(reads) == b"".join(chunks)
    # never more than asked for, never a chunk joined with the next
    assert max(len(r) for r in reads) <= 8
    assert [len(r) for r in reads] == [8, 2, 3, 8, 8, 8, 1]


async def test_a_short_body_is_incomplete() -> None:
    reader = BodyReader(_body([b"abc"]), 10)
    with pytest.raises(S3Error) as info:
        await anyio.to_thread.run_sync(_read_all, reader, 4)
    assert info.value.code is S3Code.INCOMPLETE_BODY


async def test_the_body_s_own_errors_surface_from_read() -> None:
    failure = S3Error(S3Code.XAMZ_CONTENT_SHA256_MISMATCH)
    reader = BodyReader(_body([b"abc"], failure), None)
    with pytest.raises(S3Error) as info:
        await anyio.to_thread.run_sync(_read_all, reader, 4)
    assert info.value is failure


@pytest.mark.parametrize("most", [0, 5, 12, 38, 100])
async def test_chunks_read_ahead_are_read_as_the_others(
    most: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    chunks = [b"a" * 10, b"", b"b" * 3, b"c" * 25]
    hand_backs = []
    run = anyio.from_thread.run

    def counted(fn: Any, *args: Any) -> Any:
        hand_backs.append(fn)
        return run(fn, *args)

    monkeypatch.setattr(anyio.from_thread, "run", counted)
    reader = BodyReader(_body(chunks), 38)
    await reader.read_ahead(most)
    reads = await anyio.to_thread.run_sync(_read_all, reader, 8)
    assert [len(r) for r in reads] == [8, 2, 3, 8, 8, 8, 1]
    assert b"".join(reads) == b"".join(chunks)
    # past `most` bytes (or the end) nothing more was taken ahead: the rest came from the loop
    ahead = {0: 1, 5: 1, 12: 3, 38: 5, 100: 5}[most]  # chunks taken, the end counting as one
    assert len(hand_backs) == 5 - ahead


@pytest.mark.parametrize(
    ("chunks", "expected", "limit", "code"),
    [
        ([b"abc"], 10, None, S3Code.INCOMPLETE_BODY),
        ([b"abc", b"def"], None, 4, S3Code.ENTITY_TOO_LARGE),
    ],
)
async def test_chunks_read_ahead_are_checked_when_read(
    chunks: list[bytes], expected: int | None, limit: int | None, code: S3Code
) -> None:
    reader = BodyReader(_body(chunks), expected, limit=limit)
    await reader.read_ahead(100)
    with pytest.raises(S3Error) as info:
        await anyio.to_thread.run_sync(_read_all, reader, 4)
    assert info.value.code is code


async def test_the_body_s_own_errors_surface_from_reading_ahead() -> None:
    failure = S3Error(S3Code.XAMZ_CONTENT_SHA256_MISMATCH)
    reader = BodyReader(_body([b"abc"], failure), None)
    with pytest.raises(S3Error) as info:
        await reader.read_ahead(100)
    assert info.value is failure
