"""An audit event: who changed what, from where, what it was before and after, how it ended.

Events are small and hold nothing secret. :func:`safe_value` is applied to every ``before``,
``after`` and ``details`` value before it is stored or logged: a value under a key named like a
secret (``secret``, ``password``, ``token``, ``authorization``, ``credential``: the names the
log masks too) is replaced with :data:`~mirror.logging.REDACTED`, and a value whose JSON passes
:data:`MAX_VALUE_BYTES` is replaced with its size and SHA-256. The writers put no secret there
in the first place (an access key's ID, never its secret); this is the guard behind them.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from mirror.logging import REDACTED, is_secret_key

__all__ = [
    "FAILURE",
    "MAX_MESSAGE_CHARS",
    "MAX_USER_AGENT_CHARS",
    "MAX_VALUE_BYTES",
    "RECORD_VERSION",
    "SUCCESS",
    "SYSTEM",
    "Actor",
    "AuditEvent",
    "format_time",
    "parse_rfc3339",
    "safe_value",
    "system_actor",
]

SUCCESS = "success"
"""The result of a change that was made."""
FAILURE = "failure"
"""The result of a change that was refused or failed (its status and message say why)."""
SYSTEM = "system"
"""The user ID of a change a process made on its own, for no caller."""

RECORD_VERSION = 1
MAX_VALUE_BYTES = 8192
"""The largest JSON a ``before``, ``after`` or ``details`` value keeps in an event."""
MAX_MESSAGE_CHARS = 1000
"""The longest failure message an event keeps (the start of it)."""
MAX_USER_AGENT_CHARS = 256
"""The longest ``User-Agent`` an event keeps (the start of it)."""

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_MICROSECOND = timedelta(microseconds=1)
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


def format_time(time_us: int) -> str:
    """Return microseconds since the epoch as RFC 3339 in UTC (``2025-01-31T12:00:00.000001Z``)."""
    moment = _EPOCH + timedelta(microseconds=time_us)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def parse_rfc3339(text: str) -> int:
    """Return the microseconds since the epoch of an RFC 3339 time (no offset: UTC).

    Raises:
        ValueError: ``text`` is no date and time.
    """
    moment = datetime.fromisoformat(text.strip())
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return (moment - _EPOCH) // _MICROSECOND


def _scrub(value: Any, key: str) -> Any:
    if value is not None and key and is_secret_key(key):
        return REDACTED
    if isinstance(value, Mapping):
        return {str(k): _scrub(v, str(k)) for k, v in value.items()}
    if isinstance(value, list | tuple | set | frozenset):
        return [_scrub(v, key) for v in value]
    if value is None or isinstance(value, bool | int | float | str):
        return value
    return str(value)


def safe_value(value: Any) -> Any:
    """Return ``value`` as JSON an event may hold: secrets masked, size bounded (see the module)."""
    scrubbed = _scrub(value, "")
    encoded = json.dumps(scrubbed, sort_keys=True, separators=(",", ":")).encode()
    if len(encoded) <= MAX_VALUE_BYTES:
        return scrubbed
    return {"truncated": True, "bytes": len(encoded), "sha256": hashlib.sha256(encoded).hexdigest()}


def _clip(text: str | None, limit: int) -> str | None:
    if text is None:
        return None
    return _CONTROL.sub(" ", text[:limit])


@dataclass(frozen=True, slots=True)
class Actor:
    """Who asked for a change, and from where.

    Attributes:
        user_id: The signed-in user; :data:`SYSTEM` for a process acting on its own; ``None``
            for an anonymous request (the first administrator's setup).
        access_key_id: The access key the request signed in with (``None``: a login token).
        address: The client's network address, as the front door saw it.
        user_agent: The client's ``User-Agent`` (its first :data:`MAX_USER_AGENT_CHARS`).
        via: What recorded the change: ``api`` (the REST API), ``replicant`` (its
            configuration API), or the name of a process.
    """

    user_id: str | None
    access_key_id: str | None = None
    address: str | None = None
    user_agent: str | None = None
    via: str = "api"

    def to_json(self) -> dict[str, Any]:
        """Return the actor's JSON form."""
        return {
            "user_id": self.user_id,
            "access_key_id": self.access_key_id,
            "address": self.address,
            "user_agent": _clip(self.user_agent, MAX_USER_AGENT_CHARS),
            "via": self.via,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Actor:
        """Return the actor ``data`` describes."""
        return cls(
            user_id=data.get("user_id"),
            access_key_id=data.get("access_key_id"),
            address=data.get("address"),
            user_agent=data.get("user_agent"),
            via=str(data.get("via", "api")),
        )


def system_actor(process: str) -> Actor:
    """Return the actor of a change ``process`` makes on its own (user :data:`SYSTEM`)."""
    return Actor(SYSTEM, via=process)


@dataclass(frozen=True, slots=True)
class AuditEvent:
    """One recorded change, made or refused.

    Attributes:
        id: Unique; orders events newest first (:mod:`mirror.audit.store`), and pages listings.
        time_us: When it was recorded, in microseconds since the epoch.
        kind: What changed (:mod:`mirror.audit.kinds`).
        actor: Who asked, and from where.
        target: What it changed, by name: ``repository``, ``branch``, ``user``, ``group``,
            ``policy``, ``access_key_id``, ``mirror``, ... as the kind has them.
        result: :data:`SUCCESS` or :data:`FAILURE`.
        status: The HTTP status the change was answered with.
        message: Why it failed (``None`` on success).
        before: The state it replaced, when small (rules, statements, a branch head).
        after: The state it asked for, when small; a failed change did not reach it.
        details: Anything else of note (``force``, a run's counts, ...).
        request_id: The ``X-Request-ID`` of the request that made it, as in the access log.
    """

    id: str
    time_us: int
    kind: str
    actor: Actor
    target: Mapping[str, str] = field(default_factory=dict)
    result: str = SUCCESS
    status: int = 200
    message: str | None = None
    before: Any = None
    after: Any = None
    details: Mapping[str, Any] = field(default_factory=dict)
    request_id: str | None = None

    @property
    def time(self) -> float:
        """Return when the event was recorded, in seconds since the epoch."""
        return self.time_us / 1_000_000

    @property
    def repository(self) -> str | None:
        """Return the repository the event names, if any."""
        return self.target.get("repository")

    def to_json(self) -> dict[str, Any]:
        """Return the event's JSON form, as the API answers it (``time`` in RFC 3339)."""
        return {
            "id": self.id,
            "time": format_time(self.time_us),
            "kind": self.kind,
            "actor": self.actor.to_json(),
            "target": dict(self.target),
            "result": self.result,
            "status": self.status,
            "message": _clip(self.message, MAX_MESSAGE_CHARS),
            "before": self.before,
            "after": self.after,
            "details": dict(self.details),
            "request_id": self.request_id,
        }

    def encode(self) -> bytes:
        """Return the record as stored: versioned, compact JSON with sorted keys."""
        record = {"v": RECORD_VERSION, **self.to_json(), "time_us": self.time_us}
        return json.dumps(record, sort_keys=True, separators=(",", ":")).encode()

    @classmethod
    def decode(cls, raw: bytes) -> AuditEvent:
        """Return the event stored as ``raw``."""
        data = json.loads(raw)
        return cls(
            id=str(data["id"]),
            time_us=int(data["time_us"]),
            kind=str(data["kind"]),
            actor=Actor.from_json(data.get("actor") or {}),
            target={str(k): str(v) for k, v in (data.get("target") or {}).items()},
            result=str(data.get("result", SUCCESS)),
            status=int(data.get("status", 200)),
            message=data.get("message"),
            before=data.get("before"),
            after=data.get("after"),
            details=dict(data.get("details") or {}),
            request_id=data.get("request_id"),
        )
