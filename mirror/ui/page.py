"""What every view works with: the request, the signed-in person, and the API as that person.

A view opens a :class:`Page` (which signs the person in, or sends them to the sign-in page),
reads what it shows from the REST API with :meth:`Page.get`, changes things with
:meth:`Page.send` after :meth:`Page.form` checked the CSRF token, asks :meth:`Page.allowed`
before drawing a write control, and answers :meth:`Page.render`.

The header's links (administration, one's own access keys) depend on the person's policies too.
:meth:`Page.open` asks for them at once; a view that asks :meth:`Page.allowed` anyway may open
its page with ``header_later`` so that its first call asks for the header's as well, one
``POST /user/permissions`` per page instead of two.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import httpx
from starlette.datastructures import FormData
from starlette.requests import Request
from starlette.responses import HTMLResponse

from mirror.auth.permissions import ALL_RESOURCES, Action, Permission, user_arn
from mirror.ui.api import ApiClient
from mirror.ui.csrf import FORM_FIELD, CsrfTokens
from mirror.ui.render import Templates
from mirror.ui.server_config import ServerConfig
from mirror.ui.session import Session, checked_form, current_session

__all__ = ["ADMINISTRATION", "Page", "UIState", "render_page", "ui_state"]

ADMINISTRATION = Permission(Action.LIST_USERS, ALL_RESOURCES)
"""Who holds it sees the header's link to the administration pages (users, groups, policies)."""


@dataclass(frozen=True, slots=True)
class UIState:
    """What the UI app holds: the API it calls, CSRF tokens, templates, the server's /config."""

    api: ApiClient
    csrf: CsrfTokens
    templates: Templates
    config: ServerConfig = field(default_factory=ServerConfig)


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
        """Whether the header links to the administration pages (see :meth:`open`)."""
        self.keeps_keys = False
        """Whether the header links to the person's own access keys (see :meth:`open`)."""
        self._header_pending = False

    @classmethod
    async def open(cls, request: Request, *, header_later: bool = False) -> Page:
        """Return the page of ``request``'s signed-in person.

        Args:
            request: The browser's request.
            header_later: Ask the header's permissions with the view's first :meth:`allowed`
                call rather than now. Such a view must call :meth:`allowed` (with no
                permission of its own if it has none) before :meth:`render`; one that only
                redirects need not.

        Raises:
            SignInRequired: nobody is signed in (the app sends the browser to sign in).
        """
        ui = ui_state(request)
        page = cls(request, await current_session(request, ui.api, ui.csrf), ui)
        page._header_pending = True
        if not header_later:
            await page.allowed([])
        return page

    def _header_permissions(self) -> list[Permission]:
        # lakeFS's UI offers its administration to whoever may list the users
        own_keys = Permission(Action.LIST_CREDENTIALS, user_arn(self.session.user_id))
        return [ADMINISTRATION, own_keys]

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
        The first call also asks the header's permissions (see :meth:`open`).
        """
        header = self._header_permissions() if self._header_pending else []
        self._header_pending = False  # before the await: a concurrent call must not ask again
        asked = [*header, *permissions]
        if not asked:
            return []
        body = {"permissions": [{"action": p.action, "resource": p.resource} for p in asked]}
        response = await self.send("POST", "/user/permissions", json=body)
        answers = [bool(r["allowed"]) for r in response.json()["results"]]
        if header:
            self.administers, self.keeps_keys = answers[: len(header)]
        return answers[len(header) :]

    async def storage_config(self) -> dict[str, Any]:
        """Return the server's storage configuration (``GET /config``, read once per process)."""
        return await self.ui.config.storage(self.ui.api, self.session.token)

    async def form(self) -> FormData:
        """Return the request's form once its CSRF token checked out.

        Raises:
            CsrfRefused: missing or wrong token (the app answers 403 saying why).
        """
        return await checked_form(self.request, self.session, self.ui.csrf)

    def render(self, template: str, status: int = 200, **context: Any) -> HTMLResponse:
        """Return ``template`` rendered for the signed-in person, with ``context``.

        Raises:
            RuntimeError: the page was opened with ``header_later`` and never asked
                :meth:`allowed`, so the header's links are not known.
        """
        if self._header_pending:
            raise RuntimeError("a page opened with header_later rendered before asking allowed()")
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
