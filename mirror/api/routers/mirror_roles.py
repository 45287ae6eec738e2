"""Repository roles: demote a source to a mirror, promote a mirror, preserve diverged commits.

These endpoints move the writable role of a repository between regions (planned switchover,
forced failover, fail-back). Each needs ``fs:MirrorRepository`` on the repository (the built-in
``Replicator`` policy grants it). A demotion answers only once every write the server will ever
acknowledge on the repository is in its branch heads (see :mod:`mirror.core.roles`).

Demotions and promotions are recorded in the audit trail (``repository.demote``,
``repository.promote``), refused ones too, with the repository's role before and after.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter
from fastapi.responses import JSONResponse

from mirror.api.audit import AuditDep
from mirror.api.convert import repository_model
from mirror.api.deps import CallerDep, StateDep
from mirror.api.models import MirrorDemotion, MirrorPreservation, MirrorPromotion, Ref, Repository
from mirror.api.routing import LakeFSRoute
from mirror.audit import kinds
from mirror.auth.permissions import Action, Permission, repository_arn
from mirror.core.ids import CommitID, MetaRangeID
from mirror.core.model import Commit as CoreCommit
from mirror.core.model import Repository as CoreRepository
from mirror.errors import LakeMirrorError

__all__ = ["router"]

router = APIRouter(route_class=LakeFSRoute, tags=["mirrors"])

_MIRROR = "/repositories/{repository}/mirror"


def _role(repo: CoreRepository) -> JSONResponse:
    """Answer with the repository, ``mirror_of`` included even when it is ``null``."""
    return JSONResponse(repository_model(repo).model_dump())


def _role_of(repo: CoreRepository) -> dict[str, object]:
    return {"read_only": repo.read_only, "mirror_of": repo.mirror_of}


def _role_before(state: StateDep, repository: str) -> dict[str, object] | None:
    """Return a repository's role before a change; ``None`` when it cannot be read.

    Never raises: the change itself answers for a missing repository.
    """
    try:
        return _role_of(state.catalog.get_repository(repository))
    except LakeMirrorError:
        return None


@router.post(_MIRROR + "/demote", response_model=Repository)
def demote_repository(
    repository: str, body: MirrorDemotion, state: StateDep, caller: CallerDep, audit: AuditDep
) -> JSONResponse:
    """Make a repository a read-only mirror of ``mirror_of``; from now on writes answer 403.

    Demoting a repository that is read-only already answers 409, unless ``mirror_of`` is the
    same (a retry, 200).
    """
    caller.require(Permission(Action.MIRROR_REPOSITORY, repository_arn(repository)))
    with audit.change(
        kinds.REPOSITORY_DEMOTE,
        target={"repository": repository},
        after={"read_only": True, "mirror_of": body.mirror_of},
    ) as change:
        change.before = _role_before(state, repository)
        demoted = state.catalog.demote_repository(repository, body.mirror_of)
        change.after = _role_of(demoted)
    return _role(demoted)


@router.post(_MIRROR + "/promote", response_model=Repository)
def promote_repository(
    repository: str, body: MirrorPromotion, state: StateDep, caller: CallerDep, audit: AuditDep
) -> JSONResponse:
    """Make a mirror writable (``mirror_of`` cleared), keeping ``promotion`` as its record.

    A repository that is not read-only answers 409 "repository '<repo>' is not a mirror".
    """
    caller.require(Permission(Action.MIRROR_REPOSITORY, repository_arn(repository)))
    with audit.change(
        kinds.REPOSITORY_PROMOTE,
        target={"repository": repository},
        after={"read_only": False, "mirror_of": None},
        # the record's names only: its heads may be many
        details={"promotion_fields": sorted(body.promotion)},
    ) as change:
        change.before = _role_before(state, repository)
        promoted = state.catalog.promote_repository(repository, body.promotion)
        change.after = _role_of(promoted)
    return _role(promoted)


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
