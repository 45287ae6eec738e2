"""Errors of the versioning core, one subclass per entity under the shared tree.

The official lakeFS clients match on lakeFS's error texts (its sentinel errors, pkg/graveler/
errors.go), so every error here that lakeFS also has starts its message with lakeFS's text and
puts LakeMirror's detail after it: ``uncommitted changes (dirty branch): merge of 'dev': branch
'main' has uncommitted changes``. The HTTP layer maps the classes to lakeFS's statuses.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar

from mirror.errors import (
    AlreadyExistsError,
    ConflictError,
    InvalidValueError,
    LakeMirrorError,
    NotFoundError,
    PreconditionFailedError,
    ReadOnlyError,
    UnavailableError,
)

__all__ = [
    "BranchExistsError",
    "BranchNotFoundError",
    "CherryPickParentRequiredError",
    "CommitNotFoundError",
    "DefaultBranchDeletionError",
    "DirtyBranchError",
    "InvalidMergeStrategyError",
    "InvalidNameError",
    "InvalidPathError",
    "InvalidRefError",
    "InvalidURIError",
    "LakeFSText",
    "MergeConflictError",
    "NoChangesError",
    "NoDataError",
    "NoMergeBaseError",
    "NotYetReplicatedError",
    "ObjectNotFoundError",
    "ParentOutOfRangeError",
    "PathRequiredError",
    "PromotionNotFoundError",
    "ProtectedBranchCommitError",
    "ProtectedBranchError",
    "ProtectedBranchWriteError",
    "RefNotFoundError",
    "RefPreconditionFailedError",
    "RepositoryExistsError",
    "RepositoryNotAMirrorError",
    "RepositoryNotFoundError",
    "RepositoryPreconditionFailedError",
    "RepositoryReadOnlyError",
    "RepositoryRoleConflictError",
    "RevertParentRequiredError",
    "StagingNotACommitError",
    "TagExistsError",
    "TagNotFoundError",
    "TooManyTriesError",
    "with_text",
]

INVALID_VALUE = "invalid value: validation error"
"""lakeFS's text for a malformed argument (``ErrInvalidValue``)."""


def with_text(text: str, detail: str) -> str:
    """Return lakeFS's ``text`` followed by ``detail``: ``"<text>: <detail>"``.

    A detail that already starts with ``text`` is returned as it is, so building an error from
    another one's message (re-raising, unpickling) never repeats the text.
    """
    if not detail or detail == text:
        return text
    if detail.startswith(text):
        return detail
    return f"{text}: {detail}"


class LakeFSText(LakeMirrorError):
    """An error whose message starts with lakeFS's text for it (clients match on that text).

    Attributes:
        lakefs_text: lakeFS's text (per class); the detail given follows it.
    """

    lakefs_text: ClassVar[str] = ""

    def __init__(self, detail: str = "") -> None:
        super().__init__(with_text(self.lakefs_text, detail))


class RepositoryNotFoundError(LakeFSText, NotFoundError):
    """No repository of that name."""

    lakefs_text = "repository not found"


class BranchNotFoundError(LakeFSText, NotFoundError):
    """No branch of that name."""

    lakefs_text = "branch not found"


class TagNotFoundError(LakeFSText, NotFoundError):
    """No tag of that name."""

    lakefs_text = "tag not found"


class CommitNotFoundError(LakeFSText, NotFoundError):
    """No commit of that ID."""

    lakefs_text = "commit not found"


class RefNotFoundError(LakeFSText, NotFoundError):
    """A ref expression resolves to nothing."""

    lakefs_text = "not found"


class ObjectNotFoundError(LakeFSText, NotFoundError):
    """No object at that path of that ref."""

    lakefs_text = "not found"


class RepositoryExistsError(LakeFSText, AlreadyExistsError):
    """A repository of that name exists."""

    lakefs_text = "not unique"


class BranchExistsError(LakeFSText, AlreadyExistsError):
    """A branch of that name exists."""

    lakefs_text = "branch already exists: not unique"


class TagExistsError(LakeFSText, AlreadyExistsError):
    """A tag of that name exists (tags are immutable)."""

    lakefs_text = "tag already exists: not unique"


class InvalidNameError(LakeFSText, InvalidValueError):
    """A repository, branch or tag name breaks the naming rules."""

    lakefs_text = INVALID_VALUE


class InvalidPathError(LakeFSText, InvalidValueError):
    """An object path contains forbidden characters or is too long."""

    lakefs_text = INVALID_VALUE


class PathRequiredError(InvalidPathError):
    """An object path is empty."""

    lakefs_text = "missing path: required value: validation error"


class InvalidRefError(LakeFSText, InvalidValueError):
    """A ref expression is malformed, or used where it is not allowed."""

    lakefs_text = INVALID_VALUE


class InvalidMergeStrategyError(InvalidRefError):
    """A merge strategy other than ``source-wins`` or ``dest-wins``."""

    lakefs_text = "invalid merge strategy"


class StagingNotACommitError(InvalidRefError):
    """A ``branch$`` ref (the staging area) was given where a commit is needed."""

    lakefs_text = "reference to staging area with $ is not a commit"


class ParentOutOfRangeError(InvalidRefError):
    """A parent number beyond the commit's parents (or a root commit, which has none)."""

    lakefs_text = "given commit does not have the given parent number"


class CherryPickParentRequiredError(InvalidRefError):
    """A cherry-pick of a merge commit without the parent to diff against."""

    lakefs_text = "must specify 1-based parent number for cherry-picking merge commit"


class InvalidURIError(LakeFSText, InvalidValueError):
    """A ``lakefs://`` URI is malformed."""

    lakefs_text = INVALID_VALUE


class NoChangesError(LakeFSText, ConflictError):
    """A commit or merge would change nothing."""

    lakefs_text = "no changes"


class DirtyBranchError(LakeFSText, ConflictError):
    """The branch has uncommitted changes that the operation does not allow."""

    lakefs_text = "uncommitted changes (dirty branch)"


class NoMergeBaseError(LakeFSText, ConflictError):
    """The two commits share no ancestor."""

    lakefs_text = "no merge base"


class RevertParentRequiredError(LakeFSText, ConflictError):
    """A revert of a merge commit without the parent to revert to."""

    lakefs_text = "must specify 1-based parent number for reverting merge commit"


class DefaultBranchDeletionError(LakeFSText, ConflictError):
    """The repository's default branch cannot be deleted."""

    lakefs_text = "cannot delete repository default branch"


class MergeConflictError(LakeFSText, ConflictError):
    """The three-way merge found conflicting changes.

    Attributes:
        paths: The conflicting object paths, sorted.
    """

    lakefs_text = "conflict found"

    def __init__(self, paths: Sequence[str]) -> None:
        shown = ", ".join(repr(p) for p in paths[:10])
        more = f" and {len(paths) - 10} more" if len(paths) > 10 else ""
        super().__init__(f"{len(paths)} path(s): {shown}{more}")
        self.paths = list(paths)

    def __reduce__(self) -> tuple[type[MergeConflictError], tuple[list[str]]]:
        return (type(self), (self.paths,))


class RefPreconditionFailedError(LakeFSText, PreconditionFailedError):
    """A branch head was not the expected commit.

    Attributes:
        expected: The commit the caller expected.
        found: The commit actually there.
    """

    lakefs_text = "Precondition failed"

    def __init__(self, branch: str, expected: str | None, found: str | None) -> None:
        super().__init__(f"branch {branch!r}: expected head {expected}, found {found}")
        self.branch = branch
        self.expected = expected
        self.found = found

    def __reduce__(
        self,
    ) -> tuple[type[RefPreconditionFailedError], tuple[str, str | None, str | None]]:
        return (type(self), (self.branch, self.expected, self.found))


class RepositoryPreconditionFailedError(LakeFSText, PreconditionFailedError):
    """The repository record changed between reading it and replacing it."""

    lakefs_text = "Precondition failed"


class RepositoryRoleConflictError(ConflictError):
    """A repository's role (writable source or read-only mirror) forbids the change asked."""


class RepositoryNotAMirrorError(RepositoryRoleConflictError):
    """A promotion was asked of a writable repository: it is not a mirror.

    The one text of this refusal, whether the server or a replicant answers it.
    """

    def __init__(self, repository: str) -> None:
        super().__init__(f"repository '{repository}' is not a mirror")
        self.repository = repository


class PromotionNotFoundError(LakeFSText, NotFoundError):
    """The repository has never been promoted from a mirror."""

    lakefs_text = "not found"


class RepositoryReadOnlyError(LakeFSText, ReadOnlyError):
    """The repository is read-only (a mirror) and the write was refused."""

    lakefs_text = "read-only repository"

    def __init__(self, repository: str) -> None:
        super().__init__(f"repository {repository!r} is read-only")
        self.repository = repository

    def __reduce__(self) -> tuple[type[RepositoryReadOnlyError], tuple[str]]:
        return (type(self), (self.repository,))


class NotYetReplicatedError(UnavailableError):
    """A file of a mirror repository has not arrived in this region yet (retry later)."""

    def __init__(self, what: str) -> None:
        super().__init__(f"{what} not yet replicated to this region; retry later")
        self.what = what


class NoDataError(LakeFSText, NotFoundError):
    """An object's data is gone from the object store (lakeFS's 410 ``No data``)."""

    lakefs_text = "No data"


class ProtectedBranchError(LakeFSText, ReadOnlyError):
    """A branch protection rule refused the operation (a hard reset, for one)."""

    lakefs_text = "protected branch"


class ProtectedBranchWriteError(ProtectedBranchError):
    """A branch protection rule refused a write to the branch's staging area."""

    lakefs_text = "cannot write to protected branch"


class ProtectedBranchCommitError(ProtectedBranchError):
    """A branch protection rule refused a commit on the branch."""

    lakefs_text = "cannot commit to protected branch"


class TooManyTriesError(LakeFSText):
    """A compare-and-swap kept losing to concurrent updates and gave up."""

    lakefs_text = "Too many attempts, try again later"
