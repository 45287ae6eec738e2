"""Resetting a branch to any ref: lakeFS's hard reset, behind a confirmation.

``PUT /api/v1/repositories/{r}/branches/{b}/hard_reset?ref=<ref>`` points the branch at the
commit ``ref`` resolves to (a branch, a tag, a commit ID or a ref expression such as
``main~1``). The server drops nothing staged: it refuses a branch with uncommitted changes
(``uncommitted changes (dirty branch)``) and a branch a protection rule covers (``protected
branch``), and the page shows that refusal. The confirmation names the branch, its head and the
commit the target resolves to; a person whose policies do not allow it (``fs:RevertBranch``, as
lakeFS asks), and a mirror, get no button.
"""

from __future__ import annotations

import asyncio
from typing import Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route

from mirror.auth.permissions import Action, Permission, branch_arn
from mirror.ui.api import ApiError
from mirror.ui.forms import field, redirect_after
from mirror.ui.page import Page
from mirror.ui.render import page_url, urlpart
from mirror.ui.views.commits import commit_url, find_commit
from mirror.ui.views.repository import (
    load_repository,
    repository_api,
    repository_context,
    repository_url,
)

__all__ = ["reset_url", "routes"]

_TAB = "branches"


def reset_url(repository: str, branch: str) -> str:
    """Return the UI path of the page resetting ``branch``."""
    return f"{repository_url(repository, _TAB)}/{urlpart(branch)}/reset"


async def _target(page: Page, repository: str, ref: str) -> tuple[dict[str, Any] | None, str]:
    """Return the commit ``ref`` resolves to, or the API's refusal of it."""
    if not ref:
        return None, ""
    try:
        found: dict[str, Any] = await page.get(repository_api(repository, "commits", urlpart(ref)))
    except ApiError as refused:
        return None, refused.message
    return found, ""


async def _dirty(page: Page, repository: str, branch: str, *, writable: bool) -> bool:
    """Return whether the branch has uncommitted changes (``False`` when not read: a mirror's)."""
    if not writable:
        return False
    try:
        diff: dict[str, Any] = await page.get(
            repository_api(repository, "branches", urlpart(branch), "diff"), amount=1
        )
    except ApiError:
        return False
    return bool(diff["results"])


async def _confirmation(page: Page, ref: str, *, error: str = "", status: int = 200) -> Response:
    params = page.request.path_params
    repository, name = params["repository"], params["branch"]
    repo, branch = await asyncio.gather(
        load_repository(page, repository),
        page.get(repository_api(repository, "branches", urlpart(name))),
    )
    writable = not repo.get("read_only", False)
    (may_reset,), head, (target, target_error), dirty = await asyncio.gather(
        page.allowed([Permission(Action.REVERT_BRANCH, branch_arn(repository, name))]),
        find_commit(page, repository, branch["commit_id"]),
        _target(page, repository, ref),
        _dirty(page, repository, name, writable=writable),
    )
    here = reset_url(repository, name)
    return page.render(
        "repository/branch_reset.html",
        status,
        **repository_context(repo, _TAB),
        branch=branch,
        head=head,
        head_url=commit_url(repository, branch["commit_id"]),
        ref=ref,
        target=target,
        target_url=commit_url(repository, target["id"]) if target else "",
        target_error=target_error,
        dirty=dirty,
        changes_url=page_url(repository_url(repository, "changes"), ref=name),
        can_reset=writable and may_reset,
        writable=writable,
        action=here,
        here=here,
        cancel_url=repository_url(repository, _TAB),
        error=error,
    )


async def confirm_reset(request: Request) -> Response:
    """Show the branch, its head, and the commit the target ``ref`` names, to confirm."""
    page = await Page.open(request, header_later=True)
    return await _confirmation(page, request.query_params.get("ref", "").strip())


async def reset_branch(request: Request) -> Response:
    """Hard-reset the branch to the form's ``ref``; show the API's refusal on the confirmation."""
    page = await Page.open(request, header_later=True)
    form = await page.form()
    repository, branch = request.path_params["repository"], request.path_params["branch"]
    ref = field(form, "ref")
    path = repository_api(repository, "branches", urlpart(branch), "hard_reset")
    return await redirect_after(
        page.send("PUT", path, params={"ref": ref}),
        page_url(repository_url(repository, _TAB), reset=branch, to=ref),
        refused=lambda e: _confirmation(page, ref, error=e.message, status=e.status),
    )


_RESET = "/ui/repositories/{repository}/branches/{branch}/reset"

routes: list[BaseRoute] = [
    Route(_RESET, confirm_reset, methods=["GET"]),
    Route(_RESET, reset_branch, methods=["POST"]),
]
