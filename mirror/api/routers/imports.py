"""Import: lakeFS's ``…/branches/{branch}/import`` (start, status, cancel).

``POST`` checks the repository, branch and sources at once and answers 202 with the import's
ID; the import itself runs in the background (:mod:`mirror.imports`), and ``GET`` answers its
status from the KV on any server process. ``DELETE`` cancels it.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from fastapi import APIRouter, Request, Response
from pydantic import BaseModel, ConfigDict

from mirror.api.convert import commit_model
from mirror.api.deps import ApiState, CallerDep, StateDep
from mirror.api.models import Commit, Error
from mirror.api.routing import LakeFSRoute
from mirror.auth.permissions import Action, Permission, branch_arn, namespace_arn, object_arn
from mirror.core.imports import ImportSource
from mirror.core.model import Commit as CoreCommit
from mirror.imports import ImportManager, ImportRecord

__all__ = [
    "IMPORT_CANCEL",
    "IMPORT_FROM_STORAGE",
    "ImportCreation",
    "ImportCreationResponse",
    "ImportStatus",
    "router",
]

router = APIRouter(route_class=LakeFSRoute, tags=["import"])

IMPORT_FROM_STORAGE = "fs:ImportFromStorage"
"""lakeFS's action for reading a storage location to import it."""
IMPORT_CANCEL = "fs:ImportCancel"
"""lakeFS's action for canceling an import."""

_IMPORT = "/repositories/{repository}/branches/{branch}/import"


class _Request(BaseModel):
    model_config = ConfigDict(extra="ignore")


class ImportLocation(_Request):
    """One source: ``common_prefix`` or ``object``, its URI, and where it lands."""

    type: str
    path: str
    destination: str


class ImportCommit(_Request):
    """The import commit's message and metadata (its date is ignored, as in lakeFS)."""

    message: str = ""
    metadata: dict[str, str] | None = None
    date: int | None = None


class ImportCreation(_Request):
    """``POST …/import`` body."""

    paths: list[ImportLocation]
    commit: ImportCommit
    force: bool = False


class ImportCreationResponse(BaseModel):
    """The started import's ID."""

    id: str


class ImportStatus(BaseModel):
    """An import's status."""

    completed: bool
    update_time: datetime
    ingested_objects: int
    metarange_id: str | None = None
    commit: Commit | None = None
    error: Error | None = None


def manager(request: Request, state: ApiState) -> ImportManager:
    """Return the import manager of this process's catalog and task runner."""
    return ImportManager(state.catalog, getattr(request.app.state, "tasks", None))


def _commit_view(commit: CoreCommit) -> dict[str, Any]:
    return commit_model(commit).model_dump(mode="json")


def _status(record: ImportRecord) -> ImportStatus:
    return ImportStatus(
        completed=record.completed,
        update_time=datetime.fromtimestamp(record.update_time, tz=UTC),
        ingested_objects=record.ingested_objects,
        metarange_id=record.metarange_id,
        commit=Commit.model_validate(record.commit) if record.commit is not None else None,
        error=Error(message=record.error) if record.error is not None else None,
    )


@router.post(_IMPORT, status_code=202, response_model=ImportCreationResponse)
def import_start(
    repository: str,
    branch: str,
    body: ImportCreation,
    request: Request,
    state: StateDep,
    caller: CallerDep,
) -> ImportCreationResponse:
    """Start importing the sources into the branch; answer the import's ID at once."""
    needed = [Permission(IMPORT_FROM_STORAGE, namespace_arn(p.path)) for p in body.paths]
    needed += [
        Permission(Action.WRITE_OBJECT, object_arn(repository, p.destination)) for p in body.paths
    ]
    needed.append(Permission(Action.CREATE_COMMIT, branch_arn(repository, branch)))
    caller.require(*needed)
    sources = [ImportSource(p.type, p.path, p.destination) for p in body.paths]
    record = manager(request, state).start(
        repository,
        branch,
        sources,
        committer=caller.id,
        message=body.commit.message,
        metadata=body.commit.metadata,
        commit_view=_commit_view,
    )
    return ImportCreationResponse(id=record.id)


@router.get(_IMPORT, response_model=ImportStatus, response_model_exclude_none=True)
def import_status(
    repository: str, branch: str, id: str, request: Request, state: StateDep, caller: CallerDep
) -> ImportStatus:
    """Return an import's status: progress, then its commit or its error."""
    caller.require(Permission(Action.READ_BRANCH, branch_arn(repository, branch)))
    record = manager(request, state).status(repository, id)
    return _status(record)


@router.delete(_IMPORT, status_code=204, response_class=Response)
def import_cancel(
    repository: str, branch: str, id: str, request: Request, state: StateDep, caller: CallerDep
) -> Response:
    """Cancel a running import (409 ``conflict found`` once it has committed)."""
    caller.require(Permission(IMPORT_CANCEL, branch_arn(repository, branch)))
    manager(request, state).cancel(repository, id)
    return Response(status_code=204)
