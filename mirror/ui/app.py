"""The web UI's ASGI app: the views' routes, the static files, errors as pages, security headers.

The UI is a front door beside the REST API and the S3 gateway. It imports neither: the process
assembling the server (:mod:`mirror.cli.server`) hands it the API app, which it calls in process
for every piece of data (:mod:`mirror.ui.api`). A missing or refused session sends the browser to
the sign-in page with ``next``; a CSRF refusal is a 403 page saying why; an API refusal a view
does not handle itself is a page with the API's status and message.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import BaseRoute, Mount
from starlette.staticfiles import StaticFiles

from mirror.httputil.metrics import HttpMetrics, MetricsMiddleware
from mirror.httputil.request_log import RequestLogMiddleware
from mirror.ui.api import ApiClient, ApiError, BrowserAddress, SignedOut
from mirror.ui.csrf import CsrfTokens
from mirror.ui.headers import SecurityHeadersMiddleware
from mirror.ui.mirroring import install_replicant
from mirror.ui.page import UIState, render_page
from mirror.ui.render import STATIC_PREFIX, Templates
from mirror.ui.session import CsrfRefused, SignInRequired, sign_in_url
from mirror.ui.views import (
    access_keys,
    actions,
    auth,
    branch_reset,
    branches,
    changes,
    commit,
    commits,
    compare,
    gc_rules,
    groups,
    import_status,
    imports,
    memberships,
    merges,
    object_page,
    objects,
    policies,
    protection,
    pulls,
    repositories,
    repository,
    settings,
    tags,
    upload,
    users,
)
from mirror.ui.views import mirror as mirror_page
from mirror.ui.views import mirrors as mirrors_page
from mirror.ui.views import promotion as promotion_page

if TYPE_CHECKING:
    from starlette.types import ASGIApp

__all__ = ["STATIC_DIR", "create_ui_app", "ui_routes"]

STATIC_DIR = Path(__file__).parent / "static"


def ui_routes() -> list[BaseRoute]:
    """Return every route of the UI: each view module's, then the static files."""
    return [
        *auth.routes,
        *repositories.routes,
        *repository.routes,
        *objects.routes,
        *upload.routes,
        *object_page.routes,
        *branches.routes,
        *branch_reset.routes,
        *changes.routes,
        *commits.routes,
        *commit.routes,
        *tags.routes,
        *compare.routes,
        *merges.routes,
        *pulls.routes,
        *actions.routes,
        *settings.routes,
        *gc_rules.routes,
        *protection.routes,
        *imports.routes,
        *import_status.routes,
        *mirrors_page.routes,
        *mirror_page.routes,
        *promotion_page.routes,
        *users.routes,
        *groups.routes,
        *policies.routes,
        *memberships.routes,
        *access_keys.routes,
        Mount(STATIC_PREFIX.rstrip("/"), StaticFiles(directory=STATIC_DIR), name="static"),
    ]


async def _sign_in(request: Request, exc: Exception) -> Response:
    # a session the API refuses mid-page (SignedOut) returns to the page the person was on
    next_path = exc.next_path if isinstance(exc, SignInRequired) else request.url.path
    return RedirectResponse(sign_in_url(next_path), status_code=303)


async def _csrf_refused(request: Request, exc: Exception) -> Response:
    return render_page(request, "error.html", 403, title="Request refused", message=str(exc))


async def _api_refused(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, ApiError)
    return render_page(request, "error.html", exc.status, title="Error", message=exc.message)


async def _not_found(request: Request, exc: Exception) -> Response:
    return render_page(request, "error.html", 404, title="Not found", message="No such page.")


def create_ui_app(
    api_app: ASGIApp,
    csrf: CsrfTokens,
    metrics: HttpMetrics | None = None,
    *,
    replicant_url: str = "",
) -> ASGIApp:
    """Return the UI app, reading every page's data from ``api_app`` (the ``/api/v1`` app).

    Each request of the UI writes its access line (under its own request ID, which the API
    calls it makes carry too) and, with ``metrics``, counts under its route template.

    Args:
        api_app: The REST API's ASGI app, called in process as the signed-in person.
        csrf: The installation's CSRF tokens (:meth:`CsrfTokens.from_login_tokens`).
        metrics: The HTTP metrics the UI's requests count in (the API's, on one listener).
        replicant_url: This region's replicant (``ui.replicant_url``): the mirroring pages
            call it; empty, they are not served.
    """
    app = Starlette(
        routes=ui_routes(),
        exception_handlers={
            SignInRequired: _sign_in,
            SignedOut: _sign_in,
            CsrfRefused: _csrf_refused,
            ApiError: _api_refused,
            404: _not_found,
        },
    )
    app.state.ui = UIState(ApiClient(api_app), csrf, Templates())
    install_replicant(app, replicant_url)
    # outside Starlette's own error middleware, so that even its 500 page carries the headers
    served: ASGIApp = RequestLogMiddleware(SecurityHeadersMiddleware(BrowserAddress(app)))
    return served if metrics is None else MetricsMiddleware(served, metrics)
