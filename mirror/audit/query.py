"""The filters of an audit listing, read from text as the API and the command line give them."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

from mirror.audit.errors import InvalidAuditQueryError
from mirror.audit.kinds import kind_matches
from mirror.audit.model import FAILURE, SUCCESS, AuditEvent, parse_rfc3339

__all__ = ["RESULTS", "AuditQuery", "parse_time"]

RESULTS = (SUCCESS, FAILURE)
"""The values of the ``result`` filter."""

_SECONDS = re.compile(r"-?\d+(\.\d+)?")


def parse_time(text: str, name: str) -> int:
    """Return a time given as Unix seconds or RFC 3339, in microseconds since the epoch.

    Args:
        text: ``1735689600``, ``1735689600.5``, ``2025-01-01T00:00:00Z`` or
            ``2025-01-01T01:00:00+01:00`` (no offset: UTC).
        name: The filter's name, for the error.

    Raises:
        InvalidAuditQueryError: ``text`` is neither.
    """
    value = text.strip()
    if _SECONDS.fullmatch(value):
        seconds = float(value)
        if math.isfinite(seconds) and abs(seconds) < 1e12:
            return round(seconds * 1_000_000)
    else:
        try:
            return parse_rfc3339(value)
        except ValueError:
            pass
    raise InvalidAuditQueryError(
        f"invalid {name} {text!r}: use Unix seconds (1735689600) or RFC 3339 (2025-01-01T00:00:00Z)"
    )


@dataclass(frozen=True, slots=True)
class AuditQuery:
    """Which events a listing returns; empty filters match everything.

    Attributes:
        kind: A kind, or the start of kinds (``auth`` matches ``auth.user.create``).
        user: The actor's user ID.
        repository: The repository the event names.
        since_us: Events recorded at or after this time (microseconds since the epoch).
        until_us: Events recorded at or before this time.
        result: :data:`~mirror.audit.model.SUCCESS` or :data:`~mirror.audit.model.FAILURE`.
    """

    kind: str = ""
    user: str = ""
    repository: str = ""
    since_us: int | None = None
    until_us: int | None = None
    result: str = ""

    @classmethod
    def parse(
        cls,
        *,
        kind: str = "",
        user: str = "",
        repository: str = "",
        since: str | None = None,
        until: str | None = None,
        result: str = "",
    ) -> AuditQuery:
        """Return the query of filters given as text.

        Raises:
            InvalidAuditQueryError: a time is malformed, ``since`` is after ``until``, or the
                result is neither ``success`` nor ``failure``.
        """
        if result and result not in RESULTS:
            raise InvalidAuditQueryError(f"invalid result {result!r}: use success or failure")
        since_us = parse_time(since, "since") if since else None
        until_us = parse_time(until, "until") if until else None
        if since_us is not None and until_us is not None and since_us > until_us:
            raise InvalidAuditQueryError(f"since {since!r} is after until {until!r}")
        return cls(kind.strip(), user, repository, since_us, until_us, result)

    def matches(self, event: AuditEvent) -> bool:
        """Return whether ``event`` passes every filter but the time range (the scan's)."""
        return (
            kind_matches(event.kind, self.kind)
            and (not self.user or event.actor.user_id == self.user)
            and (not self.repository or event.repository == self.repository)
            and (not self.result or event.result == self.result)
        )
