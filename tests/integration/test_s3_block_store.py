"""The object-store conformance suite and S3 specifics against S3BlockStore on moto_server."""

from __future__ import annotations

import io
import random
from typing import Any

import pytest

from mirror.block import BlockNotFoundError, BlockResolver, BlockUnavailableError
from mirror.block.s3 import S3BlockStore, S3Settings, make_s3_client, s3_store_factory
from tests.conformance.block_suite import BlockDriver, BlockStoreConformance, keys_of, md5
from tests.integration.moto_fixtures import (
    MotoServer,
    create_bucket,
    s3_settings,
    unique_name,
)

pytestmark = pytest.mark.s3

MIB = 1 << 20


@pytest.fixture
def block_driver(moto_region: MotoServer, s3_client: Any) -> BlockDriver:
    bucket = create_bucket(moto_region, s3_client)
    store = S3BlockStore(f"s3://{bucket}/repo/ns", s3_client, s3_settings(moto_region))
    return BlockDriver("s3", store)


class TestS3BlockStore(BlockStoreConformance):
    pass


@pytest.fixture
def bucket(moto_region: MotoServer, s3_client: Any) -> str:
    return create_bucket(moto_region, s3_client)


def test_prefix_keeps_stores_apart(moto_region: MotoServer, s3_client: Any, bucket: str) -> None:
    one = S3BlockStore(f"s3://{bucket}/one", s3_client)
    other = S3BlockStore(f"s3://{bucket}/one-more/", s3_client)
    one.put("k", b"1")
    other.put("k", b"2")
    assert keys_of(one) == ["k"] and keys_of(other) == ["k"]
    assert (one.get("k"), other.get("k")) == (b"1", b"2")
    assert other.namespace == f"s3://{bucket}/one-more"
    raw = s3_client.list_objects_v2(Bucket=bucket)["Contents"]
    assert sorted(o["Key"] for o in raw) == ["one-more/k", "one/k"]
    root = S3BlockStore(f"s3://{bucket}", s3_client)
    assert root.namespace == f"s3://{bucket}"
    assert keys_of(root) == ["one-more/k", "one/k"]
    assert keys_of(root, "one/") == ["one/k"]
    assert root.get("one-more/k") == b"2"
    root.delete("one/k")
    assert not one.exists("k")


def test_list_pages(moto_region: MotoServer, s3_client: Any, bucket: str) -> None:
    store = S3BlockStore(f"s3://{bucket}/p", s3_client, s3_settings(moto_region, page_size=7))
    keys = [f"k/{i:03d}" for i in range(30)]
    for key in keys:
        store.put(key, b"x")
    assert keys_of(store) == keys
    assert keys_of(store, "k/", "k/012") == keys[13:]


def test_multipart_put_streams_parts(moto_region: MotoServer, s3_client: Any, bucket: str) -> None:
    settings = s3_settings(moto_region, multipart_threshold=5 * MIB, part_size=5 * MIB)
    store = S3BlockStore(f"s3://{bucket}/big", s3_client, settings)
    data = random.Random(3).randbytes(11 * MIB + 17)
    info = store.put("obj", io.BytesIO(data))
    assert info.size == len(data)
    assert info.etag.endswith("-3")
    assert store.head("obj") == info
    assert store.get("obj", 5 * MIB - 3, 5 * MIB + 3) == data[5 * MIB - 3 : 5 * MIB + 3]
    assert store.get("obj") == data
    from_bytes = store.put("bytes", data)
    assert (from_bytes.size, from_bytes.etag) == (info.size, info.etag)
    assert store.put("small", data[:100]).etag == md5(data[:100])
    assert s3_client.list_multipart_uploads(Bucket=bucket).get("Uploads", []) == []


def test_failed_multipart_put_is_aborted(
    moto_region: MotoServer, s3_client: Any, bucket: str
) -> None:
    settings = s3_settings(moto_region, multipart_threshold=5 * MIB, part_size=5 * MIB)
    store = S3BlockStore(f"s3://{bucket}", s3_client, settings)

    class Breaks(io.RawIOBase):
        def __init__(self) -> None:
            self.sent = 0

        def readable(self) -> bool:
            return True

        def read(self, size: int | None = -1) -> bytes:
            if self.sent >= 6 * MIB:
                raise OSError("stream broke mid-upload")
            n = min(size if size is not None and size >= 0 else MIB, MIB)
            self.sent += n
            return b"y" * n

    with pytest.raises(OSError, match="mid-upload"):
        store.put("obj", Breaks())
    assert not store.exists("obj")
    assert s3_client.list_multipart_uploads(Bucket=bucket).get("Uploads", []) == []


def test_missing_bucket_is_a_clear_error(moto_region: MotoServer, s3_client: Any) -> None:
    store = S3BlockStore(f"s3://{unique_name('absent')}/x", s3_client)
    with pytest.raises(BlockUnavailableError, match="missing"):
        store.check()
    with pytest.raises(BlockUnavailableError, match="missing"):
        store.put("k", b"v")
    with pytest.raises(BlockUnavailableError, match="missing"):
        list(store.list())


def test_unreachable_endpoint_is_unavailable() -> None:
    settings = S3Settings(
        endpoint_url="http://127.0.0.1:9",
        region="us-east-1",
        access_key_id="x",
        secret_access_key="y",
        max_attempts=2,
        connect_timeout=1.0,
    )
    store = s3_store_factory(settings)("s3://bucket/ns")
    with pytest.raises(BlockUnavailableError):
        store.get("k")
    with pytest.raises(BlockUnavailableError):
        store.check()


def test_resolver_serves_s3(moto_region: MotoServer, s3_client: Any, bucket: str) -> None:
    resolver = BlockResolver()
    resolver.register("s3", s3_store_factory(s3_settings(moto_region)))
    store = resolver.open(f"s3://{bucket}/repo/")
    assert isinstance(store, S3BlockStore)
    assert store.namespace == f"s3://{bucket}/repo"
    assert resolver.open(f"s3://{bucket}/repo") is store
    store.put("a", b"v")
    assert s3_client.get_object(Bucket=bucket, Key="repo/a")["Body"].read() == b"v"
    with pytest.raises(BlockNotFoundError):
        resolver.open(f"s3://{bucket}/other").get("a")


def test_regions_are_independent(
    moto_region: MotoServer, moto_second_region: MotoServer, s3_client: Any
) -> None:
    name = unique_name("twin")
    second_settings = s3_settings(moto_second_region)
    create_bucket(moto_region, s3_client, name)
    create_bucket(moto_second_region, make_s3_client(second_settings), name)
    first = S3BlockStore(f"s3://{name}", s3_client)
    second = s3_store_factory(second_settings)(f"s3://{name}")
    first.put("k", b"first region")
    assert not second.exists("k")
    second.put("k", b"second region")
    assert (first.get("k"), second.get("k")) == (b"first region", b"second region")
