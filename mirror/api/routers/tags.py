"""Tags: list, create, get, delete."""

from __future__ import annotations

from fastapi import APIRouter, Response

from mirror.api.deps import ApiState, Caller, CallerDep, StateDep, run_read
from mirror.api.models import Ref, RefList, TagCreation
from mirror.api.paging import page
from mirror.api.routing import AfterQuery, AmountQuery, LakeFSRoute, PrefixQuery
from mirror.auth.permissions import Action, Permission, repository_arn, tag_arn
from mirror.core.model import Repository

__all__ = ["router"]

router = APIRouter(route_class=LakeFSRoute, tags=["tags"])

_TAGS = "/repositories/{repository}/tags"


@router.get(_TAGS, response_model=RefList)
async def list_tags(
    repository: str,
    state: StateDep,
    caller: CallerDep,
    prefix: PrefixQuery = "",
    after: AfterQuery = "",
    amount: AmountQuery = 0,
) -> RefList:
    """List tags by name."""
    args = (repository, state, caller, prefix, after, amount)
    return await run_read(state, repository, _list_tags, *args)


def _list_tags(
    repo: str | Repository,
    repository: str,
    state: ApiState,
    caller: Caller,
    prefix: str,
    after: str,
    amount: int,
) -> RefList:
    caller.require(Permission(Action.LIST_TAGS, repository_arn(repository)))
    found, pagination = page(state.catalog.list_tags(repo, prefix, after), amount, lambda t: t[0])
    return RefList(
        pagination=pagination, results=[Ref(id=tag, commit_id=cid) for tag, cid in found]
    )


@router.post(_TAGS, status_code=201, response_model=Ref)
def create_tag(repository: str, body: TagCreation, state: StateDep, caller: CallerDep) -> Ref:
    """Create a tag at the commit a ref resolves to."""
    caller.require(Permission(Action.CREATE_TAG, tag_arn(repository, body.id)))
    cid = state.catalog.create_tag(repository, body.id, body.ref)
    return Ref(id=body.id, commit_id=cid)


@router.get(_TAGS + "/{tag}", response_model=Ref)
async def get_tag(repository: str, tag: str, state: StateDep, caller: CallerDep) -> Ref:
    """Return a tag and its commit."""
    return await run_read(state, repository, _get_tag, repository, tag, state, caller)


def _get_tag(
    repo: str | Repository, repository: str, tag: str, state: ApiState, caller: Caller
) -> Ref:
    caller.require(Permission(Action.READ_TAG, tag_arn(repository, tag)))
    return Ref(id=tag, commit_id=state.catalog.get_tag(repo, tag))


@router.delete(_TAGS + "/{tag}", status_code=204, response_class=Response)
def delete_tag(
    repository: str, tag: str, state: StateDep, caller: CallerDep, force: bool = False
) -> Response:
    """Delete a tag."""
    caller.require(Permission(Action.DELETE_TAG, tag_arn(repository, tag)))
    state.catalog.delete_tag(repository, tag)
    return Response(status_code=204)
