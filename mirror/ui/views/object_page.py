"""An object's page and its bytes: facts, user metadata, download, and a preview.

The page (``/ui/repositories/{r}/object?ref&path``, lakeFS's object page) shows what ``GET
…/refs/{ref}/objects/stat`` answers: size, checksum, content type, modification time, physical
address, every user metadata key and value (escaped), and a preview (:mod:`mirror.ui.preview`)
read with the API's ranged ``GET``. The raw route (``…/object/raw``) streams the object's bytes
from the API's ``GET …/objects`` (:mod:`mirror.ui.relay`) with ``X-Content-Type-Options:
nosniff`` and :data:`~mirror.ui.headers.USER_CONTENT_SECURITY_POLICY`: as an image of a type
the UI chose when the object is a raster image, and as an attachment (the API's own
``Content-Disposition``) otherwise or when asked to download. HTML, SVG and scripts are thus
never rendered in the UI's origin: their preview is escaped text, their bytes a download.
"""

from __future__ import annotations

import asyncio

from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import BaseRoute, Route

from mirror.auth.permissions import Action, Permission, object_arn
from mirror.ui.headers import USER_CONTENT_SECURITY_POLICY
from mirror.ui.page import Page
from mirror.ui.preview import build_preview, image_type
from mirror.ui.ref_picker import resolve_ref
from mirror.ui.relay import RelayResponse, open_relay
from mirror.ui.render import urlpart
from mirror.ui.views.objects import (
    TAB,
    breadcrumbs,
    human_size,
    object_url,
    objects_url,
    parent_prefix,
    raw_url,
    stat_object,
)
from mirror.ui.views.repository import load_repository, repository_context

__all__ = ["routes"]

_PASSED_ON = ("content-length", "etag", "last-modified")
"""Headers of the API's answer the raw route hands on as they are."""


def _objects_path(repository: str, ref: str) -> str:
    return f"/repositories/{urlpart(repository)}/refs/{urlpart(ref)}/objects"


async def show_object(request: Request) -> Response:
    """Show an object at a ref: its facts, metadata, download link and preview."""
    page = await Page.open(request)
    repository = request.path_params["repository"]
    query = request.query_params
    repo = await load_repository(page, repository)
    ref = query.get("ref") or repo["default_branch"]
    path = query.get("path", "")
    if not path:
        return RedirectResponse(objects_url(repository, ref), status_code=303)
    shown, stat = await asyncio.gather(
        resolve_ref(page, repository, ref), stat_object(page, repository, ref, path)
    )

    async def read(start: int, end: int) -> bytes:
        answer = await page.send(
            "GET",
            _objects_path(repository, ref),
            params={"path": path},
            headers={"Range": f"bytes={start}-{end - 1}"},
        )
        return answer.content

    content_type = stat.get("content_type") or ""
    size = int(stat.get("size_bytes") or 0)
    preview = await build_preview(read, path, content_type, size)
    can_delete = False
    if shown.is_branch and not repo.get("read_only", False):
        (can_delete,) = await page.allowed(
            [Permission(Action.DELETE_OBJECT, object_arn(repository, path))]
        )
    crumbs = breadcrumbs(repository, ref, parent_prefix(path))
    return page.render(
        "repository/object.html",
        **repository_context(repo, TAB),
        shown=shown,
        ref=ref,
        stat=stat,
        name=path[len(parent_prefix(path)) :] or path,
        size_text=f"{size:,} bytes" if size < 1024 else f"{human_size(size)} ({size:,} bytes)",
        crumbs=crumbs,
        metadata=sorted((stat.get("metadata") or {}).items()),
        preview=preview,
        raw_url=raw_url(repository, ref, path),
        download_url=raw_url(repository, ref, path, download=True),
        delete_url=object_url(repository, ref, path, "delete") if can_delete else "",
        folder_url=crumbs[-1]["url"],
    )


async def raw_object(request: Request) -> Response:
    """Stream an object's bytes: inline as an image it is one, else as an attachment."""
    page = await Page.open(request)
    repository = request.path_params["repository"]
    query = request.query_params
    ref, path = query.get("ref", ""), query.get("path", "")
    stat = await stat_object(page, repository, ref, path)
    image = None if query.get("download") == "1" else image_type(path, stat["content_type"])
    relay = await open_relay(
        page.ui.api, _objects_path(repository, ref), page.session.token, params={"path": path}
    )
    headers = {k: relay.headers[k] for k in _PASSED_ON if k in relay.headers}
    headers["Content-Security-Policy"] = USER_CONTENT_SECURITY_POLICY
    headers["Cache-Control"] = "private, no-store"
    if image is None:
        headers["Content-Disposition"] = relay.headers.get("content-disposition", "attachment")
        media_type = relay.headers.get("content-type", "application/octet-stream")
    else:
        media_type = image
    return RelayResponse(relay, headers, media_type)


routes: list[BaseRoute] = [
    Route("/ui/repositories/{repository}/object", show_object, methods=["GET"]),
    Route("/ui/repositories/{repository}/object/raw", raw_object, methods=["GET"]),
]
