"""What the mirroring pages share: this region's replicant, called as the page's person.

The UI app holds a :class:`~mirror.ui.replicant.ReplicantClient` when ``ui.replicant_url`` is
set (:func:`install_replicant`); without one the mirroring pages answer 404 and no page links
to them. :func:`known_mirrors` is what a repository's page shows of the mirrors the replicant
knows for it.
"""

from __future__ import annotations

import time
from datetime import UTC, datetime
from typing import Any

import httpx
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request

from mirror.ui.api import ApiError
from mirror.ui.mirror_status import MirrorView, describe, duration
from mirror.ui.page import Page
from mirror.ui.render import urlpart
from mirror.ui.replicant import ReplicantClient, mirror_path, mirrors_path

__all__ = [
    "MIRRORS_URL",
    "NotMirroring",
    "install_replicant",
    "known_mirrors",
    "load_mirror",
    "mirror_url",
    "replicant_call",
    "replicant_of",
]

MIRRORS_URL = "/ui/mirrors"
_PANEL_TIMEOUT = 3.0
"""Seconds a repository's page waits for the replicant before showing it without mirrors."""


def _clock(epoch: float) -> str:
    return datetime.fromtimestamp(epoch, tz=UTC).strftime("%H:%M:%S UTC")


class NotMirroring(HTTPException):
    """The UI has no replicant configured (``ui.replicant_url`` is empty): its pages are 404."""

    def __init__(self) -> None:
        super().__init__(status_code=404)


def install_replicant(
    app: Starlette, replicant_url: str, transport: httpx.AsyncBaseTransport | None = None
) -> None:
    """Give the UI app the replicant at ``replicant_url`` (nothing when empty).

    The pages' header then links to the mirrors (``mirrors_url`` of every template); the
    templates get the ``duration`` and ``clock`` filters the mirroring pages use.
    """
    client = ReplicantClient(replicant_url, transport) if replicant_url else None
    app.state.replicant = client
    env = app.state.ui.templates.env
    env.globals["mirrors_url"] = MIRRORS_URL if client else ""
    env.filters["duration"] = duration
    env.filters["clock"] = _clock


def replicant_of(request: Request) -> ReplicantClient:
    """Return the UI's replicant client.

    Raises:
        NotMirroring: none is configured.
    """
    client: ReplicantClient | None = getattr(request.app.state, "replicant", None)
    if client is None:
        raise NotMirroring
    return client


async def replicant_call(
    page: Page,
    method: str,
    path: str,
    *,
    json: Any = None,
    timeout: float | None = None,
) -> Any:
    """Call the replicant as the page's person; return the JSON answer (``None`` if empty).

    Raises:
        NotMirroring: no replicant is configured.
        ApiError: the replicant refused, with its message, or could not be reached.
    """
    response = await replicant_of(page.request).call(
        method, path, page.session.token, json=json, timeout=timeout
    )
    return response.json() if response.content else None


def mirror_url(source_repo: str, name: str, *rest: str) -> str:
    """Return the UI path of mirror ``name`` of ``source_repo`` (and of ``rest`` under it)."""
    return "/".join([f"{MIRRORS_URL}/{urlpart(source_repo)}/{urlpart(name)}", *rest])


async def load_mirror(page: Page, source_repo: str, name: str) -> MirrorView:
    """Return mirror ``name`` of ``source_repo`` with its status, as the pages show it.

    Raises:
        NotMirroring: no replicant is configured.
        ApiError: the replicant refused (404: no such mirror), or could not be reached.
    """
    found = await replicant_call(page, "GET", mirror_path(source_repo, name))
    return describe(found, time.time())


async def known_mirrors(page: Page, repo: dict[str, Any]) -> dict[str, Any] | None:
    """Return what a repository's page shows of the mirrors this region's replicant knows.

    Those are the mirrors whose source repository has the repository's name (in the usual
    set-up of one name in every region, the repository's own mirror here), and, when the
    repository is a mirror of a repository of another name, that mirror. ``None`` when no
    replicant is configured or the person may not list mirrors; a replicant that does not
    answer in time, or refuses otherwise, is named instead of the list.
    """
    client: ReplicantClient | None = getattr(page.request.app.state, "replicant", None)
    if client is None:
        return None
    token = page.session.token
    views: dict[str, MirrorView] = {}
    now = time.time()
    try:
        listed = await client.call("GET", mirrors_path(repo["id"]), token, timeout=_PANEL_TIMEOUT)
        for found in listed.json()["results"]:
            views[found["name"]] = describe(found, now)
        source = str(repo.get("mirror_of") or "").partition("/")[2]
        if source and source != repo["id"] and repo["id"] not in views:
            path = mirror_path(source, repo["id"])
            try:
                found = (await client.call("GET", path, token, timeout=_PANEL_TIMEOUT)).json()
            except ApiError as missing:
                if missing.status != 404:
                    raise
            else:
                views[found["name"]] = describe(found, now)
    except ApiError as refused:
        if refused.status == 403:
            return None  # the person may not list mirrors: their pages show none, not an error
        return {"mirrors": [], "error": refused.message}
    return {
        "mirrors": [
            {"view": v, "url": mirror_url(v.source_repo, v.name)} for _, v in sorted(views.items())
        ],
        "error": "",
    }
