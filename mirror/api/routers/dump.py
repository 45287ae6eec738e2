"""Refs dump and restore: lakeFS's ``refs/dump``, ``refs/restore`` and their task forms.

- ``PUT …/refs/dump`` → 201 ``{commits_meta_range_id, tags_meta_range_id,
  branches_meta_range_id}``, also written to ``_lakefs/refs_manifest.json``;
- ``PUT …/refs/restore`` (those IDs and ``force``) → 200 with no body; a repository that is
  not bare answers 400 ``can only restore into a bare repository``;
- ``POST …/dump`` → 202 ``{"id": "DR…"}``; ``GET …/dump?task_id=`` → ``{id, done,
  update_time, error?, refs?}``;
- ``POST …/restore`` → 202 ``{"id": "RR…"}``; ``GET …/restore?task_id=`` → ``{id, done,
  update_time, error?}``.

A task ID is its prefix and 20 nanoid characters; anything else, or a task of another
repository or operation, is 404. Tasks live in the KV (:mod:`mirror.tasks`), so any server
process answers their status. Dumping reads (allowed on mirrors); restoring writes (403 on a
mirror). The permissions are lakeFS's: listing tags, branches and commits to dump, creating
them to restore.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime
from typing import Any

from fastapi import APIRouter, Response
from pydantic import BaseModel

from mirror.api.deps import ApiState, Caller, CallerDep, StateDep
from mirror.api.errors import describe_error
from mirror.api.routers.async_ops import RunnerDep, TaskCreation
from mirror.api.routing import LakeFSRoute
from mirror.auth.permissions import Action, Permission, repository_arn
from mirror.core.dump import RefsDump, dump_refs, require_bare, restore_refs
from mirror.core.errors import RepositoryReadOnlyError
from mirror.core.model import Repository
from mirror.tasks import Task, TaskNotFoundError, TaskRunner

__all__ = [
    "DUMP_TASK_PREFIX",
    "RESTORE_TASK_PREFIX",
    "RefsDumpModel",
    "RefsRestoreModel",
    "RepositoryDumpStatus",
    "RepositoryRestoreStatus",
    "router",
    "task_of",
]

router = APIRouter(route_class=LakeFSRoute, tags=["internal"])

DUMP_TASK_PREFIX = "DR"
"""How dump task IDs start (lakeFS's)."""
RESTORE_TASK_PREFIX = "RR"
"""How restore task IDs start (lakeFS's)."""

_REPO = "/repositories/{repository}"
_TASK_ID = re.compile(r"[A-Za-z0-9_-]{20}")


class RefsDumpModel(BaseModel):
    """The three metaranges of a dump."""

    commits_meta_range_id: str
    tags_meta_range_id: str
    branches_meta_range_id: str


class RefsRestoreModel(RefsDumpModel):
    """What to restore; ``force`` allows a read-only repository that is not a mirror."""

    force: bool = False


class RepositoryRestoreStatus(BaseModel):
    """A restore task's status."""

    id: str
    done: bool
    update_time: datetime
    error: str | None = None


class RepositoryDumpStatus(RepositoryRestoreStatus):
    """A dump task's status; ``refs`` once done."""

    refs: RefsDumpModel | None = None


def _may_dump(caller: Caller, repository: str) -> None:
    arn = repository_arn(repository)
    caller.require(
        Permission(Action.LIST_TAGS, arn),
        Permission(Action.LIST_BRANCHES, arn),
        Permission(Action.LIST_COMMITS, arn),
    )


def _may_restore(caller: Caller, repository: str) -> None:
    arn = repository_arn(repository)
    caller.require(
        Permission(Action.CREATE_TAG, arn),
        Permission(Action.CREATE_BRANCH, arn),
        Permission(Action.CREATE_COMMIT, arn),
    )


def _restorable(state: ApiState, repository: str, force: bool) -> Repository:
    """Check up front what a restore refuses first: the repository, read-only, not bare."""
    repo = state.catalog.get_repository(repository)
    if repo.read_only and (repo.mirror_of or not force):
        raise RepositoryReadOnlyError(repo.id)
    return repo


def _dump_of(body: RefsDumpModel) -> RefsDump:
    return RefsDump(
        body.commits_meta_range_id, body.tags_meta_range_id, body.branches_meta_range_id
    )


def task_of(
    state: ApiState, runner: TaskRunner, task_id: str, prefix: str, operation: str, repository: str
) -> Task:
    """Return the task ``task_id`` if it is ``operation``'s on ``repository``.

    Raises:
        RepositoryNotFoundError: no such repository.
        TaskNotFoundError: not an ID of that shape, or no such task here.
    """
    state.catalog.get_repository(repository)
    if not task_id.startswith(prefix) or not _TASK_ID.fullmatch(task_id[len(prefix) :]):
        raise TaskNotFoundError(task_id)
    task = runner.store.status(task_id)
    if task.operation != operation or task.repository != repository:
        raise TaskNotFoundError(task_id)
    return task


def _status_fields(task: Task) -> dict[str, Any]:
    return {
        "id": task.id,
        "done": task.done,
        "update_time": datetime.fromtimestamp(task.updated, tz=UTC),
        "error": task.error,
    }


@router.put(_REPO + "/refs/dump", status_code=201, response_model=RefsDumpModel)
def dump_refs_sync(repository: str, state: StateDep, caller: CallerDep) -> RefsDumpModel:
    """Dump every commit, tag and branch to three metaranges in the namespace."""
    _may_dump(caller, repository)
    return RefsDumpModel(**dump_refs(state.catalog, repository).to_json())


@router.put(_REPO + "/refs/restore", status_code=200, response_class=Response)
def restore_refs_sync(
    repository: str, body: RefsRestoreModel, state: StateDep, caller: CallerDep
) -> Response:
    """Restore a dump into this bare repository (400 when it is not bare, 403 on a mirror)."""
    _may_restore(caller, repository)
    _restorable(state, repository, body.force)
    restore_refs(state.catalog, repository, _dump_of(body), force=body.force)
    return Response(status_code=200)


@router.post(_REPO + "/dump", status_code=202, response_model=TaskCreation)
def dump_submit(
    repository: str, state: StateDep, caller: CallerDep, runner: RunnerDep
) -> TaskCreation:
    """Start dumping the repository's refs; answer the task's ID at once."""
    _may_dump(caller, repository)
    state.catalog.get_repository(repository)

    def work() -> dict[str, Any]:
        return {"refs": dump_refs(state.catalog, repository).to_json()}

    task = runner.submit(
        "dump",
        repository,
        {},
        work,
        lambda exc: describe_error(exc, state.catalog, repository),
        id_prefix=DUMP_TASK_PREFIX,
    )
    return TaskCreation(id=task.id)


@router.get(_REPO + "/dump", response_model=RepositoryDumpStatus)
def dump_status(
    repository: str, task_id: str, state: StateDep, caller: CallerDep, runner: RunnerDep
) -> RepositoryDumpStatus:
    """Return a dump task's status; once done, the three metarange IDs or the error."""
    _may_dump(caller, repository)
    task = task_of(state, runner, task_id, DUMP_TASK_PREFIX, "dump", repository)
    refs = (task.result or {}).get("refs")
    return RepositoryDumpStatus(
        **_status_fields(task), refs=RefsDumpModel(**refs) if refs is not None else None
    )


@router.post(_REPO + "/restore", status_code=202, response_model=TaskCreation)
def restore_submit(
    repository: str, body: RefsRestoreModel, state: StateDep, caller: CallerDep, runner: RunnerDep
) -> TaskCreation:
    """Start restoring a dump into this bare repository; answer the task's ID at once.

    What the restore would refuse first is refused here already: 403 on a mirror, 400 when
    the repository is not bare.
    """
    _may_restore(caller, repository)
    require_bare(state.catalog, _restorable(state, repository, body.force))
    dump = _dump_of(body)

    def work() -> dict[str, Any]:
        restore_refs(state.catalog, repository, dump, force=body.force)
        return {}

    task = runner.submit(
        "restore",
        repository,
        {},
        work,
        lambda exc: describe_error(exc, state.catalog, repository),
        id_prefix=RESTORE_TASK_PREFIX,
    )
    return TaskCreation(id=task.id)


@router.get(_REPO + "/restore", response_model=RepositoryRestoreStatus)
def restore_status(
    repository: str, task_id: str, state: StateDep, caller: CallerDep, runner: RunnerDep
) -> RepositoryRestoreStatus:
    """Return a restore task's status; once done, the error if it failed."""
    _may_restore(caller, repository)
    task = task_of(state, runner, task_id, RESTORE_TASK_PREFIX, "restore", repository)
    return RepositoryRestoreStatus(**_status_fields(task))
