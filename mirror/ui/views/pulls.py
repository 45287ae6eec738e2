"""A repository's Pull Requests tab: the open and the closed ones, opening one, its page.

lakeFS's calls: ``GET /api/v1/repositories/{r}/pulls?status=open|closed&after&amount`` pages of
100, newest first (closed includes merged); ``POST …/pulls`` ``{title, description,
source_branch, destination_branch}`` opens one; ``GET …/pulls/{id}`` is its page, with the
differences merging it would bring (``GET …/refs/{destination}/diff/{source}``, one folder level
at a time, :mod:`mirror.ui.difftree`); ``PUT …/pulls/{id}/merge`` merges it and ``PATCH
…/pulls/{id}`` ``{status: closed}`` closes it (lakeFS has no reopen). Every refusal shows the
server's message. Opening needs ``pr:WritePullRequest``, merging that and ``fs:CreateCommit`` on
the destination branch; a mirror offers neither.
"""

from __future__ import annotations

import asyncio

from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import BaseRoute, Route

from mirror.auth.permissions import Action, Permission, branch_arn, repository_arn
from mirror.ui.api import ApiError
from mirror.ui.difftree import DiffListing, load_diff
from mirror.ui.forms import redirect_after, text
from mirror.ui.listing import list_page
from mirror.ui.page import Page
from mirror.ui.render import page_url, urlpart
from mirror.ui.times import minute
from mirror.ui.views.commits import branch_names, commit_url
from mirror.ui.views.repository import (
    load_repository,
    repository_api,
    repository_context,
    repository_url,
)

__all__ = ["STATUSES", "pull_url", "routes"]

STATUSES = ("open", "closed")
"""The lists lakeFS's UI offers (``closed`` includes merged pull requests)."""

_TAB = "pulls"
_NEW_FIELDS = ("title", "description", "source_branch", "destination_branch")


def pull_url(repository: str, pull_id: str, **params: str) -> str:
    """Return the UI path of a pull request's page."""
    return page_url(f"{repository_url(repository, _TAB)}/{urlpart(pull_id)}", **params)


async def list_pulls(request: Request) -> Response:
    """List the open or the closed pull requests, 100 a page, newest first."""
    page = await Page.open(request)
    repository = request.path_params["repository"]
    query = request.query_params
    status = query.get("status", "open")
    if status not in STATUSES:
        status = "open"
    here = repository_url(repository, _TAB)
    repo, listed = await asyncio.gather(
        load_repository(page, repository),
        list_page(page, repository_api(repository, "pulls"), here, status=status),
    )
    writable = not repo.get("read_only", False)
    (can_create,) = (
        await page.allowed([Permission(Action.WRITE_PULL_REQUEST, repository_arn(repository))])
        if writable
        else [False]
    )
    rows = [
        {**p, "url": pull_url(repository, p["id"]), "created": minute(p["creation_date"])}
        for p in listed.results
    ]
    return page.render(
        "repository/pulls.html",
        **repository_context(repo, _TAB),
        rows=rows,
        showing=status,
        lists=[(s, page_url(here, status=s)) for s in STATUSES],
        can_create=can_create,
        new_url=f"{here}/new",
        next_url=listed.next_url,
        start_url=listed.start_url,
    )


async def _new(
    page: Page, new: dict[str, str] | None = None, error: str = "", status: int = 200
) -> Response:
    repository = page.request.path_params["repository"]
    repo, names = await asyncio.gather(
        load_repository(page, repository), branch_names(page, repository)
    )
    query = page.request.query_params
    writable = not repo.get("read_only", False)
    (can_create,) = (
        await page.allowed([Permission(Action.WRITE_PULL_REQUEST, repository_arn(repository))])
        if writable
        else [False]
    )
    return page.render(
        "repository/pull_new.html",
        status,
        **repository_context(repo, _TAB),
        action=repository_url(repository, _TAB),
        cancel_url=repository_url(repository, _TAB),
        branch_names=names,
        can_create=can_create,
        new=new
        or {
            "title": "",
            "description": "",
            "source_branch": query.get("source", ""),
            "destination_branch": query.get("destination", "") or repo["default_branch"],
        },
        error=error,
    )


async def new_pull(request: Request) -> Response:
    """Show the form opening a pull request (``source`` and ``destination`` fill it in)."""
    return await _new(await Page.open(request))


async def create_pull(request: Request) -> Response:
    """Open a pull request; show the API's refusal next to the form with what was typed."""
    page = await Page.open(request)
    form = await page.form()
    new = {name: text(form, name) for name in _NEW_FIELDS}
    # browsers send a textarea's lines CRLF-separated; lakeFS's UI sends them as typed
    new["description"] = new["description"].replace("\r\n", "\n")
    new["source_branch"] = new["source_branch"].strip()
    new["destination_branch"] = new["destination_branch"].strip()
    repository = request.path_params["repository"]
    try:
        made = await page.send("POST", repository_api(repository, "pulls"), json=new)
    except ApiError as refused:
        return await _new(page, new, refused.message, refused.status)
    return RedirectResponse(pull_url(repository, made.json()["id"], opened="1"), status_code=303)


async def _pull(page: Page, *, error: str = "", status: int = 200) -> Response:
    repository, pull_id = page.request.path_params["repository"], page.request.path_params["pull"]
    repo, pull = await asyncio.gather(
        load_repository(page, repository),
        page.get(repository_api(repository, "pulls", urlpart(pull_id))),
    )
    query = page.request.query_params
    source, destination = pull["source_branch"], pull["destination_branch"]
    diff: DiffListing | None = None
    diff_error = ""
    try:
        diff = await load_diff(
            page,
            repository_api(repository, "refs", urlpart(destination), "diff", urlpart(source)),
            prefix=query.get("prefix", ""),
            after=query.get("after", ""),
            url=lambda p, a: pull_url(repository, pull_id, prefix=p, after=a),
        )
    except ApiError as refused:
        diff_error = refused.message  # a branch deleted since: the page still shows the request
    is_open = pull["status"] == "open" and not repo.get("read_only", False)
    may_write, may_commit = (
        await page.allowed(
            [
                Permission(Action.WRITE_PULL_REQUEST, repository_arn(repository)),
                Permission(Action.CREATE_COMMIT, branch_arn(repository, destination)),
            ]
        )
        if is_open
        else (False, False)
    )
    merged = pull.get("merged_commit_id") or ""
    here = pull_url(repository, pull_id)
    return page.render(
        "repository/pull.html",
        status,
        **repository_context(repo, _TAB),
        pull=pull,
        created=minute(pull["creation_date"]),
        closed=minute(pull.get("closed_date")),
        merged_url=commit_url(repository, merged) if merged else "",
        diff=diff,
        diff_error=diff_error,
        can_merge=may_write and may_commit,
        can_close=may_write,
        merge_url=f"{here}/merge",
        close_url=f"{here}/close",
        list_url=repository_url(repository, _TAB),
        error=error,
        notes={k: query.get(k, "") for k in ("opened", "merged", "closed")},
    )


async def show_pull(request: Request) -> Response:
    """Show a pull request: its description, status, and the differences it brings."""
    return await _pull(await Page.open(request))


async def merge_pull(request: Request) -> Response:
    """Merge a pull request into its destination; show the server's refusal on its page."""
    page = await Page.open(request)
    await page.form()
    repository, pull_id = request.path_params["repository"], request.path_params["pull"]
    return await redirect_after(
        page.send("PUT", repository_api(repository, "pulls", urlpart(pull_id), "merge")),
        pull_url(repository, pull_id, merged="1"),
        refused=lambda e: _pull(page, error=e.message, status=e.status),
    )


async def close_pull(request: Request) -> Response:
    """Close a pull request without merging it; show the server's refusal on its page."""
    page = await Page.open(request)
    await page.form()
    repository, pull_id = request.path_params["repository"], request.path_params["pull"]
    closing = {"status": "closed"}
    return await redirect_after(
        page.send("PATCH", repository_api(repository, "pulls", urlpart(pull_id)), json=closing),
        pull_url(repository, pull_id, closed="1"),
        refused=lambda e: _pull(page, error=e.message, status=e.status),
    )


_PULLS = "/ui/repositories/{repository}/pulls"

routes: list[BaseRoute] = [
    Route(_PULLS, list_pulls, methods=["GET"]),
    Route(_PULLS, create_pull, methods=["POST"]),
    Route(_PULLS + "/new", new_pull, methods=["GET"]),
    Route(_PULLS + "/{pull}", show_pull, methods=["GET"]),
    Route(_PULLS + "/{pull}/merge", merge_pull, methods=["POST"]),
    Route(_PULLS + "/{pull}/close", close_pull, methods=["POST"]),
]
