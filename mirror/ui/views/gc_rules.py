"""A repository's garbage collection rules, in its Settings tab: shown, edited as rows, removed.

As lakeFS's UI: ``GET /api/v1/repositories/{r}/settings/gc_rules`` reads them (404: none are
set), ``PUT`` replaces them with ``{default_retention_days, branches: [{branch_id,
retention_days}]}`` and ``DELETE`` removes them. The form holds the default retention and one
row per branch rule; **Add branch rule** adds a row (in place with script, by sending the form
back without it), and a row left blank is dropped. What was typed goes to the API as typed
(a number when it reads as one), so a bad value gets the server's own message, shown next to
the form with the rows kept. Editing needs ``retention:SetGarbageCollectionRules``; reading
``retention:GetGarbageCollectionRules``, without which the page says the rules are not shown.
A mirror refuses both changes, so it gets no control.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from starlette.datastructures import FormData
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import BaseRoute, Route

from mirror.auth.permissions import Permission, repository_arn
from mirror.ui.api import ApiError
from mirror.ui.forms import texts
from mirror.ui.page import Page
from mirror.ui.render import page_url, urlpart
from mirror.ui.views.commits import branch_names
from mirror.ui.views.repository import load_repository
from mirror.ui.views.settings import settings_context, settings_url

__all__ = ["ADD_RULE", "SET_GC_RULES", "routes"]

SET_GC_RULES = "retention:SetGarbageCollectionRules"
"""lakeFS's action for changing (and removing) a repository's rules."""
ADD_RULE = "add_rule"
"""The name of the button that asks for one more branch row."""

_SECTION = "gc"


@dataclass(frozen=True, slots=True)
class RuleRow:
    """One branch rule as the form holds it (text as typed)."""

    branch: str
    days: str


@dataclass(slots=True)
class RulesForm:
    """What the rules form shows: the values, the rows, and the server's refusal if any."""

    default_days: str = ""
    rows: list[RuleRow] = field(default_factory=list)
    error: str = ""


def _api_path(repository: str) -> str:
    return f"/repositories/{urlpart(repository)}/settings/gc_rules"


def _typed(form: FormData) -> RulesForm:
    branches, days = texts(form, "rule_branch", strip=True), texts(form, "rule_days", strip=True)
    days += [""] * (len(branches) - len(days))
    rows = [RuleRow(b, d) for b, d in zip(branches, days, strict=False)]
    default = form.get("default_retention_days")
    return RulesForm(default.strip() if isinstance(default, str) else "", rows)


def _number(text: str) -> int | str:
    # anything but digits goes as typed, for the API's message to name it
    return int(text) if text.isdigit() else text


def _body(typed: RulesForm) -> dict[str, Any]:
    return {
        "default_retention_days": _number(typed.default_days),
        "branches": [
            {"branch_id": row.branch, "retention_days": _number(row.days)}
            for row in typed.rows
            if row.branch or row.days
        ],
    }


def _shown(rules: dict[str, Any]) -> RulesForm:
    return RulesForm(
        str(rules["default_retention_days"]),
        [RuleRow(r["branch_id"], str(r["retention_days"])) for r in rules["branches"]],
    )


async def _read_rules(page: Page, repository: str) -> tuple[dict[str, Any] | None, bool]:
    """Return the rules (``None``: none set) and whether the person may read them."""
    try:
        rules: dict[str, Any] = await page.get(_api_path(repository))
    except ApiError as refused:
        if refused.status == 404:
            return None, True  # lakeFS's answer for a repository without rules
        if refused.status == 403:
            return None, False
        raise
    return rules, True


_DONE = {"saved": "The rules were saved.", "removed": "The rules were removed."}
"""What the page says after a change, by the ``done`` its address carries."""


async def _rules_page(
    page: Page, typed: RulesForm | None = None, *, status: int = 200, error: str = ""
) -> Response:
    repository = page.request.path_params["repository"]
    repo = await load_repository(page, repository)
    rules, visible = await _read_rules(page, repository)
    writable = visible and not repo.get("read_only", False)
    can_edit = (
        writable and (await page.allowed([Permission(SET_GC_RULES, repository_arn(repository))]))[0]
    )
    form = typed or (_shown(rules) if rules else RulesForm())
    form.error = error or form.error
    if not form.rows:
        form.rows.append(RuleRow("", ""))
    here = settings_url(repository, _SECTION)
    return page.render(
        "repository/settings_gc.html",
        status,
        **settings_context(repo, _SECTION),
        rules=rules,
        visible=visible,
        can_edit=can_edit,
        form=form,
        branch_names=await branch_names(page, repository) if can_edit else [],
        save_url=here,
        delete_url=f"{here}/delete",
        note="" if status != 200 else _DONE.get(page.request.query_params.get("done", ""), ""),
    )


async def show_rules(request: Request) -> Response:
    """Show the repository's garbage collection rules, and the form to change them."""
    return await _rules_page(await Page.open(request))


async def save_rules(request: Request) -> Response:
    """Replace the rules with the form's (or add a row to the form); show a refusal by it."""
    page = await Page.open(request)
    form = await page.form()
    typed = _typed(form)
    if ADD_RULE in form:
        typed.rows.append(RuleRow("", ""))
        return await _rules_page(page, typed)
    repository = request.path_params["repository"]
    try:
        await page.send("PUT", _api_path(repository), json=_body(typed))
    except ApiError as refused:
        typed.error = refused.message
        return await _rules_page(page, typed, status=refused.status)
    here = settings_url(repository, _SECTION)
    return RedirectResponse(page_url(here, done="saved"), status_code=303)


async def delete_rules(request: Request) -> Response:
    """Remove the repository's rules."""
    page = await Page.open(request)
    await page.form()
    repository = request.path_params["repository"]
    try:
        await page.send("DELETE", _api_path(repository))
    except ApiError as refused:
        return await _rules_page(page, status=refused.status, error=refused.message)
    here = settings_url(repository, _SECTION)
    return RedirectResponse(page_url(here, done="removed"), status_code=303)


_RULES = "/ui/repositories/{repository}/settings/gc"

routes: list[BaseRoute] = [
    Route(_RULES, show_rules, methods=["GET"]),
    Route(_RULES, save_rules, methods=["POST"]),
    Route(_RULES + "/delete", delete_rules, methods=["POST"]),
]
