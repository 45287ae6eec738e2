"""The repositories page: list with search and paging, create, delete with confirmation.

As lakeFS's UI: ``GET /api/v1/repositories?prefix&after&amount`` pages of 100, with Next and
Back to start only; ``POST /api/v1/repositories`` creates, and its refusal (a bad name, a
namespace the server does not serve) is shown next to the form; deleting asks the person to type
the repository's name. A mirror (a read-only repository) is marked with its source and offers no
delete, and a person whose policies do not allow creating or deleting sees no such control.
"""

from __future__ import annotations

from typing import Any

from starlette.datastructures import FormData
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import BaseRoute, Route

from mirror.auth.permissions import Action, Permission, repository_arn
from mirror.ui.api import ApiError
from mirror.ui.page import Page
from mirror.ui.render import page_url, urlpart
from mirror.ui.views.repository import load_repository, repository_url

__all__ = ["LIST_PATH", "PAGE_SIZE", "routes"]

LIST_PATH = "/ui/repositories"
PAGE_SIZE = 100
"""Repositories a page lists (lakeFS's UI asks for 100)."""

_NEW_FIELDS = ("name", "storage_namespace", "default_branch")


def _field(form: FormData, name: str) -> str:
    value = form.get(name)
    return value.strip() if isinstance(value, str) else ""


async def _listing(
    page: Page, *, new: dict[str, str] | None = None, error: str = "", status: int = 200
) -> Response:
    query = page.request.query_params
    search = query.get("search", "")
    after = query.get("after", "")
    listing: dict[str, Any] = await page.get(
        "/repositories", prefix=search, after=after, amount=PAGE_SIZE
    )
    repos: list[dict[str, Any]] = listing["results"]
    allowed = await page.allowed(
        [
            Permission(Action.CREATE_REPOSITORY, repository_arn("*")),
            *(Permission(Action.DELETE_REPOSITORY, repository_arn(r["id"])) for r in repos),
        ]
    )
    rows = [
        {
            **r,
            "url": repository_url(r["id"]),
            "delete_url": f"{repository_url(r['id'])}/delete",
            "can_delete": may and not r.get("read_only", False),
        }
        for r, may in zip(repos, allowed[1:], strict=True)
    ]
    pagination = listing["pagination"]
    next_url = (
        page_url(LIST_PATH, search=search, after=pagination["next_offset"])
        if pagination["has_more"]
        else ""
    )
    return page.render(
        "repositories.html",
        status,
        rows=rows,
        search=search,
        after=after,
        next_url=next_url,
        start_url=page_url(LIST_PATH, search=search) if after else "",
        can_create=allowed[0],
        new=new or dict.fromkeys(_NEW_FIELDS, ""),
        error=error,
        deleted=query.get("deleted", ""),
    )


async def list_repositories(request: Request) -> Response:
    """List repositories: a page of 100 from ``after``, those starting with ``search``."""
    return await _listing(await Page.open(request))


async def create_repository(request: Request) -> Response:
    """Create a repository; show the API's refusal next to the form."""
    page = await Page.open(request)
    form = await page.form()
    new = {name: _field(form, name) for name in _NEW_FIELDS}
    body = {"name": new["name"], "storage_namespace": new["storage_namespace"]}
    if new["default_branch"]:
        body["default_branch"] = new["default_branch"]
    try:
        await page.send("POST", "/repositories", json=body)
    except ApiError as refused:
        return await _listing(page, new=new, error=refused.message, status=refused.status)
    return RedirectResponse(repository_url(new["name"]), status_code=303)


async def _confirmation(
    page: Page, repository: str, *, error: str = "", status: int = 200
) -> Response:
    repo = await load_repository(page, repository)
    return page.render(
        "repository_delete.html",
        status,
        repo=repo,
        action=f"{repository_url(repo['id'])}/delete",
        error=error,
    )


async def confirm_delete(request: Request) -> Response:
    """Ask the person to type the repository's name before deleting it."""
    page = await Page.open(request)
    return await _confirmation(page, request.path_params["repository"])


async def delete_repository(request: Request) -> Response:
    """Delete a repository once its name was typed; show the API's refusal otherwise."""
    page = await Page.open(request)
    form = await page.form()
    repository = request.path_params["repository"]
    if _field(form, "confirm") != repository:
        return await _confirmation(
            page,
            repository,
            error="The name typed does not match the repository's name; nothing was deleted.",
            status=400,
        )
    try:
        await page.send("DELETE", f"/repositories/{urlpart(repository)}")
    except ApiError as refused:
        return await _confirmation(page, repository, error=refused.message, status=refused.status)
    return RedirectResponse(page_url(LIST_PATH, deleted=repository), status_code=303)


routes: list[BaseRoute] = [
    Route(LIST_PATH, list_repositories, methods=["GET"]),
    Route(LIST_PATH, create_repository, methods=["POST"]),
    Route("/ui/repositories/{repository}/delete", confirm_delete, methods=["GET"]),
    Route("/ui/repositories/{repository}/delete", delete_repository, methods=["POST"]),
]
