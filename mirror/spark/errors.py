"""Errors of the Spark readers and writers, raised before any Spark job starts.

Every class also derives from :class:`SparkIOError`, so callers can catch them all at once.
"""

from __future__ import annotations

from mirror.errors import (
    AlreadyExistsError,
    InvalidValueError,
    LakeMirrorError,
    NotFoundError,
    PermissionDeniedError,
    ReadOnlyError,
    UnavailableError,
)

__all__ = [
    "DatasetExistsError",
    "EmptyDatasetError",
    "NotABranchError",
    "RefNotFoundError",
    "RepositoryNotFoundError",
    "RepositoryReadOnlyError",
    "ServerAuthError",
    "ServerError",
    "ServerUnavailableError",
    "SparkIOError",
    "UnsupportedAddressError",
    "UnsupportedFormatError",
    "UnsupportedModeError",
]


class SparkIOError(LakeMirrorError):
    """Base of the errors of :mod:`mirror.spark`'s readers and writers."""


class RepositoryNotFoundError(SparkIOError, NotFoundError):
    """The server has no repository of that name."""

    def __init__(self, repository: str) -> None:
        super().__init__(f"repository {repository!r} not found")
        self.repository = repository


class RefNotFoundError(SparkIOError, NotFoundError):
    """The repository has no branch, tag or commit of that name."""

    def __init__(self, repository: str, ref: str) -> None:
        super().__init__(f"ref {ref!r} not found in repository {repository!r}")
        self.repository = repository
        self.ref = ref


class NotABranchError(SparkIOError, InvalidValueError):
    """A write named a ref that exists but is not a branch (a tag, a commit, an expression)."""

    def __init__(self, repository: str, ref: str) -> None:
        super().__init__(
            f"ref {ref!r} of repository {repository!r} is not a branch: writes need a branch"
        )
        self.repository = repository
        self.ref = ref


class RepositoryReadOnlyError(SparkIOError, ReadOnlyError):
    """A write named a read-only repository (a mirror, say)."""


class UnsupportedFormatError(SparkIOError, InvalidValueError):
    """The data source format is not one the readers and writers support."""


class UnsupportedModeError(SparkIOError, InvalidValueError):
    """The save mode is not one of Spark's."""


class UnsupportedAddressError(SparkIOError, InvalidValueError):
    """An object's physical address has a scheme Spark cannot read here (``mem://``, say)."""


class EmptyDatasetError(SparkIOError, NotFoundError):
    """A read found no object under the path (and no schema was given to read it as empty).

    Attributes:
        uri: The dataset's URI pinned at the commit read (``lakefs://repo/<commit>/path``).
        commit_id: The commit the ref resolved to.
    """

    def __init__(self, uri: str, commit_id: str, resolved_from: str) -> None:
        super().__init__(f"no objects under {uri} (resolved from {resolved_from})")
        self.uri = uri
        self.commit_id = commit_id


class DatasetExistsError(SparkIOError, AlreadyExistsError):
    """A write in mode ``error`` / ``errorifexists`` found objects under the path."""


class ServerAuthError(SparkIOError, PermissionDeniedError):
    """The server refused the credentials or the permission."""


class ServerUnavailableError(SparkIOError, UnavailableError):
    """The server could not be reached, or answered 503."""


class ServerError(SparkIOError):
    """The server refused a request for another reason; the message is the server's."""
