"""Repositories: create, list, get, delete, metadata.

Creations and deletions are recorded in the audit trail (``repository.create``,
``repository.delete``, with the repository's namespace, default branch and role).
"""

from __future__ import annotations

import re

from fastapi import APIRouter, Response
from pydantic import BaseModel
from starlette.concurrency import run_in_threadpool

from mirror.api.audit import AuditDep
from mirror.api.convert import repository_model
from mirror.api.deps import ApiState, Caller, CallerDep, StateDep, run_read
from mirror.api.models import Repository, RepositoryCreation, RepositoryList
from mirror.api.paging import page
from mirror.api.routing import AfterQuery, AmountQuery, LakeFSRoute, PrefixQuery
from mirror.audit import AuditRecorder, kinds
from mirror.auth.permissions import (
    ALL_RESOURCES,
    Action,
    Permission,
    namespace_arn,
    repository_arn,
)
from mirror.block.errors import InvalidNamespaceError
from mirror.block.resolver import split_namespace
from mirror.core.model import Repository as CoreRepository
from mirror.core.repository_metadata import RepositoryMetadataStore
from mirror.errors import InvalidValueError

__all__ = ["audited_repository", "check_namespace", "router"]

router = APIRouter(route_class=LakeFSRoute, tags=["repositories"])

_LOCAL_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]*(/[A-Za-z0-9_][A-Za-z0-9_.-]*)*")
_RESERVED = ("kv.sqlite",)


def check_namespace(state: ApiState, namespace: str) -> None:
    """Refuse storage namespaces this server does not serve.

    ``local://<name>`` must be a relative name, resolved under the server's data directory, that
    is not taken by a file of the server's own.

    Raises:
        InvalidNamespaceError: the namespace is malformed or not allowed.
    """
    scheme, rest = split_namespace(namespace)
    if scheme not in state.namespace_schemes:
        allowed = ", ".join(f"{s}://" for s in sorted(state.namespace_schemes))
        raise InvalidNamespaceError(
            f"storage namespace {namespace!r}: scheme {scheme!r} is not served here (use {allowed})"
        )
    if scheme != "local":
        return
    if state.local_root is None or not _LOCAL_NAME.fullmatch(rest) or ".." in rest.split("/"):
        raise InvalidNamespaceError(
            f"storage namespace {namespace!r}: use local://<name>, a relative name of letters, "
            "digits, '_', '-', '.' and '/' (it lives under the server's data directory)"
        )
    first = rest.split("/", 1)[0]
    target = state.local_root / rest
    if first.startswith(_RESERVED) or (target.exists() and not target.is_dir()):
        raise InvalidNamespaceError(f"storage namespace {namespace!r} is reserved")


def audited_repository(repo: CoreRepository) -> dict[str, object]:
    """Return what the audit trail keeps of a repository: where it lives and its role."""
    return {
        "storage_namespace": repo.storage_namespace,
        "default_branch": repo.default_branch,
        "read_only": repo.read_only,
        "mirror_of": repo.mirror_of,
    }


def create_audited(
    state: ApiState,
    audit: AuditRecorder,
    name: str,
    storage_namespace: str,
    default_branch: str,
    *,
    read_only: bool,
    bare: bool,
    mirror_of: str | None = None,
    storage_id: str | None = None,
) -> CoreRepository:
    """Create a repository (as ``catalog.create_repository``) and record its audit event.

    The event holds what was asked, then what was made; a refused creation (an unknown
    ``storage_id``, a namespace :func:`check_namespace` refuses, a name taken) is recorded too.
    """
    asked: dict[str, object] = {
        "storage_namespace": storage_namespace,
        "default_branch": default_branch,
        "read_only": read_only,
    }
    if mirror_of is not None:
        asked["mirror_of"] = mirror_of
    with audit.change(
        kinds.REPOSITORY_CREATE,
        target={"repository": name},
        after=asked,
        details={"bare": bare},
        status=201,
    ) as change:
        if storage_id:
            raise InvalidValueError(f'unknown storage_id {storage_id!r}: use ""')
        check_namespace(state, storage_namespace)
        repo = state.catalog.create_repository(
            name,
            storage_namespace,
            default_branch,
            read_only=read_only,
            mirror_of=mirror_of,
            bare=bare,
        )
        change.after = audited_repository(repo)
    return repo


@router.post("/repositories", status_code=201, response_model=Repository)
def create_repository(
    body: RepositoryCreation,
    state: StateDep,
    caller: CallerDep,
    audit: AuditDep,
    bare: bool = False,
) -> Repository:
    """Create a repository with an initial commit on its default branch (``bare``: neither)."""
    caller.require(
        Permission(Action.CREATE_REPOSITORY, repository_arn(body.name)),
        Permission(Action.ATTACH_STORAGE_NAMESPACE, namespace_arn(body.storage_namespace)),
    )
    repo = create_audited(
        state,
        audit,
        body.name,
        body.storage_namespace,
        body.default_branch or "main",
        read_only=body.read_only,
        bare=bare,
        storage_id=body.storage_id,
    )
    return repository_model(repo)


@router.get("/repositories", response_model=RepositoryList)
async def list_repositories(
    state: StateDep,
    caller: CallerDep,
    prefix: PrefixQuery = "",
    after: AfterQuery = "",
    amount: AmountQuery = 0,
) -> RepositoryList:
    """List repositories by name."""
    args = (state, caller, prefix, after, amount)
    if state.inline_reads:
        # the KV's records only, one page of them: quicker than a hop to a worker thread
        return _list_repositories(*args)
    return await run_in_threadpool(_list_repositories, *args)


def _list_repositories(
    state: ApiState, caller: Caller, prefix: str, after: str, amount: int
) -> RepositoryList:
    caller.require(Permission(Action.LIST_REPOSITORIES, ALL_RESOURCES))
    repos, pagination = page(state.catalog.list_repositories(prefix, after), amount, lambda r: r.id)
    return RepositoryList(pagination=pagination, results=[repository_model(r) for r in repos])


@router.get("/repositories/{repository}", response_model=Repository)
async def get_repository(repository: str, state: StateDep, caller: CallerDep) -> Repository:
    """Return a repository."""
    return await run_read(state, repository, _get_repository, repository, state, caller)


def _get_repository(
    repo: str | CoreRepository, repository: str, state: ApiState, caller: Caller
) -> Repository:
    caller.require(Permission(Action.READ_REPOSITORY, repository_arn(repository)))
    return repository_model(state.catalog.get_repository(repo))


@router.delete("/repositories/{repository}", status_code=204, response_class=Response)
def delete_repository(
    repository: str, state: StateDep, caller: CallerDep, audit: AuditDep, force: bool = False
) -> Response:
    """Delete a repository (``force`` also deletes a read-only one)."""
    caller.require(Permission(Action.DELETE_REPOSITORY, repository_arn(repository)))
    with audit.change(
        kinds.REPOSITORY_DELETE,
        target={"repository": repository},
        details={"force": force},
        status=204,
    ) as change:
        change.before = audited_repository(state.catalog.get_repository(repository))
        state.catalog.delete_repository(repository, force=force)
    return Response(status_code=204)


@router.get("/repositories/{repository}/metadata", response_model=dict[str, str])
def get_repository_metadata(repository: str, state: StateDep, caller: CallerDep) -> dict[str, str]:
    """Return the repository's metadata map."""
    caller.require(Permission(Action.READ_REPOSITORY, repository_arn(repository)))
    repo = state.catalog.get_repository(repository)
    return RepositoryMetadataStore(state.catalog.kv).get(repo)


class RepositoryMetadataSet(BaseModel):
    """``POST /repositories/{r}/metadata`` body: the keys to set."""

    metadata: dict[str, str]


class RepositoryMetadataKeys(BaseModel):
    """``DELETE /repositories/{r}/metadata`` body: the keys to remove."""

    keys: list[str]


@router.post("/repositories/{repository}/metadata", status_code=204, response_class=Response)
def set_repository_metadata(
    repository: str, body: RepositoryMetadataSet, state: StateDep, caller: CallerDep
) -> Response:
    """Set keys of the repository's metadata, keeping the others (403 on a read-only one)."""
    caller.require(Permission(Action.UPDATE_REPOSITORY, repository_arn(repository)))
    repo = state.catalog.get_repository(repository)
    RepositoryMetadataStore(state.catalog.kv).set(repo, body.metadata)
    return Response(status_code=204)


@router.delete("/repositories/{repository}/metadata", status_code=204, response_class=Response)
def delete_repository_metadata(
    repository: str, body: RepositoryMetadataKeys, state: StateDep, caller: CallerDep
) -> Response:
    """Remove keys of the repository's metadata; missing keys are ignored."""
    caller.require(Permission(Action.UPDATE_REPOSITORY, repository_arn(repository)))
    repo = state.catalog.get_repository(repository)
    RepositoryMetadataStore(state.catalog.kv).delete(repo, body.keys)
    return Response(status_code=204)
