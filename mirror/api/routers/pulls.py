"""Pull requests (lakeFS's experimental ``/repositories/{r}/pulls``): list, open, update, merge.

Permissions are lakeFS's (pkg/permissions/actions.go): ``pr:ListPullRequests``,
``pr:ReadPullRequest`` and ``pr:WritePullRequest`` on the repository; merging also needs
``fs:CreateCommit`` on the destination branch. Every write refuses on a read-only repository.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Literal

from fastapi import APIRouter, Response
from pydantic import BaseModel

from mirror.api.deps import ApiState, Caller, CallerDep, StateDep, run_read
from mirror.api.models import MergeResult, Pagination
from mirror.api.paging import page
from mirror.api.routing import AfterQuery, AmountQuery, LakeFSRoute, PrefixQuery
from mirror.auth.permissions import Action, Permission, branch_arn, repository_arn
from mirror.core.errors import RepositoryReadOnlyError
from mirror.core.model import Repository
from mirror.core.pulls import PullRequest, PullRequestStore

__all__ = [
    "LIST_PULL_REQUESTS",
    "READ_PULL_REQUEST",
    "WRITE_PULL_REQUEST",
    "PullRequestBasic",
    "PullRequestCreation",
    "PullRequestCreationResponse",
    "PullRequestModel",
    "PullRequestsList",
    "router",
]

READ_PULL_REQUEST = Action.READ_PULL_REQUEST
WRITE_PULL_REQUEST = Action.WRITE_PULL_REQUEST
LIST_PULL_REQUESTS = Action.LIST_PULL_REQUESTS

router = APIRouter(route_class=LakeFSRoute, tags=["pulls", "experimental"])

_PULLS = "/repositories/{repository}/pulls"


class PullRequestModel(BaseModel):
    """A pull request on the wire."""

    id: str
    status: str
    title: str
    description: str
    author: str
    source_branch: str
    destination_branch: str
    creation_date: str
    merged_commit_id: str | None = None
    closed_date: str | None = None


class PullRequestsList(BaseModel):
    """A page of pull requests."""

    pagination: Pagination
    results: list[PullRequestModel]


class PullRequestCreation(BaseModel):
    """``POST /pulls`` body."""

    title: str
    description: str = ""
    source_branch: str
    destination_branch: str


class PullRequestCreationResponse(BaseModel):
    """The ID of a new pull request."""

    id: str


class PullRequestBasic(BaseModel):
    """``PATCH /pulls/{id}`` body: the fields to change."""

    title: str | None = None
    description: str | None = None
    status: str | None = None


def _rfc3339(seconds: float | None) -> str | None:
    if seconds is None:
        return None
    return datetime.fromtimestamp(seconds, UTC).isoformat().replace("+00:00", "Z")


def pull_request_model(pull: PullRequest, *, description: bool = True) -> PullRequestModel:
    """Return the wire form of a pull request (``description=False``: ``""``, as lakeFS lists)."""
    return PullRequestModel(
        id=pull.id,
        status=pull.status,
        title=pull.title,
        description=pull.description if description else "",
        author=pull.author,
        source_branch=pull.source_branch,
        destination_branch=pull.destination_branch,
        creation_date=_rfc3339(pull.creation_date) or "",
        merged_commit_id=pull.merged_commit_id,
        closed_date=_rfc3339(pull.closed_date),
    )


@router.get(_PULLS, response_model=PullRequestsList)
def list_pull_requests(
    repository: str,
    state: StateDep,
    caller: CallerDep,
    prefix: PrefixQuery = "",
    after: AfterQuery = "",
    amount: AmountQuery = 0,
    status: Literal["open", "closed", "all"] = "open",
) -> PullRequestsList:
    """List pull requests newest first; ``closed`` includes merged ones."""
    caller.require(Permission(LIST_PULL_REQUESTS, repository_arn(repository)))
    repo = state.catalog.get_repository(repository)
    pulls = PullRequestStore(state.catalog.kv).list(repo, status, prefix, after)
    found, pagination = page(pulls, amount, lambda p: p.id)
    return PullRequestsList(
        pagination=pagination,
        results=[pull_request_model(p, description=False) for p in found],
    )


@router.post(_PULLS, status_code=201, response_model=PullRequestCreationResponse)
def create_pull_request(
    repository: str, body: PullRequestCreation, state: StateDep, caller: CallerDep
) -> PullRequestCreationResponse:
    """Open a pull request; both branches must exist and differ (duplicates are allowed)."""
    caller.require(Permission(WRITE_PULL_REQUEST, repository_arn(repository)))
    catalog = state.catalog
    repo = catalog.get_repository(repository)
    if repo.read_only:
        raise RepositoryReadOnlyError(repo.id)
    catalog.get_branch(repository, body.source_branch)
    catalog.get_branch(repository, body.destination_branch)
    pull = PullRequestStore(catalog.kv).create(
        repo,
        title=body.title,
        description=body.description,
        author=caller.id,
        source_branch=body.source_branch,
        destination_branch=body.destination_branch,
    )
    return PullRequestCreationResponse(id=pull.id)


@router.get(_PULLS + "/{pull_request}", response_model=PullRequestModel)
async def get_pull_request(
    repository: str, pull_request: str, state: StateDep, caller: CallerDep
) -> PullRequestModel:
    """Return a pull request."""
    args = (repository, pull_request, state, caller)
    return await run_read(state, repository, _get_pull_request, *args)


def _get_pull_request(
    repo: str | Repository, repository: str, pull_request: str, state: ApiState, caller: Caller
) -> PullRequestModel:
    caller.require(Permission(READ_PULL_REQUEST, repository_arn(repository)))
    record = state.catalog.get_repository(repo)
    return pull_request_model(PullRequestStore(state.catalog.kv).get(record, pull_request))


@router.patch(_PULLS + "/{pull_request}", status_code=204, response_class=Response)
def update_pull_request(
    repository: str,
    pull_request: str,
    body: PullRequestBasic,
    state: StateDep,
    caller: CallerDep,
) -> Response:
    """Change a pull request's title, description or status (204, as lakeFS answers)."""
    caller.require(Permission(WRITE_PULL_REQUEST, repository_arn(repository)))
    repo = state.catalog.get_repository(repository)
    PullRequestStore(state.catalog.kv).edit(
        repo, pull_request, title=body.title, description=body.description, status=body.status
    )
    return Response(status_code=204)


@router.put(_PULLS + "/{pull_request}/merge", response_model=MergeResult)
def merge_pull_request(
    repository: str, pull_request: str, state: StateDep, caller: CallerDep
) -> MergeResult:
    """Merge an open pull request into its destination branch."""
    caller.require(Permission(WRITE_PULL_REQUEST, repository_arn(repository)))
    catalog = state.catalog
    repo = catalog.get_repository(repository)
    if repo.read_only:
        raise RepositoryReadOnlyError(repo.id)
    store = PullRequestStore(catalog.kv)
    pull = store.get(repo, pull_request)
    caller.require(
        Permission(Action.CREATE_COMMIT, branch_arn(repository, pull.destination_branch))
    )
    return MergeResult(reference=store.merge(catalog, repo, pull_request, caller.id))
