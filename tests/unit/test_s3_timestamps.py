"""S3 clients parse ISO 8601 timestamps fast, and every timestamp as botocore does."""

from __future__ import annotations

import asyncio

import pytest
from botocore.utils import parse_timestamp as botocore_timestamp

from mirror.block.s3 import S3Settings, make_s3_client, parse_timestamp


@pytest.mark.parametrize(
    "value",
    [
        "2026-11-24T15:48:06.000Z",  # ListObjectsV2's LastModified
        "2026-11-24T15:48:06Z",
        "2026-11-24T15:48:06.123456+02:00",
        "Tue, 24 Nov 2026 15:48:06 GMT",  # a Last-Modified header
        "2026-11-24T15:48:06",  # no zone: botocore decides
        1_795_000_000,
    ],
)
def test_same_instant_as_botocore(value: object) -> None:
    ours = parse_timestamp(value)
    theirs = botocore_timestamp(value)
    assert ours == theirs
    assert (ours.tzinfo is None) == (theirs.tzinfo is None)


def test_clients_use_it() -> None:
    client = make_s3_client(S3Settings(endpoint_url="http://127.0.0.1:9", region="us-east-1"))
    # responses are parsed by the endpoint's parsers, made by the session's factory
    factory = client._endpoint._response_parser_factory
    assert factory.create_parser("rest-xml")._timestamp_parser is parse_timestamp


def test_async_clients_use_it() -> None:
    from mirror.block.s3_async import async_s3_client

    async def parser_of_client() -> object:
        settings = S3Settings(endpoint_url="http://127.0.0.1:9", region="us-east-1")
        async with async_s3_client(settings) as client:
            factory = client._endpoint._response_parser_factory  # type: ignore[attr-defined]
            return factory.create_parser("rest-xml")._timestamp_parser

    assert asyncio.run(parser_of_client()) is parse_timestamp
