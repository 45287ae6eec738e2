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
from mirror.ui.api import ApiError
from mirror.ui.auth_pages import (
    CREDENTIALS_URL,
    USERS_URL,
    confirm,
    field,
    list_page,
    user_url,
)
from mirror.ui.page import Page
from mirror.ui.render import page_url, urlpart

__all__ = ["routes"]

_FIELDS = ("id", "email")


async def _listing(
    page: Page, *, new: dict[str, str] | None = None, error: str = "", status: int = 200
) -> Response:
    query = page.request.query_params
    prefix = query.get("prefix", "")
    listed = await list_page(page, "/auth/users", USERS_URL, prefix=prefix)
    allowed = await page.allowed(
        [
            Permission(Action.CREATE_USER, user_arn("*")),
            *(Permission(Action.DELETE_USER, user_arn(u["id"])) for u in listed.results),
        ]
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
        for user, may in zip(listed.results, allowed[1:], strict=True)
    ]
    return page.render(
        "auth/users.html",
        status,
        auth_tab="users",
        rows=rows,
        prefix=prefix,
        next_url=listed.next_url,
        start_url=listed.start_url,
        can_create=allowed[0],
        new=new or dict.fromkeys(_FIELDS, ""),
        error=error,
        deleted=query.get("deleted", ""),
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
    try:
        await page.send("POST", "/auth/users", json=body)
    except ApiError as refused:
        return await _listing(page, new=new, error=refused.message, status=refused.status)
    return RedirectResponse(page_url(user_url(new["id"], "groups"), created=1), status_code=303)


def _confirmation(page: Page, user_id: str, *, error: str = "", status: int = 200) -> Response:
    return confirm(
        page,
        heading=f"Delete user {user_id}",
        text=(
            "This deletes the user with its access keys, group memberships and attached "
            "policies. Anything signed in with its keys stops working. It cannot be undone."
        ),
        action=user_url(user_id, "delete"),
        button="Delete user",
        cancel_url=user_url(user_id, "groups"),
        error=error,
        status=status,
    )


async def confirm_delete(request: Request) -> Response:
    """Ask the person to confirm deleting a user."""
    page = await Page.open(request)
    user_id = request.path_params["user"]
    await page.get(f"/auth/users/{urlpart(user_id)}")  # an unknown user shows the API's 404
    return _confirmation(page, user_id)


async def delete_user(request: Request) -> Response:
    """Delete a user; show the API's refusal on the confirmation page."""
    page = await Page.open(request)
    await page.form()
    user_id = request.path_params["user"]
    try:
        await page.send("DELETE", f"/auth/users/{urlpart(user_id)}")
    except ApiError as refused:
        return _confirmation(page, user_id, error=refused.message, status=refused.status)
    return RedirectResponse(page_url(USERS_URL, deleted=user_id), status_code=303)


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
