"""The FastAPI application serving lakeFS's ``/api/v1`` over a :class:`~mirror.core.Catalog`."""

from __future__ import annotations

import os
import re
from collections.abc import AsyncIterator, Callable, Iterable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import TYPE_CHECKING

import anyio.to_thread
from fastapi import FastAPI

from mirror import __version__
from mirror.api import health
from mirror.api.deps import ApiState
from mirror.api.errors import in_request_context
from mirror.api.fast_reads import install_fast_reads
from mirror.api.routers import (
    acl,
    audit,
    auth,
    auth_capabilities,
    backing,
    branches,
    config,
    gc,
    imports,
    internal,
    metadata,
    mirror_roles,
    mirrors,
    object_writes,
    objects,
    permissions,
    pmpu,
    protection,
    pulls,
    refs,
    repositories,
    staging,
    tags,
)
from mirror.api.routers import actions as actions_routes
from mirror.api.routers import async_ops as async_ops_routes
from mirror.api.routers import dump as dump_routes
from mirror.api.routers import login as login_routes
from mirror.auth.store import AuthStore
from mirror.auth.tokens import LoginTokens
from mirror.config import GCSettings
from mirror.core.catalog import Catalog
from mirror.httputil import metrics as http_metrics
from mirror.httputil.body_limit import BodyLimitMiddleware
from mirror.httputil.errors import install_error_handlers
from mirror.httputil.request_log import RequestLogMiddleware
from mirror.tasks import RunnerSettings, TaskRunner, TaskStore

if TYPE_CHECKING:
    from starlette.types import ASGIApp, Message, Receive, Scope, Send

__all__ = ["API_PREFIX", "LAKEFS_COMPATIBLE_VERSION", "WORKER_HEADER", "create_app"]

API_PREFIX = "/api/v1"
LAKEFS_COMPATIBLE_VERSION = "1.50.0"
"""The lakeFS version whose API this server speaks, as ``/config`` reports it."""
WORKER_HEADER = "X-LakeMirror-Worker"
"""The response header naming the worker process that answered (``server.workers`` > 1)."""

# the one route whose body streams to storage (an object upload) instead of being read whole
_UPLOAD = re.compile(rf"{API_PREFIX}/repositories/[^/]+/branches/[^/]+/objects")


def _streams_body(scope: Scope) -> bool:
    return scope.get("method") == "POST" and _UPLOAD.fullmatch(scope.get("path", "")) is not None


class _WorkerHeaderMiddleware:
    """Name the process that answered in :data:`WORKER_HEADER` (its process ID)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app
        self.header = (WORKER_HEADER.lower().encode(), str(os.getpid()).encode())

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Serve one ASGI connection."""
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def send_with_worker(message: Message) -> None:
            if message["type"] == "http.response.start":
                message["headers"] = [*message.get("headers", ()), self.header]
            await send(message)

        await self.app(scope, receive, send_with_worker)


def create_app(
    catalog: Catalog,
    auth_store: AuthStore,
    *,
    version: str = LAKEFS_COMPATIBLE_VERSION,
    local_root: str | Path | None = None,
    namespace_schemes: Iterable[str] = ("local",),
    worker_header: bool = False,
    on_startup: Iterable[Callable[[], object]] = (),
    on_shutdown: Iterable[Callable[[], object]] = (),
    async_ops: bool = True,
    task_settings: RunnerSettings | None = None,
    gc_settings: GCSettings | None = None,
    login_tokens: LoginTokens | None = None,
    logout_redirect_url: str = "/auth/login",
    fast_reads: bool = True,
    max_json_body: int | None = None,
) -> FastAPI:
    """Return the lakeFS-compatible API app.

    Deleting a repository removes the records the layers above the core keep of it through the
    cleanups registered on ``catalog``; the process assembling the app registers them
    (:func:`mirror.cli.repository_cleanups.register_repository_cleanups`).

    Args:
        catalog: The versioning core to serve.
        auth_store: Users, keys, groups and policies (its built-ins are created if missing).
        version: The numeric version ``/config`` reports (clients compare it with lakeFS's).
        local_root: The directory relative ``local://`` namespaces resolve under.
        namespace_schemes: Schemes a new repository's storage namespace may use.
        worker_header: Name the answering process in :data:`WORKER_HEADER`.
        on_startup: Called, in order, when the app starts (before the first request).
        on_shutdown: Called, in order, when the app shuts down (after the last request).
        async_ops: Serve asynchronous commit and merge (``/config`` advertises them).
        task_settings: How background tasks run (TTL, heartbeat, shutdown bound).
        gc_settings: Garbage collection's settings (``gc``); default: the defaults.
        login_tokens: Signs and verifies login tokens (default: a random key, for an app that
            is the only process of its installation).
        logout_redirect_url: Where ``GET /logout`` sends the browser (``auth.logout_redirect_url``).
        fast_reads: Serve plain stat, read, upload, list and commit requests by
            :mod:`mirror.api.fast_reads` (``False``: through FastAPI's routes, as every other
            request).
        max_json_body: Refuse bodies of more bytes with 413, object uploads aside
            (``server.max_json_body``; ``None``: no bound).
    """
    auth_store.ensure_builtins()
    starters = tuple(on_startup)
    closers = tuple(on_shutdown)
    metrics = http_metrics.HttpMetrics()

    runner = (
        TaskRunner(TaskStore(catalog.kv), task_settings or RunnerSettings()) if async_ops else None
    )

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        if runner is not None:
            runner.start()
        for start in starters:
            start()
        try:
            yield
        finally:
            if runner is not None:
                # running tasks get the shutdown bound to finish, before the KV closes
                await anyio.to_thread.run_sync(runner.stop)
            for close in closers:
                close()
            metrics.process_stopped()

    app = FastAPI(
        title="LakeMirror",
        description="A lakeFS-compatible versioning API with transactional mirroring.",
        version=__version__,
        openapi_url="/openapi.json",
        docs_url="/docs",
        redoc_url=None,
        lifespan=lifespan,
    )
    app.state.api = ApiState(
        catalog=catalog,
        auth=auth_store,
        version=version,
        local_root=Path(local_root).resolve() if local_root is not None else None,
        namespace_schemes=frozenset(namespace_schemes),
        gc=gc_settings or GCSettings(),
        logout_redirect_url=logout_redirect_url,
    )
    app.state.metrics = metrics
    app.state.tasks = runner
    app.state.login_tokens = login_tokens or LoginTokens.ephemeral()
    # lakeFS's 401, which its web UI reads as signed out, and no browser sign-in box
    install_error_handlers(app, basic_challenge=False, in_context=in_request_context)
    if max_json_body is not None:
        app.add_middleware(
            BodyLimitMiddleware,
            limit=max_json_body,
            metrics=metrics.overload,
            streams=_streams_body,
        )
    app.add_middleware(RequestLogMiddleware)
    app.add_middleware(http_metrics.MetricsMiddleware, metrics=metrics)
    if worker_header:
        app.add_middleware(_WorkerHeaderMiddleware)
    app.include_router(health.router)
    app.include_router(http_metrics.router)
    # lakeFS mounts /logout at the root, where its web UI navigates to sign out
    app.include_router(login_routes.logout_router)
    # the routers of the most frequent requests (stat, read, list, upload, commit) first:
    # Starlette tries routes in order, and no path of theirs is another router's (a unit test
    # holds the app to that), so the order changes no answer, only how many routes are tried
    for module in (
        objects,
        object_writes,
        branches,
        refs,
        config,
        repositories,
        tags,
        staging,
        mirrors,
        mirror_roles,
        auth,
        acl,
        auth_capabilities,
        permissions,
        async_ops_routes,
        gc,
        protection,
        imports,
        backing,
        pmpu,
        pulls,
        metadata,
        internal,
        login_routes,
        dump_routes,
        actions_routes,
        audit,
    ):
        app.include_router(module.router, prefix=API_PREFIX)
        metrics.name_routes(module.router.routes, API_PREFIX)
    if fast_reads:
        # stat, read, upload, list, commit: plain requests skip FastAPI's dependency resolution
        fast = {**objects.FAST_READS, **object_writes.FAST_ROUTES, **branches.FAST_ROUTES}
        install_fast_reads(app, API_PREFIX, fast)
    return app
