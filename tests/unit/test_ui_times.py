"""The UI's rendering of the API's RFC 3339 times (runs, hooks, imports)."""

from __future__ import annotations

from mirror.ui.times import clock, seconds_between


def test_clock_shows_utc_to_the_second() -> None:
    assert clock("2026-11-24T15:30:07Z") == "2026-11-24 15:30:07 UTC"
    assert clock("2026-11-24T17:30:07.5+02:00") == "2026-11-24 15:30:07 UTC"
    # a time without a zone is the API's UTC
    assert clock("2026-11-24T15:30:07") == "2026-11-24 15:30:07 UTC"


def test_clock_keeps_what_it_cannot_read() -> None:
    assert clock("soon") == "soon"
    assert clock("") == ""
    assert clock(None) == ""
    assert clock(12) == ""


def test_seconds_between() -> None:
    assert seconds_between("2026-11-24T15:30:07Z", "2026-11-24T15:31:09Z") == 62
    assert seconds_between("2026-11-24T15:30:07Z", "2026-11-24T15:30:07.6Z") == 1
    # clocks of two processes may disagree: never a negative duration
    assert seconds_between("2026-11-24T15:30:09Z", "2026-11-24T15:30:07Z") == 0
    assert seconds_between("2026-11-24T15:30:07Z", "") is None
    assert seconds_between(None, "2026-11-24T15:30:07Z") is None
