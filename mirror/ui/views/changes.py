"""A branch's uncommitted changes: the changed paths as a tree, revert, commit.

lakeFS shows them as a toggle of the objects page; here they are a tab of their own
(``/ui/repositories/<r>/changes?ref=<branch>``) making lakeFS's calls:
``GET …/branches/{b}/diff?delimiter=/&prefix&after&amount`` lists one folder level with each path
marked added, changed or removed (:mod:`mirror.ui.difftree`); ``PUT …/branches/{b}`` with
``{type: object|common_prefix, path}`` reverts one path or a folder and ``{type: reset}``
everything, each after a confirmation page; ``POST …/branches/{b}/commits`` ``{message,
metadata}`` commits, and its refusal (nothing to commit, a pre-commit hook's 412) is shown next
to the form with what was typed. A mirror, or a person whose policies do not allow it, gets
neither control.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any

from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import BaseRoute, Route

from mirror.auth.permissions import Action, Permission, branch_arn
from mirror.ui.api import ApiError
from mirror.ui.difftree import load_diff
from mirror.ui.forms import text
from mirror.ui.metadata_form import (
    ADD_ROW,
    MetadataRow,
    blank_rows,
    metadata_of,
    rows_from,
)
from mirror.ui.page import Page
from mirror.ui.render import page_url, urlpart
from mirror.ui.views.commits import branch_names, commit_url
from mirror.ui.views.repository import load_repository, repository_context, repository_url

__all__ = ["REVERT_KINDS", "routes"]

_TAB = "changes"

REVERT_KINDS = ("object", "common_prefix", "reset")
"""The ``type`` values of lakeFS's ``PUT …/branches/{b}`` (one path, a folder, everything)."""


@dataclass(slots=True)
class CommitForm:
    """What the commit form shows: what was typed, and the server's refusal if any."""

    message: str = ""
    rows: list[MetadataRow] = field(default_factory=blank_rows)
    error: str = ""
    open: bool = False


def _branch_path(repository: str, branch: str, *rest: str) -> str:
    return "/".join([f"/repositories/{urlpart(repository)}/branches/{urlpart(branch)}", *rest])


def changes_url(
    repository: str, branch: str, prefix: str = "", after: str = "", **notes: str
) -> str:
    """Return the URL of a branch's uncommitted changes under ``prefix``, with notices."""
    return page_url(
        repository_url(repository, _TAB), ref=branch, prefix=prefix, after=after, **notes
    )


async def _branch_of(page: Page) -> str:
    """Return the branch the request names (``ref``), or the repository's default one."""
    named = page.request.query_params.get("ref", "")
    if named:
        return named
    repo = await load_repository(page, page.request.path_params["repository"])
    default: str = repo["default_branch"]
    return default


async def _changes(page: Page, commit: CommitForm | None = None, status: int = 200) -> Response:
    repository = page.request.path_params["repository"]
    repo = await load_repository(page, repository)
    query = page.request.query_params
    branch = query.get("ref", "") or repo["default_branch"]
    prefix, after = query.get("prefix", ""), query.get("after", "")
    context: dict[str, Any] = {
        **repository_context(repo, _TAB),
        "tab_url": repository_url(repository, _TAB),
        "branch": branch,
        "branch_names": await branch_names(page, repository),
        "commit": commit or CommitForm(),
        "notes": {k: query.get(k, "") for k in ("reverted", "reverted_all")},
        "committed": query.get("committed", ""),
        "committed_url": commit_url(repository, query.get("committed", "")),
    }
    try:
        head: dict[str, Any] = await page.get(_branch_path(repository, branch))
    except ApiError as refused:
        return page.render(
            "repository/changes.html",
            refused.status,
            **context,
            error=refused.message,
            head="",
            diff=None,
            can_revert=False,
            can_commit=False,
        )
    writable = not repo.get("read_only", False)
    diff, allowed = await asyncio.gather(
        load_diff(
            page,
            _branch_path(repository, branch, "diff"),
            prefix=prefix,
            after=after,
            url=lambda p, a: changes_url(repository, branch, p, a),
        ),
        page.allowed(
            [
                Permission(Action.REVERT_BRANCH, branch_arn(repository, branch)),
                Permission(Action.CREATE_COMMIT, branch_arn(repository, branch)),
            ]
            if writable
            else []
        ),
    )
    can_revert, can_commit = allowed if writable else (False, False)
    if commit is None and diff.rows:
        context["commit"] = CommitForm(open=True)
    return page.render(
        "repository/changes.html",
        status,
        **context,
        error="",
        head=head["commit_id"],
        head_url=commit_url(repository, head["commit_id"]),
        diff=diff,
        here=changes_url(repository, branch, prefix),
        revert_url=f"{repository_url(repository, _TAB)}/revert",
        can_revert=can_revert,
        can_commit=can_commit,
    )


async def show_changes(request: Request) -> Response:
    """Show a branch's uncommitted changes, one folder level and 100 rows at a time."""
    return await _changes(await Page.open(request))


async def commit_changes(request: Request) -> Response:
    """Commit a branch's changes with a message and metadata; show the server's refusal."""
    page = await Page.open(request)
    form = await page.form()
    message, rows = text(form, "message"), rows_from(form)
    if ADD_ROW in form:
        return await _changes(page, CommitForm(message, [*rows, *blank_rows()], open=True))
    try:
        metadata = metadata_of(rows)
    except ValueError as bad:
        return await _changes(page, CommitForm(message, rows, str(bad), open=True), 400)
    repository, branch = request.path_params["repository"], await _branch_of(page)
    try:
        made = await page.send(
            "POST",
            _branch_path(repository, branch, "commits"),
            json={"message": message, "metadata": metadata},
        )
    except ApiError as refused:
        failed = CommitForm(message, rows, refused.message, open=True)
        return await _changes(page, failed, refused.status)
    commit_id: str = made.json()["id"]
    return RedirectResponse(changes_url(repository, branch, committed=commit_id), status_code=303)


def _what(kind: str, path: str, branch: str) -> str:
    if kind == "reset":
        return f"all uncommitted changes of branch {branch}"
    if kind == "common_prefix":
        return f"every uncommitted change under {path}"
    return f"the uncommitted change of {path}"


async def _confirmation(
    page: Page, values: dict[str, str], *, error: str = "", status: int = 200
) -> Response:
    repository = page.request.path_params["repository"]
    repo = await load_repository(page, repository)
    kind, path, branch = values["type"], values["path"], values["ref"]
    if kind not in REVERT_KINDS or (kind != "reset" and not path):
        return page.render(
            "error.html", 400, title="Nothing to revert", message="Choose a path to revert."
        )
    return page.render(
        "repository/change_revert.html",
        status,
        **repository_context(repo, _TAB),
        values=values,
        what=_what(kind, path, branch),
        action=f"{repository_url(repository, _TAB)}/revert",
        cancel_url=changes_url(repository, branch, values["prefix"]),
        error=error,
    )


def _revert_values(source: Any) -> dict[str, str]:
    return {
        name: value if isinstance(value := source.get(name, ""), str) else ""
        for name in ("ref", "type", "path", "prefix")
    }


async def confirm_revert(request: Request) -> Response:
    """Ask the person to confirm reverting one path, a folder, or everything."""
    page = await Page.open(request)
    values = _revert_values(request.query_params)
    if not values["ref"]:
        values["ref"] = await _branch_of(page)
    return await _confirmation(page, values)


async def revert_changes(request: Request) -> Response:
    """Revert one path, a folder, or everything; show the API's refusal on the confirmation."""
    page = await Page.open(request)
    values = _revert_values(await page.form())
    repository, kind = request.path_params["repository"], values["type"]
    if kind not in REVERT_KINDS or not values["ref"]:
        return await _confirmation(page, values)
    body = {"type": kind} if kind == "reset" else {"type": kind, "path": values["path"]}
    try:
        await page.send("PUT", _branch_path(repository, values["ref"]), json=body)
    except ApiError as refused:
        return await _confirmation(page, values, error=refused.message, status=refused.status)
    if kind == "reset":
        target = changes_url(repository, values["ref"], reverted_all="1")
    else:
        target = changes_url(repository, values["ref"], values["prefix"], reverted=values["path"])
    return RedirectResponse(target, status_code=303)


_CHANGES = "/ui/repositories/{repository}/changes"

routes: list[BaseRoute] = [
    Route(_CHANGES, show_changes, methods=["GET"]),
    Route(_CHANGES, commit_changes, methods=["POST"]),
    Route(_CHANGES + "/revert", confirm_revert, methods=["GET"]),
    Route(_CHANGES + "/revert", revert_changes, methods=["POST"]),
]
