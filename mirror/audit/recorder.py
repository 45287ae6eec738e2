"""Record the changes of one request: its actor, bound once, and one event per change.

A front door builds an :class:`AuditRecorder` for a request from what only it knows (the signed-in
user, the access key, the client's address) and hands it to the code making the change::

    with audit.change(kinds.AUTH_USER_DELETE, target={"user": user_id}):
        store.delete_user(user_id)

The event is recorded when the block ends: a success, or, when it raises, a failure with the
status and message the front door answers for that error (``describe``). Changes are recorded
only once the caller is authorized (permission checks come before the block), so an event's
failure is a refusal of the change itself, never of the caller.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from mirror.audit.model import Actor, AuditEvent
from mirror.audit.trail import AuditTrail

__all__ = ["AuditRecorder", "Change", "Describe"]

Describe = Callable[[BaseException], tuple[int, str]]
"""Return the HTTP status and message a front door answers an error with."""


@dataclass(slots=True)
class Change:
    """What a change block records; the block may fill it in as it learns more.

    Attributes:
        target: What the change names (``repository``, ``user``, ...).
        before: The state it replaces, when small.
        after: The state it asks for, when small.
        details: Anything else of note.
        status: The status a success is answered with.
        refusal: ``(status, message)`` when the block refused without raising.
    """

    target: dict[str, str] = field(default_factory=dict)
    before: Any = None
    after: Any = None
    details: dict[str, Any] = field(default_factory=dict)
    status: int = 200
    refusal: tuple[int, str] | None = None

    def refuse(self, status: int, message: str) -> None:
        """Record the change as refused with ``status`` and ``message`` (no error raised)."""
        self.refusal = (status, message)


class AuditRecorder:
    """Record the changes one caller makes.

    Args:
        trail: Where events go.
        actor: Who asks, and from where.
        describe: The status and message the front door answers an error with.
    """

    def __init__(self, trail: AuditTrail, actor: Actor, describe: Describe) -> None:
        self.trail = trail
        self.actor = actor
        self._describe = describe

    def record(self, kind: str, change: Change) -> AuditEvent:
        """Record ``change`` as an event of ``kind`` now."""
        status, message = change.refusal or (change.status, None)
        return self.trail.record(
            kind,
            self.actor,
            target=change.target,
            status=status,
            message=message,
            before=change.before,
            after=change.after,
            details=change.details,
        )

    @contextmanager
    def change(
        self,
        kind: str,
        *,
        target: Mapping[str, str | None] | None = None,
        before: Any = None,
        after: Any = None,
        details: Mapping[str, Any] | None = None,
        status: int = 200,
    ) -> Iterator[Change]:
        """Record the change the block makes as one event of ``kind``, when the block ends.

        An error raised in the block is recorded as a failure (with ``describe``'s status and
        message) and raised on.
        """
        change = Change(
            target={k: v for k, v in (target or {}).items() if v is not None},
            before=before,
            after=after,
            details=dict(details or {}),
            status=status,
        )
        try:
            yield change
        except Exception as exc:
            change.refusal = self._describe(exc)
            self.record(kind, change)
            raise
        self.record(kind, change)
