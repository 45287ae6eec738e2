"""A repository's branch protection rules, in its Settings tab: listed, added, removed.

As lakeFS's UI: ``GET /api/v1/repositories/{r}/settings/branch_protection`` answers the
patterns and, in ``ETag``, their version; a change ``PUT``s the whole list with ``If-Match:
<that ETag>``. The page carries the ETag it read in each form, and a change builds the new list
from the rules as they are now, so a change someone made since the page was read makes the API
answer 412: the page then shows the server's message and the rules as they are, to decide
again. A pattern the API refuses (an invalid glob) shows its message next to the form, with what
was typed. Changing needs ``branches:SetBranchProtectionRules``; reading
``branches:GetBranchProtectionRules``, without which the page says the rules are not shown. A
mirror refuses every change, so it gets no control.
"""

from __future__ import annotations

from collections.abc import Callable

import httpx
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import BaseRoute, Route

from mirror.auth.permissions import Permission, repository_arn
from mirror.ui.api import ApiError
from mirror.ui.forms import field
from mirror.ui.page import Page
from mirror.ui.render import page_url, urlpart
from mirror.ui.views.repository import load_repository
from mirror.ui.views.settings import settings_context, settings_url

__all__ = ["SET_PROTECTION", "routes"]

SET_PROTECTION = "branches:SetBranchProtectionRules"
"""lakeFS's action for changing a repository's branch protection rules."""

_SECTION = "branches"
_CHANGED = "The rules changed since this page was read; here they are as they are now."
"""What the page adds to the API's 412 (lakeFS's ``Precondition failed``)."""


def _api_path(repository: str) -> str:
    return f"/repositories/{urlpart(repository)}/settings/branch_protection"


async def _read(page: Page, repository: str) -> tuple[list[str], str] | None:
    """Return the protected patterns and their ETag, or ``None`` if the person may not read them."""
    try:
        answer: httpx.Response = await page.send("GET", _api_path(repository))
    except ApiError as refused:
        if refused.status == 403:
            return None
        raise
    return [rule["pattern"] for rule in answer.json()], answer.headers.get("ETag", "")


async def _rules_page(
    page: Page, *, pattern: str = "", error: str = "", status: int = 200
) -> Response:
    repository = page.request.path_params["repository"]
    repo = await load_repository(page, repository)
    found = await _read(page, repository)
    can_edit = (
        found is not None
        and not repo.get("read_only", False)
        and (await page.allowed([Permission(SET_PROTECTION, repository_arn(repository))]))[0]
    )
    here = settings_url(repository, _SECTION)
    query = page.request.query_params
    return page.render(
        "repository/settings_protection.html",
        status,
        **settings_context(repo, _SECTION),
        visible=found is not None,
        patterns=found[0] if found else [],
        etag=found[1] if found else "",
        can_edit=can_edit,
        pattern=pattern,
        error=error,
        add_url=f"{here}/add",
        remove_url=f"{here}/remove",
        added=query.get("added", "") if status == 200 else "",
        removed=query.get("removed", "") if status == 200 else "",
    )


async def show_rules(request: Request) -> Response:
    """Show the repository's branch protection rules, and the controls to change them."""
    return await _rules_page(await Page.open(request))


async def _change(
    request: Request, change: Callable[[list[str], str], tuple[list[str], str]], done: str
) -> Response:
    """PUT the list ``change`` makes of the current rules, under the ETag the page read.

    ``change`` answers the new list and, when the change is no change (a pattern protected
    already), why: the list is PUT all the same, so that a change made since the page was read
    is still reported (412) rather than hidden behind this message.
    """
    page = await Page.open(request)
    form = await page.form()
    repository = request.path_params["repository"]
    pattern, etag = field(form, "pattern"), form.get("etag")
    if not pattern:
        return await _rules_page(page, error="Type a branch name pattern.", status=400)
    found = await _read(page, repository)
    wanted, unchanged = change(found[0] if found else [], pattern)
    body = [{"pattern": p} for p in wanted]
    # the ETag of the page the person saw, not of the rules read just now: a change made in
    # between is theirs to see before deciding again
    headers = {"If-Match": etag} if isinstance(etag, str) else None
    kept = pattern if done == "added" else ""
    try:
        await page.send("PUT", _api_path(repository), json=body, headers=headers)
    except ApiError as refused:
        message = f"{refused.message}. {_CHANGED}" if refused.status == 412 else refused.message
        return await _rules_page(page, pattern=kept, error=message, status=refused.status)
    if unchanged:
        return await _rules_page(page, pattern=kept, error=unchanged, status=409)
    here = settings_url(repository, _SECTION)
    return RedirectResponse(page_url(here, **{done: pattern}), status_code=303)


def _with(current: list[str], pattern: str) -> tuple[list[str], str]:
    if pattern in current:
        return current, f"The pattern “{pattern}” is protected already."
    return [*current, pattern], ""


def _without(current: list[str], pattern: str) -> tuple[list[str], str]:
    if pattern not in current:
        return current, f"The pattern “{pattern}” is not protected."
    return [p for p in current if p != pattern], ""


async def add_rule(request: Request) -> Response:
    """Protect one more branch name pattern."""
    return await _change(request, _with, "added")


async def remove_rule(request: Request) -> Response:
    """Stop protecting a branch name pattern."""
    return await _change(request, _without, "removed")


_RULES = "/ui/repositories/{repository}/settings/branches"

routes: list[BaseRoute] = [
    Route(_RULES, show_rules, methods=["GET"]),
    Route(_RULES + "/add", add_rule, methods=["POST"]),
    Route(_RULES + "/remove", remove_rule, methods=["POST"]),
]
