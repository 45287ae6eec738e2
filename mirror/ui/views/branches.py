"""A repository's Branches tab: list with paging, create from any ref, delete, protection shown.

As lakeFS's UI: ``GET /api/v1/repositories/{r}/branches?prefix&after&amount`` pages of 100;
``POST …/branches`` ``{name, source}`` creates from any ref (a branch, a tag, a commit ID or a
ref expression), ``DELETE …/branches/{b}`` deletes after a confirmation. The default branch is
never offered for deletion; a protected branch is, as lakeFS allows it. Each row shows the head
commit (``GET …/commits/{id}``, read once per distinct head) and whether a branch protection
rule (``GET …/settings/branch_protection``) covers it; a person who may not read the rules sees
that they are not shown. A mirror, or a person without the permission, gets no create or delete
control.
"""

from __future__ import annotations

import asyncio
import re
from typing import Any

from starlette.datastructures import FormData
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import BaseRoute, Route

from mirror.auth.permissions import Action, Permission, branch_arn
from mirror.core.protection import InvalidPatternError, compile_pattern
from mirror.ui.api import ApiError
from mirror.ui.page import Page
from mirror.ui.render import page_url, urlpart
from mirror.ui.views.repository import load_repository, repository_context, repository_url

__all__ = ["PAGE_SIZE", "routes"]

PAGE_SIZE = 100
"""Branches a page lists (lakeFS's UI asks for 100)."""

_TAB = "branches"


def _field(form: FormData, name: str) -> str:
    value = form.get(name)
    return value.strip() if isinstance(value, str) else ""


def _api_path(repository: str, *rest: str) -> str:
    return "/".join([f"/repositories/{urlpart(repository)}", *rest])


async def _head(page: Page, repository: str, commit_id: str) -> dict[str, Any] | None:
    try:
        found: dict[str, Any] = await page.get(_api_path(repository, "commits", urlpart(commit_id)))
    except ApiError:
        return None  # the row still shows the commit ID
    return found


async def _protection(page: Page, repository: str) -> list[re.Pattern[str]] | None:
    """Return the compiled protection patterns, or ``None`` when the person may not read them."""
    try:
        rules: list[dict[str, str]] = await page.get(
            _api_path(repository, "settings", "branch_protection")
        )
    except ApiError as refused:
        if refused.status == 403:
            return None
        raise
    compiled = []
    for rule in rules:
        try:
            compiled.append(compile_pattern(rule["pattern"]))
        except InvalidPatternError:
            continue  # the API refuses such a pattern; an old one stored elsewhere protects nothing
    return compiled


async def _branches(
    page: Page, *, new: dict[str, str] | None = None, error: str = "", status: int = 200
) -> Response:
    repository = page.request.path_params["repository"]
    repo = await load_repository(page, repository)
    query = page.request.query_params
    prefix = query.get("prefix", "")
    after = query.get("after", "")
    listing: dict[str, Any] = await page.get(
        _api_path(repository, "branches"), prefix=prefix, after=after, amount=PAGE_SIZE
    )
    branches: list[dict[str, Any]] = listing["results"]
    commit_ids = sorted({b["commit_id"] for b in branches if b["commit_id"]})
    found, rules = await asyncio.gather(
        asyncio.gather(*(_head(page, repository, c) for c in commit_ids)),
        _protection(page, repository),
    )
    heads = dict(zip(commit_ids, found, strict=True))
    writable = not repo.get("read_only", False)
    allowed = (
        await page.allowed(
            [
                Permission(Action.CREATE_BRANCH, branch_arn(repository, "*")),
                *(
                    Permission(Action.DELETE_BRANCH, branch_arn(repository, b["id"]))
                    for b in branches
                ),
            ]
        )
        if writable
        else [False] * (len(branches) + 1)
    )
    rows = []
    for branch, may_delete in zip(branches, allowed[1:], strict=True):
        name = branch["id"]
        protected = None if rules is None else any(p.fullmatch(name) for p in rules)
        default = name == repo["default_branch"]
        rows.append(
            {
                "id": name,
                "commit_id": branch["commit_id"],
                "head": heads.get(branch["commit_id"]),
                "default": default,
                "protected": protected,
                "delete_url": f"{repository_url(repository, _TAB)}/{urlpart(name)}/delete",
                # lakeFS lets a protected branch be deleted: protection guards its contents
                "can_delete": writable and may_delete and not default,
            }
        )
    here = repository_url(repository, _TAB)
    pagination = listing["pagination"]
    return page.render(
        "repository/branches.html",
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
        rules_visible=rules is not None,
        can_create=writable and allowed[0],
        new=new or {"name": "", "source": repo["default_branch"]},
        error=error,
        created=query.get("created", ""),
        deleted=query.get("deleted", ""),
    )


async def list_branches(request: Request) -> Response:
    """List a repository's branches: 100 from ``after``, those starting with ``prefix``."""
    return await _branches(await Page.open(request))


async def create_branch(request: Request) -> Response:
    """Create a branch from a ref; show the API's refusal next to the form."""
    page = await Page.open(request)
    form = await page.form()
    repository = request.path_params["repository"]
    new = {"name": _field(form, "name"), "source": _field(form, "source")}
    try:
        await page.send("POST", _api_path(repository, "branches"), json=new)
    except ApiError as refused:
        return await _branches(page, new=new, error=refused.message, status=refused.status)
    return RedirectResponse(
        page_url(repository_url(repository, _TAB), created=new["name"]), status_code=303
    )


async def _confirmation(
    page: Page, repository: str, branch: str, *, error: str = "", status: int = 200
) -> Response:
    repo = await load_repository(page, repository)
    found: dict[str, Any] = await page.get(_api_path(repository, "branches", urlpart(branch)))
    return page.render(
        "repository/branch_delete.html",
        status,
        **repository_context(repo, _TAB),
        branch=found,
        action=f"{repository_url(repository, _TAB)}/{urlpart(branch)}/delete",
        cancel_url=repository_url(repository, _TAB),
        error=error,
    )


async def confirm_delete(request: Request) -> Response:
    """Ask the person to confirm deleting a branch."""
    page = await Page.open(request)
    params = request.path_params
    return await _confirmation(page, params["repository"], params["branch"])


async def delete_branch(request: Request) -> Response:
    """Delete a branch; show the API's refusal on the confirmation page."""
    page = await Page.open(request)
    await page.form()
    repository, branch = request.path_params["repository"], request.path_params["branch"]
    try:
        await page.send("DELETE", _api_path(repository, "branches", urlpart(branch)))
    except ApiError as refused:
        return await _confirmation(
            page, repository, branch, error=refused.message, status=refused.status
        )
    return RedirectResponse(
        page_url(repository_url(repository, _TAB), deleted=branch), status_code=303
    )


_BRANCH = "/ui/repositories/{repository}/branches/{branch}/delete"

routes: list[BaseRoute] = [
    Route("/ui/repositories/{repository}/branches", list_branches, methods=["GET"]),
    Route("/ui/repositories/{repository}/branches", create_branch, methods=["POST"]),
    Route(_BRANCH, confirm_delete, methods=["GET"]),
    Route(_BRANCH, delete_branch, methods=["POST"]),
]
