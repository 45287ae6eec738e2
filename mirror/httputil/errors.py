"""The one place where LakeMirror's error tree becomes HTTP statuses and lakeFS error bodies.

Statuses and texts are lakeFS's (pkg/api/controller.go, handleAPIErrorCallback): the official
clients match on the texts, so every message starts with lakeFS's text for its error and carries
LakeMirror's detail after it. The core's errors carry their text themselves
(:class:`~mirror.core.errors.LakeFSText`); :func:`message_for` adds it to the others.

A 401 of lakeFS's API is the exception: lakeFS's web UI signs the user out only when the
message *equals* ``error authenticating request`` (and the content type is exactly
``application/json``), so such a 401's message is that text alone and LakeMirror's detail goes
in a ``detail`` field; and it carries no ``WWW-Authenticate``: lakeFS sends none, and a browser
would answer one with its own sign-in box over the UI's. LakeMirror's own APIs (the replicant's
configuration API) keep the HTTP Basic challenge and the detail after the text
(:func:`install_error_handlers`).

Some errors read differently depending on the request (the repository it names): a front door
passes its own ``in_context`` to :func:`install_error_handlers` for those.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from functools import partial
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.requests import ClientDisconnect

from mirror.auth.errors import (
    GroupExistsError,
    PolicyExistsError,
    SignInThrottledError,
    UserExistsError,
)
from mirror.block.errors import InvalidRangeError
from mirror.core.errors import (
    DefaultBranchDeletionError,
    DirtyBranchError,
    LakeFSText,
    MergeConflictError,
    NoChangesError,
    NoDataError,
    NoMergeBaseError,
    TooManyTriesError,
    with_text,
)
from mirror.errors import (
    AlreadyExistsError,
    AuthenticationError,
    ConflictError,
    InvalidValueError,
    LakeMirrorError,
    NotFoundError,
    PermissionDeniedError,
    PreconditionFailedError,
    ReadOnlyError,
    UnavailableError,
)
from mirror.kv.errors import KVUnavailableError

__all__ = [
    "CONFLICTS_LISTED",
    "UNAUTHENTICATED",
    "InContext",
    "answer_for",
    "error_response",
    "install_error_handlers",
    "message_for",
    "status_for",
    "unauthorized",
]

log = logging.getLogger("mirror.api")

InContext = Callable[[Request, LakeMirrorError], Awaitable[LakeMirrorError]]
"""Return the error to answer a request's error with, given what the request names."""

CONFLICTS_LISTED = 100
"""The conflicting paths a merge conflict's answer lists at most (its message names 10)."""

# most specific first: the first matching class decides
_STATUS: tuple[tuple[type[BaseException], int], ...] = (
    (MergeConflictError, 409),
    (NoChangesError, 400),
    (DirtyBranchError, 400),
    # lakeFS leaves "no merge base" unmapped (500); histories only split when commit records
    # are imported, so this is no user error to report as one
    (NoMergeBaseError, 500),
    (DefaultBranchDeletionError, 403),
    (AuthenticationError, 401),
    (PermissionDeniedError, 403),
    (ReadOnlyError, 403),
    (NoDataError, 410),
    (NotFoundError, 404),
    (AlreadyExistsError, 409),
    (PreconditionFailedError, 412),
    (InvalidRangeError, 416),
    (InvalidValueError, 400),
    (ConflictError, 409),
    (TooManyTriesError, 429),
    (UnavailableError, 503),
)

# lakeFS's texts of errors that do not carry one themselves, most specific first
_TEXT: tuple[tuple[type[BaseException], str], ...] = (
    (UserExistsError, "Already exists"),
    (GroupExistsError, "Already exists"),
    (PolicyExistsError, "Already exists"),
    (NotFoundError, "not found"),
    (PreconditionFailedError, "Precondition failed"),
)

UNAUTHENTICATED = "error authenticating request"
"""lakeFS's whole message of every 401 (pkg/auth/errors.go), which its web UI compares exactly."""

# what DynamoDB says when it throttles; lakeFS answers those with its "slow down" text
_THROTTLED = ("ProvisionedThroughputExceeded", "ThrottlingException", "RequestLimitExceeded")
_SLOW_DOWN = "Throughput exceeded. Slow down and retry"


def status_for(exc: BaseException) -> int:
    """Return the HTTP status for an error of LakeMirror's tree (500 for anything else)."""
    for cls, status in _STATUS:
        if isinstance(exc, cls):
            return status
    return 500


def message_for(exc: BaseException) -> str:
    """Return the message lakeFS's clients expect for ``exc``: lakeFS's text, then the detail.

    An error's text is found by substring, as clients look for it; a message that holds it
    already is returned as it is.
    """
    message = str(exc)
    if isinstance(exc, LakeFSText):
        return message
    if isinstance(exc, KVUnavailableError) and any(t in message for t in _THROTTLED):
        text = _SLOW_DOWN
    else:
        text = next((t for cls, t in _TEXT if isinstance(exc, cls)), "")
    if not text or text in message:
        return message
    return with_text(text, message)


def answer_for(exc: BaseException) -> tuple[int, str]:
    """Return the status and message the API answers for ``exc``."""
    return status_for(exc), message_for(exc)


def error_response(
    status: int, message: str, headers: dict[str, str] | None = None, **extra: Any
) -> JSONResponse:
    """Return a lakeFS error: ``{"message": ...}`` with the status (HEAD gets no body)."""
    return JSONResponse({"message": message, **extra}, status_code=status, headers=headers)


def unauthorized(reason: str) -> JSONResponse:
    """Return lakeFS's 401: the message :data:`UNAUTHENTICATED` alone, ``reason`` in ``detail``.

    ``reason`` may start with lakeFS's text already (``error authenticating request: token
    expired``); the text is not repeated in the detail.
    """
    detail = reason.removeprefix(UNAUTHENTICATED).lstrip(": ").strip()
    if not detail:
        return error_response(401, UNAUTHENTICATED)
    return error_response(401, UNAUTHENTICATED, detail=detail)


_CHALLENGE = {"WWW-Authenticate": 'Basic realm="lakemirror"'}


def _lakemirror_error(exc: LakeMirrorError, *, challenge: bool) -> Response:
    status = status_for(exc)
    if status == 401 and not challenge:
        response = unauthorized(message_for(exc))
        if isinstance(exc, SignInThrottledError):
            response.headers["Retry-After"] = str(exc.retry_after)
        return response
    headers: dict[str, str] = dict(_CHALLENGE) if status == 401 else {}
    if isinstance(exc, SignInThrottledError):
        headers["Retry-After"] = str(exc.retry_after)
    extra: dict[str, Any] = {}
    if status in (429, 503):
        headers["Retry-After"] = "1"
    if isinstance(exc, MergeConflictError):
        # lakeFS answers a conflict with a MergeResult whose reference is empty
        extra["reference"] = ""
        extra["conflicts"] = exc.paths[:CONFLICTS_LISTED]
    message = message_for(exc)
    if status == 500 and isinstance(exc, LakeFSText):
        log.warning("answered 500 as lakeFS does: %s", message)
    elif status == 500:
        log.error("unexpected error: %s", type(exc).__name__, exc_info=exc)
    return error_response(status, message, headers, **extra)


async def _on_lakemirror_error(
    request: Request, exc: Exception, *, challenge: bool, in_context: InContext | None
) -> Response:
    assert isinstance(exc, LakeMirrorError)
    error = exc if in_context is None else await in_context(request, exc)
    response = _lakemirror_error(error, challenge=challenge)
    if request.method == "HEAD":
        return Response(status_code=response.status_code, headers=_plain(response))
    return response


def _plain(response: Response) -> dict[str, str]:
    return {
        k: v for k, v in response.headers.items() if k not in ("content-length", "content-type")
    }


async def _on_validation_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, RequestValidationError)
    # name the field and the rule, never the offending value (it may be a secret)
    problems = []
    for err in exc.errors():
        if err.get("type") == "json_invalid":
            # a body that is no JSON: where the parser stopped and why (json's own words)
            reason = (err.get("ctx") or {}).get("error", "")
            at = f" at character {err['loc'][-1]}" if err.get("loc") else ""
            problems.append(f"JSON decode error{at}" + (f": {reason}" if reason else ""))
            continue
        where = ".".join(str(p) for p in err.get("loc", ()) if p != "body")
        problems.append(f"{where}: {err.get('msg', 'invalid')}" if where else err.get("msg", ""))
    return error_response(400, "invalid request: " + "; ".join(problems))


async def _on_http_error(request: Request, exc: Exception, *, challenge: bool) -> Response:
    assert isinstance(exc, StarletteHTTPException)
    if exc.status_code == 401 and not challenge:
        # only FastAPI's HTTP Basic raises it, for a header it cannot decode, with a generic
        # text and a WWW-Authenticate challenge: both are replaced
        response: Response = unauthorized("malformed credentials (HTTP Basic)")
        if request.method == "HEAD":
            return Response(status_code=401, headers=_plain(response))
        return response
    if request.method == "HEAD" or exc.status_code in (204, 304):
        return Response(status_code=exc.status_code, headers=exc.headers)
    return error_response(exc.status_code, str(exc.detail), dict(exc.headers or {}))


CLIENT_CLOSED_REQUEST = 499
"""The status counted (metrics, access log) for a request whose client left before its answer.

No client ever reads it: the connection is gone. It is nginx's "client closed request".
"""


def client_gone(method: str, path: str) -> Response:
    """Note that a client hung up mid-request (no error of the server's) and return its answer."""
    log.info("client closed the connection: %s %s", method, path)
    return Response(status_code=CLIENT_CLOSED_REQUEST)


async def _on_client_disconnect(request: Request, exc: Exception) -> Response:
    return client_gone(request.method, request.url.path)


async def _on_unexpected(request: Request, exc: Exception) -> Response:
    return error_response(500, "internal server error")


def install_error_handlers(
    app: FastAPI, *, basic_challenge: bool = True, in_context: InContext | None = None
) -> None:
    """Make ``app`` answer every error with lakeFS's body and the status of :func:`status_for`.

    Args:
        app: The app.
        basic_challenge: Answer a 401 with ``WWW-Authenticate: Basic`` and the detail after
            lakeFS's text in the message, as LakeMirror's own APIs do; ``False``: with lakeFS's
            401 (:func:`unauthorized`), which lakeFS's web UI reads as signed out.
        in_context: Turns an error of LakeMirror's tree into the one to answer, given the
            request (``None``: answer it as it is).
    """
    app.add_exception_handler(
        LakeMirrorError,
        partial(_on_lakemirror_error, challenge=basic_challenge, in_context=in_context),
    )
    app.add_exception_handler(RequestValidationError, _on_validation_error)
    app.add_exception_handler(
        StarletteHTTPException, partial(_on_http_error, challenge=basic_challenge)
    )
    app.add_exception_handler(ClientDisconnect, _on_client_disconnect)
    app.add_exception_handler(Exception, _on_unexpected)
