"""The mirrors page (beyond lakeFS): every mirror of this region, create one, delete one.

Served when ``ui.replicant_url`` names this region's replicant; its configuration API is called
as the signed-in person (:mod:`mirror.ui.replicant`). ``GET /service/replication/v1/mirrors``
lists the region's mirrors with each branch's status, shown with a health mark per mirror by the
shipped alerts' thresholds; ``POST …/repositories/{source}/mirrors`` creates one (its refusal is
shown next to the form); ``DELETE …/mirrors/{name}`` stops mirroring after a confirmation (the
repository stays, read-only). Controls are drawn only for people whose policies allow them
(``fs:CreateRepository``, ``fs:DeleteRepository`` on the mirror); the replicant checks again.
"""

from __future__ import annotations

import re
import time
from typing import Any

from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import BaseRoute, Route

from mirror.auth.permissions import Action, Permission, repository_arn
from mirror.ui.api import ApiError
from mirror.ui.forms import field, redirect_after
from mirror.ui.listing import may_add_and_remove
from mirror.ui.mirror_status import MirrorView, describe
from mirror.ui.mirroring import MIRRORS_URL, load_mirror, mirror_url, replicant_call
from mirror.ui.page import Page
from mirror.ui.render import page_url
from mirror.ui.replicant import mirror_path, mirrors_path

__all__ = ["routes"]

_FIELDS = ("source_repo", "name", "storage_namespace", "branches", "source_region")
_NO_SOURCE = "Name the source repository to mirror; nothing was created."
_HEALTH_ORDER = {"stuck": 0, "lagging": 1, "healthy": 2}


def _patterns(text: str) -> list[str]:
    """Return the branch globs of a form field: separated by commas or white space."""
    return [p for p in re.split(r"[,\s]+", text) if p]


async def _listing(
    page: Page, *, new: dict[str, Any] | None = None, error: str = "", status: int = 200
) -> Response:
    answer: dict[str, Any] = await replicant_call(page, "GET", "/mirrors")
    now = time.time()
    views = sorted(
        (describe(m, now) for m in answer["results"]),
        key=lambda v: (_HEALTH_ORDER[v.health], v.name),
    )
    can_create, may_delete = await may_add_and_remove(
        page,
        Permission(Action.CREATE_REPOSITORY, repository_arn("*")),
        (Permission(Action.DELETE_REPOSITORY, repository_arn(v.name)) for v in views),
    )
    rows = [
        {
            "view": v,
            "url": mirror_url(v.source_repo, v.name),
            "delete_url": mirror_url(v.source_repo, v.name, "delete"),
            "can_delete": may,
        }
        for v, may in zip(views, may_delete, strict=True)
    ]
    counts = {h: sum(1 for v in views if v.health == h) for h in ("healthy", "lagging", "stuck")}
    query = page.request.query_params
    return page.render(
        "mirrors/list.html",
        status,
        region=answer["region"],
        rows=rows,
        counts=counts,
        can_create=can_create,
        new=new or {**dict.fromkeys(_FIELDS, ""), "branches": "*", "tags": True},
        error=error,
        deleted=query.get("deleted", ""),
    )


async def list_mirrors(request: Request) -> Response:
    """List every mirror of this region with its branches' lag and a health mark."""
    return await _listing(await Page.open(request))


async def create_mirror(request: Request) -> Response:
    """Create a mirror; show the replicant's refusal next to the form."""
    page = await Page.open(request)
    form = await page.form()
    new: dict[str, Any] = {name: field(form, name) for name in _FIELDS}
    new["tags"] = bool(field(form, "tags"))
    answer: dict[str, Any] = await replicant_call(page, "GET", "/mirrors")
    body: dict[str, Any] = {
        "name": new["name"],
        "region": answer["region"],
        "storage_namespace": new["storage_namespace"],
        "branches": _patterns(new["branches"]) or ["*"],
        "tags": new["tags"],
    }
    if new["source_region"]:
        body["source_region"] = new["source_region"]
    if not new["source_repo"]:
        return await _listing(page, new=new, error=_NO_SOURCE, status=400)
    return await redirect_after(
        replicant_call(page, "POST", mirrors_path(new["source_repo"]), json=body),
        page_url(mirror_url(new["source_repo"], new["name"]), created="1"),
        refused=lambda e: _listing(page, new=new, error=e.message, status=e.status),
    )


async def _confirmation(
    page: Page, view: MirrorView, *, error: str = "", status: int = 200
) -> Response:
    return page.render(
        "mirrors/delete.html",
        status,
        mirror=view,
        action=mirror_url(view.source_repo, view.name, "delete"),
        cancel_url=mirror_url(view.source_repo, view.name),
        error=error,
    )


async def confirm_delete(request: Request) -> Response:
    """Ask the person to confirm that mirroring stops."""
    page = await Page.open(request)
    params = request.path_params
    return await _confirmation(page, await load_mirror(page, params["source"], params["name"]))


async def delete_mirror(request: Request) -> Response:
    """Stop mirroring (the repository stays); show the replicant's refusal otherwise."""
    page = await Page.open(request)
    await page.form()
    source, name = request.path_params["source"], request.path_params["name"]
    try:
        await replicant_call(page, "DELETE", mirror_path(source, name))
    except ApiError as refused:
        view = await load_mirror(page, source, name)
        return await _confirmation(page, view, error=refused.message, status=refused.status)
    return RedirectResponse(page_url(MIRRORS_URL, deleted=name), status_code=303)


_DELETE = MIRRORS_URL + "/{source}/{name}/delete"

routes: list[BaseRoute] = [
    Route(MIRRORS_URL, list_mirrors, methods=["GET"]),
    Route(MIRRORS_URL, create_mirror, methods=["POST"]),
    Route(_DELETE, confirm_delete, methods=["GET"]),
    Route(_DELETE, delete_mirror, methods=["POST"]),
]
