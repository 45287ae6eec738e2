"""A repository's Settings tab: its general facts, and the sections of its settings.

As lakeFS's settings pages: **General** shows the repository's ID, storage namespace, default
branch, creation date and whether it is a read-only mirror, and leads to deleting it (the
repositories page's confirmation, where the name must be typed: lakeFS's rule); **Garbage
collection** (:mod:`mirror.ui.views.gc_rules`) and **Branch protection**
(:mod:`mirror.ui.views.protection`) are sections of their own. Deleting is offered only to
those whose policies allow ``fs:DeleteRepository``, and never for a mirror, as the repositories
page offers it.
"""

from __future__ import annotations

from typing import Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route

from mirror.auth.permissions import Action, Permission, repository_arn
from mirror.ui.page import Page
from mirror.ui.views.repository import load_repository, repository_context, repository_url

__all__ = ["SECTIONS", "routes", "settings_context", "settings_url"]

TAB = "settings"

SECTIONS = (("", "General"), ("gc", "Garbage collection"), ("branches", "Branch protection"))
"""The settings' sections: their path under the tab, and their label (lakeFS's)."""


def settings_url(repository: str, section: str = "") -> str:
    """Return the UI path of a section of a repository's settings."""
    base = repository_url(repository, TAB)
    return f"{base}/{section}" if section else base


def settings_context(repo: dict[str, Any], section: str) -> dict[str, Any]:
    """Return what a settings page's template needs: the tab's frame and the sections."""
    return {
        **repository_context(repo, TAB),
        "sections": [
            {"label": label, "url": settings_url(repo["id"], key), "active": key == section}
            for key, label in SECTIONS
        ],
    }


async def show_general(request: Request) -> Response:
    """Show a repository's general settings, with the way to delete it."""
    page = await Page.open(request)
    repository = request.path_params["repository"]
    repo = await load_repository(page, repository)
    can_delete = (
        not repo.get("read_only", False)
        and (
            await page.allowed([Permission(Action.DELETE_REPOSITORY, repository_arn(repository))])
        )[0]
    )
    return page.render(
        "repository/settings_general.html",
        **settings_context(repo, ""),
        delete_url=f"{repository_url(repository)}/delete" if can_delete else "",
    )


routes: list[BaseRoute] = [
    Route("/ui/repositories/{repository}/settings", show_general, methods=["GET"]),
]
