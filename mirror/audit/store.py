"""Audit events in the KV, newest first.

KV layout: ``audit/events/<id>`` → the event (:meth:`~mirror.audit.model.AuditEvent.encode`).
An ID is 16 hex digits of ``2**64 - 1`` minus the event's time in microseconds, then 8 random
hex digits, so that the KV's ascending order is newest first: a listing's first page is one scan
from the start of the prefix, a time range is a scan from the first key of its end, and the
expired events are every key from the first key of the retention cutoff on, a scan that finds
nothing while none has expired. Events are written once (create-if-absent) and never changed.
"""

from __future__ import annotations

import itertools
import secrets
from collections.abc import Iterator

from mirror.audit.model import AuditEvent
from mirror.kv import KV

__all__ = ["EVENTS_PREFIX", "AuditStore", "new_event_id"]

EVENTS_PREFIX = b"audit/events/"

_LATEST = 16**16 - 1
"""Inverted times count down from here."""


def _inverted(time_us: int) -> str:
    return f"{_LATEST - max(0, min(time_us, _LATEST)):016x}"


def new_event_id(time_us: int) -> str:
    """Return a new event ID for ``time_us``: sorts before the IDs of every earlier time."""
    return _inverted(time_us) + secrets.token_hex(4)


class AuditStore:
    """Add, scan and expire audit events in the KV.

    Args:
        kv: The region's KV, shared by every server process and the replicant.
    """

    def __init__(self, kv: KV) -> None:
        self.kv = kv

    def add(self, event: AuditEvent) -> None:
        """Store a new event.

        Raises:
            KVPreconditionFailedError: an event of that ID exists (IDs are random: never).
            KVUnavailableError: the KV failed.
        """
        self.kv.set_if(EVENTS_PREFIX + event.id.encode(), event.encode(), None)

    def scan(self, *, after: str = "", until_us: int | None = None) -> Iterator[AuditEvent]:
        """Yield events newest first: after the ID ``after``, recorded at or before ``until_us``."""
        starts = [EVENTS_PREFIX]
        if after:
            starts.append(EVENTS_PREFIX + after.encode() + b"\x00")
        if until_us is not None:
            starts.append(EVENTS_PREFIX + _inverted(until_us).encode())
        for _, raw in self.kv.scan(EVENTS_PREFIX, max(starts)):
            yield AuditEvent.decode(raw)

    def expire(self, cutoff_us: int, limit: int) -> int:
        """Remove at most ``limit`` of the events recorded before ``cutoff_us``; return how many."""
        start = EVENTS_PREFIX + _inverted(cutoff_us - 1).encode()
        keys = [key for key, _ in itertools.islice(self.kv.scan(EVENTS_PREFIX, start), limit)]
        for key in keys:
            self.kv.delete(key)
        return len(keys)
