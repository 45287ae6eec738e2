"""Garbage collection: rules per repository, preparing a run, and the grace period of runs.

lakeFS's endpoints and status codes: ``…/settings/gc_rules`` (GET 200 or 404 ``not found``, PUT
204, DELETE 204) with the deprecated aliases ``…/gc/rules`` (GET, POST, DELETE) and the
preflight ``…/gc/rules/set_allowed`` (204); ``…/gc/prepare_commits`` and
``…/gc/prepare_uncommited`` (sic), which write what a run needs into the storage namespace
(201); ``/config/garbage-collection`` with the grace period a run waits before deleting an object.

``POST …/gc/prepare_commits/async`` runs ``prepare_commits`` as a background task (202
``{"id": "GCPC…"}``); ``GET …/gc/prepare_commits/status?id=`` answers ``{task_id, completed,
update_time, result?, error?: {message}}`` from the KV on any server process (unknown id: 404).
A repository without rules fails the task (its error is the synchronous call's 404 text).

Read-only repositories (mirrors) answer every write and every preparation with 403
``read-only repository``: a mirror's objects go when the source's deletions replicate.

Rule changes are recorded in the audit trail (``gc.rules.set``, ``gc.rules.delete``, with the
rules before and after). A sweep deletes objects outside the server (``lakemirror gc --sweep``,
a Spark job), so the job reports it: ``POST …/gc/sweeps`` (a LakeMirror extension, needing
``retention:PrepareGarbageCollectionCommits`` as the run itself) records ``gc.sweep`` with the
run's counts and, when it failed, why.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated, Any

from fastapi import APIRouter, Body, Response
from pydantic import BaseModel, ConfigDict, Field

from mirror.api.audit import AuditDep
from mirror.api.deps import ApiState, Caller, CallerDep, StateDep
from mirror.api.errors import describe_error
from mirror.api.routers.async_ops import RunnerDep, TaskCreation, TaskError
from mirror.api.routers.dump import task_of
from mirror.api.routing import LakeFSRoute
from mirror.audit import AuditRecorder, Change, kinds
from mirror.auth.permissions import Permission, repository_arn
from mirror.core.model import Repository
from mirror.gc import (
    GCRules,
    GCRulesStore,
    gc_repository,
    prepare_commits,
    prepare_uncommitted,
)
from mirror.gc.errors import (
    GCRulesNotFoundError,
    InvalidContinuationTokenError,
    InvalidGCRulesError,
)

__all__ = [
    "GC_PREPARE_TASK_PREFIX",
    "GET_RULES",
    "PREPARE_COMMITS",
    "PREPARE_UNCOMMITTED",
    "SET_RULES",
    "GarbageCollectionConfig",
    "GarbageCollectionPrepareResponse",
    "GarbageCollectionRule",
    "GarbageCollectionRules",
    "GarbageCollectionSweepReport",
    "PrepareGCUncommittedResponse",
    "PrepareGarbageCollectionCommitsStatus",
    "router",
]

router = APIRouter(route_class=LakeFSRoute, tags=["retention"])

GET_RULES = "retention:GetGarbageCollectionRules"
SET_RULES = "retention:SetGarbageCollectionRules"
PREPARE_COMMITS = "retention:PrepareGarbageCollectionCommits"
PREPARE_UNCOMMITTED = "retention:PrepareGarbageCollectionUncommitted"

GC_PREPARE_TASK_PREFIX = "GCPC"
"""How asynchronous ``prepare_commits`` task IDs start (lakeFS's)."""

_REPO = "/repositories/{repository}"


class GarbageCollectionRule(BaseModel):
    """One branch's retention."""

    branch_id: str
    retention_days: int


class GarbageCollectionRules(BaseModel):
    """A repository's rules; ``branches`` is ``[]`` when there are none, never ``null``."""

    default_retention_days: int
    branches: list[GarbageCollectionRule]


class GarbageCollectionPrepareResponse(BaseModel):
    """Where ``prepare_commits`` wrote the retained commits."""

    run_id: str
    gc_commits_location: str
    gc_addresses_location: str
    gc_commits_presigned_url: str | None = None


class PrepareGarbageCollectionCommitsStatus(BaseModel):
    """An asynchronous ``prepare_commits``: once completed, its result or its error."""

    task_id: str
    completed: bool
    update_time: datetime
    result: GarbageCollectionPrepareResponse | None = None
    error: TaskError | None = None


class PrepareGCUncommittedResponse(BaseModel):
    """One page of ``prepare_uncommited``."""

    run_id: str
    gc_uncommitted_location: str
    continuation_token: str | None = None


class GarbageCollectionSweepReport(BaseModel):
    """What a sweep of ``lakemirror gc`` did, as the job reports it for the audit trail."""

    model_config = ConfigDict(extra="forbid")

    run_id: str | None = Field(
        default=None,
        min_length=1,
        max_length=128,
        description="the run that swept (absent: it failed before it had one)",
    )
    mark_id: str | None = Field(
        default=None, max_length=128, description="the earlier dry run whose marks it swept"
    )
    marked: int = Field(ge=0, description="objects marked as garbage")
    marked_bytes: int = Field(default=0, ge=0, description="their bytes")
    deleted: int = Field(ge=0, description="objects deleted")
    error: str | None = Field(
        default=None, max_length=1000, description="why the sweep failed; absent: it succeeded"
    )
    status: int | None = Field(
        default=None, ge=400, le=599, description="the status of the answer that failed it"
    )


class GarbageCollectionConfig(BaseModel):
    """The grace period of runs, in seconds."""

    grace_period: int


_RULES_BODY = {
    "requestBody": {
        "required": True,
        "content": {
            "application/json": {"schema": GarbageCollectionRules.model_json_schema()},
        },
    }
}

RulesBody = Annotated[Any, Body(description="the rules")]


def _rules_model(rules: GCRules) -> GarbageCollectionRules:
    return GarbageCollectionRules.model_validate(rules.to_lakefs())


def _allow(caller: Caller, action: str, repository: str) -> None:
    caller.require(Permission(action, repository_arn(repository)))


def _parse(body: object) -> GCRules:
    """Parse a rules body before any repository is looked at (as lakeFS validates first)."""
    try:
        return GCRules.from_lakefs(body)
    except InvalidGCRulesError as exc:
        raise InvalidGCRulesError(f"invalid garbage collection rules: {exc}") from exc


def _get_rules(state: ApiState, caller: Caller, repository: str) -> GarbageCollectionRules:
    _allow(caller, GET_RULES, repository)
    repo = state.catalog.get_repository(repository)
    return _rules_model(GCRulesStore(state.catalog.kv).get(repo))


def _rules_before(store: GCRulesStore, repo: Repository) -> dict[str, Any] | None:
    try:
        return store.get(repo).to_lakefs()
    except GCRulesNotFoundError:
        return None


def _set_rules(
    state: ApiState, caller: Caller, audit: AuditRecorder, repository: str, body: object
) -> Response:
    _allow(caller, SET_RULES, repository)
    target = {"repository": repository}
    with audit.change(kinds.GC_RULES_SET, target=target, after=body, status=204) as change:
        rules = _parse(body)
        change.after = rules.to_lakefs()
        repo = gc_repository(state.catalog, repository)
        store = GCRulesStore(state.catalog.kv)
        change.before = _rules_before(store, repo)
        store.set(repo, rules)
    return Response(status_code=204)


def _delete_rules(
    state: ApiState, caller: Caller, audit: AuditRecorder, repository: str
) -> Response:
    _allow(caller, SET_RULES, repository)
    target = {"repository": repository}
    with audit.change(kinds.GC_RULES_DELETE, target=target, status=204) as change:
        repo = gc_repository(state.catalog, repository)
        store = GCRulesStore(state.catalog.kv)
        change.before = _rules_before(store, repo)
        store.delete(repo)
    return Response(status_code=204)


@router.get(_REPO + "/settings/gc_rules", response_model=GarbageCollectionRules)
def get_gc_rules(repository: str, state: StateDep, caller: CallerDep) -> GarbageCollectionRules:
    """Return the repository's rules (404 ``not found`` when it has none)."""
    return _get_rules(state, caller, repository)


@router.put(
    _REPO + "/settings/gc_rules",
    status_code=204,
    response_class=Response,
    openapi_extra=_RULES_BODY,
)
def set_gc_rules(
    repository: str, body: RulesBody, state: StateDep, caller: CallerDep, audit: AuditDep
) -> Response:
    """Replace the repository's rules (403 on a read-only repository)."""
    return _set_rules(state, caller, audit, repository, body)


@router.delete(_REPO + "/settings/gc_rules", status_code=204, response_class=Response)
def delete_gc_rules(
    repository: str, state: StateDep, caller: CallerDep, audit: AuditDep
) -> Response:
    """Remove the repository's rules (204 even when it had none)."""
    return _delete_rules(state, caller, audit, repository)


@router.get(_REPO + "/gc/rules", response_model=GarbageCollectionRules, deprecated=True)
def get_gc_rules_deprecated(
    repository: str, state: StateDep, caller: CallerDep
) -> GarbageCollectionRules:
    """Return the repository's rules (deprecated path of ``…/settings/gc_rules``)."""
    return _get_rules(state, caller, repository)


@router.post(
    _REPO + "/gc/rules",
    status_code=204,
    response_class=Response,
    deprecated=True,
    openapi_extra=_RULES_BODY,
)
def set_gc_rules_deprecated(
    repository: str, body: RulesBody, state: StateDep, caller: CallerDep, audit: AuditDep
) -> Response:
    """Replace the repository's rules (deprecated path of ``…/settings/gc_rules``)."""
    return _set_rules(state, caller, audit, repository, body)


@router.delete(_REPO + "/gc/rules", status_code=204, response_class=Response, deprecated=True)
def delete_gc_rules_deprecated(
    repository: str, state: StateDep, caller: CallerDep, audit: AuditDep
) -> Response:
    """Remove the repository's rules (deprecated path of ``…/settings/gc_rules``)."""
    return _delete_rules(state, caller, audit, repository)


@router.get(_REPO + "/gc/rules/set_allowed", status_code=204, response_class=Response)
def set_gc_rules_preflight(repository: str, state: StateDep, caller: CallerDep) -> Response:
    """Answer 204 when the caller may set the repository's rules (403 when not, or read-only)."""
    _allow(caller, SET_RULES, repository)
    gc_repository(state.catalog, repository)
    return Response(status_code=204)


@router.post(
    _REPO + "/gc/prepare_commits",
    status_code=201,
    response_model=GarbageCollectionPrepareResponse,
)
def prepare_gc_commits(
    repository: str, state: StateDep, caller: CallerDep
) -> GarbageCollectionPrepareResponse:
    """Write the commits the rules retain to ``_lakefs/retention/gc/commits/run_id=<run>/``.

    404 ``not found`` when the repository has no rules: a run then retains every commit.
    """
    _allow(caller, PREPARE_COMMITS, repository)
    prepared = prepare_commits(state.catalog, repository)
    return GarbageCollectionPrepareResponse(
        run_id=prepared.run_id,
        gc_commits_location=prepared.commits_location,
        gc_addresses_location=prepared.addresses_location,
    )


@router.post(
    _REPO + "/gc/prepare_commits/async",
    status_code=202,
    response_model=TaskCreation,
)
def prepare_gc_commits_async(
    repository: str, state: StateDep, caller: CallerDep, runner: RunnerDep
) -> TaskCreation:
    """Start ``prepare_commits`` in the background; answer the task's ID at once.

    The repository and its read-only state are checked first (404, 403); missing rules fail the
    task, as in lakeFS.
    """
    _allow(caller, PREPARE_COMMITS, repository)
    gc_repository(state.catalog, repository)

    def work() -> dict[str, Any]:
        prepared = prepare_commits(state.catalog, repository)
        return GarbageCollectionPrepareResponse(
            run_id=prepared.run_id,
            gc_commits_location=prepared.commits_location,
            gc_addresses_location=prepared.addresses_location,
        ).model_dump(mode="json", exclude_none=True)

    task = runner.submit(
        "gc-prepare-commits",
        repository,
        {},
        work,
        lambda exc: describe_error(exc, state.catalog, repository),
        id_prefix=GC_PREPARE_TASK_PREFIX,
    )
    return TaskCreation(id=task.id)


@router.get(
    _REPO + "/gc/prepare_commits/status",
    response_model=PrepareGarbageCollectionCommitsStatus,
)
def prepare_gc_commits_status(
    repository: str, id: str, state: StateDep, caller: CallerDep, runner: RunnerDep
) -> PrepareGarbageCollectionCommitsStatus:
    """Return an asynchronous ``prepare_commits``'s status (404 for an unknown task ID)."""
    _allow(caller, PREPARE_COMMITS, repository)
    task = task_of(state, runner, id, GC_PREPARE_TASK_PREFIX, "gc-prepare-commits", repository)
    result = task.result
    return PrepareGarbageCollectionCommitsStatus(
        task_id=task.id,
        completed=task.done,
        update_time=datetime.fromtimestamp(task.updated, tz=UTC),
        result=GarbageCollectionPrepareResponse(**result) if result is not None else None,
        error=TaskError(message=task.error) if task.error is not None else None,
    )


@router.post(
    _REPO + "/gc/prepare_uncommited",
    status_code=201,
    response_model=PrepareGCUncommittedResponse,
)
def prepare_gc_uncommitted(
    repository: str,
    state: StateDep,
    caller: CallerDep,
    body: Annotated[dict[str, Any] | None, Body()] = None,
) -> PrepareGCUncommittedResponse:
    """Write one page of every branch's staged addresses; call again with the token returned.

    The body ``{"continuation_token": …}`` is optional on the first call. A bad token is 400
    ``invalid continuation token``.
    """
    _allow(caller, PREPARE_UNCOMMITTED, repository)
    token = (body or {}).get("continuation_token")
    if token is not None and not isinstance(token, str):
        raise InvalidContinuationTokenError("expected a string")
    page = prepare_uncommitted(
        state.catalog,
        repository,
        token or None,
        page_size=state.gc.uncommitted_page_size,
    )
    return PrepareGCUncommittedResponse(
        run_id=page.run_id,
        gc_uncommitted_location=page.location,
        continuation_token=page.continuation_token,
    )


@router.post(_REPO + "/gc/sweeps", status_code=204, response_class=Response)
def report_gc_sweep(
    repository: str,
    body: GarbageCollectionSweepReport,
    state: StateDep,
    caller: CallerDep,
    audit: AuditDep,
) -> Response:
    """Record a sweep of ``lakemirror gc`` in the audit trail (a LakeMirror extension).

    Needs the permission of preparing a run; 404 for an unknown repository.
    """
    _allow(caller, PREPARE_COMMITS, repository)
    state.catalog.get_repository(repository)
    details = body.model_dump(exclude={"error", "status"})
    details["reported_by"] = "lakemirror gc"
    change = Change(target={"repository": repository}, details=details, status=204)
    if body.error is not None:
        change.refuse(body.status or 500, body.error)
    audit.record(kinds.GC_SWEEP, change)
    return Response(status_code=204)


@router.get("/config/garbage-collection", response_model=GarbageCollectionConfig)
def get_gc_config(state: StateDep, caller: CallerDep) -> GarbageCollectionConfig:
    """Return the grace period of garbage collection runs, in seconds (``gc.grace_period``)."""
    return GarbageCollectionConfig(grace_period=state.gc.grace_period)
