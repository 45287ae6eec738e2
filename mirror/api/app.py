"""The FastAPI application serving lakeFS's ``/api/v1`` over a :class:`~mirror.core.Catalog`."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from fastapi import FastAPI

from mirror import __version__
from mirror.api import health
from mirror.api import metrics as http_metrics
from mirror.api.auth.store import AuthStore
from mirror.api.deps import ApiState
from mirror.api.errors import install_error_handlers
from mirror.api.routers import (
    auth,
    branches,
    config,
    mirrors,
    objects,
    refs,
    repositories,
    staging,
    tags,
)
from mirror.core.catalog import Catalog
from mirror.logging import RequestLogMiddleware

__all__ = ["API_PREFIX", "LAKEFS_COMPATIBLE_VERSION", "create_app"]

API_PREFIX = "/api/v1"
LAKEFS_COMPATIBLE_VERSION = "1.50.0"
"""The lakeFS version whose API this server speaks, as ``/config`` reports it."""


def create_app(
    catalog: Catalog,
    auth_store: AuthStore,
    *,
    version: str = LAKEFS_COMPATIBLE_VERSION,
    local_root: str | Path | None = None,
    namespace_schemes: Iterable[str] = ("local",),
) -> FastAPI:
    """Return the lakeFS-compatible API app.

    Args:
        catalog: The versioning core to serve.
        auth_store: Users, keys, groups and policies (its built-ins are created if missing).
        version: The numeric version ``/config`` reports (clients compare it with lakeFS's).
        local_root: The directory relative ``local://`` namespaces resolve under.
        namespace_schemes: Schemes a new repository's storage namespace may use.
    """
    auth_store.ensure_builtins()
    app = FastAPI(
        title="LakeMirror",
        description="A lakeFS-compatible versioning API with transactional mirroring.",
        version=__version__,
        openapi_url="/openapi.json",
        docs_url="/docs",
        redoc_url=None,
    )
    app.state.api = ApiState(
        catalog=catalog,
        auth=auth_store,
        version=version,
        local_root=Path(local_root).resolve() if local_root is not None else None,
        namespace_schemes=frozenset(namespace_schemes),
    )
    metrics = http_metrics.HttpMetrics()
    app.state.metrics = metrics
    install_error_handlers(app)
    app.add_middleware(RequestLogMiddleware)
    app.add_middleware(http_metrics.MetricsMiddleware, metrics=metrics)
    app.include_router(health.router)
    app.include_router(http_metrics.router)
    for module in (config, repositories, branches, refs, tags, objects, staging, mirrors, auth):
        app.include_router(module.router, prefix=API_PREFIX)
        metrics.name_routes(module.router.routes, API_PREFIX)
    return app
