"""AsyncS3BlockStore reads what S3BlockStore wrote, over moto_server."""

from __future__ import annotations

from typing import Any

import anyio
import pytest

from mirror.block import BlockNotFoundError, BlockUnavailableError, InvalidRangeError
from mirror.block.s3 import S3BlockStore
from mirror.block.s3_async import AsyncS3BlockStore, async_s3_client
from tests.integration.moto_fixtures import MotoServer, create_bucket, s3_settings, unique_name

pytestmark = [pytest.mark.s3, pytest.mark.anyio]


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


async def _keys(store: AsyncS3BlockStore, prefix: str = "", start_after: str = "") -> list[str]:
    return [info.key async for info in store.list(prefix, start_after)]


async def test_async_reads_match_sync_store(moto_region: MotoServer, s3_client: Any) -> None:
    bucket = create_bucket(moto_region, s3_client)
    settings = s3_settings(moto_region, page_size=4)
    sync = S3BlockStore(f"s3://{bucket}/ns", s3_client, settings)
    keys = [f"d/{i:02d}" for i in range(10)]
    for key in keys:
        sync.put(key, key.encode() * 3)
    sync.put("empty", b"")
    async with async_s3_client(settings) as client:
        store = AsyncS3BlockStore(f"s3://{bucket}/ns/", client, settings)
        assert store.namespace == f"s3://{bucket}/ns"
        assert await _keys(store) == [*keys, "empty"]
        assert await _keys(store, "d/", "d/06") == keys[7:]
        assert await store.head("d/03") == sync.head("d/03")
        assert await store.exists("d/03")
        assert not await store.exists("d/99")
        assert await store.get("d/03") == b"d/03" * 3
        assert await store.get("d/03", 2, 6) == b"03d/"
        assert await store.get("d/03", 4, 4) == b""
        assert await store.get("empty") == b""
        assert await store.get("empty", 0, 5) == b""
        with pytest.raises(InvalidRangeError, match="12"):
            await store.get("d/03", 12)
        with pytest.raises(BlockNotFoundError):
            await store.get("d/99")
        with pytest.raises(BlockNotFoundError):
            await store.head("d/99")

        # many heads at once over one client, as a checker of a whole listing runs them
        found: dict[str, int] = {}

        async def head(key: str) -> None:
            found[key] = (await store.head(key)).size

        async with anyio.create_task_group() as group:
            for key in keys:
                group.start_soon(head, key)
        assert found == {key: 12 for key in keys}


async def test_async_missing_bucket(moto_region: MotoServer) -> None:
    settings = s3_settings(moto_region)
    async with async_s3_client(settings) as client:
        store = AsyncS3BlockStore(f"s3://{unique_name('absent')}", client, settings)
        with pytest.raises(BlockUnavailableError, match="missing"):
            await _keys(store)
