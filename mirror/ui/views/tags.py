"""A repository's Tags tab: list with prefix search and paging, create from any ref, delete.

As lakeFS's UI: ``GET /api/v1/repositories/{r}/tags?prefix&after&amount`` pages of 100;
``POST …/tags`` ``{id, ref}`` tags the commit any ref resolves to (a branch, a tag, a commit ID
or a ref expression); ``DELETE …/tags/{tag}`` deletes after a confirmation. Each row links its
commit to the commit's page and shows its message (``GET …/commits/{id}``, read once per
distinct commit). A tag's name may hold ``/``, so the delete pages name the tag in the query.
A mirror, or a person without the permission, gets no create or delete control.
"""

from __future__ import annotations

from typing import Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route

from mirror.auth.permissions import Action, Permission, tag_arn
from mirror.ui.forms import field, redirect_after
from mirror.ui.listing import named_list
from mirror.ui.page import Page
from mirror.ui.render import page_url, urlpart
from mirror.ui.views.commits import commit_url, find_commits
from mirror.ui.views.repository import (
    load_repository,
    repository_api,
    repository_context,
    repository_url,
)

__all__ = ["routes"]

_TAB = "tags"


async def _tags(
    page: Page, *, new: dict[str, str] | None = None, error: str = "", status: int = 200
) -> Response:
    repository = page.request.path_params["repository"]
    repo = await load_repository(page, repository)
    here = repository_url(repository, _TAB)
    listed = await named_list(
        page,
        repository_api(repository, "tags"),
        here,
        create=Permission(Action.CREATE_TAG, tag_arn(repository, "*")),
        delete=lambda tag: Permission(Action.DELETE_TAG, tag_arn(repository, tag["id"])),
        writable=not repo.get("read_only", False),
    )
    commits = await find_commits(page, repository, (t["commit_id"] for t, _ in listed.entries))
    rows = [
        {
            "id": tag["id"],
            "commit_id": tag["commit_id"],
            "commit": commits.get(tag["commit_id"]),
            "commit_url": commit_url(repository, tag["commit_id"]),
            "delete_url": page_url(f"{here}/delete", tag=tag["id"]),
            "can_delete": may_delete,
        }
        for tag, may_delete in listed.entries
    ]
    return page.render(
        "repository/tags.html",
        status,
        **repository_context(repo, _TAB),
        **listed.context,
        rows=rows,
        tab_url=here,
        new=new or {"id": "", "ref": repo["default_branch"]},
        error=error,
    )


async def list_tags(request: Request) -> Response:
    """List a repository's tags: 100 from ``after``, those starting with ``prefix``."""
    return await _tags(await Page.open(request))


async def create_tag(request: Request) -> Response:
    """Tag the commit a ref resolves to; show the API's refusal next to the form."""
    page = await Page.open(request)
    form = await page.form()
    repository = request.path_params["repository"]
    new = {"id": field(form, "id"), "ref": field(form, "ref")}
    return await redirect_after(
        page.send("POST", repository_api(repository, "tags"), json=new),
        page_url(repository_url(repository, _TAB), created=new["id"]),
        refused=lambda e: _tags(page, new=new, error=e.message, status=e.status),
    )


async def _confirmation(
    page: Page, repository: str, tag: str, *, error: str = "", status: int = 200
) -> Response:
    repo = await load_repository(page, repository)
    found: dict[str, Any] = await page.get(repository_api(repository, "tags", urlpart(tag)))
    here = repository_url(repository, _TAB)
    return page.render(
        "repository/tag_delete.html",
        status,
        **repository_context(repo, _TAB),
        tag=found,
        commit_url=commit_url(repository, found["commit_id"]),
        action=f"{here}/delete",
        cancel_url=here,
        error=error,
    )


async def confirm_delete(request: Request) -> Response:
    """Ask the person to confirm deleting the tag named by ``tag``."""
    page = await Page.open(request)
    tag = request.query_params.get("tag", "")
    return await _confirmation(page, request.path_params["repository"], tag)


async def delete_tag(request: Request) -> Response:
    """Delete a tag; show the API's refusal on the confirmation page."""
    page = await Page.open(request)
    form = await page.form()
    repository, tag = request.path_params["repository"], field(form, "tag")
    return await redirect_after(
        page.send("DELETE", repository_api(repository, "tags", urlpart(tag))),
        page_url(repository_url(repository, _TAB), deleted=tag),
        refused=lambda e: _confirmation(page, repository, tag, error=e.message, status=e.status),
    )


_TAGS = "/ui/repositories/{repository}/tags"

routes: list[BaseRoute] = [
    Route(_TAGS, list_tags, methods=["GET"]),
    Route(_TAGS, create_tag, methods=["POST"]),
    Route(_TAGS + "/delete", confirm_delete, methods=["GET"]),
    Route(_TAGS + "/delete", delete_tag, methods=["POST"]),
]
