"""The administration's groups: list with lakeFS's paging and a prefix search, create, delete.

``GET /api/v1/auth/groups?prefix&after&amount`` pages of 100, each group with its description.
**Create group** takes an ID and a description (``POST /auth/groups`` ``{id, description}``, as
lakeFS's form); the API's refusal shows next to the form with what was typed. **Delete** asks
first (``DELETE /auth/groups/{id}``): its members stay, without what its policies gave them. A
group's ID links to its page (:mod:`mirror.ui.views.memberships`).
"""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import BaseRoute, Route

from mirror.auth.permissions import Action, Permission, group_arn
from mirror.ui.api import ApiError
from mirror.ui.auth_pages import GROUPS_URL, confirm, field, group_url, list_page
from mirror.ui.page import Page
from mirror.ui.render import page_url, urlpart

__all__ = ["routes"]

_FIELDS = ("id", "description")


async def _listing(
    page: Page, *, new: dict[str, str] | None = None, error: str = "", status: int = 200
) -> Response:
    query = page.request.query_params
    prefix = query.get("prefix", "")
    listed = await list_page(page, "/auth/groups", GROUPS_URL, prefix=prefix)
    allowed = await page.allowed(
        [
            Permission(Action.CREATE_GROUP, group_arn("*")),
            *(Permission(Action.DELETE_GROUP, group_arn(g["id"])) for g in listed.results),
        ]
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
        for group, may in zip(listed.results, allowed[1:], strict=True)
    ]
    return page.render(
        "auth/groups.html",
        status,
        auth_tab="groups",
        rows=rows,
        prefix=prefix,
        next_url=listed.next_url,
        start_url=listed.start_url,
        can_create=allowed[0],
        new=new or dict.fromkeys(_FIELDS, ""),
        error=error,
        deleted=query.get("deleted", ""),
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
    try:
        await page.send("POST", "/auth/groups", json=body)
    except ApiError as refused:
        return await _listing(page, new=new, error=refused.message, status=refused.status)
    return RedirectResponse(page_url(group_url(new["id"], "members"), created=1), status_code=303)


def _confirmation(page: Page, group_id: str, *, error: str = "", status: int = 200) -> Response:
    return confirm(
        page,
        heading=f"Delete group {group_id}",
        text=(
            "This deletes the group with its memberships and policy attachments. Its members "
            "stay, without what the group's policies allowed them. It cannot be undone."
        ),
        action=group_url(group_id, "delete"),
        button="Delete group",
        cancel_url=group_url(group_id, "members"),
        error=error,
        status=status,
    )


async def confirm_delete(request: Request) -> Response:
    """Ask the person to confirm deleting a group."""
    page = await Page.open(request)
    group_id = request.path_params["group"]
    await page.get(f"/auth/groups/{urlpart(group_id)}")  # an unknown group shows the API's 404
    return _confirmation(page, group_id)


async def delete_group(request: Request) -> Response:
    """Delete a group; show the API's refusal on the confirmation page."""
    page = await Page.open(request)
    await page.form()
    group_id = request.path_params["group"]
    try:
        await page.send("DELETE", f"/auth/groups/{urlpart(group_id)}")
    except ApiError as refused:
        return _confirmation(page, group_id, error=refused.message, status=refused.status)
    return RedirectResponse(page_url(GROUPS_URL, deleted=group_id), status_code=303)


routes: list[BaseRoute] = [
    Route(GROUPS_URL, list_groups, methods=["GET"]),
    Route(GROUPS_URL, create_group, methods=["POST"]),
    Route(GROUPS_URL + "/{group}/delete", confirm_delete, methods=["GET"]),
    Route(GROUPS_URL + "/{group}/delete", delete_group, methods=["POST"]),
]
