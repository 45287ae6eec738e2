"""The task record: one background operation, as every server process reads it from the KV."""

from __future__ import annotations

import json
import secrets
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, replace
from enum import StrEnum
from typing import Any

__all__ = ["OWNER_GONE_STATUS", "Task", "TaskState", "new_task_id"]

OWNER_GONE_STATUS = 408
"""The status of a task whose owning process stopped before finishing it (lakeFS's choice)."""

_ID_ALPHABET = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
_ID_LENGTH = 20


def new_task_id(prefix: str = "") -> str:
    """Return a new random task ID: ``prefix`` and 20 letters or digits (lakeFS's shape)."""
    return prefix + "".join(secrets.choice(_ID_ALPHABET) for _ in range(_ID_LENGTH))


class TaskState(StrEnum):
    """Where a task is in its life."""

    PENDING = "pending"
    """Accepted, waiting for a free worker thread of its owner."""
    RUNNING = "running"
    SUCCEEDED = "succeeded"
    FAILED = "failed"


@dataclass(frozen=True, slots=True)
class Task:
    """One background operation.

    Attributes:
        id: The task ID clients poll.
        operation: What it does (``commit``, ``merge``, ...).
        repository: The repository it works on.
        scope: What else identifies its target (``{"branch": ...}``, ...); a status request
            must name the same target.
        owner: The instance ID of the process running it.
        state: Where it is in its life.
        progress: A short word on what it is doing now.
        created: When it was accepted (Unix seconds).
        updated: When its record last changed (Unix seconds).
        ttl: Seconds it is kept once finished.
        result: What it produced (JSON), once succeeded.
        error: Why it failed, once failed.
        status_code: The HTTP status of the failure (the synchronous call's).
        details: What the failure's answer carries beside its message (a merge conflict's
            paths), if anything.
    """

    id: str
    operation: str
    repository: str
    scope: dict[str, str]
    owner: str
    state: TaskState
    created: float
    updated: float
    ttl: float
    progress: str = ""
    result: dict[str, Any] | None = None
    error: str | None = None
    status_code: int | None = field(default=None)
    details: dict[str, Any] | None = None

    @property
    def done(self) -> bool:
        """Return whether the task finished (succeeded or failed)."""
        return self.state in (TaskState.SUCCEEDED, TaskState.FAILED)

    @property
    def expires(self) -> float | None:
        """Return when a finished task may be removed (``None`` while it runs)."""
        return self.updated + self.ttl if self.done else None

    def running(self, now: float) -> Task:
        """Return this task started by its owner at ``now``."""
        return replace(self, state=TaskState.RUNNING, progress="running", updated=now)

    def succeeded(self, result: dict[str, Any], now: float) -> Task:
        """Return this task finished at ``now`` with ``result``."""
        return replace(self, state=TaskState.SUCCEEDED, progress="done", result=result, updated=now)

    def failed(
        self,
        status_code: int,
        error: str,
        now: float,
        details: Mapping[str, Any] | None = None,
    ) -> Task:
        """Return this task failed at ``now`` with the HTTP ``status_code`` and ``error``.

        ``details`` is what the failure's answer carries beside its message, if anything.
        """
        return replace(
            self,
            state=TaskState.FAILED,
            progress="done",
            error=error,
            status_code=status_code,
            details=dict(details) if details else None,
            updated=now,
        )

    def encode(self) -> bytes:
        """Return the record as stored in the KV (JSON)."""
        data = asdict(self)
        if data["details"] is None:
            # a record without details stays readable by a process of the previous release
            del data["details"]
        return json.dumps(data, sort_keys=True, separators=(",", ":")).encode()

    @classmethod
    def decode(cls, raw: bytes) -> Task:
        """Return the record stored as ``raw``."""
        data = json.loads(raw)
        data["state"] = TaskState(data["state"])
        data["scope"] = dict(data.get("scope") or {})
        return cls(**data)
