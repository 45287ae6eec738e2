"""An import's page: its progress while it runs, then its commit or why it ended; cancel.

The import form (:mod:`mirror.ui.views.imports`) sends the browser here
(``/ui/repositories/<r>/imports/<id>?branch=<b>``). The page reads ``GET
/api/v1/repositories/{r}/branches/{b}/import?id=``: while the import runs it shows how many
objects it has ingested and when it last reported, and follows it as lakeFS's UI does, every
:data:`REFRESH_SECONDS` seconds (``follow.js`` asks for the page again and puts the new status in
place; without script a ``<noscript>`` meta refresh reloads it). Once done it links the
import's commit; a failed or canceled import shows the API's ``error.message``. **Cancel**
(``DELETE …/import?id=``, for those whose policies allow ``fs:ImportCancel`` on the branch)
stops a running import; the API marks it canceled at once, and it never commits afterwards.
"""

from __future__ import annotations

from typing import Any

from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import BaseRoute, Route

from mirror.auth.permissions import Permission, branch_arn
from mirror.ui.api import ApiError
from mirror.ui.forms import text
from mirror.ui.page import Page
from mirror.ui.render import page_url, urlpart
from mirror.ui.times import clock
from mirror.ui.views.commits import commit_url
from mirror.ui.views.repository import load_repository, repository_context, repository_url

__all__ = ["IMPORT_CANCEL", "REFRESH_SECONDS", "import_status_url", "routes"]

IMPORT_CANCEL = "fs:ImportCancel"
"""lakeFS's action for canceling an import."""
REFRESH_SECONDS = 3
"""How often a running import's page asks for its status again (lakeFS's UI: every 3 s)."""

_TAB = "objects"


def import_status_url(repository: str, branch: str, import_id: str) -> str:
    """Return the UI path of the import ``import_id`` into ``branch``."""
    return page_url(f"{repository_url(repository)}/imports/{urlpart(import_id)}", branch=branch)


def _api_path(repository: str, branch: str) -> str:
    return f"/repositories/{urlpart(repository)}/branches/{urlpart(branch)}/import"


async def _status_page(
    page: Page, branch: str, *, error: str = "", status: int = 200, canceled: bool = False
) -> Response:
    repository, import_id = page.request.path_params["repository"], page.request.path_params["id"]
    repo = await load_repository(page, repository)
    found: dict[str, Any] = await page.get(_api_path(repository, branch), id=import_id)
    commit: dict[str, Any] = found.get("commit") or {}
    failure: dict[str, Any] = found.get("error") or {}
    completed = bool(found.get("completed"))
    # an import that failed or was canceled is not completed, but it is over
    running = not completed and not failure
    can_cancel = (
        running
        and not repo.get("read_only", False)
        and (await page.allowed([Permission(IMPORT_CANCEL, branch_arn(repository, branch))]))[0]
    )
    return page.render(
        "repository/import_status.html",
        status,
        **repository_context(repo, _TAB),
        import_id=import_id,
        branch=branch,
        running=running,
        completed=completed,
        ingested=found.get("ingested_objects", 0),
        updated=clock(found.get("update_time")),
        commit=commit,
        commit_url=commit_url(repository, commit["id"]) if commit.get("id") else "",
        failure=failure.get("message", ""),
        error=error,
        canceled=canceled,
        can_cancel=can_cancel,
        cancel_url=f"{repository_url(repository)}/imports/{urlpart(import_id)}/cancel",
        refresh=REFRESH_SECONDS,
        objects_url=page_url(repository_url(repository, _TAB), ref=branch),
    )


async def show_import(request: Request) -> Response:
    """Show an import: running, done with its commit, or ended with the API's reason."""
    page = await Page.open(request)
    query = request.query_params
    return await _status_page(page, query.get("branch", ""), canceled=query.get("canceled") == "1")


async def cancel_import(request: Request) -> Response:
    """Cancel a running import; show the API's refusal (an import that committed) on its page."""
    page = await Page.open(request)
    form = await page.form()
    repository, import_id = request.path_params["repository"], request.path_params["id"]
    branch = text(form, "branch")
    try:
        await page.send("DELETE", _api_path(repository, branch), params={"id": import_id})
    except ApiError as refused:
        return await _status_page(page, branch, error=refused.message, status=refused.status)
    here = f"{repository_url(repository)}/imports/{urlpart(import_id)}"
    return RedirectResponse(page_url(here, branch=branch, canceled=1), status_code=303)


_IMPORT = "/ui/repositories/{repository}/imports/{id}"

routes: list[BaseRoute] = [
    Route(_IMPORT, show_import, methods=["GET"]),
    Route(_IMPORT + "/cancel", cancel_import, methods=["POST"]),
]
