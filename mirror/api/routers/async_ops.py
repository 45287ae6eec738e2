"""Asynchronous commit and merge: lakeFS's ``…/async`` endpoints, over background tasks.

``POST …/commits/async`` and ``POST …/merge/{destination}/async`` check what the synchronous
calls check up front (permission, repository, read-only, branch, body) and answer 202 with a
task ID at once; the task runs the synchronous call itself in the background
(:mod:`mirror.tasks`). ``GET …/async/{id}/status`` answers from the KV on any replica:
``completed``, ``update_time``, then the result the synchronous call returns, or its error
message with its ``status_code`` (one error mapping, :func:`~mirror.api.errors.describe_error`);
a merge conflict's error also lists the conflicting paths, as the synchronous 409 does.
A task whose server process died reads as completed with status 408.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Annotated, Any

from fastapi import APIRouter, Depends, FastAPI, Request
from pydantic import BaseModel
from starlette.exceptions import HTTPException

from mirror.api.deps import ApiState, Caller, CallerDep, StateDep
from mirror.api.errors import describe_error
from mirror.api.models import Commit, CommitCreation, Merge, MergeResult
from mirror.api.routers import branches, refs
from mirror.api.routing import LakeFSRoute
from mirror.auth.permissions import Action, Permission, branch_arn
from mirror.core.errors import MergeConflictError, RepositoryReadOnlyError
from mirror.core.merge import MergeStrategy
from mirror.errors import InvalidValueError
from mirror.httputil.errors import CONFLICTS_LISTED
from mirror.tasks import DescribeError, Task, TaskNotFoundError, TaskRunner

__all__ = [
    "COMMIT_TASK_PREFIX",
    "MERGE_TASK_PREFIX",
    "CommitAsyncStatus",
    "MergeAsyncStatus",
    "TaskCreation",
    "TaskError",
    "enabled",
    "router",
]

router = APIRouter(route_class=LakeFSRoute, tags=["async"])

COMMIT_TASK_PREFIX = "CA"
"""How asynchronous commit task IDs start (as lakeFS's)."""
MERGE_TASK_PREFIX = "MA"
"""How asynchronous merge task IDs start (as lakeFS's)."""

_REPO = "/repositories/{repository}"
_COMMIT = _REPO + "/branches/{branch}/commits/async"
_MERGE = _REPO + "/refs/{sourceRef}/merge/{destinationBranch}/async"


class TaskCreation(BaseModel):
    """The answer to starting a task: its ID (lakeFS's ``TaskInfo``)."""

    id: str


class TaskError(BaseModel):
    """Why a task failed: the synchronous call's error message.

    A merge conflict also lists the conflicting paths (at most 100, sorted), as the
    synchronous merge's 409 does (a LakeMirror field beside lakeFS's ``message``).
    """

    message: str
    conflicts: list[str] | None = None


class _AsyncStatus(BaseModel):
    task_id: str
    completed: bool
    update_time: datetime
    error: TaskError | None = None
    status_code: int | None = None


class CommitAsyncStatus(_AsyncStatus):
    """An asynchronous commit's status; ``result`` is the commit once done."""

    result: Commit | None = None


class MergeAsyncStatus(_AsyncStatus):
    """An asynchronous merge's status; ``result`` holds the merge commit once done."""

    result: MergeResult | None = None


def enabled(app: FastAPI) -> bool:
    """Return whether ``app`` serves asynchronous operations (``/config`` advertises them)."""
    return getattr(app.state, "tasks", None) is not None


def get_runner(request: Request) -> TaskRunner:
    """Return this process's task runner.

    Raises:
        HTTPException: 501, asynchronous operations are turned off (``server.async_ops``).
    """
    runner: TaskRunner | None = getattr(request.app.state, "tasks", None)
    if runner is None:
        raise HTTPException(501, "Not Implemented")
    return runner


RunnerDep = Annotated[TaskRunner, Depends(get_runner)]


def _writable_branch(state: ApiState, repository: str, branch: str) -> None:
    """Check up front what the synchronous call would refuse first: repository, then branch."""
    repo = state.catalog.get_repository(repository)
    if repo.read_only:
        raise RepositoryReadOnlyError(repo.id)
    state.catalog.get_branch(repository, branch)


def _describer(state: ApiState, repository: str) -> DescribeError:
    return lambda exc: describe_error(exc, state.catalog, repository)


def _conflicts(exc: BaseException) -> dict[str, Any] | None:
    if isinstance(exc, MergeConflictError):
        return {"conflicts": exc.paths[:CONFLICTS_LISTED]}
    return None


def _task(
    state: ApiState,
    runner: TaskRunner,
    task_id: str,
    operation: str,
    repository: str,
    scope: Mapping[str, str],
) -> Task:
    """Return the task ``task_id`` if it is the ``operation`` on this target.

    Raises:
        RepositoryNotFoundError: no such repository.
        TaskNotFoundError: no such task here (another target's task is not shown either).
    """
    state.catalog.get_repository(repository)
    task = runner.store.status(task_id)
    if task.operation != operation or task.repository != repository or task.scope != scope:
        raise TaskNotFoundError(task_id)
    return task


def _status_fields(task: Task) -> dict[str, Any]:
    fields: dict[str, Any] = {
        "task_id": task.id,
        "completed": task.done,
        "update_time": datetime.fromtimestamp(task.updated, tz=UTC),
    }
    if task.error is not None:
        fields["error"] = TaskError(message=task.error, **(task.details or {}))
        fields["status_code"] = task.status_code
    return fields


@router.post(_COMMIT, status_code=202, response_model=TaskCreation)
def commit_async(
    repository: str,
    branch: str,
    body: CommitCreation,
    state: StateDep,
    caller: CallerDep,
    runner: RunnerDep,
    source_metarange: str | None = None,
) -> TaskCreation:
    """Start committing the branch's staged changes; answer the task's ID at once."""
    caller.require(Permission(Action.CREATE_COMMIT, branch_arn(repository, branch)))
    if source_metarange:
        raise InvalidValueError("commit: source_metarange is not supported")
    _writable_branch(state, repository, branch)

    def work() -> dict[str, Any]:
        made = branches.commit(
            repository=repository,
            branch=branch,
            body=body,
            state=state,
            caller=caller,
            source_metarange=source_metarange,
        )
        return made.model_dump(mode="json")

    task = runner.submit(
        "commit",
        repository,
        {"branch": branch},
        work,
        _describer(state, repository),
        id_prefix=COMMIT_TASK_PREFIX,
    )
    return TaskCreation(id=task.id)


@router.get(_COMMIT + "/{id}/status", response_model=CommitAsyncStatus)
def commit_async_status(
    repository: str, branch: str, id: str, state: StateDep, caller: CallerDep, runner: RunnerDep
) -> CommitAsyncStatus:
    """Return an asynchronous commit's status; once done, the commit or the error."""
    caller.require(Permission(Action.CREATE_COMMIT, branch_arn(repository, branch)))
    task = _task(state, runner, id, "commit", repository, {"branch": branch})
    result = Commit.model_validate(task.result) if task.result is not None else None
    return CommitAsyncStatus(**_status_fields(task), result=result)


@router.post(_MERGE, status_code=202, response_model=TaskCreation)
def merge_async(
    repository: str,
    sourceRef: str,
    destinationBranch: str,
    state: StateDep,
    caller: CallerDep,
    runner: RunnerDep,
    body: Merge | None = None,
) -> TaskCreation:
    """Start merging a ref into a branch; answer the task's ID at once."""
    _may_merge(caller, repository, destinationBranch)
    merge = body or Merge()
    MergeStrategy.parse(merge.strategy or None)
    _writable_branch(state, repository, destinationBranch)
    state.catalog.resolve_ref(repository, sourceRef)

    def work() -> dict[str, Any]:
        made = refs.merge_into_branch(
            repository=repository,
            sourceRef=sourceRef,
            destinationBranch=destinationBranch,
            state=state,
            caller=caller,
            body=merge,
        )
        return made.model_dump(mode="json")

    task = runner.submit(
        "merge",
        repository,
        {"source": sourceRef, "destination": destinationBranch},
        work,
        _describer(state, repository),
        id_prefix=MERGE_TASK_PREFIX,
        details=_conflicts,
    )
    return TaskCreation(id=task.id)


@router.get(_MERGE + "/{id}/status", response_model=MergeAsyncStatus)
def merge_async_status(
    repository: str,
    sourceRef: str,
    destinationBranch: str,
    id: str,
    state: StateDep,
    caller: CallerDep,
    runner: RunnerDep,
) -> MergeAsyncStatus:
    """Return an asynchronous merge's status; once done, the merge reference or the error."""
    _may_merge(caller, repository, destinationBranch)
    scope = {"source": sourceRef, "destination": destinationBranch}
    task = _task(state, runner, id, "merge", repository, scope)
    result = MergeResult.model_validate(task.result) if task.result is not None else None
    return MergeAsyncStatus(**_status_fields(task), result=result)


def _may_merge(caller: Caller, repository: str, destination: str) -> None:
    # the synchronous merge's permission
    caller.require(Permission(Action.CREATE_COMMIT, branch_arn(repository, destination)))
