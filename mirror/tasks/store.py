"""Task records and owner heartbeats in the KV, and the status every server process derives.

KV layout, under the ``tasks/`` prefix:

- ``tasks/records/<id>`` → the :class:`~mirror.tasks.model.Task` (JSON);
- ``tasks/instances/<instance>`` → ``{"seen": <Unix seconds>, "interval": <seconds>}``, written
  by a server process every ``interval`` seconds while it runs tasks.

Only the owning process writes a task's record while the task runs, so any process can tell a
running task from one whose owner died: the owner's heartbeat stops. A task whose owner missed
:data:`MISSED_HEARTBEATS` heartbeats, or whose owner's record is gone, reads as failed with
status 408, as lakeFS answers. Finished tasks are kept ``ttl`` seconds, then read as unknown
and are removed: at once by the reader that finds them expired, or by the next :meth:`sweep`.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass, replace

from mirror.kv import KV, KeyNotFoundError, KVPreconditionFailedError
from mirror.tasks.errors import TaskChangedError, TaskNotFoundError
from mirror.tasks.model import OWNER_GONE_STATUS, Task

__all__ = ["MISSED_HEARTBEATS", "Heartbeat", "TaskStore"]

MISSED_HEARTBEATS = 6
"""Heartbeats an owner may miss before its running tasks read as failed (408)."""

_RECORDS = b"tasks/records/"
_INSTANCES = b"tasks/instances/"


@dataclass(frozen=True, slots=True)
class Heartbeat:
    """The last sign of life of a server process running tasks.

    Attributes:
        seen: When it last wrote (Unix seconds, its own clock).
        interval: How often it promised to write (seconds).
    """

    seen: float
    interval: float

    @property
    def deadline(self) -> float:
        """Return when the process counts as dead without another heartbeat."""
        return self.seen + self.interval * MISSED_HEARTBEATS

    def encode(self) -> bytes:
        """Return the record as stored in the KV."""
        return json.dumps({"seen": self.seen, "interval": self.interval}).encode()

    @classmethod
    def decode(cls, raw: bytes) -> Heartbeat:
        """Return the record stored as ``raw``."""
        data = json.loads(raw)
        return cls(float(data["seen"]), float(data["interval"]))


class TaskStore:
    """Create, update and read tasks in the KV; derive their status from owner heartbeats.

    Args:
        kv: The region's KV, shared by every server process.
        clock: Returns the time in Unix seconds.
    """

    def __init__(self, kv: KV, clock: Callable[[], float] = time.time) -> None:
        self.kv = kv
        self.clock = clock

    @staticmethod
    def _key(task_id: str) -> bytes:
        return _RECORDS + task_id.encode()

    # -- records -----------------------------------------------------------------------------

    def create(self, task: Task) -> bytes:
        """Store a new task; return its stored bytes (for :meth:`replace`).

        Raises:
            TaskChangedError: a task of that ID exists (IDs are random: practically never).
        """
        raw = task.encode()
        try:
            self.kv.set_if(self._key(task.id), raw, None)
        except KVPreconditionFailedError as exc:
            raise TaskChangedError(task.id) from exc
        return raw

    def replace(self, expected: bytes, task: Task) -> bytes:
        """Store ``task`` over its record if that still holds ``expected``; return the new bytes.

        Raises:
            TaskChangedError: the record holds something else, or is gone.
        """
        raw = task.encode()
        try:
            self.kv.set_if(self._key(task.id), raw, expected)
        except KVPreconditionFailedError as exc:
            raise TaskChangedError(task.id) from exc
        return raw

    def get_raw(self, task_id: str) -> tuple[Task, bytes]:
        """Return a task as stored and its bytes, whatever its owner's state.

        Raises:
            TaskNotFoundError: no such record.
        """
        try:
            raw = self.kv.get(self._key(task_id))
        except KeyNotFoundError as exc:
            raise TaskNotFoundError(task_id) from exc
        return Task.decode(raw), raw

    # -- heartbeats ----------------------------------------------------------------------------

    def beat(self, instance: str, interval: float) -> None:
        """Record that ``instance`` is alive now and will write again within ``interval``."""
        self.kv.set(_INSTANCES + instance.encode(), Heartbeat(self.clock(), interval).encode())

    def forget(self, instance: str) -> None:
        """Remove ``instance``'s heartbeat: its unfinished tasks read as failed at once."""
        self.kv.delete(_INSTANCES + instance.encode())

    def heartbeat(self, instance: str) -> Heartbeat | None:
        """Return ``instance``'s last heartbeat (``None``: it has none)."""
        try:
            return Heartbeat.decode(self.kv.get(_INSTANCES + instance.encode()))
        except KeyNotFoundError:
            return None

    # -- status ------------------------------------------------------------------------------

    def _as_seen(
        self, task: Task, now: float, beats: dict[str, Heartbeat | None] | None = None
    ) -> Task:
        """Return ``task`` as clients see it at ``now``, given its owner's heartbeat."""
        if task.done:
            return task
        if beats is not None and task.owner in beats:
            beat = beats[task.owner]
        else:
            beat = self.heartbeat(task.owner)
            if beats is not None:
                beats[task.owner] = beat
        if beat is None:
            message = (
                f"task expired: server instance {task.owner} that ran it is no longer available"
            )
            return task.failed(OWNER_GONE_STATUS, message, task.updated)
        if now > beat.deadline:
            message = (
                f"task expired: server instance {task.owner} that ran it stopped "
                f"heartbeating {now - beat.seen:.0f}s ago"
            )
            return task.failed(OWNER_GONE_STATUS, message, beat.deadline)
        return replace(task, updated=max(task.updated, beat.seen))

    def status(self, task_id: str) -> Task:
        """Return a task as clients see it now; remove it when it has expired.

        A running task whose owner stopped heartbeating is returned failed with status 408.

        Raises:
            TaskNotFoundError: no such task, or it expired.
        """
        task, raw = self.get_raw(task_id)
        now = self.clock()
        seen = self._as_seen(task, now)
        expires = seen.expires
        if expires is not None and now >= expires:
            self._remove(task_id, raw)
            raise TaskNotFoundError(task_id)
        return seen

    def _remove(self, task_id: str, raw: bytes) -> bool:
        try:
            self.kv.delete_if(self._key(task_id), raw)
        except KVPreconditionFailedError:
            return False  # changed meanwhile, or another process removed it first
        return True

    def sweep(self) -> int:
        """Remove expired tasks, and heartbeats no task refers to any more; return the count.

        A heartbeat is removed only when stale and unchanged since read, so a process that just
        came back to life and wrote a fresh one keeps it.
        """
        now = self.clock()
        beats: dict[str, Heartbeat | None] = {}
        owners: set[str] = set()
        removed = 0
        for key, raw in list(self.kv.scan(_RECORDS)):
            task = Task.decode(raw)
            seen = self._as_seen(task, now, beats)
            expires = seen.expires
            if expires is not None and now >= expires:
                removed += self._remove(key[len(_RECORDS) :].decode(), raw)
            else:
                owners.add(task.owner)
        for key, raw in list(self.kv.scan(_INSTANCES)):
            instance = key[len(_INSTANCES) :].decode()
            if instance in owners or now <= Heartbeat.decode(raw).deadline:
                continue
            try:
                self.kv.delete_if(key, raw)
            except KVPreconditionFailedError:
                continue
        return removed
