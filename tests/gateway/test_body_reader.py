"""The bridge from an async request body to the blocking file a block store reads."""

from __future__ import annotations

import io
from collections.abc import AsyncIterator

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
