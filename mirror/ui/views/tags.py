"""A repository's Tags tab: list with prefix search and paging, create from any ref, delete.

As lakeFS's UI: ``GET /api/v1/repositories/{r}/tags?prefix&after&amount`` pages of 100;
``POST …/tags`` ``{id, ref}`` tags the commit any ref resolves to (a branch, a tag, a commit ID
or a ref expression); ``DELETE …/tags/{tag}`` deletes after a confirmation. Each row links its
commit to the commit's page and shows its message (``GET …/commits/{id}``, read once per
distinct commit). A tag's name may hold ``/``, so the delete pages name the tag in the query.
A mirror, or a person without the permission, gets no create or delete control.
"""

from __future__ import annotations

import asyncio
from typing import Any

from starlette.datastructures import FormData
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import BaseRoute, Route

from mirror.auth.permissions import Action, Permission, tag_arn
from mirror.ui.api import ApiError
from mirror.ui.page import Page
from mirror.ui.render import page_url, urlpart
from mirror.ui.views.commits import commit_url
from mirror.ui.views.repository import load_repository, repository_context, repository_url

__all__ = ["PAGE_SIZE", "routes"]

PAGE_SIZE = 100
"""Tags a page lists (lakeFS's UI asks for 100)."""

_TAB = "tags"


def _field(form: FormData, name: str) -> str:
    value = form.get(name)
    return value.strip() if isinstance(value, str) else ""


def _api(repository: str, *rest: str) -> str:
    return "/".join([f"/repositories/{urlpart(repository)}", *rest])


async def _commit(page: Page, repository: str, commit_id: str) -> dict[str, Any] | None:
    try:
        found: dict[str, Any] = await page.get(_api(repository, "commits", urlpart(commit_id)))
    except ApiError:
        return None  # the row still shows the commit ID
    return found


async def _tags(
    page: Page, *, new: dict[str, str] | None = None, error: str = "", status: int = 200
) -> Response:
    repository = page.request.path_params["repository"]
    repo = await load_repository(page, repository)
    query = page.request.query_params
    prefix, after = query.get("prefix", ""), query.get("after", "")
    listing: dict[str, Any] = await page.get(
        _api(repository, "tags"), prefix=prefix, after=after, amount=PAGE_SIZE
    )
    tags: list[dict[str, Any]] = listing["results"]
    commit_ids = sorted({t["commit_id"] for t in tags})
    found = await asyncio.gather(*(_commit(page, repository, c) for c in commit_ids))
    commits = dict(zip(commit_ids, found, strict=True))
    writable = not repo.get("read_only", False)
    allowed = (
        await page.allowed(
            [
                Permission(Action.CREATE_TAG, tag_arn(repository, "*")),
                *(Permission(Action.DELETE_TAG, tag_arn(repository, t["id"])) for t in tags),
            ]
        )
        if writable
        else [False] * (len(tags) + 1)
    )
    here = repository_url(repository, _TAB)
    rows = [
        {
            "id": tag["id"],
            "commit_id": tag["commit_id"],
            "commit": commits.get(tag["commit_id"]),
            "commit_url": commit_url(repository, tag["commit_id"]),
            "delete_url": page_url(f"{here}/delete", tag=tag["id"]),
            "can_delete": writable and may_delete,
        }
        for tag, may_delete in zip(tags, allowed[1:], strict=True)
    ]
    pagination = listing["pagination"]
    return page.render(
        "repository/tags.html",
        status,
        **repository_context(repo, _TAB),
        rows=rows,
        tab_url=here,
        prefix=prefix,
        next_url=(
            page_url(here, prefix=prefix, after=pagination["next_offset"])
            if pagination["has_more"]
            else ""
        ),
        start_url=page_url(here, prefix=prefix) if after else "",
        can_create=writable and allowed[0],
        new=new or {"id": "", "ref": repo["default_branch"]},
        error=error,
        created=query.get("created", ""),
        deleted=query.get("deleted", ""),
    )


async def list_tags(request: Request) -> Response:
    """List a repository's tags: 100 from ``after``, those starting with ``prefix``."""
    return await _tags(await Page.open(request))


async def create_tag(request: Request) -> Response:
    """Tag the commit a ref resolves to; show the API's refusal next to the form."""
    page = await Page.open(request)
    form = await page.form()
    repository = request.path_params["repository"]
    new = {"id": _field(form, "id"), "ref": _field(form, "ref")}
    try:
        await page.send("POST", _api(repository, "tags"), json=new)
    except ApiError as refused:
        return await _tags(page, new=new, error=refused.message, status=refused.status)
    return RedirectResponse(
        page_url(repository_url(repository, _TAB), created=new["id"]), status_code=303
    )


async def _confirmation(
    page: Page, repository: str, tag: str, *, error: str = "", status: int = 200
) -> Response:
    repo = await load_repository(page, repository)
    found: dict[str, Any] = await page.get(_api(repository, "tags", urlpart(tag)))
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
    repository, tag = request.path_params["repository"], _field(form, "tag")
    try:
        await page.send("DELETE", _api(repository, "tags", urlpart(tag)))
    except ApiError as refused:
        return await _confirmation(
            page, repository, tag, error=refused.message, status=refused.status
        )
    return RedirectResponse(
        page_url(repository_url(repository, _TAB), deleted=tag), status_code=303
    )


_TAGS = "/ui/repositories/{repository}/tags"

routes: list[BaseRoute] = [
    Route(_TAGS, list_tags, methods=["GET"]),
    Route(_TAGS, create_tag, methods=["POST"]),
    Route(_TAGS + "/delete", confirm_delete, methods=["GET"]),
    Route(_TAGS + "/delete", delete_tag, methods=["POST"]),
]
