"""A diff shown as a tree: one folder level at a time, each path marked, paged as lakeFS pages.

The uncommitted changes of a branch (``GET …/branches/{b}/diff``) and a commit's changes against
its first parent (``GET …/refs/{parent}/diff/{id}``) are both listed with ``delimiter=/``, so the
API answers one level: the changed objects under the prefix, and each folder holding changes as a
common prefix. A folder opens by following its prefix, and crumbs lead back up. Pages hold 100
rows and go on from ``pagination.next_offset``, with Next page and Back to start only.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from mirror.ui.page import Page

__all__ = ["MARKS", "PAGE_SIZE", "Crumb", "DiffListing", "DiffRow", "load_diff", "prefix_crumbs"]

PAGE_SIZE = 100
"""Rows a page of a diff lists (lakeFS's UI asks for 100)."""

MARKS = {
    "added": "Added",
    "changed": "Changed",
    "removed": "Removed",
    "conflict": "Conflict",
    "prefix_changed": "Changes inside",
}
"""The label shown for each kind of difference the API answers."""

PageUrl = Callable[[str, str], str]
"""Return the URL of the page listing the diff at a prefix, from an ``after`` (or ``""``)."""


@dataclass(frozen=True, slots=True)
class DiffRow:
    """One changed object, or one folder holding changes.

    Attributes:
        path: The full path (a folder's ends with ``/``).
        name: The path below the listed prefix.
        kind: The API's ``type``: added, changed, removed, conflict or prefix_changed.
        label: What the mark says (:data:`MARKS`).
        folder: Whether the row is a common prefix.
        url: For a folder, the page listing its changes; otherwise ``""``.
    """

    path: str
    name: str
    kind: str
    label: str
    folder: bool
    url: str


@dataclass(frozen=True, slots=True)
class Crumb:
    """One step of the path from the top to the listed folder."""

    label: str
    url: str


@dataclass(frozen=True, slots=True)
class DiffListing:
    """One page of a diff at one folder level.

    Attributes:
        prefix: The folder listed (``""`` for the top).
        rows: The changes in it, in path order.
        crumbs: The way back up: the top, then each folder down to ``prefix``.
        next_url: The next page, or ``""`` on the last one.
        start_url: The first page, or ``""`` on the first one.
    """

    prefix: str
    rows: list[DiffRow]
    crumbs: list[Crumb]
    next_url: str
    start_url: str


def prefix_crumbs(prefix: str, url: PageUrl) -> list[Crumb]:
    """Return the crumbs of ``prefix``: the top, then each folder of it."""
    crumbs = [Crumb("(top)", url("", ""))]
    walked = ""
    for part in prefix.split("/")[:-1]:
        walked += part + "/"
        crumbs.append(Crumb(part + "/", url(walked, "")))
    if not prefix.endswith("/") and prefix:
        # a prefix typed by hand need not end at a folder: it still reads as the last step
        crumbs.append(Crumb(prefix.rsplit("/", 1)[-1], url(prefix, "")))
    return crumbs


def _row(item: dict[str, Any], prefix: str, url: PageUrl) -> DiffRow:
    path: str = item["path"]
    kind: str = item["type"]
    folder = item.get("path_type") == "common_prefix"
    name = path[len(prefix) :] if path.startswith(prefix) else path
    return DiffRow(
        path=path,
        name=name,
        kind=kind,
        label=MARKS.get(kind, kind),
        folder=folder,
        url=url(path, "") if folder else "",
    )


async def load_diff(
    page: Page, api_path: str, *, prefix: str, after: str, url: PageUrl
) -> DiffListing:
    """Return one page of the diff the API answers at ``api_path``, one level under ``prefix``.

    Args:
        page: The page being served (the call is made as its person).
        api_path: The diff's path under ``/api/v1``.
        prefix: The folder to list.
        after: Where the page starts (the previous page's ``next_offset``).
        url: Builds the URL of this page at another prefix or offset.

    Raises:
        ApiError: the API refused, with its message.
    """
    listing: dict[str, Any] = await page.get(
        api_path, delimiter="/", prefix=prefix, after=after, amount=PAGE_SIZE
    )
    pagination = listing["pagination"]
    return DiffListing(
        prefix=prefix,
        rows=[_row(item, prefix, url) for item in listing["results"]],
        crumbs=prefix_crumbs(prefix, url),
        next_url=url(prefix, pagination["next_offset"]) if pagination["has_more"] else "",
        start_url=url(prefix, "") if after else "",
    )
