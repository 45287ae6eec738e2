"""What every view works with: the request, the signed-in person, and the API as that person.

A view opens a :class:`Page` (which signs the person in, or sends them to the sign-in page),
reads what it shows from the REST API with :meth:`Page.get`, changes things with
:meth:`Page.send` after :meth:`Page.form` checked the CSRF token, asks :meth:`Page.allowed`
before drawing a write control, and answers :meth:`Page.render`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import httpx
from starlette.datastructures import FormData
from starlette.requests import Request
from starlette.responses import HTMLResponse

from mirror.auth.permissions import ALL_RESOURCES, Action, Permission, user_arn
from mirror.ui.api import ApiClient
from mirror.ui.csrf import FORM_FIELD, CsrfTokens
from mirror.ui.render import Templates
from mirror.ui.session import Session, checked_form, current_session

__all__ = ["ADMINISTRATION", "Page", "UIState", "render_page", "ui_state"]

ADMINISTRATION = Permission(Action.LIST_USERS, ALL_RESOURCES)
"""Who holds it sees the header's link to the administration pages (users, groups, policies)."""


@dataclass(frozen=True, slots=True)
class UIState:
    """What the UI app holds: the API it calls, its CSRF tokens and its templates."""

    api: ApiClient
    csrf: CsrfTokens
    templates: Templates


def ui_state(request: Request) -> UIState:
    """Return the state of the UI app serving ``request``."""
    state: UIState = request.app.state.ui
    return state


class Page:
    """One page being served to a signed-in person.

    Args:
        request: The browser's request.
        session: The person's session.
        ui: The UI's state.
    """

    def __init__(self, request: Request, session: Session, ui: UIState) -> None:
        self.request = request
        self.session = session
        self.ui = ui
        self.administers = False
        """Whether the header links to the administration pages (set by :meth:`open`)."""
        self.keeps_keys = False
        """Whether the header links to the person's own access keys (set by :meth:`open`)."""

    @classmethod
    async def open(cls, request: Request) -> Page:
        """Return the page of ``request``'s signed-in person.

        Raises:
            SignInRequired: nobody is signed in (the app sends the browser to sign in).
        """
        ui = ui_state(request)
        page = cls(request, await current_session(request, ui.api, ui.csrf), ui)
        # lakeFS's UI offers its administration to whoever may list the users
        own_keys = Permission(Action.LIST_CREDENTIALS, user_arn(page.session.user_id))
        page.administers, page.keeps_keys = await page.allowed([ADMINISTRATION, own_keys])
        return page

    async def get(self, path: str, **params: str | int) -> Any:
        """Return the JSON the API answers ``GET /api/v1<path>`` with (empty params dropped).

        Raises:
            SignedOut: the API no longer accepts the session.
            ApiError: the API refused, with its message.
        """
        kept = {k: v for k, v in params.items() if v != ""}
        response = await self.ui.api.call("GET", path, self.session.token, params=kept)
        return response.json()

    async def send(
        self,
        method: str,
        path: str,
        *,
        json: Any = None,
        params: Mapping[str, str | int] | None = None,
        headers: Mapping[str, str] | None = None,
        files: Any = None,
        content: bytes | None = None,
    ) -> httpx.Response:
        """Send a call to ``/api/v1<path>`` as the signed-in person; return the answer.

        Also reads what :meth:`get` cannot: bytes (with ``headers`` such as ``Range``). ``files``
        go as ``multipart/form-data``; ``content`` is a raw JSON body, sent as it is.

        Raises:
            SignedOut: the API no longer accepts the session.
            ApiError: the API refused, with its message.
        """
        return await self.ui.api.call(
            method,
            path,
            self.session.token,
            params=params,
            json=json,
            headers=headers,
            files=files,
            content=content,
        )

    async def allowed(self, permissions: Sequence[Permission]) -> list[bool]:
        """Return whether the person holds each permission (``POST /api/v1/user/permissions``).

        The answer only decides which controls to draw: the API checks each request it gets.
        """
        if not permissions:
            return []
        body = {"permissions": [{"action": p.action, "resource": p.resource} for p in permissions]}
        response = await self.send("POST", "/user/permissions", json=body)
        return [bool(r["allowed"]) for r in response.json()["results"]]

    async def form(self) -> FormData:
        """Return the request's form once its CSRF token checked out.

        Raises:
            CsrfRefused: missing or wrong token (the app answers 403 saying why).
        """
        return await checked_form(self.request, self.session, self.ui.csrf)

    def render(self, template: str, status: int = 200, **context: Any) -> HTMLResponse:
        """Return ``template`` rendered for the signed-in person, with ``context``."""
        return render_page(
            self.request,
            template,
            status,
            session=self.session,
            administers=self.administers,
            keeps_keys=self.keeps_keys,
            **context,
        )


def render_page(
    request: Request,
    template: str,
    status: int = 200,
    *,
    session: Session | None = None,
    **context: Any,
) -> HTMLResponse:
    """Return ``template`` rendered with what ``base.html`` needs (``session`` may be absent)."""
    values = {
        "request_path": request.url.path,
        "user_id": session.user_id if session else "",
        "csrf_field": FORM_FIELD,
        "csrf_token": session.csrf if session else "",
        **context,
    }
    return ui_state(request).templates.render(template, values, status)
