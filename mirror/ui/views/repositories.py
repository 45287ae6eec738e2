"""The repositories page: list with search and paging, create, delete with confirmation.

As lakeFS's UI: ``GET /api/v1/repositories?prefix&after&amount`` pages of 100, with Next and
Back to start only; ``POST /api/v1/repositories`` creates, and its refusal (a bad name, a
namespace the server does not serve) is shown next to the form; deleting asks the person to type
the repository's name. A mirror (a read-only repository) is marked with its source and offers no
delete, and a person whose policies do not allow creating or deleting sees no such control.
"""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route

from mirror.auth.permissions import Action, Permission, repository_arn
from mirror.ui.forms import field, redirect_after
from mirror.ui.listing import named_list
from mirror.ui.page import Page
from mirror.ui.render import page_url, urlpart
from mirror.ui.views.repository import load_repository, repository_url

__all__ = ["LIST_PATH", "routes"]

LIST_PATH = "/ui/repositories"

_NEW_FIELDS = ("name", "storage_namespace", "default_branch")


async def _listing(
    page: Page, *, new: dict[str, str] | None = None, error: str = "", status: int = 200
) -> Response:
    listed = await named_list(
        page,
        "/repositories",
        LIST_PATH,
        create=Permission(Action.CREATE_REPOSITORY, repository_arn("*")),
        delete=lambda repo: Permission(Action.DELETE_REPOSITORY, repository_arn(repo["id"])),
        search="search",
    )
    rows = [
        {
            **r,
            "url": repository_url(r["id"]),
            "delete_url": f"{repository_url(r['id'])}/delete",
            "can_delete": may and not r.get("read_only", False),
        }
        for r, may in listed.entries
    ]
    return page.render(
        "repositories.html",
        status,
        **listed.context,
        rows=rows,
        new=new or dict.fromkeys(_NEW_FIELDS, ""),
        error=error,
    )


async def list_repositories(request: Request) -> Response:
    """List repositories: a page of 100 from ``after``, those starting with ``search``."""
    return await _listing(await Page.open(request))


async def create_repository(request: Request) -> Response:
    """Create a repository; show the API's refusal next to the form."""
    page = await Page.open(request)
    form = await page.form()
    new = {name: field(form, name) for name in _NEW_FIELDS}
    body = {"name": new["name"], "storage_namespace": new["storage_namespace"]}
    if new["default_branch"]:
        body["default_branch"] = new["default_branch"]
    return await redirect_after(
        page.send("POST", "/repositories", json=body),
        repository_url(new["name"]),
        refused=lambda e: _listing(page, new=new, error=e.message, status=e.status),
    )


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
    if field(form, "confirm") != repository:
        return await _confirmation(
            page,
            repository,
            error="The name typed does not match the repository's name; nothing was deleted.",
            status=400,
        )
    return await redirect_after(
        page.send("DELETE", f"/repositories/{urlpart(repository)}"),
        page_url(LIST_PATH, deleted=repository),
        refused=lambda e: _confirmation(page, repository, error=e.message, status=e.status),
    )


routes: list[BaseRoute] = [
    Route(LIST_PATH, list_repositories, methods=["GET"]),
    Route(LIST_PATH, create_repository, methods=["POST"]),
    Route("/ui/repositories/{repository}/delete", confirm_delete, methods=["GET"]),
    Route("/ui/repositories/{repository}/delete", delete_repository, methods=["POST"]),
]
