"""A commit's page: its facts and metadata, its diff against its first parent, revert, cherry-pick.

As lakeFS's UI: ``GET …/commits/{id}``, then ``GET …/refs/{parent}/diff/{id}?delimiter=/&prefix``
(one folder level, 100 rows a page, :mod:`mirror.ui.difftree`) against the first parent; the
first commit of a repository has none and shows no diff. The tree at the commit opens in the
Objects tab (``/ui/repositories/<r>/objects?ref=<id>``). **Revert** commits the commit's
inverse onto a chosen branch (``POST …/branches/{b}/revert`` ``{ref, parent_number}``) and
**cherry-pick** its changes (``POST …/branches/{b}/cherry-pick``); a merge commit asks which
parent to take its changes against. The server's refusal (a conflict, a protected branch) is
shown next to the form that sent it. A mirror, or a person whose policies allow neither, gets no
such form.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any

from starlette.datastructures import FormData
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import BaseRoute, Route

from mirror.auth.permissions import Action, Permission, branch_arn
from mirror.ui.api import ApiError
from mirror.ui.difftree import DiffListing, load_diff
from mirror.ui.forms import field, text
from mirror.ui.page import Page
from mirror.ui.render import page_url, urlpart
from mirror.ui.views.commits import branch_names, commit_url
from mirror.ui.views.repository import (
    load_repository,
    repository_api,
    repository_context,
    repository_url,
)

__all__ = ["objects_url", "routes"]

_TAB = "commits"
REVERT = "revert"
CHERRY_PICK = "cherry-pick"


@dataclass(frozen=True, slots=True)
class ApplyForm:
    """What a revert or cherry-pick form shows: the branch and parent chosen, and any refusal."""

    branch: str = ""
    parent_number: int = 1
    error: str = ""


def objects_url(repository: str, ref: str) -> str:
    """Return the URL of the Objects tab browsing the tree at ``ref``."""
    return page_url(repository_url(repository, "objects"), ref=ref)


async def _first_parent_diff(
    page: Page, repository: str, commit_id: str, parents: list[str], prefix: str, after: str
) -> DiffListing | ApiError | None:
    """Return a page of the commit's diff against its first parent (``None`` for a root).

    A refusal is returned to be shown in the diff's place: the commit's own facts still show
    (a mirror's commit whose data has not arrived yet, say).
    """
    if not parents:
        return None
    here = commit_url(repository, commit_id)
    try:
        return await load_diff(
            page,
            repository_api(repository, "refs", urlpart(parents[0]), "diff", urlpart(commit_id)),
            prefix=prefix,
            after=after,
            url=lambda p, a: page_url(here, prefix=p, after=a),
        )
    except ApiError as refused:
        return refused


async def _commit_page(
    page: Page, forms: dict[str, ApplyForm] | None = None, status: int = 200
) -> Response:
    repository = page.request.path_params["repository"]
    repo, commit = await asyncio.gather(
        load_repository(page, repository),
        page.get(
            repository_api(repository, "commits", urlpart(page.request.path_params["commit"]))
        ),
    )
    commit_id: str = commit["id"]
    parents: list[str] = commit["parents"]
    query = page.request.query_params
    here = commit_url(repository, commit_id)
    writable = not repo.get("read_only", False)
    diff_call = _first_parent_diff(
        page, repository, commit_id, parents, query.get("prefix", ""), query.get("after", "")
    )
    wanted = [
        Permission(Action.REVERT_BRANCH, branch_arn(repository, "*")),
        Permission(Action.CREATE_COMMIT, branch_arn(repository, "*")),
    ]
    diff, allowed = await asyncio.gather(diff_call, page.allowed(wanted if writable else []))
    can_revert, can_pick = allowed if writable else (False, False)
    default = ApplyForm(branch=repo["default_branch"])
    forms = forms or {}
    return page.render(
        "repository/commit.html",
        status,
        **repository_context(repo, _TAB),
        commit=commit,
        metadata=sorted((commit.get("metadata") or {}).items()),
        parents=[{"id": p, "url": commit_url(repository, p)} for p in parents],
        browse_url=objects_url(repository, commit_id),
        log_url=page_url(repository_url(repository, _TAB), ref=commit_id),
        diff=None if isinstance(diff, ApiError) else diff,
        diff_error=diff.message if isinstance(diff, ApiError) else "",
        root=not parents,
        can_revert=can_revert,
        can_pick=can_pick,
        branch_names=await branch_names(page, repository) if can_revert or can_pick else [],
        revert=forms.get(REVERT, default),
        pick=forms.get(CHERRY_PICK, default),
        revert_url=f"{here}/{REVERT}",
        pick_url=f"{here}/{CHERRY_PICK}",
        notes={k: query.get(k, "") for k in ("reverted", "picked", "made")},
        made_url=commit_url(repository, query["made"]) if query.get("made") else "",
    )


async def show_commit(request: Request) -> Response:
    """Show a commit, its metadata and parents, and its diff against its first parent."""
    return await _commit_page(await Page.open(request))


def _chosen(form: FormData) -> ApplyForm:
    number = text(form, "parent_number")
    try:
        parent = int(number) if number else 0
    except ValueError:
        parent = 0  # the API explains which numbers a merge commit takes
    return ApplyForm(field(form, "branch"), parent)


async def _apply(request: Request, kind: str) -> Response:
    page = await Page.open(request)
    chosen = _chosen(await page.form())
    repository, commit_ref = request.path_params["repository"], request.path_params["commit"]
    branch_path = repository_api(repository, "branches", urlpart(chosen.branch))
    body = {"ref": commit_ref, "parent_number": chosen.parent_number}
    if not chosen.branch:
        missing = ApplyForm("", chosen.parent_number or 1, "Choose the branch to apply it to.")
        return await _commit_page(page, {kind: missing}, 400)
    try:
        if kind == REVERT:
            await page.send("POST", f"{branch_path}/revert", json=body)
            # the revert answers no body: the commit it made is the branch's new head
            head: dict[str, Any] = await page.get(branch_path)
            made, note = head["commit_id"], "reverted"
        else:
            answer = await page.send("POST", f"{branch_path}/cherry-pick", json=body)
            made, note = answer.json()["id"], "picked"
    except ApiError as refused:
        failed = ApplyForm(chosen.branch, chosen.parent_number or 1, refused.message)
        return await _commit_page(page, {kind: failed}, refused.status)
    notes = {note: chosen.branch, "made": made}
    return RedirectResponse(page_url(commit_url(repository, commit_ref), **notes), status_code=303)


async def revert_commit(request: Request) -> Response:
    """Commit the inverse of a commit onto a branch; show the server's refusal."""
    return await _apply(request, REVERT)


async def cherry_pick_commit(request: Request) -> Response:
    """Apply a commit's changes onto a branch as a new commit; show the server's refusal."""
    return await _apply(request, CHERRY_PICK)


_COMMIT = "/ui/repositories/{repository}/commits/{commit}"

routes: list[BaseRoute] = [
    Route(_COMMIT, show_commit, methods=["GET"]),
    Route(f"{_COMMIT}/{REVERT}", revert_commit, methods=["POST"]),
    Route(f"{_COMMIT}/{CHERRY_PICK}", cherry_pick_commit, methods=["POST"]),
]
