"""Actions runs: the runs of a repository's hooks, their hook runs and their output logs.

lakeFS's ``/repositories/{repository}/actions/runs`` operations (all need ``ci:ReadAction``).
Runs come from the KV (every server process sees them), outputs from the repository's
namespace (``_lakefs/actions/log/<run>/<hook_run_id>.log``).
"""

from __future__ import annotations

import itertools
from typing import Annotated

from fastapi import APIRouter, Query, Response
from pydantic import BaseModel

from mirror.actions.runs import HookRunRecord, RunNotFoundError, RunRecord, RunStore
from mirror.actions.service import log_key
from mirror.api.deps import CallerDep, StateDep
from mirror.api.models import Pagination
from mirror.api.paging import page
from mirror.api.routing import AfterQuery, AmountQuery, LakeFSRoute
from mirror.auth.permissions import Permission, repository_arn
from mirror.errors import InvalidValueError

__all__ = ["READ_ACTION", "router"]

router = APIRouter(route_class=LakeFSRoute, tags=["actions"])

READ_ACTION = "ci:ReadAction"
"""lakeFS's action name for reading action runs."""

_RUNS = "/repositories/{repository}/actions/runs"


class ActionRun(BaseModel):
    """One run (lakeFS's ``ActionRun``)."""

    run_id: str
    branch: str
    start_time: str
    end_time: str
    event_type: str
    status: str
    commit_id: str


class ActionRunList(BaseModel):
    """A page of runs."""

    pagination: Pagination
    results: list[ActionRun]


class HookRun(BaseModel):
    """One hook's run (lakeFS's ``HookRun``)."""

    hook_run_id: str
    action: str
    hook_id: str
    start_time: str
    end_time: str | None = None
    status: str


class HookRunList(BaseModel):
    """A page of hook runs."""

    pagination: Pagination
    results: list[HookRun]


def _run(run: RunRecord) -> ActionRun:
    return ActionRun(
        run_id=run.run_id,
        branch=run.branch,
        start_time=run.start_time,
        end_time=run.end_time,
        event_type=run.event_type,
        status=run.status,
        commit_id=run.commit_id,
    )


def _hook(hook: HookRunRecord) -> HookRun:
    # lakeFS also answers "skipped", which the clients' enum rejects: a skipped hook did not
    # complete, so it reads as failed
    status = "completed" if hook.status == "completed" else "failed"
    return HookRun(
        hook_run_id=hook.hook_run_id,
        action=hook.action,
        hook_id=hook.hook_id,
        start_time=hook.start_time,
        end_time=hook.end_time or None,
        status=status,
    )


@router.get(_RUNS, response_model=ActionRunList, response_model_exclude_none=True)
def list_repository_runs(
    repository: str,
    state: StateDep,
    caller: CallerDep,
    after: AfterQuery = "",
    amount: AmountQuery = 0,
    branch: Annotated[str, Query(description="runs of this branch")] = "",
    commit: Annotated[str, Query(description="runs of this commit")] = "",
) -> ActionRunList:
    """List the runs of a repository newest first, optionally of one branch or commit."""
    caller.require(Permission(READ_ACTION, repository_arn(repository)))
    if branch and commit:
        raise InvalidValueError("filter by branch and by commit: parameters conflict")
    repo = state.catalog.get_repository(repository)
    runs = RunStore(state.catalog.kv).list(repo, branch=branch, commit=commit, after=after)
    found, pagination = page(runs, amount, lambda r: r.run_id)
    return ActionRunList(pagination=pagination, results=[_run(r) for r in found])


@router.get(_RUNS + "/{run_id}", response_model=ActionRun)
def get_run(repository: str, run_id: str, state: StateDep, caller: CallerDep) -> ActionRun:
    """Return one run."""
    caller.require(Permission(READ_ACTION, repository_arn(repository)))
    repo = state.catalog.get_repository(repository)
    return _run(RunStore(state.catalog.kv).get(repo, run_id))


@router.get(_RUNS + "/{run_id}/hooks", response_model=HookRunList, response_model_exclude_none=True)
def list_run_hooks(
    repository: str,
    run_id: str,
    state: StateDep,
    caller: CallerDep,
    after: AfterQuery = "",
    amount: AmountQuery = 0,
) -> HookRunList:
    """List the hook runs of a run, in ``hook_run_id`` order."""
    caller.require(Permission(READ_ACTION, repository_arn(repository)))
    repo = state.catalog.get_repository(repository)
    run = RunStore(state.catalog.kv).get(repo, run_id)
    hooks = itertools.dropwhile(lambda h: after and h.hook_run_id <= after, run.hooks)
    found, pagination = page(hooks, amount, lambda h: h.hook_run_id)
    return HookRunList(pagination=pagination, results=[_hook(h) for h in found])


@router.get(_RUNS + "/{run_id}/hooks/{hook_run_id}/output", response_class=Response)
def get_run_hook_output(
    repository: str, run_id: str, hook_run_id: str, state: StateDep, caller: CallerDep
) -> Response:
    """Return a hook run's output log (empty for a hook that was skipped)."""
    caller.require(Permission(READ_ACTION, repository_arn(repository)))
    repo = state.catalog.get_repository(repository)
    run = RunStore(state.catalog.kv).get(repo, run_id)
    hook = next((h for h in run.hooks if h.hook_run_id == hook_run_id), None)
    if hook is None:
        raise RunNotFoundError(f"not found: hook run {hook_run_id!r} of run {run_id!r}")
    data = b""
    if hook.status != "skipped":
        data = state.catalog.block_store(repo).get(log_key(run_id, hook_run_id))
    return Response(
        data,
        media_type="application/octet-stream",
        headers={"Content-Disposition": f"attachment; filename={hook_run_id}.log"},
    )
