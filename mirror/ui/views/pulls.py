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
from datetime import datetime

from starlette.datastructures import FormData
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import BaseRoute, Route

from mirror.auth.permissions import Action, Permission, branch_arn, repository_arn
from mirror.ui.api import ApiError
from mirror.ui.difftree import DiffListing, load_diff
from mirror.ui.page import Page
from mirror.ui.render import page_url, urlpart
from mirror.ui.views.commits import branch_names, commit_url
from mirror.ui.views.repository import load_repository, repository_context, repository_url

__all__ = ["PAGE_SIZE", "STATUSES", "pull_url", "routes"]

PAGE_SIZE = 100
"""Pull requests a page lists (lakeFS's UI asks for 100)."""

STATUSES = ("open", "closed")
"""The lists lakeFS's UI offers (``closed`` includes merged pull requests)."""

_TAB = "pulls"
_NEW_FIELDS = ("title", "description", "source_branch", "destination_branch")


def pull_url(repository: str, pull_id: str, **params: str) -> str:
    """Return the UI path of a pull request's page."""
    return page_url(f"{repository_url(repository, _TAB)}/{urlpart(pull_id)}", **params)


def _field(form: FormData, name: str) -> str:
    value = form.get(name)
    return value if isinstance(value, str) else ""


def _api(repository: str, *rest: str) -> str:
    return "/".join([f"/repositories/{urlpart(repository)}", *rest])


def _date(value: object) -> str:
    """Return an RFC 3339 date of the API (pull requests carry strings) as pages show dates."""
    if not isinstance(value, str) or not value:
        return ""
    try:
        moment = datetime.fromisoformat(value)
    except ValueError:
        return value
    return moment.strftime("%Y-%m-%d %H:%M UTC")


async def list_pulls(request: Request) -> Response:
    """List the open or the closed pull requests, 100 a page, newest first."""
    page = await Page.open(request)
    repository = request.path_params["repository"]
    query = request.query_params
    status = query.get("status", "open")
    if status not in STATUSES:
        status = "open"
    after = query.get("after", "")
    repo, listing = await asyncio.gather(
        load_repository(page, repository),
        page.get(_api(repository, "pulls"), status=status, after=after, amount=PAGE_SIZE),
    )
    writable = not repo.get("read_only", False)
    (can_create,) = (
        await page.allowed([Permission(Action.WRITE_PULL_REQUEST, repository_arn(repository))])
        if writable
        else [False]
    )
    here = repository_url(repository, _TAB)
    rows = [
        {**p, "url": pull_url(repository, p["id"]), "created": _date(p["creation_date"])}
        for p in listing["results"]
    ]
    pagination = listing["pagination"]
    return page.render(
        "repository/pulls.html",
        **repository_context(repo, _TAB),
        rows=rows,
        showing=status,
        lists=[(s, page_url(here, status=s)) for s in STATUSES],
        can_create=can_create,
        new_url=f"{here}/new",
        next_url=(
            page_url(here, status=status, after=pagination["next_offset"])
            if pagination["has_more"]
            else ""
        ),
        start_url=page_url(here, status=status) if after else "",
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
    new = {name: _field(form, name) for name in _NEW_FIELDS}
    # browsers send a textarea's lines CRLF-separated; lakeFS's UI sends them as typed
    new["description"] = new["description"].replace("\r\n", "\n")
    new["source_branch"] = new["source_branch"].strip()
    new["destination_branch"] = new["destination_branch"].strip()
    repository = request.path_params["repository"]
    try:
        made = await page.send("POST", _api(repository, "pulls"), json=new)
    except ApiError as refused:
        return await _new(page, new, refused.message, refused.status)
    return RedirectResponse(pull_url(repository, made.json()["id"], opened="1"), status_code=303)


async def _pull(page: Page, *, error: str = "", status: int = 200) -> Response:
    repository, pull_id = page.request.path_params["repository"], page.request.path_params["pull"]
    repo, pull = await asyncio.gather(
        load_repository(page, repository),
        page.get(_api(repository, "pulls", urlpart(pull_id))),
    )
    query = page.request.query_params
    source, destination = pull["source_branch"], pull["destination_branch"]
    diff: DiffListing | None = None
    diff_error = ""
    try:
        diff = await load_diff(
            page,
            _api(repository, "refs", urlpart(destination), "diff", urlpart(source)),
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
        created=_date(pull["creation_date"]),
        closed=_date(pull.get("closed_date")),
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
    try:
        await page.send("PUT", _api(repository, "pulls", urlpart(pull_id), "merge"))
    except ApiError as refused:
        return await _pull(page, error=refused.message, status=refused.status)
    return RedirectResponse(pull_url(repository, pull_id, merged="1"), status_code=303)


async def close_pull(request: Request) -> Response:
    """Close a pull request without merging it; show the server's refusal on its page."""
    page = await Page.open(request)
    await page.form()
    repository, pull_id = request.path_params["repository"], request.path_params["pull"]
    try:
        await page.send(
            "PATCH", _api(repository, "pulls", urlpart(pull_id)), json={"status": "closed"}
        )
    except ApiError as refused:
        return await _pull(page, error=refused.message, status=refused.status)
    return RedirectResponse(pull_url(repository, pull_id, closed="1"), status_code=303)


_PULLS = "/ui/repositories/{repository}/pulls"

routes: list[BaseRoute] = [
    Route(_PULLS, list_pulls, methods=["GET"]),
    Route(_PULLS, create_pull, methods=["POST"]),
    Route(_PULLS + "/new", new_pull, methods=["GET"]),
    Route(_PULLS + "/{pull}", show_pull, methods=["GET"]),
    Route(_PULLS + "/{pull}/merge", merge_pull, methods=["POST"]),
    Route(_PULLS + "/{pull}/close", close_pull, methods=["POST"]),
]
