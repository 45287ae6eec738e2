"""Mirror repositories: create one, import commit records, move branch heads and tags by CAS.

These endpoints are how ``lakemirror replicant`` fills a read-only mirror repository. Each needs
``fs:MirrorRepository`` on the repository (the built-in ``Replicator`` policy grants it); every
one except the creation refuses a repository that is not read-only (400). Ordinary writes to a
mirror stay refused (403), whoever asks. Creating a mirror repository is recorded in the audit
trail as any repository creation (``repository.create``, with its ``mirror_of``).
"""

from __future__ import annotations

from fastapi import APIRouter, Response

from mirror.api.audit import AuditDep
from mirror.api.convert import commit_model, repository_model
from mirror.api.deps import Caller, CallerDep, StateDep
from mirror.api.errors import NotAMirrorError
from mirror.api.models import (
    Commit,
    MirrorBranchUpdate,
    MirrorRepositoryCreation,
    MirrorTagCreation,
    Ref,
    Repository,
)
from mirror.api.routers.repositories import create_audited
from mirror.api.routing import LakeFSRoute
from mirror.auth.permissions import Action, Permission, repository_arn
from mirror.core.catalog import Catalog
from mirror.core.errors import TagExistsError
from mirror.core.ids import CommitID, MetaRangeID
from mirror.core.model import Commit as CoreCommit
from mirror.core.model import Repository as CoreRepository

__all__ = ["router"]

router = APIRouter(route_class=LakeFSRoute, tags=["mirrors"])

_MIRROR = "/repositories/{repository}/mirror"


def _mirror(catalog: Catalog, caller: Caller, repository: str) -> CoreRepository:
    """Authorize the caller on ``repository`` and return it if it is a mirror.

    Raises:
        PermissionDeniedError: the caller may not mirror this repository.
        RepositoryNotFoundError: no such repository.
        NotAMirrorError: the repository is not read-only.
    """
    caller.require(Permission(Action.MIRROR_REPOSITORY, repository_arn(repository)))
    repo = catalog.get_repository(repository)
    if not repo.read_only:
        raise NotAMirrorError(repo.id)
    return repo


@router.post("/mirror/repositories", status_code=201, response_model=Repository)
def create_mirror_repository(
    body: MirrorRepositoryCreation, state: StateDep, caller: CallerDep, audit: AuditDep
) -> Repository:
    """Create a read-only repository that mirrors ``mirror_of`` (free text, e.g. "region/repo").

    The repository is bare: it has no commit and no branch, so it never shows a commit its
    source lacks. Its default branch appears when the replicant first creates it (``PUT
    .../mirror/branches/{branch}`` with ``expected: null``) at a validated source commit.
    """
    caller.require(Permission(Action.MIRROR_REPOSITORY, repository_arn(body.name)))
    repo = create_audited(
        state,
        audit,
        body.name,
        body.storage_namespace,
        body.default_branch or "main",
        read_only=True,
        bare=True,
        mirror_of=body.mirror_of,
    )
    return repository_model(repo)


@router.post(_MIRROR + "/commits", status_code=201, response_model=Commit)
def import_commit(repository: str, body: Commit, state: StateDep, caller: CallerDep) -> Commit:
    """Add a commit record of the source repository, as its ``GET .../commits/{id}`` returns it.

    The ID must match the content (400) and every parent must be there already (404); importing
    a commit that is there already succeeds again.
    """
    catalog = state.catalog
    _mirror(catalog, caller, repository)
    commit = CoreCommit(
        id=CommitID(body.id),
        committer=body.committer,
        message=body.message,
        metarange_id=MetaRangeID(body.meta_range_id),
        creation_date=body.creation_date,
        parents=tuple(CommitID(p) for p in body.parents),
        metadata=dict(body.metadata),
        generation=body.generation,
        version=body.version,
    )
    catalog.import_commit(repository, commit, force=True)
    return commit_model(catalog.get_commit(repository, commit.id))


@router.put(_MIRROR + "/branches/{branch}", response_model=Ref)
def set_mirror_branch(
    repository: str, branch: str, body: MirrorBranchUpdate, state: StateDep, caller: CallerDep
) -> Ref:
    """Point a mirror branch at ``commit_id`` if its head is ``expected`` (``null``: create it).

    A head other than ``expected`` (or an existing branch, for ``null``) answers 412 naming both.
    """
    catalog = state.catalog
    _mirror(catalog, caller, repository)
    moved = catalog.set_branch_head(repository, branch, body.commit_id, body.expected, force=True)
    return Ref(id=moved.id, commit_id=moved.commit_id)


@router.delete(_MIRROR + "/branches/{branch}", status_code=204, response_class=Response)
def delete_mirror_branch(
    repository: str, branch: str, state: StateDep, caller: CallerDep
) -> Response:
    """Delete a mirror branch (never the default branch)."""
    catalog = state.catalog
    repo = _mirror(catalog, caller, repository)
    catalog.delete_branch(repository, branch, force=True)
    state.hidden.set(repo, branch, False)
    return Response(status_code=204)


@router.put(_MIRROR + "/tags/{tag}", status_code=201, response_model=Ref)
def set_mirror_tag(
    repository: str, tag: str, body: MirrorTagCreation, state: StateDep, caller: CallerDep
) -> Ref:
    """Create a mirror tag at a commit; again at the same commit succeeds, elsewhere is 409."""
    catalog = state.catalog
    _mirror(catalog, caller, repository)
    target = catalog.get_commit(repository, body.commit_id).id
    try:
        catalog.create_tag(repository, tag, target, force=True)
    except TagExistsError:
        found = catalog.get_tag(repository, tag)
        if found != target:
            raise TagExistsError(
                f"tag {tag!r} already exists at commit {found}, not {target}"
            ) from None
    return Ref(id=tag, commit_id=target)


@router.delete(_MIRROR + "/tags/{tag}", status_code=204, response_class=Response)
def delete_mirror_tag(repository: str, tag: str, state: StateDep, caller: CallerDep) -> Response:
    """Delete a mirror tag."""
    catalog = state.catalog
    _mirror(catalog, caller, repository)
    catalog.delete_tag(repository, tag, force=True)
    return Response(status_code=204)
