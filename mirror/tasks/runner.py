"""Run tasks in background threads of this server process, heartbeating while they run.

The :class:`TaskRunner` of a process writes each task's record when it is accepted, started and
finished, and the process's heartbeat every ``heartbeat`` seconds while it owns an unfinished
task (:mod:`mirror.tasks.store`). Work runs in daemon threads, at most ``workers`` at a time, so
the event loop never waits for it and a process that must stop is never held up by it.

On :meth:`TaskRunner.stop` (the server's graceful shutdown) no new task is accepted and the
running ones get ``shutdown_timeout`` seconds to finish. Then the process's heartbeat is
removed, so that any task still unfinished reads as failed (408) from every replica at once,
while its thread dies with the process. What the work itself wrote stays atomic: an operation
cut short leaves its branch as it was (the versioning core's guarantee).
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from mirror.kv import KVUnavailableError
from mirror.logging import get_logger
from mirror.tasks.errors import TaskChangedError, TasksStoppedError
from mirror.tasks.model import Task, TaskState, new_task_id
from mirror.tasks.store import TaskStore

__all__ = [
    "DescribeError",
    "ErrorDetails",
    "RunnerSettings",
    "TaskRunner",
    "Work",
    "tasks_still_running",
]

_TASK_THREAD = "lakemirror-task-"


def tasks_still_running() -> bool:
    """Return whether a task's thread still runs in this process (one given up at shutdown).

    The interpreter's finalization tears modules down under threads that still run, and a
    thread in the middle of a commit (Parquet, SQLite) can then crash the process: a stopping
    process that gave a task up exits without it (:func:`os._exit`).
    """
    return any(t.name.startswith(_TASK_THREAD) and t.is_alive() for t in threading.enumerate())


Work = Callable[[], Mapping[str, Any]]
"""A task's work: returns its result (JSON), or raises."""
DescribeError = Callable[[BaseException], tuple[int, str]]
"""Returns the HTTP status and message a failure of the work answers with."""
ErrorDetails = Callable[[BaseException], Mapping[str, Any] | None]
"""Returns what a failure's answer carries beside its message (a merge conflict's paths)."""

log = get_logger("mirror.tasks")


@dataclass(frozen=True, slots=True)
class RunnerSettings:
    """How a server process runs background tasks.

    Attributes:
        ttl: Seconds a finished task stays readable.
        heartbeat: Seconds between heartbeats while tasks run.
        workers: Tasks run at the same time (more wait, pending).
        shutdown_timeout: Seconds running tasks get to finish when the process stops.
    """

    ttl: float = 86400.0
    heartbeat: float = 5.0
    workers: int = 4
    shutdown_timeout: float = 25.0

    @property
    def sweep_interval(self) -> float:
        """Return how often expired tasks are looked for: a quarter TTL, at most 5 minutes."""
        return min(max(self.ttl / 4, self.heartbeat), 300.0)


def _described(describe: DescribeError, exc: Exception) -> tuple[int, str]:
    try:
        return describe(exc)
    except Exception as failure:
        log.error("cannot describe a task failure", error=str(failure))
        return 500, "internal server error"


def _detailed(details: ErrorDetails | None, exc: Exception) -> Mapping[str, Any] | None:
    if details is None:
        return None
    try:
        return details(exc)
    except Exception as failure:
        # the status and message still tell what failed
        log.error("cannot detail a task failure", error=str(failure))
        return None


def _retrying(write: Callable[[], object], tries: int = 5, pause: float = 0.2) -> None:
    """Run ``write``, retrying transient KV failures: a lost final write leaves a task running."""
    for attempt in range(tries):
        try:
            write()
            return
        except KVUnavailableError:
            if attempt == tries - 1:
                raise
            time.sleep(pause * 2**attempt)


class TaskRunner:
    """Accept tasks, run them in background threads, and keep their records current.

    Args:
        store: Where task records and heartbeats live.
        settings: TTL, heartbeat, concurrency and shutdown bound.
        instance: This process's instance ID (default: a new random one).
    """

    def __init__(
        self, store: TaskStore, settings: RunnerSettings, *, instance: str | None = None
    ) -> None:
        self.store = store
        self.settings = settings
        self.instance = instance or uuid.uuid4().hex
        self._slots = threading.BoundedSemaphore(settings.workers)
        self._lock = threading.Condition()
        self._unfinished = 0
        self._stopping = False
        self._abandoned = False
        self._wake = threading.Event()
        self._keeper: threading.Thread | None = None

    # -- life cycle ----------------------------------------------------------------------------

    def start(self) -> None:
        """Start the thread that heartbeats and removes expired tasks (idempotent)."""
        with self._lock:
            if self._keeper is not None or self._stopping:
                return
            self._keeper = threading.Thread(target=self._keep, name="lakemirror-tasks", daemon=True)
            self._keeper.start()

    def stop(self, timeout: float | None = None) -> int:
        """Accept no new task, wait for running ones, then drop the heartbeat.

        Args:
            timeout: Seconds to wait (default ``settings.shutdown_timeout``).

        Returns:
            How many tasks were still unfinished (they now read as failed, 408).
        """
        bound = self.settings.shutdown_timeout if timeout is None else timeout
        deadline = time.monotonic() + bound
        with self._lock:
            self._stopping = True
            while self._unfinished and (left := deadline - time.monotonic()) > 0:
                self._lock.wait(left)
            unfinished = self._unfinished
            # tasks still running are given up: they read as failed (408) once the heartbeat
            # is gone, and an error they meet from now on (the KV closing under them) is no
            # outcome of theirs to record
            self._abandoned = unfinished > 0
        self._wake.set()
        if self._keeper is not None:
            self._keeper.join(timeout=5.0)
        if unfinished:
            log.warning("tasks unfinished at shutdown", count=unfinished, instance=self.instance)
        try:
            self.store.forget(self.instance)
        except Exception as exc:  # the KV may be failing: the heartbeat then just goes stale
            log.warning("cannot remove the task heartbeat", error=str(exc))
        return unfinished

    @property
    def busy(self) -> int:
        """Return how many tasks of this process are unfinished."""
        with self._lock:
            return self._unfinished

    # -- tasks ---------------------------------------------------------------------------------

    def submit(
        self,
        operation: str,
        repository: str,
        scope: Mapping[str, str],
        work: Work,
        describe: DescribeError,
        *,
        id_prefix: str = "",
        details: ErrorDetails | None = None,
    ) -> Task:
        """Accept a task, store it, and start its work in the background; return it.

        A failure of ``work`` is recorded with the status and message ``describe`` gives it,
        and with what ``details`` (if given) adds.

        Raises:
            TasksStoppedError: the process is shutting down.
        """
        self.start()
        with self._lock:
            if self._stopping:
                raise TasksStoppedError()
            self._unfinished += 1
        try:
            # the heartbeat first: a reader must never find a task whose owner has none
            self.store.beat(self.instance, self.settings.heartbeat)
            now = self.store.clock()
            task = Task(
                id=new_task_id(id_prefix),
                operation=operation,
                repository=repository,
                scope=dict(scope),
                owner=self.instance,
                state=TaskState.PENDING,
                created=now,
                updated=now,
                ttl=self.settings.ttl,
                progress="waiting for a worker",
            )
            raw = self.store.create(task)
        except BaseException:
            self._finished()
            raise
        thread = threading.Thread(
            target=self._run,
            args=(task, raw, work, describe, details),
            name=f"{_TASK_THREAD}{task.id}",
            daemon=True,
        )
        thread.start()
        log.info("task accepted", task_id=task.id, operation=operation, repository=repository)
        return task

    def _run(
        self,
        task: Task,
        raw: bytes,
        work: Work,
        describe: DescribeError,
        details: ErrorDetails | None,
    ) -> None:
        try:
            with self._slots:
                running = task.running(self.store.clock())
                raw = self.store.replace(raw, running)
                try:
                    result = dict(work())
                except Exception as exc:
                    if self._given_up():
                        log.warning("task given up at shutdown", task_id=task.id, error=str(exc))
                        return
                    status, message = _described(describe, exc)
                    done = running.failed(
                        status, message, self.store.clock(), _detailed(details, exc)
                    )
                else:
                    done = running.succeeded(result, self.store.clock())
                _retrying(lambda: self.store.replace(raw, done))
                log.info(
                    "task finished",
                    task_id=task.id,
                    operation=task.operation,
                    state=done.state.value,
                    status_code=done.status_code,
                    seconds=round(done.updated - task.created, 3),
                )
        except TaskChangedError:
            log.error("task record changed under its owner", task_id=task.id)
        except Exception as exc:
            # the KV failed: the heartbeat goes stale and the task reads as failed (408)
            log.error("cannot record the task", task_id=task.id, error=str(exc))
        finally:
            self._finished()

    def _given_up(self) -> bool:
        with self._lock:
            return self._abandoned

    def _finished(self) -> None:
        with self._lock:
            self._unfinished -= 1
            self._lock.notify_all()

    # -- heartbeat and expiry ------------------------------------------------------------------

    def _keep(self) -> None:
        """Heartbeat while tasks run; remove expired tasks now and then; until stopped."""
        interval = self.settings.heartbeat
        next_sweep = time.monotonic()
        while not self._wake.wait(interval):
            try:
                if self.busy:
                    self.store.beat(self.instance, interval)
                if time.monotonic() >= next_sweep:
                    next_sweep = time.monotonic() + self.settings.sweep_interval
                    removed = self.store.sweep()
                    if removed:
                        log.info("expired tasks removed", count=removed)
            except Exception as exc:  # the KV failing now and then must not end the heartbeat
                log.warning("task heartbeat failed", error=str(exc))
