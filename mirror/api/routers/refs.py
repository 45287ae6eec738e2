"""Refs: commits, log, diff between refs, merge."""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from datetime import datetime
from typing import Annotated, Literal

from fastapi import APIRouter, Query
from starlette.concurrency import run_in_threadpool

from mirror.api.convert import commit_model
from mirror.api.deps import ApiState, Caller, CallerDep, StateDep, run_read
from mirror.api.listing import CommonPrefix, group_paths, under_prefix
from mirror.api.models import Commit, CommitList, DiffList, Merge, MergeResult, Pagination
from mirror.api.paging import MAX_PER_PAGE, page, page_size
from mirror.api.routers.branches import diff_rows
from mirror.api.routing import (
    AfterQuery,
    AmountQuery,
    DelimiterQuery,
    LakeFSRoute,
    PrefixQuery,
)
from mirror.auth.permissions import Action, Permission, branch_arn, repository_arn
from mirror.core.catalog import Catalog
from mirror.core.model import Commit as CoreCommit
from mirror.core.model import DiffEntry, Repository
from mirror.core.resolve import require_commit_ref
from mirror.errors import InvalidValueError

__all__ = ["router"]

router = APIRouter(route_class=LakeFSRoute, tags=["refs", "commits"])

_REPO = "/repositories/{repository}"


@router.get(_REPO + "/commits/{commitId}", response_model=Commit)
async def get_commit(repository: str, commitId: str, state: StateDep, caller: CallerDep) -> Commit:
    """Return the commit a ref expression resolves to."""
    return await run_read(state, repository, _get_commit, repository, commitId, state, caller)


def _get_commit(
    repo: str | Repository, repository: str, commitId: str, state: ApiState, caller: Caller
) -> Commit:
    caller.require(Permission(Action.READ_COMMIT, repository_arn(repository)))
    require_commit_ref(commitId)
    resolved = state.catalog.resolve_ref(repo, commitId)
    return commit_model(state.catalog.get_commit(repo, resolved.commit_id))


def _touches(
    catalog: Catalog,
    repository: str,
    commit: CoreCommit,
    objects: list[str],
    prefixes: list[str],
) -> bool:
    """Return whether ``commit`` changed one of ``objects`` or something under ``prefixes``."""
    if commit.parents:
        changes: Iterator[str] = (
            d.path for d in catalog.diff(repository, commit.parents[0], commit.id)
        )
    else:
        changes = (o.path for o in catalog.iter_objects(repository, commit.id))
    wanted = set(objects)
    return any(p in wanted or p.startswith(tuple(prefixes)) for p in changes)


def _since(value: str | None) -> int | None:
    if not value:
        return None
    try:
        return int(datetime.fromisoformat(value).timestamp())
    except ValueError as exc:
        raise InvalidValueError(f"invalid since {value!r}: use an RFC 3339 date-time") from exc


@router.get(_REPO + "/refs/{ref}/commits", response_model=CommitList)
async def log_commits(
    repository: str,
    ref: str,
    state: StateDep,
    caller: CallerDep,
    after: AfterQuery = "",
    amount: AmountQuery = 0,
    objects: Annotated[list[str] | None, Query()] = None,
    prefixes: Annotated[list[str] | None, Query()] = None,
    limit: bool = False,
    first_parent: bool = False,
    since: str | None = None,
    stop_at: str | None = None,
) -> CommitList:
    """List the history of a ref, newest first (``after``: a commit ID to skip past)."""
    args = (repository, ref, state, caller, after, amount, objects or [], prefixes or [])
    more = (limit, first_parent, since, stop_at)
    if after or objects or prefixes:
        # skipping to `after`, or filtering by paths, may walk the whole history
        return await run_in_threadpool(_log_commits, repository, *args, *more)
    return await run_read(state, repository, _log_commits, *args, *more)


def _log_commits(
    repo: str | Repository,
    repository: str,
    ref: str,
    state: ApiState,
    caller: Caller,
    after: str,
    amount: int,
    objects: list[str],
    prefixes: list[str],
    limit: bool,
    first_parent: bool,
    since: str | None,
    stop_at: str | None,
) -> CommitList:
    caller.require(Permission(Action.READ_BRANCH, branch_arn(repository, ref)))
    catalog = state.catalog
    since_ts = _since(since)
    stop_id = catalog.resolve_ref(repo, stop_at).commit_id if stop_at else None
    history: Iterator[CoreCommit] = catalog.log(repo, ref, first_parent=first_parent)

    def bounded() -> Iterator[CoreCommit]:
        for c in history:
            if since_ts is not None and c.creation_date < since_ts:
                return
            yield c
            if stop_id is not None and c.id == stop_id:
                return

    commits = bounded()
    if after:
        commits = itertools.dropwhile(lambda c: c.id != after, commits)
        next(commits, None)
    if objects or prefixes:
        commits = (c for c in commits if _touches(catalog, repository, c, objects, prefixes))
    if limit:
        found = list(itertools.islice(commits, page_size(amount)))
        pagination = Pagination(
            has_more=False, next_offset="", results=len(found), max_per_page=MAX_PER_PAGE
        )
    else:
        found, pagination = page(commits, amount, lambda c: c.id)
    return CommitList(pagination=pagination, results=[commit_model(c) for c in found])


@router.get(_REPO + "/refs/{leftRef}/diff/{rightRef}", response_model=DiffList)
def diff_refs(
    repository: str,
    leftRef: str,
    rightRef: str,
    state: StateDep,
    caller: CallerDep,
    after: AfterQuery = "",
    amount: AmountQuery = 0,
    prefix: PrefixQuery = "",
    delimiter: DelimiterQuery = "",
    type: Literal["two_dot", "three_dot"] = "three_dot",
    include_right_stats: bool = False,
) -> DiffList:
    """List the differences between two refs by path (``three_dot``: from their merge base)."""
    caller.require(Permission(Action.LIST_OBJECTS, repository_arn(repository)))
    diff = state.catalog.diff(repository, leftRef, rightRef, three_dot=type == "three_dot")
    entries: Iterator[DiffEntry] = under_prefix(diff, prefix, lambda e: e.path) if prefix else diff
    # the diff jumps to the prefix, past ``after`` and over each folder it folds, so a page
    # reads the ranges it shows, not every changed path before and inside its folders
    rows = group_paths(
        entries,
        lambda e: e.path,
        prefix=prefix,
        delimiter=delimiter,
        after=after,
        seek=diff.seek,
    )
    found, pagination = page(
        rows, amount, lambda r: str(r) if isinstance(r, CommonPrefix) else r.path
    )
    return DiffList(pagination=pagination, results=[diff_rows(r) for r in found])


@router.post(_REPO + "/refs/{sourceRef}/merge/{destinationBranch}", response_model=MergeResult)
def merge_into_branch(
    repository: str,
    sourceRef: str,
    destinationBranch: str,
    state: StateDep,
    caller: CallerDep,
    body: Merge | None = None,
) -> MergeResult:
    """Merge a ref into a branch; a conflict answers 409 with an empty ``reference``."""
    caller.require(Permission(Action.CREATE_COMMIT, branch_arn(repository, destinationBranch)))
    merge = body or Merge()

    result = state.catalog.merge(
        repository,
        sourceRef,
        destinationBranch,
        committer=caller.id,
        message=merge.message or None,
        metadata=merge.metadata,
        strategy=merge.strategy or None,
        allow_empty=merge.allow_empty,
        squash=merge.squash_merge,
    )
    return MergeResult(reference=result.commit.id)
