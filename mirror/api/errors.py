"""The one place where LakeMirror's error tree becomes HTTP statuses and lakeFS error bodies."""

from __future__ import annotations

import logging
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from starlette.exceptions import HTTPException as StarletteHTTPException

from mirror.block.errors import InvalidRangeError
from mirror.core.errors import (
    DirtyBranchError,
    MergeConflictError,
    NoChangesError,
    NoMergeBaseError,
    TooManyTriesError,
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

__all__ = ["error_response", "install_error_handlers", "status_for"]

log = logging.getLogger("mirror.api")

# most specific first: the first matching class decides
_STATUS: tuple[tuple[type[BaseException], int], ...] = (
    (MergeConflictError, 409),
    (NoChangesError, 400),
    (DirtyBranchError, 400),
    (NoMergeBaseError, 400),
    (AuthenticationError, 401),
    (PermissionDeniedError, 403),
    (ReadOnlyError, 403),
    (NotFoundError, 404),
    (AlreadyExistsError, 409),
    (PreconditionFailedError, 412),
    (InvalidRangeError, 416),
    (InvalidValueError, 400),
    (ConflictError, 409),
    (UnavailableError, 503),
    (TooManyTriesError, 503),
)


def status_for(exc: BaseException) -> int:
    """Return the HTTP status for an error of LakeMirror's tree (500 for anything else)."""
    for cls, status in _STATUS:
        if isinstance(exc, cls):
            return status
    return 500


def error_response(
    status: int, message: str, headers: dict[str, str] | None = None, **extra: Any
) -> JSONResponse:
    """Return a lakeFS error: ``{"message": ...}`` with the status (HEAD gets no body)."""
    return JSONResponse({"message": message, **extra}, status_code=status, headers=headers)


def _lakemirror_error(exc: LakeMirrorError) -> Response:
    status = status_for(exc)
    headers: dict[str, str] = {}
    extra: dict[str, Any] = {}
    if status == 401:
        headers["WWW-Authenticate"] = 'Basic realm="lakemirror"'
    if status == 503:
        headers["Retry-After"] = "1"
    if isinstance(exc, MergeConflictError):
        # lakeFS answers a conflict with a MergeResult whose reference is empty
        extra["reference"] = ""
        extra["conflicts"] = exc.paths[:100]
    if status == 500:
        log.error("unexpected error: %s", type(exc).__name__, exc_info=exc)
    return error_response(status, str(exc), headers, **extra)


async def _on_lakemirror_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, LakeMirrorError)
    response = _lakemirror_error(exc)
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
        where = ".".join(str(p) for p in err.get("loc", ()) if p != "body")
        problems.append(f"{where}: {err.get('msg', 'invalid')}" if where else err.get("msg", ""))
    return error_response(400, "invalid request: " + "; ".join(problems))


async def _on_http_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, StarletteHTTPException)
    if request.method == "HEAD" or exc.status_code in (204, 304):
        return Response(status_code=exc.status_code, headers=exc.headers)
    return error_response(exc.status_code, str(exc.detail), dict(exc.headers or {}))


async def _on_unexpected(request: Request, exc: Exception) -> Response:
    return error_response(500, "internal server error")


def install_error_handlers(app: FastAPI) -> None:
    """Make ``app`` answer every error with lakeFS's body and the status of :func:`status_for`."""
    app.add_exception_handler(LakeMirrorError, _on_lakemirror_error)
    app.add_exception_handler(RequestValidationError, _on_validation_error)
    app.add_exception_handler(StarletteHTTPException, _on_http_error)
    app.add_exception_handler(Exception, _on_unexpected)
