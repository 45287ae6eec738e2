"""Which requests of the server's one listener are the web UI's.

The UI lives under ``/ui/``: no repository, and so no path-style S3 bucket, can be called ``ui``
(names have at least 3 characters). A browser's ``GET /`` and lakeFS's sign-in path
``GET /auth/login`` (where ``GET /logout`` sends the browser) are the UI's too, unless they carry
an AWS signature: an S3 client is never redirected into the UI. Everything else, and every
lifespan event, reaches the API unchanged. With the gateway on, S3 requests never get here: the
gateway's dispatch, outside this one, takes signed and virtual-host requests first, so a signed
``GET /`` is still S3's ``ListBuckets``; with it off, they get the API's answer.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from starlette.types import ASGIApp, Receive, Scope, Send

__all__ = ["UI_PREFIX", "UIDispatch", "is_ui_request", "with_ui"]

UI_PREFIX = "/ui"
_ENTRY_PATHS = ("/", "/auth/login")
"""Paths outside the prefix a browser opens (``GET`` or ``HEAD``) that lead into the UI."""


def _signed(scope: Scope) -> bool:
    """Return whether a request carries an AWS signature (a header, or a presigned URL's)."""
    for name, value in scope.get("headers", ()):
        if name == b"authorization" and value.startswith(b"AWS"):
            return True
    query: bytes = scope.get("query_string", b"")
    return b"X-Amz-Signature=" in query or b"Signature=" in query


def is_ui_request(scope: Scope) -> bool:
    """Return whether an HTTP request is the UI's."""
    path: str = scope.get("path", "")
    if path == UI_PREFIX or path.startswith(UI_PREFIX + "/"):
        return True
    return path in _ENTRY_PATHS and scope.get("method") in ("GET", "HEAD") and not _signed(scope)


class UIDispatch:
    """One listener for the API and the UI: each HTTP request goes to one of them.

    Args:
        api_app: The REST API (it also receives lifespan events).
        ui_app: The web UI.
    """

    def __init__(self, api_app: ASGIApp, ui_app: ASGIApp) -> None:
        self.api_app = api_app
        self.ui_app = ui_app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Serve one ASGI connection."""
        if scope["type"] == "http" and is_ui_request(scope):
            await self.ui_app(scope, receive, send)
        else:
            await self.api_app(scope, receive, send)


def with_ui(api_app: ASGIApp, ui_app: ASGIApp) -> ASGIApp:
    """Return ``api_app`` and ``ui_app`` on one listener (:func:`is_ui_request` decides)."""
    return UIDispatch(api_app, ui_app)
