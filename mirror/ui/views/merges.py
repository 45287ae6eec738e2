"""An asynchronous merge's page: its progress while it runs, then its commit or its conflicts.

The Compare tab starts a merge with ``POST …/refs/{source}/merge/{destination}/async`` and sends
the browser here (``/ui/repositories/<r>/merges/<task>?source&destination&started``). The page
reads ``GET …/refs/{source}/merge/{destination}/async/{task}/status``: while the merge runs it
says so, with how long it has been running and the task's last update, and refreshes itself
(``follow.js`` polls the page and swaps its status in place; without script a ``<noscript>``
meta refresh reloads it). Once done it shows the merge commit (its page linked, its message
read with ``GET …/commits/{id}``), or the API's error: a conflict with its paths (the status's
``error.conflicts``), any other refusal with its message.
"""

from __future__ import annotations

import time
from typing import Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route

from mirror.ui.page import Page
from mirror.ui.render import page_url, urlpart
from mirror.ui.times import clock
from mirror.ui.views.commits import commit_url, find_commit
from mirror.ui.views.repository import load_repository, repository_context, repository_url

__all__ = ["REFRESH_SECONDS", "merge_status_url", "routes"]

REFRESH_SECONDS = 1
"""How often a running merge's page asks for its status again."""

_TAB = "compare"


def merge_status_url(
    repository: str, task_id: str, source: str, destination: str, started: int | None = None
) -> str:
    """Return the UI path of the merge task ``task_id`` of ``source`` into ``destination``."""
    return page_url(
        f"{repository_url(repository)}/merges/{urlpart(task_id)}",
        source=source,
        destination=destination,
        started=started,
    )


def _started(value: str) -> int | None:
    try:
        started = int(value)
    except ValueError:
        return None
    return started if 0 < started <= time.time() else None


async def show_merge(request: Request) -> Response:
    """Show an asynchronous merge: running, merged, or failed with the API's reason."""
    page = await Page.open(request)
    repository, task_id = request.path_params["repository"], request.path_params["task"]
    query = request.query_params
    source, destination = query.get("source", ""), query.get("destination", "")
    repo = await load_repository(page, repository)
    status: dict[str, Any] = await page.get(
        f"/repositories/{urlpart(repository)}/refs/{urlpart(source)}/merge/"
        f"{urlpart(destination)}/async/{urlpart(task_id)}/status"
    )
    result = status.get("result") or {}
    reference: str = result.get("reference", "")
    failure = status.get("error") or {}
    started = _started(query.get("started", ""))
    return page.render(
        "repository/merge_status.html",
        **repository_context(repo, _TAB),
        task_id=task_id,
        source=source,
        destination=destination,
        completed=bool(status.get("completed")),
        reference=reference,
        commit=await find_commit(page, repository, reference) if reference else None,
        commit_url=commit_url(repository, reference) if reference else "",
        error=failure.get("message", ""),
        conflicts=failure.get("conflicts") or [],
        status_code=status.get("status_code"),
        updated=clock(status.get("update_time")),
        running_for=int(time.time()) - started if started else None,
        refresh=REFRESH_SECONDS,
        compare_url=page_url(repository_url(repository, _TAB), ref=destination, compare=source),
    )


routes: list[BaseRoute] = [
    Route("/ui/repositories/{repository}/merges/{task}", show_merge, methods=["GET"]),
]
