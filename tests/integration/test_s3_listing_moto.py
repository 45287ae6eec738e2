"""Listing tricky keys from a moto server process: our stores and plain boto3 agree."""

from __future__ import annotations

from typing import Any

import boto3
import pytest

from mirror.block.s3 import S3BlockStore, make_s3_client
from mirror.block.s3_async import AsyncS3BlockStore, async_s3_client
from mirror.block.s3_direct import DirectGets
from tests.integration.moto_fixtures import (
    ACCESS_KEY,
    SECRET_KEY,
    MotoServer,
    create_bucket,
    s3_settings,
)

pytestmark = [pytest.mark.s3]

KEYS = [
    "ns/a&b",
    "ns/less<than>",
    "ns/quote\"and'apos",
    "ns/sp ace",
    "ns/plus+sign",
    "ns/per%20cent",
    "ns/ünïcödé/日本/🙂",
    "ns/dir one/x",
    "ns/dir&two/y",
    "ns/tilde~star*",
    "ns/trailing ",
]


@pytest.fixture(scope="module")
def listed_bucket(moto_region: MotoServer) -> tuple[str, Any]:
    plain = boto3.session.Session(
        aws_access_key_id=ACCESS_KEY,
        aws_secret_access_key=SECRET_KEY,
        region_name=moto_region.region,
    ).client("s3", endpoint_url=moto_region.url)
    bucket = create_bucket(moto_region, plain)
    for i, key in enumerate(KEYS):
        plain.put_object(Bucket=bucket, Key=key, Body=b"x" * i)
    return bucket, plain


def _plain_pages(plain: Any, **args: Any) -> list[dict[str, Any]]:
    pages = []
    for page in plain.get_paginator("list_objects_v2").paginate(**args):
        page.pop("ResponseMetadata")
        pages.append(page)
    return pages


def test_store_listing_equals_plain_boto3(
    moto_region: MotoServer, listed_bucket: tuple[str, Any]
) -> None:
    bucket, plain = listed_bucket
    expected = [
        (o["Key"][3:], o["Size"], o["ETag"].strip('"'), int(o["LastModified"].timestamp()))
        for page in _plain_pages(plain, Bucket=bucket, Prefix="ns/")
        for o in page.get("Contents", [])
    ]
    assert sorted(k for k, *_ in expected) == sorted(k[3:] for k in KEYS)
    settings = s3_settings(moto_region, page_size=3)
    store = S3BlockStore(f"s3://{bucket}/ns", make_s3_client(settings), settings)
    detailed = [(o.key, o.size, o.etag, o.mtime) for o in store.list_detailed()]
    assert detailed == expected
    assert [(o.key, o.size, o.etag) for o in store.list()] == [e[:3] for e in expected]
    assert [o.key for o in store.list("dir", "dir one/x")] == ["dir&two/y"]


def test_client_pages_equal_plain_boto3(
    moto_region: MotoServer, listed_bucket: tuple[str, Any]
) -> None:
    bucket, plain = listed_bucket
    ours = make_s3_client(s3_settings(moto_region))
    for args in (
        {"Bucket": bucket, "Prefix": "ns/", "MaxKeys": 4},
        {"Bucket": bucket, "Prefix": "ns/", "Delimiter": "/"},
        {"Bucket": bucket, "Prefix": "ns/d", "Delimiter": " "},
        {"Bucket": bucket, "Prefix": "nothing/"},
    ):
        assert _plain_pages(ours, **args) == _plain_pages(plain, **args)


@pytest.mark.anyio
@pytest.mark.parametrize("anyio_backend", ["asyncio"])
async def test_async_store_listing_equals_plain_boto3(
    moto_region: MotoServer, listed_bucket: tuple[str, Any], anyio_backend: str
) -> None:
    bucket, plain = listed_bucket
    expected = [
        (o["Key"][3:], o["Size"], o["ETag"].strip('"'))
        for page in _plain_pages(plain, Bucket=bucket, Prefix="ns/")
        for o in page.get("Contents", [])
    ]
    settings = s3_settings(moto_region, page_size=4)
    async with async_s3_client(settings) as client:
        store = AsyncS3BlockStore(f"s3://{bucket}/ns", client, settings)
        listed = [(o.key, o.size, o.etag) async for o in store.list()]
        assert listed == expected
        raw = await client.list_objects_v2(Bucket=bucket, Prefix="ns/", Delimiter="/")
    raw.pop("ResponseMetadata")
    # the client reads key lists: each listed object's key, size and ETag, the rest as botocore
    page = _plain_pages(plain, Bucket=bucket, Prefix="ns/", Delimiter="/")[0]
    page["Contents"] = [{n: o[n] for n in ("Key", "Size", "ETag")} for o in page["Contents"]]
    assert page["Contents"] and page["CommonPrefixes"]
    assert raw == page


@pytest.mark.anyio
@pytest.mark.parametrize("anyio_backend", ["asyncio"])
@pytest.mark.parametrize("direct", [True, False])
async def test_async_store_lists_pages_of_sizes_as_its_listing(
    moto_region: MotoServer,
    listed_bucket: tuple[str, Any],
    anyio_backend: str,
    direct: bool,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Keys decoded by the store itself (``+``, ``%``, entities, unicode): the listing's keys.

    Sent directly (aiohttp, signed by botocore) or, with that path off, by botocore: the same
    pages, one request each.
    """
    bucket, _ = listed_bucket
    by_botocore: list[str] = []
    sent_directly: list[dict[str, str]] = []
    original = DirectGets.get

    async def counted(self: DirectGets, operation: str, *args: Any, **kwargs: Any) -> Any:
        found = await original(self, operation, *args, **kwargs)
        if found is not None and operation == "ListObjectsV2":
            sent_directly.append(kwargs["query"])
        return found

    monkeypatch.setattr(DirectGets, "get", counted)
    settings = s3_settings(moto_region, page_size=4)
    async with async_s3_client(settings) as client:
        client.meta.events.register(
            "before-send.s3.ListObjectsV2", lambda request, **_: by_botocore.append(request.url)
        )
        store = AsyncS3BlockStore(f"s3://{bucket}/ns", client, settings)
        assert store._direct is not None
        store._direct.enabled = direct
        listed = [(o.key, o.size) async for o in store.list()]
        assert len(listed) == len(KEYS)
        for after in ("", "a&b", "dir one/x", "zzz"):
            for limit in (0, 1, 4, 5, 11, 50):
                by_botocore.clear()
                sent_directly.clear()
                sizes = await store.list_sizes("", after, limit)
                remaining = [(k, s) for k, s in listed if k > after]
                assert list(sizes.items()) == remaining[:limit]
                # pages of 4 keys: as many requests as pages were needed, and no more
                pages = max(1, -(-min(limit, len(remaining)) // 4)) if limit else 0
                if direct:
                    assert (len(sent_directly), by_botocore) == (pages, [])
                    assert all(q["encoding-type"] == "url" for q in sent_directly)
                else:
                    assert (len(by_botocore), sent_directly) == (pages, [])
                    assert all("encoding-type=url" in url for url in by_botocore)
        assert await store.list_sizes("dir", "", 10) == {"dir one/x": 7, "dir&two/y": 8}
