"""The replicant's HTTP face: the mirror configuration API, ``/metrics`` and ``/healthz``.

``POST|GET /service/replication/v1/repositories/{source_repo}/mirrors`` and
``GET|DELETE …/mirrors/{name}`` follow lakeFS's replication API. Callers sign in with the access
keys of the region's server (HTTP Basic, checked against the region's user store), or with a
login token of the region's server (``Authorization: Bearer``, the web UI's session: the region's
processes share the token key), and need ``fs:CreateRepository`` / ``fs:DeleteRepository`` /
``fs:ReadRepository`` on the mirror repository (``fs:ListRepositories`` to list).
``POST …/mirrors/{name}/promote`` makes the mirror the writable repository
(``fs:MirrorRepository`` on it); a creation with ``existing`` adopts a repository of this region
as the mirror (fail-back). ``GET /service/replication/v1/mirrors`` lists every mirror of the
region, ``GET …/mirrors/{name}/lag_history`` a mirror's lag of the last hour, and
``GET …/mirrors/{name}/promotion`` the report of its promotion.

Every change (``mirror.create``, ``mirror.adopt``, ``mirror.delete``, ``mirror.promote``,
``mirror.copy_preserved``) is recorded in the region's audit trail, which the region's server
lists (``GET /api/v1/audit``): by whom, from where, and how it ended, refusals included (a
planned promotion the mirror did not catch up for).

Under load it behaves as the server does (``server.*`` limits of the process's configuration):
at most ``max_concurrent_requests`` served at once and ``max_queued_requests`` waiting, the rest
answered 503 with ``Retry-After``; ``/healthz``, ``/readyz`` and ``/metrics`` always answered;
JSON bodies bounded by ``max_json_body``.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Annotated, Any

from fastapi import APIRouter, Depends, FastAPI, Request, Response
from fastapi.responses import JSONResponse
from fastapi.security import HTTPBasic, HTTPBasicCredentials
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from pydantic import BaseModel, ConfigDict, Field

from mirror import __version__
from mirror.audit import Actor, AuditRecorder, AuditTrail, kinds
from mirror.auth.caller import Caller
from mirror.auth.permissions import Action, Permission, repository_arn
from mirror.auth.store import AuthStore
from mirror.auth.tokens import LoginTokens, login_user
from mirror.errors import AuthenticationError, InvalidValueError, LakeMirrorError
from mirror.httputil.admission import Admission, AdmissionLimits, AdmissionMiddleware
from mirror.httputil.body_limit import BodyLimitMiddleware
from mirror.httputil.errors import answer_for, install_error_handlers
from mirror.httputil.metrics import OverloadMetrics
from mirror.httputil.request_log import RequestLogMiddleware
from mirror.replicant.lag_history import SLOT_SECONDS, WINDOW_SECONDS, LagSample
from mirror.replicant.mirror_request import MirrorRequest
from mirror.replicant.service import ReplicantService
from mirror.replicant.state import MirrorConfig

__all__ = [
    "ALL_MIRRORS_PATH",
    "MIRRORS_PATH",
    "PRESERVED_PATH",
    "MirrorCreation",
    "PromotionRequest",
    "create_replicant_app",
]

MIRRORS_PATH = "/service/replication/v1/repositories/{source_repo}/mirrors"
ALL_MIRRORS_PATH = "/service/replication/v1/mirrors"
PRESERVED_PATH = "/service/replication/v1/repositories/{repo}/preserved-branches"


class MirrorCreation(BaseModel):
    """The body of a mirror creation request."""

    model_config = ConfigDict(extra="forbid", strict=True)

    name: str = Field(description="the mirror repository's name in the mirror region")
    region: str = Field(description="the region to mirror into (this replicant's)")
    storage_namespace: str | None = Field(
        default=None,
        description="where object-store replication delivers the source namespace in the region "
        "(when adopting, the existing repository's namespace, which is the default)",
    )
    source_region: str | None = Field(
        default=None, description="the source repository's region (found when unambiguous)"
    )
    branches: list[str] = Field(default=["*"], description="glob patterns of branches to mirror")
    tags: bool = Field(default=True, description="mirror tags too")
    existing: bool = Field(
        default=False,
        description="adopt the existing repository `name` of this region (its history must be a "
        "prefix of the source's) instead of creating one",
    )
    preserve_diverged: bool = Field(
        default=False,
        description="when adopting, keep each diverged branch head on a new preserved-<branch>-"
        "<UTC timestamp> branch instead of refusing",
    )


class PromotionRequest(BaseModel):
    """The body of a promotion request."""

    model_config = ConfigDict(extra="forbid")

    force: bool = Field(
        default=False,
        description="promote without the source region, at the mirror's validated heads",
    )
    timeout: float = Field(
        default=60.0,
        gt=0,
        le=3600,
        description="seconds a planned promotion waits for the mirror to catch up",
    )


class MissingHead(BaseModel):
    """A source head a forced promotion may lack."""

    mirror_head: str | None
    source_head: str | None
    lag_commits: int | None = Field(
        description="commits the promoted head is behind source_head; null when not all known"
    )
    lag_commits_at_least: int | None = Field(
        default=None, description="a lower bound of lag_commits when that is null"
    )


class PromotionReportModel(BaseModel):
    """What a promotion did."""

    mirror: str
    source: str
    forced: bool
    heads: dict[str, str]
    tags: dict[str, str]
    missing: dict[str, MissingHead]
    writes_refused_seconds: float | None
    promoted_at: float


class PreservedCopyRequest(BaseModel):
    """The body of a request to copy a branch preserved in another region."""

    model_config = ConfigDict(extra="forbid", strict=True)

    region: str = Field(description="the region holding the preserved branch")
    repository: str = Field(description="its repository there (the adopted one)")
    branch: str = Field(description="the preserved branch (preserved-<branch>-<UTC>)")


class CopiedBranchModel(BaseModel):
    """A preserved branch copied into a repository of this region."""

    branch: str
    head: str
    source: str
    commits: list[str]


class PreservedBranchModel(BaseModel):
    """A diverged branch head kept on a branch of its own when a repository was adopted."""

    branch: str
    from_branch: str
    head: str
    commits: list[str]
    paths: int


class BranchStatusModel(BaseModel):
    """Where mirroring of one branch stands."""

    branch: str
    state: str
    source_head: str | None
    mirror_head: str | None
    lag_seconds: float
    lag_commits: int | None = Field(
        description="source commits the mirror branch does not show; null while not all known"
    )
    lag_commits_at_least: int | None = Field(
        default=None, description="a lower bound of lag_commits while that is null"
    )
    missing_objects: int
    missing_sample: list[str]
    last_error: str | None
    last_advance: float | None


class MirrorModel(BaseModel):
    """A mirror and its status."""

    name: str
    source_repo: str
    source_region: str
    region: str
    storage_namespace: str
    branches: list[str]
    tags: bool
    created: int
    adopted: bool = False
    preserved_branches: list[str] = []
    preserved_tags: list[str] = []
    preserved: list[PreservedBranchModel] = []
    worker: str | None = None
    status: list[BranchStatusModel] = []


class MirrorList(BaseModel):
    """The mirrors of a source repository."""

    results: list[MirrorModel]


class RegionMirrorList(BaseModel):
    """Every mirror of the replicant's region."""

    region: str = Field(description="the region this replicant mirrors into")
    results: list[MirrorModel]


class LagSampleModel(BaseModel):
    """The worst lag of a branch during one slot of its history."""

    time: float = Field(description="when that lag was seen (seconds since the epoch)")
    lag_seconds: float
    lag_commits: int | None = Field(description="a count; null when only a bound was known")
    lag_commits_at_least: int | None = Field(description="a lower bound when lag_commits is null")


class BranchLagHistory(BaseModel):
    """One branch's lag samples of the last hour, oldest first."""

    branch: str
    samples: list[LagSampleModel]


class LagHistoryModel(BaseModel):
    """A mirror's lag history: each branch's samples of the last hour."""

    mirror: str
    window_seconds: float = Field(description="the span answered (the last hour)")
    slot_seconds: float = Field(description="each sample is the worst lag of a slot this long")
    branches: list[BranchLagHistory]


def _samples(samples: list[LagSample]) -> list[LagSampleModel]:
    return [LagSampleModel.model_validate(s.to_json()) for s in samples]


_basic = HTTPBasic(auto_error=False)


def _service(request: Request) -> ReplicantService:
    service: ReplicantService = request.app.state.service
    return service


ServiceDep = Annotated[ReplicantService, Depends(_service)]


def _caller(
    request: Request, credentials: Annotated[HTTPBasicCredentials | None, Depends(_basic)]
) -> Caller:
    auth: AuthStore = request.app.state.auth
    tokens: LoginTokens | None = request.app.state.login_tokens
    if tokens is not None:
        # a Bearer token only: no session cookie, which a browser would send this port too
        user = login_user(tokens, auth, request.headers, {}, basic=credentials is not None)
        if user is not None:
            return Caller(auth, user)
    if credentials is None:
        raise AuthenticationError("error authenticating request: no credentials (HTTP Basic)")
    return Caller(auth, auth.authenticate(credentials.username, credentials.password))


CallerDep = Annotated[Caller, Depends(_caller)]


def _describe(exc: BaseException) -> tuple[int, str]:
    """Return the status and message this API answers ``exc`` with, for a failed change."""
    if isinstance(exc, LakeMirrorError):
        return answer_for(exc)
    return 500, "internal server error"


def _recorder(
    request: Request,
    caller: CallerDep,
    credentials: Annotated[HTTPBasicCredentials | None, Depends(_basic)],
) -> AuditRecorder:
    """Return the recorder of the request's changes, bound to its caller and address."""
    client = request.client
    actor = Actor(
        user_id=caller.id,
        # HTTP Basic names the key; a Bearer token (which takes precedence) names none
        access_key_id=credentials.username if credentials is not None else None,
        address=client.host if client is not None else None,
        user_agent=request.headers.get("user-agent"),
        via="replicant",
    )
    trail: AuditTrail = request.app.state.audit
    return AuditRecorder(trail, actor, _describe)


AuditDep = Annotated[AuditRecorder, Depends(_recorder)]


def _mirror_target(name: str, source_repo: str) -> dict[str, str]:
    # the mirror is a repository of this region, named as the mirror
    return {"mirror": name, "repository": name, "source_repository": source_repo}


def _model(service: ReplicantService, config: MirrorConfig) -> MirrorModel:
    data: dict[str, Any] = config.to_json()
    data["worker"] = service.worker_owner(config.name)
    data["preserved_branches"] = data.pop("preserved")
    data["preserved"] = service.store.get_preserved(config.name)
    data["status"] = [
        BranchStatusModel.model_validate(s.to_json(), strict=False)
        for s in service.status(config.name)
    ]
    return MirrorModel.model_validate(data)


router = APIRouter()


@router.post(MIRRORS_PATH, status_code=201, response_model=MirrorModel)
async def create_mirror(
    source_repo: str,
    body: MirrorCreation,
    service: ServiceDep,
    caller: CallerDep,
    audit: AuditDep,
) -> MirrorModel:
    """Mirror ``source_repo`` into a new read-only repository of this region."""
    caller.require(Permission(Action.CREATE_REPOSITORY, repository_arn(body.name)))
    kind = kinds.MIRROR_ADOPT if body.existing else kinds.MIRROR_CREATE
    with audit.change(
        kind, target=_mirror_target(body.name, source_repo), after=body.model_dump(), status=201
    ) as change:
        if body.storage_namespace is None and not body.existing:
            raise InvalidValueError("storage_namespace is required (unless adopting: existing)")
        request = MirrorRequest(
            name=body.name,
            region=body.region,
            storage_namespace=body.storage_namespace or "",
            source_region=body.source_region,
            branches=tuple(body.branches),
            tags=body.tags,
            existing=body.existing,
            preserve_diverged=body.preserve_diverged,
        )
        config = await service.create_mirror(source_repo, request)
        change.after = config.to_json()
    return _model(service, config)


@router.post(MIRRORS_PATH + "/{name}/promote", response_model=PromotionReportModel)
async def promote_mirror(
    source_repo: str,
    name: str,
    service: ServiceDep,
    caller: CallerDep,
    audit: AuditDep,
    body: PromotionRequest | None = None,
) -> PromotionReportModel:
    """Promote a mirror to this region's writable repository (see docs/disaster-recovery.md).

    Planned (``force`` false): the source is demoted, the mirror catches up, then it is promoted;
    409 if it does not catch up within ``timeout`` (the source is writable again), 503 if the
    source region cannot be reached. Forced: promoted at the mirror's validated heads at once.
    """
    caller.require(Permission(Action.MIRROR_REPOSITORY, repository_arn(name)))
    body = body or PromotionRequest()
    with audit.change(
        kinds.MIRROR_PROMOTE,
        target=_mirror_target(name, source_repo),
        details={"force": body.force, "timeout": body.timeout},
    ) as change:
        report = await service.promote(source_repo, name, force=body.force, timeout=body.timeout)
        change.after = {
            "source": report.source,
            "forced": report.forced,
            "branches": len(report.heads),
            "tags": len(report.tags),
            "missing": sorted(report.missing),
            "writes_refused_seconds": report.writes_refused_seconds,
        }
    return PromotionReportModel.model_validate(report.to_json())


@router.post(PRESERVED_PATH, status_code=201, response_model=CopiedBranchModel)
async def copy_preserved_branch(
    repo: str,
    body: PreservedCopyRequest,
    service: ServiceDep,
    caller: CallerDep,
    audit: AuditDep,
) -> CopiedBranchModel:
    """Copy a branch preserved at fail-back in another region into ``repo`` of this region.

    Answers 409 while files of the branch's head are missing from ``repo``'s namespace.
    """
    caller.require(Permission(Action.MIRROR_REPOSITORY, repository_arn(repo)))
    with audit.change(
        kinds.MIRROR_COPY_PRESERVED,
        target={"repository": repo, "branch": body.branch},
        details=body.model_dump(),
        status=201,
    ) as change:
        copied = await service.copy_preserved(repo, body.region, body.repository, body.branch)
        change.after = {"branch": copied.branch, "head": copied.head}
    return CopiedBranchModel.model_validate(copied.to_json())


@router.get(MIRRORS_PATH, response_model=MirrorList)
async def list_mirrors(source_repo: str, service: ServiceDep, caller: CallerDep) -> MirrorList:
    """List the mirrors of ``source_repo`` in this region, with their status."""
    caller.require(Permission(Action.LIST_REPOSITORIES, "*"))
    return MirrorList(results=[_model(service, m) for m in service.list_mirrors(source_repo)])


@router.get(ALL_MIRRORS_PATH, response_model=RegionMirrorList)
async def list_region_mirrors(service: ServiceDep, caller: CallerDep) -> RegionMirrorList:
    """List every mirror of this region, whatever its source, with their status."""
    caller.require(Permission(Action.LIST_REPOSITORIES, "*"))
    return RegionMirrorList(
        region=service.settings.region,
        results=[_model(service, m) for m in service.list_mirrors()],
    )


@router.get(MIRRORS_PATH + "/{name}/lag_history", response_model=LagHistoryModel)
async def get_lag_history(
    source_repo: str, name: str, service: ServiceDep, caller: CallerDep
) -> LagHistoryModel:
    """Return each mirrored branch's lag of the last hour, a sample per slot, oldest first."""
    caller.require(Permission(Action.READ_REPOSITORY, repository_arn(name)))
    history = service.lag_history(source_repo, name)
    return LagHistoryModel(
        mirror=name,
        window_seconds=WINDOW_SECONDS,
        slot_seconds=SLOT_SECONDS,
        branches=[BranchLagHistory(branch=b, samples=_samples(s)) for b, s in history.items()],
    )


@router.get(MIRRORS_PATH + "/{name}/promotion", response_model=PromotionReportModel)
async def get_promotion(
    source_repo: str, name: str, service: ServiceDep, caller: CallerDep
) -> PromotionReportModel:
    """Return the report of the mirror's newest promotion (kept after its configuration)."""
    caller.require(Permission(Action.READ_REPOSITORY, repository_arn(name)))
    return PromotionReportModel.model_validate(service.promotion_report(source_repo, name))


@router.get(MIRRORS_PATH + "/{name}", response_model=MirrorModel)
async def get_mirror(
    source_repo: str, name: str, service: ServiceDep, caller: CallerDep
) -> MirrorModel:
    """Return a mirror with the status of each branch."""
    caller.require(Permission(Action.READ_REPOSITORY, repository_arn(name)))
    return _model(service, service.get_mirror(source_repo, name))


@router.delete(MIRRORS_PATH + "/{name}", status_code=204, response_class=Response)
async def delete_mirror(
    source_repo: str, name: str, service: ServiceDep, caller: CallerDep, audit: AuditDep
) -> Response:
    """Stop mirroring (the mirror repository stays, read-only)."""
    caller.require(Permission(Action.DELETE_REPOSITORY, repository_arn(name)))
    target = _mirror_target(name, source_repo)
    with audit.change(kinds.MIRROR_DELETE, target=target, status=204) as change:
        change.before = service.get_mirror(source_repo, name).to_json()
        await service.delete_mirror(source_repo, name)
    return Response(status_code=204)


@router.get("/metrics", include_in_schema=False)
async def metrics(service: ServiceDep) -> Response:
    """Return the Prometheus metrics of this replica."""
    return Response(generate_latest(service.metrics.registry), media_type=CONTENT_TYPE_LATEST)


@router.get("/healthz", include_in_schema=False)
async def healthz(service: ServiceDep) -> dict[str, Any]:
    """Report liveness and the mirrors this replica works."""
    return {"status": "ok", "replica": service.settings.replica_id, "working": service.working()}


@router.get("/readyz", include_in_schema=False)
async def readyz(service: ServiceDep) -> Response:
    """Answer 200 once the region's KV answers (the replicant's records are readable), else 503."""
    try:
        mirrors = len(await asyncio.to_thread(lambda: list(service.store.list_mirrors())))
    except LakeMirrorError as exc:
        return JSONResponse({"status": "unavailable", "message": str(exc)}, status_code=503)
    return JSONResponse({"status": "ready", "mirrors": mirrors})


def create_replicant_app(
    service: ReplicantService,
    auth: AuthStore,
    *,
    run_workers: bool = True,
    login_tokens: LoginTokens | None = None,
    audit: AuditTrail | None = None,
    admission: AdmissionLimits | None = None,
    max_json_body: int | None = None,
) -> FastAPI:
    """Return the replicant's app; with ``run_workers`` its lifespan runs the workers.

    With ``login_tokens`` (the region's, :meth:`LoginTokens.from_config`), a login token of the
    region's server signs a caller in as HTTP Basic does. Changes are recorded in ``audit``
    (default: a trail of the default retention over the service's KV). ``admission`` bounds
    the requests served at once and queued (:mod:`mirror.httputil.admission`),
    ``max_json_body`` the bodies (``None``: no bound); refusals count in the replicant's
    registry.
    """

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        if run_workers:
            await service.start()
        try:
            yield
        finally:
            await service.stop()

    app = FastAPI(
        title="LakeMirror replicant",
        description="Configure transactional mirrors of repositories of other regions.",
        version=__version__,
        lifespan=lifespan,
        docs_url="/docs",
        redoc_url=None,
    )
    app.state.service = service
    app.state.auth = auth
    app.state.login_tokens = login_tokens
    app.state.audit = audit or AuditTrail(service.store.kv)
    install_error_handlers(app)
    overload = OverloadMetrics(service.metrics.registry)
    if max_json_body is not None:
        app.add_middleware(BodyLimitMiddleware, limit=max_json_body, metrics=overload)
    app.add_middleware(RequestLogMiddleware)
    if admission is not None:
        app.add_middleware(AdmissionMiddleware, admission=Admission(admission), metrics=overload)
    app.include_router(router)
    return app
