"""The lakeFS API's errors that depend on the repository a request names.

The mapping from LakeMirror's error tree to statuses and lakeFS's texts is shared by every front
door (:mod:`mirror.httputil.errors`); what is the API's own lives here. A write refused because
the repository is read-only names the repository it mirrors. A missing file of a mirror
repository (a range, a metarange, an object's data) means that replication has not delivered it
yet: 503 with ``Retry-After``, never 404, because the commit record may arrive before its files
do. Missing data of any other repository is lakeFS's 410 ``No data`` (garbage collection swept
it).
"""

from __future__ import annotations

import logging

from fastapi import Request
from starlette.concurrency import run_in_threadpool

from mirror.api.deps import ApiState
from mirror.block.errors import BlockNotFoundError
from mirror.core.catalog import Catalog
from mirror.core.committed import METADATA_PREFIX
from mirror.core.errors import (
    LakeFSText,
    NoDataError,
    NotYetReplicatedError,
    RepositoryReadOnlyError,
    with_text,
)
from mirror.core.model import Repository
from mirror.errors import InvalidValueError, LakeMirrorError, ReadOnlyError
from mirror.httputil.errors import message_for, status_for

__all__ = [
    "NotAMirrorError",
    "describe_error",
    "in_context",
    "in_request_context",
    "read_only_message",
]

log = logging.getLogger("mirror.api")


class NotAMirrorError(InvalidValueError):
    """A mirror endpoint was called on a repository that is not a (read-only) mirror."""

    def __init__(self, repository: str) -> None:
        super().__init__(f"repository {repository} is not a mirror")
        self.repository = repository


def read_only_message(repo: Repository) -> str:
    """Return why a write to the read-only repository ``repo`` is refused, naming its source."""
    if repo.mirror_of:
        detail = f'repository "{repo.id}" is a read-only mirror of "{repo.mirror_of}"'
    else:
        detail = f'repository "{repo.id}" is read-only'
    return with_text(RepositoryReadOnlyError.lakefs_text, detail)


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


async def in_request_context(request: Request, exc: LakeMirrorError) -> LakeMirrorError:
    """Return the error to answer ``exc`` with, given the repository ``request`` names.

    Only the errors that depend on it read the repository (on a worker thread: a KV read).
    """
    if isinstance(exc, RepositoryReadOnlyError | BlockNotFoundError):
        return await run_in_threadpool(_in_context, request, exc)
    return exc


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
