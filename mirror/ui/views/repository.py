"""A repository's page frame: its header (with the mirror mark) and lakeFS's tabs.

Every tab of a repository is a view of its own module that renders a template extending
``repository/base.html`` with :func:`repository_context`. The tabs are lakeFS's, in lakeFS's
order; a tab whose view is not written yet is shown without a link.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import BaseRoute, Route

from mirror.ui.mirroring import known_mirrors
from mirror.ui.page import Page
from mirror.ui.render import urlpart

__all__ = [
    "TABS",
    "Tab",
    "load_repository",
    "repository_api",
    "repository_context",
    "repository_url",
    "routes",
]


@dataclass(frozen=True, slots=True)
class Tab:
    """One tab of a repository: its key, label, and whether a view serves it yet."""

    key: str
    label: str
    served: bool


TABS = (
    Tab("objects", "Objects", True),
    Tab("changes", "Uncommitted Changes", True),
    Tab("commits", "Commits", True),
    Tab("branches", "Branches", True),
    Tab("tags", "Tags", True),
    Tab("compare", "Compare", True),
    Tab("pulls", "Pull Requests", True),
    Tab("actions", "Actions", True),
    Tab("settings", "Settings", True),
)
"""lakeFS's repository tabs, in its order (its objects page's uncommitted changes are a tab)."""

DEFAULT_TAB = "objects"
"""The tab a repository opens on (lakeFS's Objects)."""


def repository_url(repository: str, tab: str | None = None) -> str:
    """Return the UI path of a repository, or of one of its tabs."""
    base = f"/ui/repositories/{urlpart(repository)}"
    return f"{base}/{tab}" if tab else base


def repository_api(repository: str, *rest: str) -> str:
    """Return the API path of a repository, or of one of its parts (``rest``: encoded segments)."""
    return "/".join([f"/repositories/{urlpart(repository)}", *rest])


async def load_repository(page: Page, repository: str) -> dict[str, Any]:
    """Return the repository as ``GET /api/v1/repositories/{repository}`` answers it.

    With a replicant configured, ``ui_mirrors`` holds the mirrors it knows for the
    repository, which the repository's header lists (:func:`~mirror.ui.mirroring.known_mirrors`).

    Raises:
        ApiError: not found, or not readable by the person (the page shows the API's message).
    """
    found: dict[str, Any] = await page.get(repository_api(repository))
    found["ui_mirrors"] = await known_mirrors(page, found)
    return found


def repository_context(repo: dict[str, Any], tab: str) -> dict[str, Any]:
    """Return what ``repository/base.html`` needs: the repository, its tabs, the active one."""
    return {
        "repo": repo,
        "tabs": [
            {
                "key": t.key,
                "label": t.label,
                "url": repository_url(repo["id"], t.key) if t.served else "",
                "active": t.key == tab,
            }
            for t in TABS
        ],
    }


async def repository_home(request: Request) -> Response:
    """Open a repository on its default tab (once signed in: nothing else is asked here)."""
    # only the session is checked; the tab the browser goes to asks for the header's links
    await Page.open(request, header_later=True)
    repository = request.path_params["repository"]
    return RedirectResponse(repository_url(repository, DEFAULT_TAB), status_code=302)


routes: list[BaseRoute] = [
    Route("/ui/repositories/{repository}", repository_home, methods=["GET"]),
]
