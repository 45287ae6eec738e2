"""PutObject's body is bounded at S3's 5 GiB even when no length is stated (chunked bodies)."""

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


async def _endless(chunk: bytes, produced: list[int]) -> AsyncIterator[bytes]:
    while True:
        produced.append(len(chunk))
        yield chunk


def _drain(reader: io.RawIOBase) -> int:
    total = 0
    while piece := reader.read(1024):
        total += len(piece)
    return total


async def test_a_body_of_no_stated_length_is_cut_off_past_the_limit() -> None:
    produced: list[int] = []
    reader = BodyReader(_endless(b"x" * 100, produced), None, limit=1000)
    with pytest.raises(S3Error) as info:
        await anyio.to_thread.run_sync(_drain, reader)
    assert info.value.code is S3Code.ENTITY_TOO_LARGE
    assert "more than 1000 bytes" in info.value.message
    # the body was read one chunk past the limit, no further
    assert sum(produced) == 1100


async def test_a_body_within_the_limit_is_read_whole() -> None:
    async def body() -> AsyncIterator[bytes]:
        for _ in range(10):
            yield b"x" * 100

    reader = BodyReader(body(), None, limit=1000)
    assert await anyio.to_thread.run_sync(_drain, reader) == 1000
