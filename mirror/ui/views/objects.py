"""A repository's Objects tab: browse any ref by folder, one page at a time; delete an object.

As lakeFS's Data tab: ``GET /api/v1/repositories/{r}/refs/{ref}/objects/ls`` with
``delimiter=/``, ``prefix`` (the folder) and lakeFS's ``after``/``amount`` paging (100 a page,
Next page and Back to start, no totals). A page costs one listing call of one page whatever the
repository holds, plus the ref's resolution (:mod:`mirror.ui.ref_picker`) and the picker's first
page of branches and tags: nothing is ever listed whole or counted. Within a page folders come
first. On a branch a person whose policies allow it gets the upload form
(:mod:`mirror.ui.views.upload`) and a Delete link per object (``DELETE …/branches/{b}/objects``,
after a confirmation); a tag, a commit or a mirror gets neither.
"""

from __future__ import annotations

import asyncio
import posixpath
from collections.abc import Sequence
from typing import Any
from urllib.parse import urlencode

from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import BaseRoute, Route

from mirror.auth.permissions import Action, Permission, object_arn
from mirror.ui.api import ApiError
from mirror.ui.page import Page
from mirror.ui.ref_picker import shown_ref
from mirror.ui.render import urlpart
from mirror.ui.views.imports import import_offer
from mirror.ui.views.repository import load_repository, repository_context, repository_url

__all__ = [
    "PAGE_SIZE",
    "TAB",
    "breadcrumbs",
    "human_size",
    "object_url",
    "objects_url",
    "parent_prefix",
    "raw_url",
    "routes",
    "stat_object",
]

PAGE_SIZE = 100
"""Entries (folders and objects) a page lists."""
TAB = "objects"
DELIMITER = "/"


def _url(path: str, params: Sequence[tuple[str, str]]) -> str:
    kept = [(k, v) for k, v in params if v]
    return f"{path}?{urlencode(kept)}" if kept else path


def objects_url(repository: str, ref: str = "", path: str = "", after: str = "") -> str:
    """Return the Objects tab's URL at ``ref`` (the default branch if empty), in a folder."""
    return _url(repository_url(repository, TAB), [("ref", ref), ("path", path), ("after", after)])


def object_url(repository: str, ref: str, path: str, view: str = "") -> str:
    """Return the URL of an object's page, or of one of its views (``raw``, ``delete``)."""
    base = f"{repository_url(repository)}/object" + (f"/{view}" if view else "")
    return _url(base, [("ref", ref), ("path", path)])


def raw_url(repository: str, ref: str, path: str, *, download: bool = False) -> str:
    """Return the URL of an object's bytes: an image preview's, or a download's."""
    base = object_url(repository, ref, path, "raw")
    return f"{base}&download=1" if download else base


def human_size(size: int) -> str:
    """Return a size in bytes as people read it (``1.5 KiB``)."""
    if size < 1024:
        return f"{size} B"
    value = float(size)
    units = ("KiB", "MiB", "GiB", "TiB")
    for unit in units[:-1]:
        value /= 1024
        if value < 1024:
            return f"{value:.1f} {unit}"
    return f"{value / 1024:.1f} {units[-1]}"


def parent_prefix(path: str) -> str:
    """Return the folder holding ``path`` (``""`` at the top)."""
    cut = path.rstrip(DELIMITER).rfind(DELIMITER)
    return path[: cut + 1] if cut >= 0 else ""


def breadcrumbs(repository: str, ref: str, prefix: str) -> list[dict[str, str]]:
    """Return the folders leading to ``prefix``: each one's name and its listing's URL."""
    crumbs = [{"name": repository, "url": objects_url(repository, ref)}]
    at = 0
    while (cut := prefix.find(DELIMITER, at)) >= 0:
        crumbs.append(
            {"name": prefix[at : cut + 1], "url": objects_url(repository, ref, prefix[: cut + 1])}
        )
        at = cut + 1
    if at < len(prefix):
        crumbs.append({"name": prefix[at:], "url": objects_url(repository, ref, prefix)})
    return crumbs


def _rows(repository: str, ref: str, prefix: str, results: list[dict[str, Any]]) -> list[Any]:
    folders, objects = [], []
    for entry in results:
        path = entry["path"]
        name = path[len(prefix) :] if path.startswith(prefix) else path
        if entry["path_type"] == "common_prefix":
            folders.append(
                {
                    "folder": True,
                    "path": path,
                    "name": name,
                    "url": objects_url(repository, ref, path),
                }
            )
        else:
            # an object's three links share one query, encoded once (object_url's, raw_url's):
            # encoding it three times was a tenth of a 100-object page's server time
            url = object_url(repository, ref, path)
            base, _, query = url.partition("?")
            objects.append(
                {
                    "folder": False,
                    "path": path,
                    "name": name or posixpath.basename(path),
                    "url": url,
                    "size": entry.get("size_bytes", 0),
                    "size_text": human_size(int(entry.get("size_bytes") or 0)),
                    "mtime": entry.get("mtime", 0),
                    "download_url": f"{base}/raw?{query}&download=1",
                    "delete_url": f"{base}/delete?{query}",
                    "can_delete": False,
                }
            )
    return folders + objects


async def _listing(
    page: Page, repository: str, ref: str, prefix: str, after: str
) -> dict[str, Any] | ApiError:
    try:
        listing: dict[str, Any] = await page.get(
            f"/repositories/{urlpart(repository)}/refs/{urlpart(ref)}/objects/ls",
            prefix=prefix,
            after=after,
            amount=PAGE_SIZE,
            delimiter=DELIMITER,
            user_metadata="false",
        )
    except ApiError as refused:
        return refused
    return listing


async def objects_page(
    page: Page,
    *,
    upload_error: str = "",
    upload_prefix: str | None = None,
    status: int = 200,
    ref: str | None = None,
    prefix: str | None = None,
) -> Response:
    """Render the Objects tab for the request's ``ref``, ``path`` and ``after``."""
    repository = page.request.path_params["repository"]
    query = page.request.query_params
    repo = await load_repository(page, repository)
    ref = ref if ref is not None else (query.get("ref") or repo["default_branch"])
    prefix = prefix if prefix is not None else query.get("path", "")
    after = query.get("after", "")
    # the listing does not wait for the ref's resolution: a ref naming nothing fails both
    (shown, choices), listed = await asyncio.gather(
        shown_ref(page, repository, ref), _listing(page, repository, ref, prefix, after)
    )
    listing: dict[str, Any] = {"results": [], "pagination": {"has_more": False}}
    listing_error = shown.error
    if isinstance(listed, ApiError):
        listing_error = listing_error or listed.message
    else:
        listing = listed
    rows = _rows(repository, ref, prefix, listing["results"])
    writable = shown.is_branch and not repo.get("read_only", False)
    files = [r for r in rows if not r["folder"]]
    can_upload, import_url = False, ""
    if writable:
        # the upload's, each row's delete and the import offer's permissions, with the header's:
        # one call (the import offer's /config is read once per process)
        offer = await import_offer(page, repo, ref, prefix)
        ours = [
            Permission(Action.WRITE_OBJECT, object_arn(repository, f"{prefix}*")),
            *(Permission(Action.DELETE_OBJECT, object_arn(repository, r["path"])) for r in files),
        ]
        allowed = await page.allowed([*ours, *offer.permissions])
        can_upload = allowed[0]
        for row, may_delete in zip(files, allowed[1 : len(ours)], strict=True):
            row["can_delete"] = may_delete
        import_url = offer.url(allowed[len(ours) :])
    else:
        await page.allowed([])  # the header's links, when the page was opened without them
    pagination = listing["pagination"]
    return page.render(
        "repository/objects.html",
        status,
        **repository_context(repo, TAB),
        shown=shown,
        choices=choices,
        ref=ref,
        prefix=prefix,
        crumbs=breadcrumbs(repository, ref, prefix),
        rows=rows,
        listing_error=listing_error,
        tab_url=repository_url(repository, TAB),
        next_url=(
            objects_url(repository, ref, prefix, pagination["next_offset"])
            if pagination.get("has_more")
            else ""
        ),
        start_url=objects_url(repository, ref, prefix) if after else "",
        can_upload=can_upload,
        upload_url=f"{repository_url(repository, TAB)}/upload",
        listing_url=objects_url(repository, ref),
        upload_prefix=prefix if upload_prefix is None else upload_prefix,
        upload_error=upload_error,
        import_url=import_url,
        uploaded=query.getlist("uploaded"),
        deleted=query.get("deleted", ""),
    )


async def list_objects(request: Request) -> Response:
    """List one page of a folder at a ref: ``ref``, ``path`` (the folder) and ``after``."""
    return await objects_page(await Page.open(request, header_later=True))


async def stat_object(page: Page, repository: str, ref: str, path: str) -> dict[str, Any]:
    """Return the object's stat (``GET …/refs/{ref}/objects/stat?path=``), with its metadata.

    Raises:
        ApiError: no such object, or not readable by the person.
    """
    answer = await page.send(
        "GET",
        f"/repositories/{urlpart(repository)}/refs/{urlpart(ref)}/objects/stat",
        params={"path": path},
    )
    found: dict[str, Any] = answer.json()
    return found


def _target(request: Request) -> tuple[str, str, str]:
    query = request.query_params
    return request.path_params["repository"], query.get("ref", ""), query.get("path", "")


async def _confirmation(
    page: Page, repository: str, ref: str, path: str, *, error: str = "", status: int = 200
) -> Response:
    repo = await load_repository(page, repository)
    stat = await stat_object(page, repository, ref, path)
    return page.render(
        "repository/object_delete.html",
        status,
        **repository_context(repo, TAB),
        ref=ref,
        stat=stat,
        action=object_url(repository, ref, path, "delete"),
        cancel_url=object_url(repository, ref, path),
        error=error,
    )


async def confirm_delete(request: Request) -> Response:
    """Ask the person to confirm deleting an object from a branch."""
    page = await Page.open(request)
    return await _confirmation(page, *_target(request))


async def delete_object(request: Request) -> Response:
    """Delete an object from a branch (``DELETE …/branches/{b}/objects?path=``)."""
    page = await Page.open(request)
    await page.form()
    repository, ref, path = _target(request)
    try:
        await page.send(
            "DELETE",
            f"/repositories/{urlpart(repository)}/branches/{urlpart(ref)}/objects",
            params={"path": path},
        )
    except ApiError as refused:
        return await _confirmation(
            page, repository, ref, path, error=refused.message, status=refused.status
        )
    listing = objects_url(repository, ref, parent_prefix(path))
    joiner = "&" if "?" in listing else "?"
    return RedirectResponse(f"{listing}{joiner}{urlencode({'deleted': path})}", status_code=303)


_DELETE = "/ui/repositories/{repository}/object/delete"

routes: list[BaseRoute] = [
    Route("/ui/repositories/{repository}/objects", list_objects, methods=["GET"]),
    Route(_DELETE, confirm_delete, methods=["GET"]),
    Route(_DELETE, delete_object, methods=["POST"]),
]
