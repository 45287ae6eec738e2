"""A repository's Branches tab: list with paging, create from any ref, delete, protection shown.

As lakeFS's UI: ``GET /api/v1/repositories/{r}/branches?prefix&after&amount`` pages of 100;
``POST …/branches`` ``{name, source}`` creates from any ref (a branch, a tag, a commit ID or a
ref expression), ``DELETE …/branches/{b}`` deletes after a confirmation. The default branch is
never offered for deletion; a protected branch is, as lakeFS allows it. Each row shows the head
commit (``GET …/commits/{id}``, read once per distinct head) and whether a branch protection
rule (``GET …/settings/branch_protection``) covers it; a person who may not read the rules sees
that they are not shown. Each branch links to its reset (:mod:`mirror.ui.views.branch_reset`),
whose permission is asked with the delete's. A mirror, or a person without the permission, gets
no create, delete or reset control.
"""

from __future__ import annotations

import asyncio
import re
from typing import Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route

from mirror.auth.permissions import Action, Permission, branch_arn
from mirror.core.protection import InvalidPatternError, compile_pattern
from mirror.ui.api import ApiError
from mirror.ui.forms import field, redirect_after
from mirror.ui.listing import named_list
from mirror.ui.page import Page
from mirror.ui.render import page_url, urlpart
from mirror.ui.views.branch_reset import reset_url
from mirror.ui.views.commits import find_commits
from mirror.ui.views.repository import (
    load_repository,
    repository_api,
    repository_context,
    repository_url,
)

__all__ = ["routes"]

_TAB = "branches"


async def _protection(page: Page, repository: str) -> list[re.Pattern[str]] | None:
    """Return the compiled protection patterns, or ``None`` when the person may not read them."""
    try:
        rules: list[dict[str, str]] = await page.get(
            repository_api(repository, "settings", "branch_protection")
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
    here = repository_url(repository, _TAB)
    listed = await named_list(
        page,
        repository_api(repository, "branches"),
        here,
        create=Permission(Action.CREATE_BRANCH, branch_arn(repository, "*")),
        delete=lambda branch: Permission(
            Action.DELETE_BRANCH, branch_arn(repository, branch["id"])
        ),
        writable=not repo.get("read_only", False),
        # lakeFS asks fs:RevertBranch of a hard reset
        also=lambda branch: Permission(Action.REVERT_BRANCH, branch_arn(repository, branch["id"])),
    )
    heads, rules = await asyncio.gather(
        find_commits(page, repository, (b["commit_id"] for b, _ in listed.entries)),
        _protection(page, repository),
    )
    rows = []
    for (branch, may_delete), can_reset in zip(listed.entries, listed.also, strict=True):
        name = branch["id"]
        default = name == repo["default_branch"]
        rows.append(
            {
                "id": name,
                "commit_id": branch["commit_id"],
                "head": heads.get(branch["commit_id"]),
                "default": default,
                "protected": None if rules is None else any(p.fullmatch(name) for p in rules),
                "delete_url": f"{here}/{urlpart(name)}/delete",
                # lakeFS lets a protected branch be deleted: protection guards its contents
                "can_delete": may_delete and not default,
                "reset_url": reset_url(repository, name),
                "can_reset": can_reset,
            }
        )
    return page.render(
        "repository/branches.html",
        status,
        **repository_context(repo, _TAB),
        **listed.context,
        rows=rows,
        tab_url=here,
        rules_visible=rules is not None,
        new=new or {"name": "", "source": repo["default_branch"]},
        error=error,
        reset=page.request.query_params.get("reset", ""),
        reset_to=page.request.query_params.get("to", ""),
    )


async def list_branches(request: Request) -> Response:
    """List a repository's branches: 100 from ``after``, those starting with ``prefix``."""
    return await _branches(await Page.open(request))


async def create_branch(request: Request) -> Response:
    """Create a branch from a ref; show the API's refusal next to the form."""
    page = await Page.open(request)
    form = await page.form()
    repository = request.path_params["repository"]
    new = {"name": field(form, "name"), "source": field(form, "source")}
    return await redirect_after(
        page.send("POST", repository_api(repository, "branches"), json=new),
        page_url(repository_url(repository, _TAB), created=new["name"]),
        refused=lambda e: _branches(page, new=new, error=e.message, status=e.status),
    )


async def _confirmation(
    page: Page, repository: str, branch: str, *, error: str = "", status: int = 200
) -> Response:
    repo = await load_repository(page, repository)
    found: dict[str, Any] = await page.get(repository_api(repository, "branches", urlpart(branch)))
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
    return await redirect_after(
        page.send("DELETE", repository_api(repository, "branches", urlpart(branch))),
        page_url(repository_url(repository, _TAB), deleted=branch),
        refused=lambda e: _confirmation(page, repository, branch, error=e.message, status=e.status),
    )


_BRANCH = "/ui/repositories/{repository}/branches/{branch}/delete"

routes: list[BaseRoute] = [
    Route("/ui/repositories/{repository}/branches", list_branches, methods=["GET"]),
    Route("/ui/repositories/{repository}/branches", create_branch, methods=["POST"]),
    Route(_BRANCH, confirm_delete, methods=["GET"]),
    Route(_BRANCH, delete_branch, methods=["POST"]),
]
