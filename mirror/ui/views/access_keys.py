"""Access keys: a user's (the **Access Credentials** tab of its page) and one's own.

``GET /auth/users/{u}/credentials?after&amount`` pages of 100 (IDs and creation dates, never a
secret). **Create access key** (``POST …/credentials``) answers with a redirect to the new key's
page, so reloading creates nothing; the secret, which the API answers only then, travels to that
page sealed in a cookie (:mod:`mirror.ui.new_key`) that the page expires as it shows it, with a
warning and copy buttons. Reloading the page, or coming back to it, shows that the secret is not
shown again. **Delete** asks first (``DELETE …/credentials/{key}``); whatever signed in with the
key stops working.

The person's own keys (``/ui/auth/credentials``, lakeFS's "My credentials") are the same pages
over their own user, which the built-in groups' ``AuthManageOwnCredentials`` lets everyone manage.
"""

from __future__ import annotations

from typing import Any

from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import BaseRoute, Route

from mirror.auth.permissions import Action, Permission, user_arn
from mirror.ui import new_key
from mirror.ui.api import ApiError
from mirror.ui.auth_pages import (
    CREDENTIALS_URL,
    USERS_URL,
    Removal,
    ask_to_remove,
    remove,
    user_url,
)
from mirror.ui.listing import list_page
from mirror.ui.page import Page
from mirror.ui.render import page_url, urlpart
from mirror.ui.views.memberships import USER, owner_context

__all__ = ["routes"]

_TAB = "credentials"


def _own(request: Request) -> bool:
    return "owner" not in request.path_params


def _user(page: Page) -> str:
    return page.session.user_id if _own(page.request) else page.request.path_params["owner"]


def _keys_url(page: Page, *rest: str) -> str:
    """Return the UI path of the keys' list (own or a user's), or of a key's part of it."""
    if _own(page.request):
        return "/".join([CREDENTIALS_URL, *rest])
    return user_url(page.request.path_params["owner"], _TAB, *rest)


def _api(user_id: str, *rest: str) -> str:
    return "/".join([f"/auth/users/{urlpart(user_id)}/credentials", *rest])


async def _frame(page: Page) -> dict[str, Any]:
    """Return the context of the page's frame: one's own keys, or a user's page with its tabs."""
    if _own(page.request):
        return {"layout": "auth/own.html", "auth_tab": "credentials"}
    context = await owner_context(page, USER, _user(page), _TAB)
    return {"layout": "auth/owner.html", **context}


async def _listing(page: Page, *, error: str = "", status: int = 200) -> Response:
    user_id = _user(page)
    frame = await _frame(page)
    listed = await list_page(page, _api(user_id), _keys_url(page))
    allowed = await page.allowed(
        [
            Permission(Action.CREATE_CREDENTIALS, user_arn(user_id)),
            Permission(Action.DELETE_CREDENTIALS, user_arn(user_id)),
        ]
    )
    rows = [
        {
            "id": key["access_key_id"],
            "creation_date": key["creation_date"],
            "url": _keys_url(page, urlpart(key["access_key_id"])),
            "delete_url": _keys_url(page, urlpart(key["access_key_id"]), "delete"),
        }
        for key in listed.results
    ]
    query = page.request.query_params
    return page.render(
        "auth/keys.html",
        status,
        **frame,
        user=user_id,
        rows=rows,
        here=_keys_url(page),
        next_url=listed.next_url,
        start_url=listed.start_url,
        can_create=allowed[0],
        can_delete=allowed[1],
        error=error,
        deleted=query.get("deleted", ""),
    )


async def list_keys(request: Request) -> Response:
    """List the access keys of a user (or one's own), 100 from ``after``."""
    return await _listing(await Page.open(request))


async def create_key(request: Request) -> Response:
    """Create an access key and go to its page, which shows its secret once."""
    page = await Page.open(request)
    await page.form()
    user_id = _user(page)
    try:
        answer = await page.send("POST", _api(user_id))
    except ApiError as refused:
        return await _listing(page, error=refused.message, status=refused.status)
    made = answer.json()
    key = new_key.NewKey(made["access_key_id"], made["secret_access_key"])
    target = _keys_url(page, urlpart(key.access_key_id))
    response = RedirectResponse(target, status_code=303)
    new_key.seal(response, request, page.ui.csrf, page.session, user_id, key, target)
    return response


async def show_key(request: Request) -> Response:
    """Show an access key; its secret only on the first showing after it was created."""
    page = await Page.open(request)
    user_id, key_id = _user(page), request.path_params["key"]
    frame = await _frame(page)
    found: dict[str, Any] = await page.get(_api(user_id, urlpart(key_id)))
    here = _keys_url(page, urlpart(key_id))
    fresh = new_key.opened(request, page.ui.csrf, page.session, user_id, key_id)
    (can_delete,) = await page.allowed([Permission(Action.DELETE_CREDENTIALS, user_arn(user_id))])
    response = page.render(
        "auth/key.html",
        **frame,
        user=user_id,
        key=found,
        secret=fresh.secret_access_key if fresh else "",
        list_url=_keys_url(page),
        delete_url=_keys_url(page, urlpart(key_id), "delete"),
        can_delete=can_delete,
    )
    if request.cookies.get(new_key.COOKIE):
        new_key.clear(response, request, here)
    return response


def _removal(page: Page) -> Removal:
    key_id = page.request.path_params["key"]
    whose = "your" if _own(page.request) else f"user {_user(page)}'s"
    return Removal(
        heading=f"Delete access key {key_id}",
        text=(
            f"This deletes {whose} access key {key_id}. Anything that signs in with it (a "
            "client, a job, lakectl) is refused from now on. It cannot be undone."
        ),
        button="Delete access key",
        action=_keys_url(page, urlpart(key_id), "delete"),
        cancel_url=_keys_url(page),
        api_path=_api(_user(page), urlpart(key_id)),
        done_url=page_url(_keys_url(page), deleted=key_id),
    )


async def confirm_delete(request: Request) -> Response:
    """Ask the person to confirm deleting an access key."""
    page = await Page.open(request)
    return await ask_to_remove(page, _removal(page))


async def delete_key(request: Request) -> Response:
    """Delete an access key; show the API's refusal on the confirmation page."""
    page = await Page.open(request)
    return await remove(page, _removal(page))


def _routes(base: str) -> list[BaseRoute]:
    return [
        Route(base, list_keys, methods=["GET"]),
        Route(base, create_key, methods=["POST"]),
        Route(base + "/{key}", show_key, methods=["GET"]),
        Route(base + "/{key}/delete", confirm_delete, methods=["GET"]),
        Route(base + "/{key}/delete", delete_key, methods=["POST"]),
    ]


routes: list[BaseRoute] = [
    *_routes(CREDENTIALS_URL),
    *_routes(f"{USERS_URL}/{{owner}}/{_TAB}"),
]
