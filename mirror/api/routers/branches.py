"""Branches: list, create, get, delete, resets; commit, uncommitted diff, revert, cherry-pick.

A hard reset moves a branch to any commit, dropping the commits after it from the branch's
history: it is recorded in the audit trail (``branch.hard_reset``, the head before and after).
"""

from __future__ import annotations

from fastapi import APIRouter, Request, Response
from fastapi.responses import PlainTextResponse
from starlette.concurrency import run_in_threadpool

from mirror.api.audit import AuditDep
from mirror.api.convert import commit_model, diff_model, model_response
from mirror.api.deps import ApiState, Caller, CallerDep, StateDep, run_read
from mirror.api.fast_reads import BODY, FastRoutes, QueryParam, QueryValues
from mirror.api.listing import CommonPrefix, group_paths
from mirror.api.models import (
    BranchCreation,
    CherryPickCreation,
    Commit,
    CommitCreation,
    Diff,
    DiffList,
    Ref,
    RefList,
    ResetCreation,
    RevertCreation,
)
from mirror.api.paging import page
from mirror.api.routing import (
    AfterQuery,
    AmountQuery,
    DelimiterQuery,
    LakeFSRoute,
    PrefixQuery,
)
from mirror.audit import kinds
from mirror.auth.permissions import Action, Permission, branch_arn, repository_arn
from mirror.core.model import DiffEntry, Repository
from mirror.errors import InvalidValueError, LakeMirrorError

__all__ = ["FAST_ROUTES", "diff_rows", "router"]

router = APIRouter(route_class=LakeFSRoute, tags=["branches"])

_BRANCH = "/repositories/{repository}/branches/{branch}"


def diff_rows(item: DiffEntry | CommonPrefix) -> Diff:
    """Return the wire row of a difference or of a common prefix."""
    if isinstance(item, CommonPrefix):
        return Diff(type="prefix_changed", path=str(item), path_type="common_prefix")
    return diff_model(item)


def _row_path(item: DiffEntry | CommonPrefix) -> str:
    return str(item) if isinstance(item, CommonPrefix) else item.path


@router.get("/repositories/{repository}/branches", response_model=RefList)
async def list_branches(
    repository: str,
    state: StateDep,
    caller: CallerDep,
    prefix: PrefixQuery = "",
    after: AfterQuery = "",
    amount: AmountQuery = 0,
    show_hidden: bool = False,
) -> RefList:
    """List branches by name (hidden ones only with ``show_hidden``)."""
    args = (repository, state, caller, prefix, after, amount, show_hidden)
    return await run_read(state, repository, _list_branches, *args)


def _list_branches(
    repo: str | Repository,
    repository: str,
    state: ApiState,
    caller: Caller,
    prefix: str,
    after: str,
    amount: int,
    show_hidden: bool,
) -> RefList:
    caller.require(Permission(Action.LIST_BRANCHES, repository_arn(repository)))
    record = state.catalog.get_repository(repo)
    branches = state.catalog.list_branches(record, prefix, after)
    if not show_hidden:
        branches = (b for b in branches if not state.hidden.is_hidden(record, b.id))
    found, pagination = page(branches, amount, lambda b: b.id)
    return RefList(
        pagination=pagination, results=[Ref(id=b.id, commit_id=b.commit_id) for b in found]
    )


@router.post(
    "/repositories/{repository}/branches",
    status_code=201,
    response_class=PlainTextResponse,
    responses={201: {"content": {"text/plain": {"schema": {"type": "string"}}}}},
)
def create_branch(
    repository: str, body: BranchCreation, state: StateDep, caller: CallerDep
) -> PlainTextResponse:
    """Create a branch at a ref; answer its commit ID as text."""
    caller.require(Permission(Action.CREATE_BRANCH, branch_arn(repository, body.name)))
    branch = state.catalog.create_branch(repository, body.name, body.source)
    state.hidden.set(state.catalog.get_repository(repository), branch.id, body.hidden)
    return PlainTextResponse(branch.commit_id, status_code=201)


@router.get(_BRANCH, response_model=Ref)
async def get_branch(repository: str, branch: str, state: StateDep, caller: CallerDep) -> Ref:
    """Return a branch and its head commit."""
    return await run_read(state, repository, _get_branch, repository, branch, state, caller)


def _get_branch(
    repo: str | Repository, repository: str, branch: str, state: ApiState, caller: Caller
) -> Ref:
    caller.require(Permission(Action.READ_BRANCH, branch_arn(repository, branch)))
    found = state.catalog.get_branch(repo, branch)
    return Ref(id=found.id, commit_id=found.commit_id)


@router.delete(_BRANCH, status_code=204, response_class=Response)
def delete_branch(
    repository: str, branch: str, state: StateDep, caller: CallerDep, force: bool = False
) -> Response:
    """Delete a branch and its staged changes."""
    caller.require(Permission(Action.DELETE_BRANCH, branch_arn(repository, branch)))
    state.catalog.delete_branch(repository, branch)
    state.hidden.set(state.catalog.get_repository(repository), branch, False)
    return Response(status_code=204)


@router.put(_BRANCH, status_code=204, response_class=Response)
def reset_branch(
    repository: str, branch: str, body: ResetCreation, state: StateDep, caller: CallerDep
) -> Response:
    """Drop staged changes: all of them, one object, or those under a prefix."""
    caller.require(Permission(Action.REVERT_BRANCH, branch_arn(repository, branch)))
    if body.type == "reset":
        state.catalog.reset_branch(repository, branch)
    else:
        if body.path is None:
            raise InvalidValueError(f"reset of type {body.type!r} needs a path")
        state.catalog.get_branch(repository, branch)
        state.catalog.reset_objects(repository, branch, body.path, exact=body.type == "object")
    return Response(status_code=204)


def _head(state: ApiState, repository: str, branch: str) -> str | None:
    """Return a branch's head for the audit trail; ``None`` when it cannot be read.

    Never raises: the change itself answers for a missing or read-only repository or branch.
    """
    try:
        return state.catalog.get_branch(repository, branch).commit_id
    except LakeMirrorError:
        return None


@router.put(f"{_BRANCH}/hard_reset", status_code=204, response_class=Response)
def hard_reset_branch(
    repository: str,
    branch: str,
    ref: str,
    state: StateDep,
    caller: CallerDep,
    audit: AuditDep,
    force: bool = False,
) -> Response:
    """Point the branch at ``ref``'s commit; it must have no uncommitted changes."""
    caller.require(Permission(Action.REVERT_BRANCH, branch_arn(repository, branch)))
    with audit.change(
        kinds.BRANCH_HARD_RESET,
        target={"repository": repository, "branch": branch},
        after={"ref": ref},
        status=204,
    ) as change:
        change.before = {"commit_id": _head(state, repository, branch)}
        moved = state.catalog.hard_reset_branch(repository, branch, ref)
        change.after = {"ref": ref, "commit_id": moved.commit_id}
    return Response(status_code=204)


@router.post(f"{_BRANCH}/commits", status_code=201, response_model=Commit, name="commit")
def commit_route(
    repository: str,
    branch: str,
    body: CommitCreation,
    state: StateDep,
    caller: CallerDep,
    source_metarange: str | None = None,
) -> Response:
    """Commit the branch's staged changes."""
    made = commit(repository, branch, body, state, caller, source_metarange)
    # answered as bytes: a returned model is validated again, on one more worker-thread hop
    return model_response(made, 201)


async def _fast_commit(
    state: ApiState, request: Request, caller: Caller, at: dict[str, str], query: QueryValues
) -> Response:
    body: CommitCreation = query[BODY]
    args = (at["repository"], at["branch"], body, state, caller, query["source_metarange"])
    made = await run_in_threadpool(commit, *args)
    return model_response(made, 201)


FAST_ROUTES: FastRoutes = {
    commit_route: ((QueryParam("source_metarange", str, None),), _fast_commit, CommitCreation),
}
"""The plain commits :func:`~mirror.api.fast_reads.install_fast_reads` serves (see there)."""


def commit(
    repository: str,
    branch: str,
    body: CommitCreation,
    state: ApiState,
    caller: Caller,
    source_metarange: str | None = None,
) -> Commit:
    """Commit the branch's staged changes; return the new commit (also for asynchronous commits)."""
    caller.require(Permission(Action.CREATE_COMMIT, branch_arn(repository, branch)))
    if source_metarange:
        raise InvalidValueError("commit: source_metarange is not supported")
    result = state.catalog.commit(
        repository,
        branch,
        body.message,
        committer=caller.id,
        metadata=body.metadata,
        allow_empty=body.allow_empty,
        date=body.date,
    )
    return commit_model(result.commit)


@router.get(f"{_BRANCH}/diff", response_model=DiffList)
def diff_branch(
    repository: str,
    branch: str,
    state: StateDep,
    caller: CallerDep,
    after: AfterQuery = "",
    amount: AmountQuery = 0,
    prefix: PrefixQuery = "",
    delimiter: DelimiterQuery = "",
) -> DiffList:
    """List the branch's uncommitted changes by path."""
    caller.require(Permission(Action.LIST_OBJECTS, repository_arn(repository)))
    entries = state.catalog.diff_uncommitted(repository, branch, prefix)
    rows = group_paths(entries, lambda e: e.path, prefix=prefix, delimiter=delimiter, after=after)
    found, pagination = page(rows, amount, _row_path)
    return DiffList(pagination=pagination, results=[diff_rows(r) for r in found])


@router.post(f"{_BRANCH}/revert", status_code=204, response_class=Response)
def revert(
    repository: str, branch: str, body: RevertCreation, state: StateDep, caller: CallerDep
) -> Response:
    """Commit the inverse of a commit's changes onto the branch."""
    caller.require(Permission(Action.REVERT_BRANCH, branch_arn(repository, branch)))
    state.catalog.revert(
        repository,
        branch,
        body.ref,
        parent_number=body.parent_number,
        committer=caller.id,
        allow_empty=body.allow_empty,
    )
    return Response(status_code=204)


@router.post(f"{_BRANCH}/cherry-pick", status_code=201, response_model=Commit)
def cherry_pick(
    repository: str, branch: str, body: CherryPickCreation, state: StateDep, caller: CallerDep
) -> Commit:
    """Apply a commit's changes onto the branch as a new commit."""
    caller.require(Permission(Action.CREATE_COMMIT, branch_arn(repository, branch)))
    result = state.catalog.cherry_pick(
        repository, branch, body.ref, parent_number=body.parent_number or 0, committer=caller.id
    )
    return commit_model(result.commit)
