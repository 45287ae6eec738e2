"""Errors of the versioning core, one subclass per entity under the shared tree."""

from __future__ import annotations

from collections.abc import Sequence

from mirror.errors import (
    AlreadyExistsError,
    ConflictError,
    InvalidValueError,
    LakeMirrorError,
    NotFoundError,
    PreconditionFailedError,
    ReadOnlyError,
)

__all__ = [
    "BranchExistsError",
    "BranchNotFoundError",
    "CommitNotFoundError",
    "DirtyBranchError",
    "InvalidNameError",
    "InvalidPathError",
    "InvalidRefError",
    "InvalidURIError",
    "MergeConflictError",
    "NoChangesError",
    "NoMergeBaseError",
    "ObjectNotFoundError",
    "RefNotFoundError",
    "RefPreconditionFailedError",
    "RepositoryExistsError",
    "RepositoryNotFoundError",
    "RepositoryReadOnlyError",
    "TagExistsError",
    "TagNotFoundError",
    "TooManyTriesError",
]


class RepositoryNotFoundError(NotFoundError):
    """No repository of that name."""


class BranchNotFoundError(NotFoundError):
    """No branch of that name."""


class TagNotFoundError(NotFoundError):
    """No tag of that name."""


class CommitNotFoundError(NotFoundError):
    """No commit of that ID."""


class RefNotFoundError(NotFoundError):
    """A ref expression resolves to nothing."""


class ObjectNotFoundError(NotFoundError):
    """No object at that path of that ref."""


class RepositoryExistsError(AlreadyExistsError):
    """A repository of that name exists."""


class BranchExistsError(AlreadyExistsError):
    """A branch of that name exists."""


class TagExistsError(AlreadyExistsError):
    """A tag of that name exists (tags are immutable)."""


class InvalidNameError(InvalidValueError):
    """A repository, branch or tag name breaks the naming rules."""


class InvalidPathError(InvalidValueError):
    """An object path is empty or contains forbidden characters."""


class InvalidRefError(InvalidValueError):
    """A ref expression is malformed, or used where it is not allowed."""


class InvalidURIError(InvalidValueError):
    """A ``lakefs://`` URI is malformed."""


class NoChangesError(ConflictError):
    """A commit or merge would change nothing."""


class DirtyBranchError(ConflictError):
    """The branch has uncommitted changes that the operation does not allow."""


class NoMergeBaseError(ConflictError):
    """The two commits share no ancestor."""


class MergeConflictError(ConflictError):
    """The three-way merge found conflicting changes.

    Attributes:
        paths: The conflicting object paths, sorted.
    """

    def __init__(self, paths: Sequence[str]) -> None:
        shown = ", ".join(repr(p) for p in paths[:10])
        more = f" and {len(paths) - 10} more" if len(paths) > 10 else ""
        super().__init__(f"conflict found in {len(paths)} path(s): {shown}{more}")
        self.paths = list(paths)


class RefPreconditionFailedError(PreconditionFailedError):
    """A branch head was not the expected commit.

    Attributes:
        expected: The commit the caller expected.
        found: The commit actually there.
    """

    def __init__(self, branch: str, expected: str | None, found: str | None) -> None:
        super().__init__(f"branch {branch!r}: expected head {expected}, found {found}")
        self.expected = expected
        self.found = found


class RepositoryReadOnlyError(ReadOnlyError):
    """The repository is read-only (a mirror) and the write was refused."""

    def __init__(self, repository: str) -> None:
        super().__init__(f"repository {repository!r} is read-only")
        self.repository = repository


class TooManyTriesError(LakeMirrorError):
    """A compare-and-swap kept losing to concurrent updates and gave up."""
