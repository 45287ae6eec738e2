"""The S3 clients' timestamp parser reads what botocore's reads, to the same instant."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from email.utils import format_datetime

import pytest
from botocore.utils import parse_timestamp as botocore_timestamp
from hypothesis import given
from hypothesis import strategies as st

from mirror.block.s3_config import parse_timestamp

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
    "text",
    [
        "Sat, 28 Nov 2026 22:31:29 GMT",
        "Sat, 28 Nov 2026 22:31:29 +0200",
        "Sat, 28 Nov 2026 22:31:29 -0000",
        "28 Nov 2026 22:31:29 GMT",
        "2026-11-28T22:31:29.123Z",
        "2026-11-28T22:31:29+05:30",
        "2026-11-28T22:31:29",
        "1764369089",
        1764369089,
        "Sun, 29 Nov 2026 22:31:29 GMT",  # the wrong weekday: read as dateutil reads it
    ],
)
def test_other_spellings_read_as_botocore_reads_them(text: str | int) -> None:
    ours, theirs = parse_timestamp(text), botocore_timestamp(text)
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
    import mirror.block.s3_config as s3_config

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
