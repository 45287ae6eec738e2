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

Two errors depend on the repository a request names. A write refused because the repository is
read-only names the repository it mirrors. A missing file of a mirror repository (a range, a
metarange, an object's data) means that replication has not delivered it yet: 503 with
``Retry-After``, never 404, because the commit record may arrive before its files do. Missing
data of any other repository is lakeFS's 410 ``No data`` (garbage collection swept it).
"""

from __future__ import annotations

import logging
from functools import partial
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException as StarletteHTTPException

from mirror.api.deps import ApiState
from mirror.auth.errors import GroupExistsError, PolicyExistsError, UserExistsError
from mirror.block.errors import BlockNotFoundError, InvalidRangeError
from mirror.core.catalog import Catalog
from mirror.core.committed import METADATA_PREFIX
from mirror.core.errors import (
    DefaultBranchDeletionError,
    DirtyBranchError,
    LakeFSText,
    MergeConflictError,
    NoChangesError,
    NoMergeBaseError,
    RepositoryReadOnlyError,
    TooManyTriesError,
    with_text,
)
from mirror.core.model import Repository
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
    "UNAUTHENTICATED",
    "NoDataError",
    "NotAMirrorError",
    "NotYetReplicatedError",
    "answer_for",
    "describe_error",
    "error_response",
    "in_context",
    "install_error_handlers",
    "message_for",
    "read_only_message",
    "status_for",
    "unauthorized",
]

log = logging.getLogger("mirror.api")


class NotAMirrorError(InvalidValueError):
    """A mirror endpoint was called on a repository that is not a (read-only) mirror."""

    def __init__(self, repository: str) -> None:
        super().__init__(f"repository {repository} is not a mirror")
        self.repository = repository


class NotYetReplicatedError(UnavailableError):
    """A file of a mirror repository has not arrived in this region yet."""

    def __init__(self, what: str) -> None:
        super().__init__(f"{what} not yet replicated to this region; retry later")
        self.what = what


class NoDataError(LakeFSText, NotFoundError):
    """An object's data is gone from the object store (lakeFS's 410 ``No data``)."""

    lakefs_text = "No data"


def read_only_message(repo: Repository) -> str:
    """Return why a write to the read-only repository ``repo`` is refused, naming its source."""
    if repo.mirror_of:
        detail = f'repository "{repo.id}" is a read-only mirror of "{repo.mirror_of}"'
    else:
        detail = f'repository "{repo.id}" is read-only'
    return with_text(RepositoryReadOnlyError.lakefs_text, detail)


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
        return unauthorized(message_for(exc))
    headers: dict[str, str] = dict(_CHALLENGE) if status == 401 else {}
    extra: dict[str, Any] = {}
    if status in (429, 503):
        headers["Retry-After"] = "1"
    if isinstance(exc, MergeConflictError):
        # lakeFS answers a conflict with a MergeResult whose reference is empty
        extra["reference"] = ""
        extra["conflicts"] = exc.paths[:100]
    message = message_for(exc)
    if status == 500 and isinstance(exc, LakeFSText):
        log.warning("answered 500 as lakeFS does: %s", message)
    elif status == 500:
        log.error("unexpected error: %s", type(exc).__name__, exc_info=exc)
    return error_response(status, message, headers, **extra)


def _repository_of(catalog: Catalog, name: str) -> Repository | None:
    try:
        return catalog.get_repository(name)
    except LakeMirrorError:
        return None


def _missing_file(key: str, path: str | None) -> str:
    if key.startswith(METADATA_PREFIX):
        return f"metadata file {key!r}"
    return f"data of object {path!r}" if path else f"data file {key!r}"


def in_context(
    exc: LakeMirrorError, catalog: Catalog, repository: str | None, path: str | None = None
) -> LakeMirrorError:
    """Return the error to answer ``exc`` with, given the repository a call names (blocking).

    Args:
        exc: The error the call raised.
        catalog: The catalog the call ran on.
        repository: The repository the call names (its path parameter), if any.
        path: The object path the call names (its ``path`` query parameter), if any.
    """
    if isinstance(exc, RepositoryReadOnlyError):
        repo = _repository_of(catalog, exc.repository)
        if repo is not None:
            return ReadOnlyError(read_only_message(repo))
    if isinstance(exc, BlockNotFoundError):
        repo = _repository_of(catalog, repository) if repository else None
        if repo is not None and repo.read_only:
            return NotYetReplicatedError(_missing_file(exc.key, path))
        if repo is not None and not exc.key.startswith(METADATA_PREFIX):
            return NoDataError(_missing_file(exc.key, path))
    return exc


def _in_context(request: Request, exc: LakeMirrorError) -> LakeMirrorError:
    state: ApiState = request.app.state.api
    name = request.path_params.get("repository")
    repository = name if isinstance(name, str) else None
    return in_context(exc, state.catalog, repository, request.query_params.get("path"))


def describe_error(exc: BaseException, catalog: Catalog, repository: str) -> tuple[int, str]:
    """Return the status and message a call on ``repository`` that raised ``exc`` answers.

    The handlers' own mapping, for work that ends outside its request (background tasks).
    """
    if not isinstance(exc, LakeMirrorError):
        log.error("unexpected error: %s", type(exc).__name__, exc_info=exc)
        return 500, "internal server error"
    error = in_context(exc, catalog, repository)
    if status_for(error) == 500 and not isinstance(error, LakeFSText):
        log.error("unexpected error: %s", type(error).__name__, exc_info=error)
    return status_for(error), message_for(error)


async def _on_lakemirror_error(request: Request, exc: Exception, *, challenge: bool) -> Response:
    assert isinstance(exc, LakeMirrorError)
    error = exc
    if isinstance(exc, RepositoryReadOnlyError | BlockNotFoundError):
        error = await run_in_threadpool(_in_context, request, exc)
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


async def _on_unexpected(request: Request, exc: Exception) -> Response:
    return error_response(500, "internal server error")


def install_error_handlers(app: FastAPI, *, basic_challenge: bool = True) -> None:
    """Make ``app`` answer every error with lakeFS's body and the status of :func:`status_for`.

    Args:
        app: The app.
        basic_challenge: Answer a 401 with ``WWW-Authenticate: Basic`` and the detail after
            lakeFS's text in the message, as LakeMirror's own APIs do; ``False``: with lakeFS's
            401 (:func:`unauthorized`), which lakeFS's web UI reads as signed out.
    """
    app.add_exception_handler(
        LakeMirrorError, partial(_on_lakemirror_error, challenge=basic_challenge)
    )
    app.add_exception_handler(RequestValidationError, _on_validation_error)
    app.add_exception_handler(
        StarletteHTTPException, partial(_on_http_error, challenge=basic_challenge)
    )
    app.add_exception_handler(Exception, _on_unexpected)
