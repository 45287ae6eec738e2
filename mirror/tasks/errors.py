"""Errors of background tasks, under the shared tree."""

from __future__ import annotations

from mirror.errors import NotFoundError, PreconditionFailedError, UnavailableError

__all__ = ["TaskChangedError", "TaskNotFoundError", "TasksStoppedError"]


class TaskNotFoundError(NotFoundError):
    """No task of that ID (never created, or expired and removed).

    The message starts with lakeFS's ``not found``, the text its clients match on.
    """

    def __init__(self, task_id: str) -> None:
        super().__init__(f"not found: no task {task_id!r}")
        self.task_id = task_id


class TaskChangedError(PreconditionFailedError):
    """A task record changed between reading it and writing it back."""

    def __init__(self, task_id: str) -> None:
        super().__init__(f"task {task_id!r} changed meanwhile")
        self.task_id = task_id


class TasksStoppedError(UnavailableError):
    """The process is shutting down and starts no new task; another replica will."""

    def __init__(self) -> None:
        super().__init__("the server is shutting down and starts no new task; retry")
