"""Structured logging: JSON lines in production, readable lines locally, never a secret.

:func:`configure_logging` sets up structlog and routes the standard library's records
(uvicorn's, ``mirror.api``'s) through the same processors, so every line has one shape.
:class:`RequestLogMiddleware` gives each API request an ID (``X-Request-ID``, honoured or
generated, echoed in the response), binds it for every line logged while the request is served,
and writes one access event per request. Values under keys named like secret, password,
authorization or token are masked in every event.
"""

from __future__ import annotations

import logging
import re
import sys
import time
import uuid
from collections.abc import Mapping, MutableMapping
from contextvars import ContextVar
from typing import TYPE_CHECKING, Any, Literal, TextIO

import structlog

if TYPE_CHECKING:
    from starlette.types import ASGIApp, Message, Receive, Scope, Send

__all__ = [
    "ACCESS_EVENT",
    "REDACTED",
    "REQUEST_ID_HEADER",
    "RequestLogMiddleware",
    "configure_logging",
    "get_logger",
    "is_secret_key",
    "note_user",
    "redact_secrets",
    "renders_json",
]

REDACTED = "**********"
"""What a secret's value is replaced with, in log events and in ``lakemirror config show``."""
REQUEST_ID_HEADER = "X-Request-ID"
ACCESS_EVENT = "request"
"""The event name of the one access line written per API request."""

_SECRET_KEY = re.compile(r"secret|password|passwd|authorization|token|credential", re.IGNORECASE)
_REQUEST_ID = re.compile(r"[A-Za-z0-9._:\-]{1,128}")
_HEADER = REQUEST_ID_HEADER.lower().encode("latin-1")

# a mutable slot per request, so that a user authenticated on a worker thread (whose context is a
# copy) is still visible to the middleware that writes the access line
_request_slot: ContextVar[dict[str, Any] | None] = ContextVar("lakemirror_request", default=None)

_access = structlog.get_logger("mirror.access")


def is_secret_key(name: str) -> bool:
    """Return whether a key named ``name`` holds a secret (and must never be shown or logged)."""
    return _SECRET_KEY.search(name) is not None


def _scrub(value: Any, key: str) -> Any:
    if value is not None and is_secret_key(key):
        return REDACTED
    if isinstance(value, Mapping):
        return {k: _scrub(v, str(k)) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_scrub(v, key) for v in value]
    return value


def redact_secrets(
    logger: Any, method_name: str, event_dict: MutableMapping[str, Any]
) -> MutableMapping[str, Any]:
    """Mask the value of every key named like secret/password/authorization/token, at any depth.

    A structlog processor.
    """
    for key, value in event_dict.items():
        event_dict[key] = _scrub(value, key)
    return event_dict


def renders_json(fmt: Literal["auto", "json", "console"], stream: TextIO | None = None) -> bool:
    """Return whether format ``fmt`` writes JSON: ``auto`` does unless ``stream`` is a terminal."""
    if fmt == "auto":
        target = stream if stream is not None else sys.stderr
        isatty = getattr(target, "isatty", None)
        return not (callable(isatty) and isatty())
    return fmt == "json"


def configure_logging(
    fmt: Literal["auto", "json", "console"] = "auto",
    level: str = "info",
    *,
    stream: TextIO | None = None,
) -> None:
    """Send structlog's and the standard library's log records to ``stream`` (standard error).

    Args:
        fmt: ``json`` (one object a line), ``console`` (readable), or ``auto`` (console on a
            terminal, JSON otherwise).
        level: The lowest level written (``debug`` … ``critical``).
        stream: Where lines go; standard error when ``None``.
    """
    target = stream if stream is not None else sys.stderr
    as_json = renders_json(fmt, target)
    numeric = logging.getLevelNamesMapping()[level.upper()]
    shared: list[Any] = [
        structlog.contextvars.merge_contextvars,
        structlog.stdlib.add_log_level,
        structlog.stdlib.add_logger_name,
        structlog.processors.TimeStamper(fmt="iso", utc=True),
        redact_secrets,
    ]
    renderer: Any
    if as_json:
        renderer = structlog.processors.JSONRenderer()
        shared.append(structlog.processors.format_exc_info)
    else:
        # plain tracebacks: a rich traceback would print local variables, secrets included
        renderer = structlog.dev.ConsoleRenderer(
            colors=False, exception_formatter=structlog.dev.plain_traceback
        )
    structlog.configure(
        processors=[
            *shared,
            structlog.stdlib.ProcessorFormatter.wrap_for_formatter,
        ],
        wrapper_class=structlog.make_filtering_bound_logger(numeric),
        logger_factory=structlog.stdlib.LoggerFactory(),
        cache_logger_on_first_use=True,
    )
    formatter = structlog.stdlib.ProcessorFormatter(
        foreign_pre_chain=shared,
        processors=[structlog.stdlib.ProcessorFormatter.remove_processors_meta, renderer],
    )
    handler = logging.StreamHandler(target)
    handler.setFormatter(formatter)
    root = logging.getLogger()
    for old in list(root.handlers):
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(numeric)
    for name in ("uvicorn", "uvicorn.error"):
        logging.getLogger(name).handlers.clear()
        logging.getLogger(name).propagate = True
    # uvicorn's own access line carries the query string; ours replaces it
    logging.getLogger("uvicorn.access").handlers.clear()
    logging.getLogger("uvicorn.access").propagate = False


def get_logger(name: str) -> Any:
    """Return a structlog logger named ``name``."""
    return structlog.get_logger(name)


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
