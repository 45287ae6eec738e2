"""The audit trail: record an event (a log line and a KV record), list events, expire old ones.

Recording never fails the change it records: the log line is written first, and a KV failure is
logged (``audit event not stored``, with the event's ID) rather than raised, so the line stays
as the record of that event. Expiry is lazy: a listing never shows an event older than the
retention, and each event recorded removes up to :data:`SWEEP_BATCH` expired ones, which keeps
pace with the events that age out as long as events keep coming at any steady rate.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import structlog

from mirror.audit.model import (
    FAILURE,
    MAX_MESSAGE_CHARS,
    SUCCESS,
    Actor,
    AuditEvent,
    safe_value,
)
from mirror.audit.query import AuditQuery
from mirror.audit.store import AuditStore, new_event_id
from mirror.config import AuditSettings
from mirror.kv import KV
from mirror.logging import get_logger

__all__ = [
    "DAY_SECONDS",
    "DEFAULT_RETENTION_DAYS",
    "LOG_EVENT",
    "SCAN_LIMIT",
    "SWEEP_BATCH",
    "AuditPage",
    "AuditTrail",
]

DAY_SECONDS = 86_400
DEFAULT_RETENTION_DAYS = AuditSettings().retention_days
SWEEP_BATCH = 100
"""Expired events one recorded event removes at most."""
SCAN_LIMIT = 10_000
"""Events one listing page reads at most; a page of rare matches may end early (``has_more``)."""
LOG_EVENT = "audit"
"""The event name of an audit event's log line."""


@dataclass(frozen=True, slots=True)
class AuditPage:
    """One page of a listing, newest first.

    Attributes:
        events: The events of the page.
        has_more: Whether a next page may hold more (ask with ``after=next_offset``).
        next_offset: Where the next page starts (an event ID; ``""`` when there is none).
    """

    events: list[AuditEvent]
    has_more: bool
    next_offset: str


class AuditTrail:
    """Record audit events, and list them.

    Args:
        kv: The region's KV (events live under ``audit/``).
        retention: Seconds an event is kept.
        clock: Returns the time in Unix seconds.
        sweep_batch: Expired events each recorded event removes at most (``0``: none).
    """

    def __init__(
        self,
        kv: KV,
        *,
        retention: float = DEFAULT_RETENTION_DAYS * DAY_SECONDS,
        clock: Callable[[], float] = time.time,
        sweep_batch: int = SWEEP_BATCH,
    ) -> None:
        self.store = AuditStore(kv)
        self.retention = retention
        self.sweep_batch = sweep_batch
        self._clock = clock
        self._log = get_logger("mirror.audit")
        self._lock = threading.Lock()
        self._last_us = 0

    @classmethod
    def from_settings(cls, kv: KV, settings: AuditSettings) -> AuditTrail:
        """Return the trail the ``audit`` configuration section describes."""
        return cls(kv, retention=settings.retention_days * DAY_SECONDS)

    def _now_us(self) -> int:
        return round(self._clock() * 1_000_000)

    def cutoff_us(self) -> int:
        """Return the time before which events have expired (microseconds since the epoch)."""
        return self._now_us() - round(self.retention * 1_000_000)

    def record(
        self,
        kind: str,
        actor: Actor,
        *,
        target: Mapping[str, str] | None = None,
        status: int = 200,
        message: str | None = None,
        before: Any = None,
        after: Any = None,
        details: Mapping[str, Any] | None = None,
    ) -> AuditEvent:
        """Record one event: log it, store it, and remove some expired ones; return it.

        A ``status`` of 400 or more records a failure with ``message``. ``before``, ``after``
        and ``details`` pass through :func:`~mirror.audit.model.safe_value`. Never raises for
        the KV: see the module.
        """
        with self._lock:
            # strictly increasing within a process, so its events list in the order they happened
            now = self._last_us = max(self._now_us(), self._last_us + 1)
        failed = status >= 400
        event = AuditEvent(
            id=new_event_id(now),
            time_us=now,
            kind=kind,
            actor=actor,
            target={k: str(v) for k, v in (target or {}).items() if v is not None},
            result=FAILURE if failed else SUCCESS,
            status=status,
            message=(message or "")[:MAX_MESSAGE_CHARS] if failed else None,
            before=safe_value(before),
            after=safe_value(after),
            details=safe_value(dict(details or {})),
            request_id=structlog.contextvars.get_contextvars().get("request_id"),
        )
        line = event.to_json()
        (self._log.warning if failed else self._log.info)(LOG_EVENT, **line)
        try:
            self.store.add(event)
            if self.sweep_batch:
                self.store.expire(now - round(self.retention * 1_000_000), self.sweep_batch)
        except Exception as exc:
            # the change is made (or refused) already; its log line above is its record
            self._log.error("audit event not stored", audit_id=event.id, kind=kind, error=str(exc))
        return event

    def expire(self, limit: int = SWEEP_BATCH) -> int:
        """Remove at most ``limit`` expired events; return how many."""
        return self.store.expire(self.cutoff_us(), limit)

    def page(
        self, query: AuditQuery, *, after: str = "", amount: int = 100, scan_limit: int = SCAN_LIMIT
    ) -> AuditPage:
        """Return the events ``query`` matches, newest first, after the event ID ``after``.

        At most ``amount`` events; at most ``scan_limit`` events are read, after which the
        page ends early with ``has_more`` and ``next_offset`` at the last event read.
        """
        oldest = self.cutoff_us()
        if query.since_us is not None:
            oldest = max(oldest, query.since_us)
        events: list[AuditEvent] = []
        scanned = 0
        for event in self.store.scan(after=after, until_us=query.until_us):
            if event.time_us < oldest:
                break
            if query.matches(event):
                if len(events) == amount:
                    return AuditPage(events, True, events[-1].id)
                events.append(event)
            scanned += 1
            if scanned >= scan_limit:
                return AuditPage(events, True, event.id)
        return AuditPage(events, False, "")
