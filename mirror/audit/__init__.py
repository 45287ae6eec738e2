"""The audit trail: who changed what in security and operations, from where, and how it ended.

Every change of users, groups, policies, keys, branch protection, GC rules, repositories and
mirrors' roles, every hard reset and every GC sweep is recorded as one :class:`AuditEvent`: a
structured log line and a KV record kept for the configured retention (``audit.retention_days``).
The front doors record through an :class:`AuditRecorder` bound to the request's caller;
``GET /api/v1/audit`` and ``lakemirror audit`` list the events. Nothing secret is ever in one
(:func:`safe_value`). See ``docs/audit.md``.
"""

from mirror.audit import kinds
from mirror.audit.errors import InvalidAuditQueryError
from mirror.audit.model import (
    FAILURE,
    SUCCESS,
    SYSTEM,
    Actor,
    AuditEvent,
    format_time,
    safe_value,
    system_actor,
)
from mirror.audit.query import RESULTS, AuditQuery, parse_time
from mirror.audit.recorder import AuditRecorder, Change, Describe
from mirror.audit.store import EVENTS_PREFIX, AuditStore, new_event_id
from mirror.audit.trail import (
    DAY_SECONDS,
    DEFAULT_RETENTION_DAYS,
    LOG_EVENT,
    SCAN_LIMIT,
    SWEEP_BATCH,
    AuditPage,
    AuditTrail,
)

__all__ = [
    "DAY_SECONDS",
    "DEFAULT_RETENTION_DAYS",
    "EVENTS_PREFIX",
    "FAILURE",
    "LOG_EVENT",
    "RESULTS",
    "SCAN_LIMIT",
    "SUCCESS",
    "SWEEP_BATCH",
    "SYSTEM",
    "Actor",
    "AuditEvent",
    "AuditPage",
    "AuditQuery",
    "AuditRecorder",
    "AuditStore",
    "AuditTrail",
    "Change",
    "Describe",
    "InvalidAuditQueryError",
    "format_time",
    "kinds",
    "new_event_id",
    "parse_time",
    "safe_value",
    "system_actor",
]
