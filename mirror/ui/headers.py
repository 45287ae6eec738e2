"""The security headers on every answer of the web UI.

The content security policy lets a page load only the UI's own scripts, styles and images (and
``data:`` images), no inline script or style, no plugin, no ``<base>``, forms posting only to
the UI, and no framing by any site; ``X-Frame-Options`` says the same to older browsers. The
headers replace any a view set, so no page can weaken them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from starlette.types import ASGIApp, Message, Receive, Scope, Send

__all__ = ["CONTENT_SECURITY_POLICY", "SECURITY_HEADERS", "SecurityHeadersMiddleware"]

CONTENT_SECURITY_POLICY = (
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"
)

SECURITY_HEADERS: dict[str, str] = {
    "Content-Security-Policy": CONTENT_SECURITY_POLICY,
    "X-Frame-Options": "DENY",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "same-origin",
}
"""Header name -> value, set on every HTTP answer of the UI."""

_RAW = [
    (name.lower().encode("latin-1"), value.encode("latin-1"))
    for name, value in SECURITY_HEADERS.items()
]
_NAMES = {name for name, _ in _RAW}


class SecurityHeadersMiddleware:
    """Set :data:`SECURITY_HEADERS` on every HTTP answer of ``app``, replacing any it set."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Serve one ASGI connection."""
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                kept = [h for h in message.get("headers", ()) if h[0].lower() not in _NAMES]
                message["headers"] = [*kept, *_RAW]
            await send(message)

        await self.app(scope, receive, send_with_headers)
