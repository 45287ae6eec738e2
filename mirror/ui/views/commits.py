"""A repository's Commits tab: the log of any ref, paged as lakeFS pages it.

As lakeFS's UI: ``GET …/refs/{ref}/commits?after&amount=100``, newest first, with Next page
(``after`` = ``pagination.next_offset``, the last commit shown) and Back to start only. A page
reads one page of the log and never walks the rest of the history, so a repository of 50,000
commits opens as fast as one of ten. The ref is any ref: a branch (the default one unless
another is named), a tag, a commit ID or a ref expression such as ``main~3``; one the API cannot
resolve shows its message next to the ref field.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from typing import Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route

from mirror.ui.api import ApiError
from mirror.ui.listing import Listing, list_page
from mirror.ui.page import Page
from mirror.ui.render import urlpart
from mirror.ui.views.repository import (
    load_repository,
    repository_api,
    repository_context,
    repository_url,
)

__all__ = ["branch_names", "commit_url", "find_commit", "find_commits", "routes"]

_TAB = "commits"
_BRANCH_CHOICES = 100
"""Branches offered by name in a branch or ref field (any other can be typed)."""


def commit_url(repository: str, commit_id: str) -> str:
    """Return the UI path of a commit's page."""
    return f"{repository_url(repository, _TAB)}/{urlpart(commit_id)}"


async def branch_names(page: Page, repository: str) -> list[str]:
    """Return the names of the repository's first branches, offered in a ref field's list."""
    listing: dict[str, Any] = await page.get(
        repository_api(repository, "branches"), amount=_BRANCH_CHOICES
    )
    return [b["id"] for b in listing["results"]]


async def find_commit(page: Page, repository: str, commit_id: str) -> dict[str, Any] | None:
    """Return a commit as ``GET …/commits/{id}`` answers it; ``None`` when the API refuses.

    A page naming a commit still shows (and links) its ID when it cannot read the commit.
    """
    try:
        found: dict[str, Any] = await page.get(
            repository_api(repository, "commits", urlpart(commit_id))
        )
    except ApiError:
        return None
    return found


async def find_commits(
    page: Page, repository: str, commit_ids: Iterable[str]
) -> dict[str, dict[str, Any] | None]:
    """Return the commits of ``commit_ids`` by ID, each read once (:func:`find_commit`)."""
    ids = sorted({c for c in commit_ids if c})
    found = await asyncio.gather(*(find_commit(page, repository, c) for c in ids))
    return dict(zip(ids, found, strict=True))


async def _log(page: Page, repository: str, ref: str, here: str) -> Listing | ApiError:
    try:
        path = repository_api(repository, "refs", urlpart(ref), "commits")
        return await list_page(page, path, here, keep={"ref": ref})
    except ApiError as refused:
        return refused


async def list_commits(request: Request) -> Response:
    """List a ref's commits, 100 from ``after``."""
    page = await Page.open(request)
    repository = request.path_params["repository"]
    repo = await load_repository(page, repository)
    query = request.query_params
    ref = query.get("ref", "") or repo["default_branch"]
    here = repository_url(repository, _TAB)
    log, names = await asyncio.gather(
        _log(page, repository, ref, here), branch_names(page, repository)
    )
    context: dict[str, Any] = {
        **repository_context(repo, _TAB),
        "tab_url": here,
        "ref": ref,
        "branch_names": names,
    }
    if isinstance(log, ApiError):
        return page.render(
            "repository/commits.html",
            log.status,
            **context,
            error=log.message,
            rows=[],
            next_url="",
            start_url="",
        )
    rows = [
        {
            "id": c["id"],
            "url": commit_url(repository, c["id"]),
            "message": c["message"],
            "committer": c["committer"],
            "creation_date": c["creation_date"],
            "metadata": len(c.get("metadata") or {}),
            "parents": len(c["parents"]),
        }
        for c in log.results
    ]
    return page.render(
        "repository/commits.html",
        **context,
        error="",
        rows=rows,
        next_url=log.next_url,
        start_url=log.start_url,
    )


routes: list[BaseRoute] = [
    Route("/ui/repositories/{repository}/commits", list_commits, methods=["GET"]),
]
