"""The access line of every HTTP request a front door serves, and its request ID.

:class:`RequestLogMiddleware` gives each request an ID (``X-Request-ID``, honoured or generated,
echoed in the response), binds it for every line logged while the request is served, and writes
one access event per request; :func:`note_user` records who the request signed in as, for that
line. The REST API and the replicant's API install it.
"""

from __future__ import annotations

import re
import time
import uuid
from contextvars import ContextVar
from typing import TYPE_CHECKING, Any

import structlog

if TYPE_CHECKING:
    from starlette.types import ASGIApp, Message, Receive, Scope, Send

__all__ = ["ACCESS_EVENT", "REQUEST_ID_HEADER", "RequestLogMiddleware", "note_user"]

REQUEST_ID_HEADER = "X-Request-ID"
ACCESS_EVENT = "request"
"""The event name of the one access line written per API request."""

_REQUEST_ID = re.compile(r"[A-Za-z0-9._:\-]{1,128}")
_HEADER = REQUEST_ID_HEADER.lower().encode("latin-1")

# a mutable slot per request, so that a user authenticated on a worker thread (whose context is a
# copy) is still visible to the middleware that writes the access line
_request_slot: ContextVar[dict[str, Any] | None] = ContextVar("lakemirror_request", default=None)

_access = structlog.get_logger("mirror.access")


def note_user(user_id: str) -> None:
    """Record the authenticated user of the request being served, for its access line."""
    slot = _request_slot.get()
    if slot is not None:
        slot["user_id"] = user_id


def _request_id(scope: Scope) -> str:
    for name, value in scope.get("headers", ()):
        if name == _HEADER:
            candidate: str = value.decode("latin-1").strip()
            if _REQUEST_ID.fullmatch(candidate):
                return candidate
            break
    return uuid.uuid4().hex


class RequestLogMiddleware:
    """Give each HTTP request an ID, bind it for its log lines, and write its access line.

    The ID is the client's ``X-Request-ID`` when it is 1-128 characters of ``[A-Za-z0-9._:-]``,
    a fresh UUID otherwise; the response carries it back. The access line holds the method, the
    path (never the query string), the status, the duration in milliseconds and the user ID when
    the request authenticated; no header is logged.
    """

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Serve one ASGI connection."""
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        request_id = _request_id(scope)
        header = (_HEADER, request_id.encode("latin-1"))
        slot: dict[str, Any] = {}
        status = 500
        started = time.perf_counter()

        async def send_with_id(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = int(message["status"])
                message["headers"] = [
                    *(h for h in message.get("headers", ()) if h[0].lower() != _HEADER),
                    header,
                ]
            await send(message)

        slot_token = _request_slot.set(slot)
        with structlog.contextvars.bound_contextvars(request_id=request_id):
            try:
                await self.app(scope, receive, send_with_id)
            finally:
                _request_slot.reset(slot_token)
                fields: dict[str, Any] = {
                    "method": scope.get("method", ""),
                    "path": scope.get("path", ""),
                    "status": status,
                    "duration_ms": round((time.perf_counter() - started) * 1000, 3),
                }
                if "user_id" in slot:
                    fields["user_id"] = slot["user_id"]
                _access.info(ACCESS_EVENT, **fields)
