"""The administration's users: list with lakeFS's paging and a prefix search, create, delete.

``GET /api/v1/auth/users?prefix&after&amount`` pages of 100 (lakeFS's UI reads them all and
filters in the browser; here the API's prefix does it, page by page). **Create user** takes an
ID and, optionally, an e-mail address (``POST /auth/users`` ``{id, email}``); the API's refusal
shows next to the form with what was typed. **Delete** asks first (``DELETE /auth/users/{id}``);
as in lakeFS, nobody is offered to delete themselves. A user's ID links to its page
(:mod:`mirror.ui.views.memberships`).
"""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import BaseRoute, Route

from mirror.auth.permissions import Action, Permission, user_arn
from mirror.ui.auth_pages import (
    CREDENTIALS_URL,
    USERS_URL,
    Removal,
    ask_to_remove,
    remove,
    user_url,
)
from mirror.ui.forms import field, redirect_after
from mirror.ui.listing import named_list
from mirror.ui.page import Page
from mirror.ui.render import page_url, urlpart

__all__ = ["routes"]

_FIELDS = ("id", "email")


async def _listing(
    page: Page, *, new: dict[str, str] | None = None, error: str = "", status: int = 200
) -> Response:
    listed = await named_list(
        page,
        "/auth/users",
        USERS_URL,
        create=Permission(Action.CREATE_USER, user_arn("*")),
        delete=lambda user: Permission(Action.DELETE_USER, user_arn(user["id"])),
    )
    rows = [
        {
            "id": user["id"],
            "email": user.get("email") or "",
            "creation_date": user["creation_date"],
            "url": user_url(user["id"]),
            "delete_url": user_url(user["id"], "delete"),
            "can_delete": may and user["id"] != page.session.user_id,
        }
        for user, may in listed.entries
    ]
    return page.render(
        "auth/users.html",
        status,
        **listed.context,
        auth_tab="users",
        rows=rows,
        new=new or dict.fromkeys(_FIELDS, ""),
        error=error,
    )


async def list_users(request: Request) -> Response:
    """List users: 100 from ``after``, those whose ID starts with ``prefix``."""
    return await _listing(await Page.open(request))


async def create_user(request: Request) -> Response:
    """Create a user; go to its page, or show the API's refusal next to the form."""
    page = await Page.open(request)
    form = await page.form()
    new = {name: field(form, name) for name in _FIELDS}
    body = {"id": new["id"]}
    if new["email"]:
        body["email"] = new["email"]
    return await redirect_after(
        page.send("POST", "/auth/users", json=body),
        page_url(user_url(new["id"], "groups"), created=1),
        refused=lambda e: _listing(page, new=new, error=e.message, status=e.status),
    )


def _removal(user_id: str) -> Removal:
    return Removal(
        heading=f"Delete user {user_id}",
        text=(
            "This deletes the user with its access keys, group memberships and attached "
            "policies. Anything signed in with its keys stops working. It cannot be undone."
        ),
        button="Delete user",
        action=user_url(user_id, "delete"),
        cancel_url=user_url(user_id, "groups"),
        api_path=f"/auth/users/{urlpart(user_id)}",
        done_url=page_url(USERS_URL, deleted=user_id),
    )


async def confirm_delete(request: Request) -> Response:
    """Ask the person to confirm deleting a user."""
    return await ask_to_remove(await Page.open(request), _removal(request.path_params["user"]))


async def delete_user(request: Request) -> Response:
    """Delete a user; show the API's refusal on the confirmation page."""
    return await remove(await Page.open(request), _removal(request.path_params["user"]))


async def auth_home(request: Request) -> Response:
    """Open the administration: the users for those who may list them, else their own keys."""
    page = await Page.open(request)
    return RedirectResponse(USERS_URL if page.administers else CREDENTIALS_URL, status_code=302)


routes: list[BaseRoute] = [
    Route("/ui/auth", auth_home, methods=["GET"]),
    Route("/ui/auth/", auth_home, methods=["GET"]),
    Route(USERS_URL, list_users, methods=["GET"]),
    Route(USERS_URL, create_user, methods=["POST"]),
    Route(USERS_URL + "/{user}/delete", confirm_delete, methods=["GET"]),
    Route(USERS_URL + "/{user}/delete", delete_user, methods=["POST"]),
]
