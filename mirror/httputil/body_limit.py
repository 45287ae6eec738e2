"""A bound on request bodies an app reads whole (JSON), checked as the bytes arrive.

FastAPI reads a JSON body whole into memory before validating it, so an unbounded body is
unbounded memory. :class:`BodyLimitMiddleware` refuses a body over its limit with ``413`` and
lakeFS's ``{"message": ...}``: at once when ``Content-Length`` says so, or as soon as the bytes
received pass the limit (chunked bodies), never holding more than the app itself would. Routes
that stream their body to storage (object uploads) are left out by ``streams``. The refused
connection is closed (the rest of the body is never read). Refusals count in
``lakemirror_http_requests_refused_total{reason="body_too_large"}``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from starlette.exceptions import HTTPException

from mirror.httputil.errors import error_response

if TYPE_CHECKING:
    from starlette.types import ASGIApp, Message, Receive, Scope, Send

    from mirror.httputil.metrics import OverloadMetrics

__all__ = ["BodyLimitMiddleware", "BodyTooLargeError", "too_large_message"]


def too_large_message(limit: int) -> str:
    """Return the text of a 413 for a body over ``limit`` bytes."""
    return f"Request body too large: at most {limit} bytes"


class BodyTooLargeError(HTTPException):
    """Raised from ``receive`` when a body passes the limit (a 413 the app's handlers render)."""

    def __init__(self, limit: int) -> None:
        super().__init__(413, too_large_message(limit), headers={"Connection": "close"})


def _content_length(scope: Scope) -> int | None:
    for name, value in scope.get("headers", ()):
        if name == b"content-length":
            try:
                return int(value)
            except ValueError:
                return None
    return None


class BodyLimitMiddleware:
    """Refuse request bodies of more than ``limit`` bytes with 413, except where ``streams``.

    Args:
        app: The app served.
        limit: The most bytes a body may have.
        metrics: Where refusals are counted.
        streams: Whether a request's route streams its body (no limit applies).
    """

    def __init__(
        self,
        app: ASGIApp,
        limit: int,
        metrics: OverloadMetrics,
        *,
        streams: Callable[[Scope], bool] = lambda scope: False,
    ) -> None:
        self.app = app
        self.limit = limit
        self.metrics = metrics
        self.streams = streams

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Serve one ASGI connection."""
        if scope["type"] != "http" or self.streams(scope):
            await self.app(scope, receive, send)
            return
        limit = self.limit
        length = _content_length(scope)
        if length is not None and length > limit:
            self.metrics.count("body_too_large")
            response = error_response(413, too_large_message(limit), {"Connection": "close"})
            await response(scope, receive, send)
            return
        received = 0
        refused = False
        started = False

        async def receive_bounded() -> Message:
            nonlocal received, refused
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > limit:
                    if not refused:
                        refused = True
                        self.metrics.count("body_too_large")
                    raise BodyTooLargeError(limit)
            return message

        async def send_seen(message: Message) -> None:
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
            await send(message)

        try:
            await self.app(scope, receive_bounded, send_seen)
        except BodyTooLargeError as exc:
            # raised where no exception handler of the app rendered it
            if started:
                raise
            response = error_response(413, str(exc.detail), dict(exc.headers or {}))
            await response(scope, receive, send)
