"""Background tasks: one small task model in the KV, shared by every background operation.

A server process accepts a task (:class:`TaskRunner`), runs it in a background thread, and
keeps its record current in the KV (:class:`TaskStore`); any server process sharing the KV
answers its status. Asynchronous commit and merge are built on it.
"""

from mirror.tasks.errors import TaskChangedError, TaskNotFoundError, TasksStoppedError
from mirror.tasks.model import OWNER_GONE_STATUS, Task, TaskState, new_task_id
from mirror.tasks.runner import (
    DescribeError,
    ErrorDetails,
    RunnerSettings,
    TaskRunner,
    Work,
    tasks_still_running,
)
from mirror.tasks.store import MISSED_HEARTBEATS, Heartbeat, TaskStore

__all__ = [
    "MISSED_HEARTBEATS",
    "OWNER_GONE_STATUS",
    "DescribeError",
    "ErrorDetails",
    "Heartbeat",
    "RunnerSettings",
    "Task",
    "TaskChangedError",
    "TaskNotFoundError",
    "TaskRunner",
    "TaskState",
    "TaskStore",
    "TasksStoppedError",
    "Work",
    "new_task_id",
    "tasks_still_running",
]
