"""The REST API as the web UI calls it: in process, through ASGI, as the signed-in user.

Every page gets its data from ``/api/v1`` itself, with the session's login token as a Bearer
token, so the UI has no second path to the data: the API authorises each call exactly as it
authorises any client's, and a refusal comes back with the server's own message, which the page
shows. The calls cross no socket (httpx's ASGI transport hands them to the API app in the same
event loop) and go through the API's middleware, so each is logged and counted as a request.
"""

from __future__ import annotations

from collections.abc import Mapping
from contextvars import ContextVar
from typing import TYPE_CHECKING, Any

import httpx
import structlog

if TYPE_CHECKING:
    from starlette.types import ASGIApp, Receive, Scope, Send

__all__ = ["API_PREFIX", "ApiClient", "ApiError", "BrowserAddress", "SignedOut", "error_text"]

API_PREFIX = "/api/v1"
_HOST = "lakemirror.internal"
"""The host name of in-process calls (the API reads no host; logs show where they came from)."""
_TIMEOUT = 60.0
"""The client's timeout setting; the ASGI transport itself runs each call to its end."""


_IN_PROCESS = ("127.0.0.1", 0)
_BROWSER: ContextVar[tuple[str, int]] = ContextVar("lakemirror_ui_browser", default=_IN_PROCESS)
"""The address of the browser whose page the UI is serving: the client of its API calls."""


class BrowserAddress:
    """Let the API calls a page makes carry the address of the browser the page is for.

    The API counts failed sign-ins and records audit events by client address: calls made
    in process would otherwise all come from 127.0.0.1, and one person's wrong passwords
    would refuse a key's sign-ins through the UI for everyone.

    Args:
        app: The UI app.
    """

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Serve one request with its client as the client of the API calls it makes."""
        client = scope.get("client")
        if scope["type"] != "http" or not client:
            await self.app(scope, receive, send)
            return
        token = _BROWSER.set((str(client[0]), int(client[1])))
        try:
            await self.app(scope, receive, send)
        finally:
            _BROWSER.reset(token)


class _BrowserTransport(httpx.ASGITransport):
    """httpx's ASGI transport, handing the API the current page's browser as the client."""

    @property
    def client(self) -> tuple[str, int]:
        return _BROWSER.get()

    @client.setter
    def client(self, value: tuple[str, int]) -> None:
        """Ignore the fixed client the base class sets: each call takes the page's own."""


def error_text(response: httpx.Response) -> str:
    """Return the message of an API error answer: lakeFS's ``message``, then our ``detail``."""
    try:
        body = response.json()
    except ValueError:
        body = None
    if isinstance(body, dict) and isinstance(body.get("message"), str):
        message: str = body["message"]
        detail = body.get("detail")
        if isinstance(detail, str) and detail and detail not in message:
            message = f"{message} ({detail})"
        return message
    text = response.text.strip()
    return text or response.reason_phrase or f"HTTP {response.status_code}"


class ApiError(Exception):
    """The API refused a call; ``message`` is its own text.

    Attributes:
        status: The HTTP status the API answered.
        message: The API's message (:func:`error_text`).
    """

    def __init__(self, status: int, message: str) -> None:
        super().__init__(f"{status}: {message}")
        self.status = status
        self.message = message


class SignedOut(Exception):
    """The API did not accept the session's token (missing, expired, or its user is gone)."""


class ApiClient:
    """Call the API app in process.

    Args:
        app: The ASGI app serving ``/api/v1`` (and ``/logout``).
    """

    def __init__(self, app: ASGIApp) -> None:
        self.app = app
        self._client = httpx.AsyncClient(
            transport=_BrowserTransport(app=app), base_url=f"http://{_HOST}", timeout=_TIMEOUT
        )

    async def aclose(self) -> None:
        """Close the HTTP client."""
        await self._client.aclose()

    async def request(
        self,
        method: str,
        path: str,
        *,
        token: str | None = None,
        params: Mapping[str, str | int] | None = None,
        json: Any = None,
        scheme: str = "http",
        headers: Mapping[str, str] | None = None,
        files: Any = None,
        content: bytes | None = None,
    ) -> httpx.Response:
        """Send one call and return the API's answer, whatever its status.

        Args:
            method: The HTTP method.
            path: The path, ``/api/v1/...`` or ``/logout``.
            token: The login token, sent as ``Authorization: Bearer``.
            params: The query parameters.
            json: The JSON body.
            scheme: ``https`` when the browser reached the UI over TLS, so the API marks the
                cookies it sets ``Secure`` as it does for any client over TLS.
            headers: More request headers (``Range``, ...).
            files: Files sent as ``multipart/form-data`` (httpx's ``files``).
            content: A raw body instead of ``json`` (sent as ``application/json`` unless
                ``headers`` name a type), so the API judges text a person typed as it is.
        """
        sent: dict[str, str] = dict(headers or {})
        if content is not None and not any(k.lower() == "content-type" for k in sent):
            sent["Content-Type"] = "application/json"
        if token is not None:
            sent["Authorization"] = f"Bearer {token}"
        # the API logs the call under the page's request ID, so a page's calls read together
        request_id = structlog.contextvars.get_contextvars().get("request_id")
        if isinstance(request_id, str):
            sent["X-Request-ID"] = request_id
        url = f"{scheme}://{_HOST}{path}"
        return await self._client.request(
            method, url, params=params, json=json, headers=sent, files=files, content=content
        )

    async def call(
        self,
        method: str,
        path: str,
        token: str,
        *,
        params: Mapping[str, str | int] | None = None,
        json: Any = None,
        headers: Mapping[str, str] | None = None,
        files: Any = None,
        content: bytes | None = None,
    ) -> httpx.Response:
        """Send one call of the signed-in user under ``/api/v1``; return a successful answer.

        Raises:
            SignedOut: the API answered 401: the token no longer signs anyone in.
            ApiError: any other refusal (4xx or 5xx), with the API's message.
        """
        response = await self.request(
            method,
            API_PREFIX + path,
            token=token,
            params=params,
            json=json,
            headers=headers,
            files=files,
            content=content,
        )
        if response.status_code == 401:
            raise SignedOut(error_text(response))
        if response.status_code >= 400:
            raise ApiError(response.status_code, error_text(response))
        return response
