"""The security headers on every answer of the web UI.

The content security policy lets a page load only the UI's own scripts, styles and images (and
``data:`` images), no inline script or style, no plugin, no ``<base>``, forms posting only to
the UI, and no framing by any site; ``X-Frame-Options`` says the same to older browsers. The
headers replace any a view set, so no page can weaken them. The one policy a view may set instead
is :data:`USER_CONTENT_SECURITY_POLICY`, stricter still, on an answer carrying a user's bytes (an
object's image or download): nothing in it may run, load, or be framed.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from starlette.types import ASGIApp, Message, Receive, Scope, Send

__all__ = [
    "CONTENT_SECURITY_POLICY",
    "SECURITY_HEADERS",
    "USER_CONTENT_SECURITY_POLICY",
    "SecurityHeadersMiddleware",
]

CONTENT_SECURITY_POLICY = (
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"
)

USER_CONTENT_SECURITY_POLICY = "default-src 'none'; frame-ancestors 'none'; sandbox"
"""The policy of an answer carrying an object's bytes: no script, style, plugin or request."""

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
_CSP = b"content-security-policy"
_USER_CSP = (_CSP, USER_CONTENT_SECURITY_POLICY.encode("latin-1"))
_RAW_USER = [_USER_CSP if name == _CSP else (name, value) for name, value in _RAW]


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
                given = message.get("headers", ())
                user = any((h[0].lower(), h[1]) == _USER_CSP for h in given)
                kept = [h for h in given if h[0].lower() not in _NAMES]
                message["headers"] = [*kept, *(_RAW_USER if user else _RAW)]
            await send(message)

        await self.app(scope, receive, send_with_headers)
