"""S3 clients parse ISO 8601 and RFC 1123 timestamps fast, and every timestamp as botocore does."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime

import pytest
from botocore.utils import parse_timestamp as botocore_timestamp
from hypothesis import given
from hypothesis import strategies as st

from mirror.block.s3 import S3Settings, make_s3_client, parse_timestamp

_INSTANTS = st.datetimes(
    min_value=datetime(1970, 1, 2), max_value=datetime(2200, 1, 1), timezones=st.just(UTC)
)


@given(_INSTANTS)
def test_header_and_listing_dates_read_as_botocore_reads_them(instant: datetime) -> None:
    header = format_datetime(instant.replace(microsecond=0), usegmt=True)  # RFC 1123, GMT
    listing = instant.isoformat(timespec="milliseconds").replace("+00:00", "Z")
    for text in (header, listing):
        ours = parse_timestamp(text)
        assert ours == botocore_timestamp(text)
        assert ours.utcoffset() == timedelta(0)


@pytest.mark.parametrize(
    "value",
    [
        "2026-11-24T15:48:06.000Z",  # ListObjectsV2's LastModified
        "2026-11-24T15:48:06Z",
        "2026-11-24T15:48:06.123456+02:00",
        "Tue, 24 Nov 2026 15:48:06 GMT",  # a Last-Modified header
        "2026-11-24T15:48:06",  # no zone: botocore decides
        1_795_000_000,
        "Sat, 28 Nov 2026 22:31:29 +0200",
        "Sat, 28 Nov 2026 22:31:29 -0000",
        "28 Nov 2026 22:31:29 GMT",
        "1764369089",
        "Sun, 29 Nov 2026 22:31:29 GMT",  # the wrong weekday: read as dateutil reads it
    ],
)
def test_same_instant_as_botocore(value: object) -> None:
    ours = parse_timestamp(value)
    theirs = botocore_timestamp(value)
    assert ours == theirs
    assert (ours.utcoffset(), ours.tzinfo is None) == (theirs.utcoffset(), theirs.tzinfo is None)


@pytest.mark.parametrize("text", ["not a date GMT", "Sat, 99 Nov 2026 22:31:29 GMT", ""])
def test_what_neither_reads_fails_as_botocore_fails(text: str) -> None:
    with pytest.raises(ValueError):
        botocore_timestamp(text)
    with pytest.raises(ValueError):
        parse_timestamp(text)


def test_header_and_listing_dates_never_reach_dateutil(monkeypatch: pytest.MonkeyPatch) -> None:
    """botocore's parser (dateutil, ~60 µs a date) reads only what the fast readers cannot."""
    from mirror.block import s3_config

    calls: list[object] = []

    def counted(value: object) -> datetime:
        calls.append(value)
        return botocore_timestamp(value)

    monkeypatch.setattr(s3_config, "botocore_timestamp", counted)
    parse_timestamp("Sat, 28 Nov 2026 22:31:29 GMT")
    parse_timestamp("2026-11-28T22:31:29.123Z")
    assert calls == []
    parse_timestamp("1764369089")
    assert calls == ["1764369089"]


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
