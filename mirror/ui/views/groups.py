"""The administration's groups: list with lakeFS's paging and a prefix search, create, delete.

``GET /api/v1/auth/groups?prefix&after&amount`` pages of 100, each group with its description.
**Create group** takes an ID and a description (``POST /auth/groups`` ``{id, description}``, as
lakeFS's form); the API's refusal shows next to the form with what was typed. **Delete** asks
first (``DELETE /auth/groups/{id}``): its members stay, without what its policies gave them. A
group's ID links to its page (:mod:`mirror.ui.views.memberships`).
"""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route

from mirror.auth.permissions import Action, Permission, group_arn
from mirror.ui.auth_pages import GROUPS_URL, Removal, ask_to_remove, group_url, remove
from mirror.ui.forms import field, redirect_after
from mirror.ui.listing import named_list
from mirror.ui.page import Page
from mirror.ui.render import page_url, urlpart

__all__ = ["routes"]

_FIELDS = ("id", "description")


async def _listing(
    page: Page, *, new: dict[str, str] | None = None, error: str = "", status: int = 200
) -> Response:
    listed = await named_list(
        page,
        "/auth/groups",
        GROUPS_URL,
        create=Permission(Action.CREATE_GROUP, group_arn("*")),
        delete=lambda group: Permission(Action.DELETE_GROUP, group_arn(group["id"])),
    )
    rows = [
        {
            "id": group["id"],
            "description": group.get("description") or "",
            "creation_date": group["creation_date"],
            "url": group_url(group["id"]),
            "delete_url": group_url(group["id"], "delete"),
            "can_delete": may,
        }
        for group, may in listed.entries
    ]
    return page.render(
        "auth/groups.html",
        status,
        **listed.context,
        auth_tab="groups",
        rows=rows,
        new=new or dict.fromkeys(_FIELDS, ""),
        error=error,
    )


async def list_groups(request: Request) -> Response:
    """List groups: 100 from ``after``, those whose ID starts with ``prefix``."""
    return await _listing(await Page.open(request))


async def create_group(request: Request) -> Response:
    """Create a group; go to its page, or show the API's refusal next to the form."""
    page = await Page.open(request)
    form = await page.form()
    new = {name: field(form, name) for name in _FIELDS}
    body = {"id": new["id"]}
    if new["description"]:
        body["description"] = new["description"]
    return await redirect_after(
        page.send("POST", "/auth/groups", json=body),
        page_url(group_url(new["id"], "members"), created=1),
        refused=lambda e: _listing(page, new=new, error=e.message, status=e.status),
    )


def _removal(group_id: str) -> Removal:
    return Removal(
        heading=f"Delete group {group_id}",
        text=(
            "This deletes the group with its memberships and policy attachments. Its members "
            "stay, without what the group's policies allowed them. It cannot be undone."
        ),
        button="Delete group",
        action=group_url(group_id, "delete"),
        cancel_url=group_url(group_id, "members"),
        api_path=f"/auth/groups/{urlpart(group_id)}",
        done_url=page_url(GROUPS_URL, deleted=group_id),
    )


async def confirm_delete(request: Request) -> Response:
    """Ask the person to confirm deleting a group."""
    return await ask_to_remove(await Page.open(request), _removal(request.path_params["group"]))


async def delete_group(request: Request) -> Response:
    """Delete a group; show the API's refusal on the confirmation page."""
    return await remove(await Page.open(request), _removal(request.path_params["group"]))


routes: list[BaseRoute] = [
    Route(GROUPS_URL, list_groups, methods=["GET"]),
    Route(GROUPS_URL, create_group, methods=["POST"]),
    Route(GROUPS_URL + "/{group}/delete", confirm_delete, methods=["GET"]),
    Route(GROUPS_URL + "/{group}/delete", delete_group, methods=["POST"]),
]
