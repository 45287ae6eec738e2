"""Times the API answers as RFC 3339 text (runs, hooks, imports), as the pages show them."""

from __future__ import annotations

from datetime import UTC, datetime

__all__ = ["clock", "minute", "seconds_between"]


def _parsed(value: object) -> datetime | None:
    if not isinstance(value, str) or not value:
        return None
    try:
        moment = datetime.fromisoformat(value)
    except ValueError:
        return None
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


def _shown(value: object, layout: str) -> str:
    moment = _parsed(value)
    if moment is None:
        return value if isinstance(value, str) else ""
    return moment.astimezone(UTC).strftime(layout)


def clock(value: object) -> str:
    """Return an RFC 3339 time as the pages show times (UTC, to the second); text as it is."""
    return _shown(value, "%Y-%m-%d %H:%M:%S UTC")


def minute(value: object) -> str:
    """Return an RFC 3339 time as the pages show dates (UTC, to the minute); text as it is."""
    return _shown(value, "%Y-%m-%d %H:%M UTC")


def seconds_between(start: object, end: object) -> int | None:
    """Return the whole seconds from ``start`` to ``end`` (RFC 3339); ``None`` if one is not."""
    first, last = _parsed(start), _parsed(end)
    if first is None or last is None:
        return None
    return max(0, round((last - first).total_seconds()))
