"""A repository's Actions tab: its runs, each run's hooks, and each hook's output log.

As lakeFS's UI: ``GET /api/v1/repositories/{r}/actions/runs?branch&commit&after&amount`` lists
the runs newest first, 100 a page with Next page and Back to start, filtered by a branch or a
commit (not both: the API refuses that, and the page shows its message). A run's page reads
``…/runs/{id}`` and its hooks (``…/runs/{id}/hooks``); a hook's log
(``…/hooks/{hook_run_id}/output``), which lakeFS's UI fetches when its row is expanded, is shown
when its row's **Show log** is followed: as text, its first :data:`LOG_BOUND` bytes only (a
log may hold megabytes), with a link that downloads the whole of it through the UI's relay as
an attachment, never rendered. Reading runs needs ``ci:ReadAction``; a person without it sees
the API's refusal. The tab changes nothing, so it has no write control.
"""

from __future__ import annotations

from typing import Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route

from mirror.ui.api import ApiError
from mirror.ui.headers import USER_CONTENT_SECURITY_POLICY
from mirror.ui.listing import Listing, list_page
from mirror.ui.page import Page
from mirror.ui.relay import RelayResponse, open_relay
from mirror.ui.render import page_url, urlpart
from mirror.ui.times import clock, seconds_between
from mirror.ui.views.commits import branch_names, commit_url
from mirror.ui.views.repository import load_repository, repository_context, repository_url

__all__ = ["LOG_BOUND", "routes", "run_url"]
LOG_BOUND = 64 << 10
"""Bytes of a hook's log a page shows; the download has the whole log."""

_TAB = "actions"


def _api_runs(repository: str, *rest: str) -> str:
    return "/".join([f"/repositories/{urlpart(repository)}/actions/runs", *rest])


def run_url(repository: str, run_id: str, **params: str) -> str:
    """Return the UI path of a run's page (``hook`` opens that hook's log)."""
    return page_url(f"{repository_url(repository, _TAB)}/runs/{urlpart(run_id)}", **params)


def _output_url(repository: str, run_id: str, hook_run_id: str) -> str:
    return (
        f"{repository_url(repository, _TAB)}/runs/{urlpart(run_id)}"
        f"/hooks/{urlpart(hook_run_id)}/output"
    )


def _timing(item: dict[str, Any]) -> dict[str, Any]:
    """Return what a row shows of a run's or a hook's times."""
    start, end = item.get("start_time"), item.get("end_time")
    return {
        "started": clock(start),
        "ended": clock(end),
        "seconds": seconds_between(start, end),
    }


async def _branch_choices(page: Page, repository: str) -> list[str]:
    try:
        return await branch_names(page, repository)
    except ApiError:
        return []  # the filter still takes any name typed


async def list_runs(request: Request) -> Response:
    """List a repository's runs: 100 from ``after``, of ``branch`` or of ``commit``."""
    page = await Page.open(request)
    repository = request.path_params["repository"]
    query = request.query_params
    branch, commit = query.get("branch", "").strip(), query.get("commit", "").strip()
    repo = await load_repository(page, repository)
    here = repository_url(repository, _TAB)
    error, status = "", 200
    listed = Listing([], "", "")
    try:
        listed = await list_page(page, _api_runs(repository), here, branch=branch, commit=commit)
    except ApiError as refused:
        error, status = refused.message, refused.status
    rows = [
        {
            **run,
            **_timing(run),
            "url": run_url(repository, run["run_id"]),
            "commit_url": commit_url(repository, run["commit_id"]) if run["commit_id"] else "",
        }
        for run in listed.results
    ]
    return page.render(
        "repository/actions.html",
        status,
        **repository_context(repo, _TAB),
        tab_url=here,
        branch=branch,
        commit=commit,
        branch_names=await _branch_choices(page, repository),
        rows=rows,
        error=error,
        next_url=listed.next_url,
        start_url=listed.start_url,
    )


async def _read_log(page: Page, repository: str, run_id: str, hook_run_id: str) -> dict[str, Any]:
    """Return a hook's log as the page shows it: its first bytes as text, and its size."""
    relay = await open_relay(
        page.ui.api,
        _api_runs(repository, urlpart(run_id), "hooks", urlpart(hook_run_id), "output"),
        page.session.token,
    )
    head = bytearray()
    try:
        async for chunk in relay.body:
            head += chunk
            if len(head) > LOG_BOUND:
                break  # the rest stays unread: the download serves it
    finally:
        closing: Any = relay.body
        await closing.aclose()
    length = relay.headers.get("content-length", "")
    size = int(length) if length.isdigit() else len(head)
    return {
        "hook_run_id": hook_run_id,
        # a byte sequence cut at the bound, or not UTF-8 at all, still shows as text
        "text": bytes(head[:LOG_BOUND]).decode("utf-8", errors="replace"),
        "size": size,
        "cut": size > LOG_BOUND or len(head) > LOG_BOUND,
        "error": "",
    }


async def show_run(request: Request) -> Response:
    """Show a run, its hooks, and the log of the hook named by ``hook``."""
    page = await Page.open(request)
    repository, run_id = request.path_params["repository"], request.path_params["run"]
    query = request.query_params
    hook, hooks_after = query.get("hook", ""), query.get("after", "")
    repo = await load_repository(page, repository)
    run: dict[str, Any] = await page.get(_api_runs(repository, urlpart(run_id)))
    hooks = await list_page(
        page, _api_runs(repository, urlpart(run_id), "hooks"), run_url(repository, run_id)
    )
    log: dict[str, Any] | None = None
    if hook:
        try:
            log = await _read_log(page, repository, run_id, hook)
        except ApiError as refused:
            log = {"hook_run_id": hook, "error": refused.message}
    rows = [
        {
            **h,
            **_timing(h),
            "log_url": run_url(repository, run_id, hook=h["hook_run_id"], after=hooks_after)
            + "#log",
            "download_url": _output_url(repository, run_id, h["hook_run_id"]),
            "open": h["hook_run_id"] == hook,
        }
        for h in hooks.results
    ]
    return page.render(
        "repository/action_run.html",
        **repository_context(repo, _TAB),
        run=run,
        timing=_timing(run),
        commit_url=commit_url(repository, run["commit_id"]) if run["commit_id"] else "",
        branch_runs_url=page_url(repository_url(repository, _TAB), branch=run["branch"]),
        rows=rows,
        log=log,
        log_bound=LOG_BOUND,
        download_url=_output_url(repository, run_id, hook) if hook else "",
        runs_url=repository_url(repository, _TAB),
        next_url=hooks.next_url,
        start_url=hooks.start_url,
    )


async def download_output(request: Request) -> Response:
    """Stream a hook's whole log as the API's attachment (never a page of the UI)."""
    page = await Page.open(request)
    params = request.path_params
    relay = await open_relay(
        page.ui.api,
        _api_runs(
            params["repository"], urlpart(params["run"]), "hooks", urlpart(params["hook"]), "output"
        ),
        page.session.token,
    )
    headers = {
        "Content-Disposition": relay.headers.get("content-disposition", "attachment"),
        "Content-Security-Policy": USER_CONTENT_SECURITY_POLICY,
        "Cache-Control": "private, no-store",
    }
    if "content-length" in relay.headers:
        headers["Content-Length"] = relay.headers["content-length"]
    return RelayResponse(relay, headers, "application/octet-stream")


_RUN = "/ui/repositories/{repository}/actions/runs/{run}"

routes: list[BaseRoute] = [
    Route("/ui/repositories/{repository}/actions", list_runs, methods=["GET"]),
    Route(_RUN, show_run, methods=["GET"]),
    Route(_RUN + "/hooks/{hook}/output", download_output, methods=["GET"]),
]
