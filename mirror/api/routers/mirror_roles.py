"""Repository roles: demote a source to a mirror, promote a mirror, preserve diverged commits.

These endpoints move the writable role of a repository between regions (planned switchover,
forced failover, fail-back). Each needs ``fs:MirrorRepository`` on the repository (the built-in
``Replicator`` policy grants it). A demotion answers only once every write the server will ever
acknowledge on the repository is in its branch heads (see :mod:`mirror.core.roles`).
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter
from fastapi.responses import JSONResponse

from mirror.api.convert import repository_model
from mirror.api.deps import CallerDep, StateDep
from mirror.api.models import MirrorDemotion, MirrorPreservation, MirrorPromotion, Ref, Repository
from mirror.api.routing import LakeFSRoute
from mirror.auth.permissions import Action, Permission, repository_arn
from mirror.core.ids import CommitID, MetaRangeID
from mirror.core.model import Commit as CoreCommit
from mirror.core.model import Repository as CoreRepository

__all__ = ["router"]

router = APIRouter(route_class=LakeFSRoute, tags=["mirrors"])

_MIRROR = "/repositories/{repository}/mirror"


def _role(repo: CoreRepository) -> JSONResponse:
    """Answer with the repository, ``mirror_of`` included even when it is ``null``."""
    return JSONResponse(repository_model(repo).model_dump())


@router.post(_MIRROR + "/demote", response_model=Repository)
def demote_repository(
    repository: str, body: MirrorDemotion, state: StateDep, caller: CallerDep
) -> JSONResponse:
    """Make a repository a read-only mirror of ``mirror_of``; from now on writes answer 403.

    Demoting a repository that is read-only already answers 409, unless ``mirror_of`` is the
    same (a retry, 200).
    """
    caller.require(Permission(Action.MIRROR_REPOSITORY, repository_arn(repository)))
    return _role(state.catalog.demote_repository(repository, body.mirror_of))


@router.post(_MIRROR + "/promote", response_model=Repository)
def promote_repository(
    repository: str, body: MirrorPromotion, state: StateDep, caller: CallerDep
) -> JSONResponse:
    """Make a mirror writable (``mirror_of`` cleared), keeping ``promotion`` as its record.

    A repository that is not read-only answers 409 "repository '<repo>' is not a mirror".
    """
    caller.require(Permission(Action.MIRROR_REPOSITORY, repository_arn(repository)))
    return _role(state.catalog.promote_repository(repository, body.promotion))


@router.get(_MIRROR + "/promotion")
def get_promotion(repository: str, state: StateDep, caller: CallerDep) -> dict[str, Any]:
    """Return the newest promotion record, as it was given (404 if never promoted)."""
    caller.require(Permission(Action.MIRROR_REPOSITORY, repository_arn(repository)))
    return state.catalog.get_promotion(repository)


@router.post(_MIRROR + "/preserve", status_code=201, response_model=Ref)
def preserve_branch(
    repository: str, body: MirrorPreservation, state: StateDep, caller: CallerDep
) -> Ref:
    """Import commit records (parents first, IDs verified) and create a new branch at ``head``.

    Works on a writable or a read-only repository; an existing branch answers 409.
    """
    caller.require(Permission(Action.MIRROR_REPOSITORY, repository_arn(repository)))
    records = [
        CoreCommit(
            id=CommitID(c.id),
            committer=c.committer,
            message=c.message,
            metarange_id=MetaRangeID(c.meta_range_id),
            creation_date=c.creation_date,
            parents=tuple(CommitID(p) for p in c.parents),
            metadata=dict(c.metadata),
            generation=c.generation,
            version=c.version,
        )
        for c in body.commits
    ]
    branch = state.catalog.preserve_branch(repository, body.branch, body.head, records)
    return Ref(id=branch.id, commit_id=branch.commit_id)
