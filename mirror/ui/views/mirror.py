"""A mirror's page (beyond lakeFS): its branches, its lag over the last hour, its controls.

``GET …/mirrors/{name}`` of this region's replicant gives each mirrored branch's status: the
source head it saw and the validated mirror head (with their messages, read from the mirror
repository, which holds both records), the lag in seconds and commits, what the validator waits
for and the last error, and the mirror's health by the shipped alerts' thresholds.
``GET …/mirrors/{name}/lag_history`` gives the last hour, drawn as two server-rendered SVG
charts (:mod:`mirror.ui.lag_chart`) of the whole hour or, with ``?window=10m``, its last ten
minutes. People whose policies allow it get planned and forced
promotion (``fs:MirrorRepository``) and stopping the mirror (``fs:DeleteRepository``).
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route

from mirror.auth.permissions import Action, Permission, repository_arn
from mirror.ui.lag_chart import HEIGHT, WIDTH, WINDOWS, lag_charts
from mirror.ui.mirror_status import MirrorView
from mirror.ui.mirroring import MIRRORS_URL, load_mirror, mirror_url, replicant_call
from mirror.ui.page import Page
from mirror.ui.render import page_url, urlpart
from mirror.ui.replicant import mirror_path
from mirror.ui.views.commits import find_commits

__all__ = ["head_messages", "routes"]


async def head_messages(page: Page, view: MirrorView) -> dict[str, str | None]:
    """Return the message of each head the mirror's branches name, read from the mirror.

    The mirror repository holds the records of the source heads it saw too (they are copied
    before they are validated); a head it cannot read maps to ``None``.
    """
    heads = (h for b in view.branches for h in (b.source_head, b.mirror_head))
    found = await find_commits(page, view.name, heads)
    return {h: None if c is None else str(c.get("message") or "") for h, c in found.items()}


async def show_mirror(request: Request) -> Response:
    """Show a mirror: its branches' status, its health, its lag chart and its controls."""
    page = await Page.open(request)
    source, name = request.path_params["source"], request.path_params["name"]
    view = await load_mirror(page, source, name)
    history: dict[str, Any]
    messages: dict[str, str | None]
    allowed: list[bool]
    history, messages, allowed = await asyncio.gather(
        replicant_call(page, "GET", mirror_path(source, name, "lag_history")),
        head_messages(page, view),
        page.allowed(
            [
                Permission(Action.MIRROR_REPOSITORY, repository_arn(name)),
                Permission(Action.DELETE_REPOSITORY, repository_arn(name)),
            ]
        ),
    )
    window = request.query_params.get("window", "1h")
    window = window if window in WINDOWS else "1h"
    charts = lag_charts(history, time.time(), window)
    here = mirror_url(source, name)
    promote = mirror_url(source, name, "promote")
    return page.render(
        "mirrors/mirror.html",
        mirror=view,
        messages=messages,
        charts=charts,
        chart_width=WIDTH,
        chart_height=HEIGHT,
        window=window,
        windows=[
            {"label": label, "url": page_url(here, window=key), "active": key == window}
            for key, label in (("1h", "Last hour"), ("10m", "Last 10 minutes"))
        ],
        history=history,
        repository_url=f"/ui/repositories/{urlpart(name)}",
        can_promote=allowed[0],
        can_delete=allowed[1],
        planned_url=promote,
        forced_url=page_url(promote, force="1"),
        delete_url=mirror_url(source, name, "delete"),
        created=request.query_params.get("created", ""),
    )


routes: list[BaseRoute] = [
    Route(MIRRORS_URL + "/{source}/{name}", show_mirror, methods=["GET"]),
]
