"""Validation of repository, branch and tag names, object paths (lakeFS's rules) and metadata."""

from __future__ import annotations

import re
from collections.abc import Mapping

from mirror.core.errors import (
    InvalidNameError,
    InvalidPathError,
    InvalidRefError,
    PathRequiredError,
)
from mirror.core.ids import BranchID, RepositoryID, TagID

__all__ = [
    "MAX_PATH_LENGTH",
    "validate_branch_id",
    "validate_metadata",
    "validate_path",
    "validate_repository_id",
    "validate_tag_id",
]

MAX_PATH_LENGTH = 1024

_REPOSITORY = re.compile(r"[a-z0-9][a-z0-9-]{2,62}")
_BRANCH = re.compile(r"[A-Za-z0-9_][-A-Za-z0-9_]*")
_TAG_FORBIDDEN = set("^:?*[\\")


def validate_repository_id(name: str) -> RepositoryID:
    """Return ``name`` as a repository ID: 3-63 of ``a-z0-9-``, not starting with ``-``.

    Raises:
        InvalidNameError: the name breaks the rule; the message names it.
    """
    if not isinstance(name, str) or not _REPOSITORY.fullmatch(name):
        raise InvalidNameError(
            f"invalid repository name {name!r}: use 3-63 characters of a-z, 0-9 and '-', "
            "starting with a letter or digit"
        )
    return RepositoryID(name)


def validate_branch_id(name: str) -> BranchID:
    """Return ``name`` as a branch ID: word characters and ``-``, not starting with ``-``.

    Raises:
        InvalidNameError: the name breaks the rule; the message names it.
    """
    if not isinstance(name, str) or not _BRANCH.fullmatch(name):
        raise InvalidNameError(
            f"invalid branch name {name!r}: use letters, digits, '_' and '-', not starting with '-'"
        )
    return BranchID(name)


def validate_tag_id(name: str) -> TagID:
    """Return ``name`` as a tag ID, as lakeFS's ``ValidateTagID`` checks it.

    git-check-ref-format's rules with ``~`` allowed and no ``/`` at all; like lakeFS, only
    characters up to the space count as control characters.

    Raises:
        InvalidNameError: the name breaks the rule; the message names it and why.
    """
    why = None
    if not isinstance(name, str) or not name:
        why = "empty"
    elif name == "@":
        why = "'@' alone is reserved"
    elif name.endswith((".", ".lock")):
        why = "must not end with '.' or '.lock'"
    elif ".." in name or "/" in name or "@{" in name:
        why = "must not contain '..', '/' or '@{'"
    elif _TAG_FORBIDDEN & set(name):
        why = "must not contain any of ^ : ? * [ \\"
    elif any(ord(c) <= 0x20 for c in name):
        why = "must not contain spaces or control characters"
    if why is not None:
        raise InvalidNameError(f"invalid tag name {name!r}: {why}")
    return TagID(name)


def validate_path(path: str) -> str:
    """Return ``path`` if it is a valid object path: non-empty, no NUL, at most 1024 bytes.

    Raises:
        PathRequiredError: the path is empty.
        InvalidPathError: the path breaks another rule; the message names it.
    """
    if not isinstance(path, str) or not path:
        raise PathRequiredError(f"invalid object path {path!r}: must not be empty")
    if "\x00" in path:
        raise InvalidPathError(f"invalid object path {path!r}: must not contain NUL")
    try:
        size = len(path.encode())
    except UnicodeEncodeError as exc:
        raise InvalidPathError(f"invalid object path {path!r}: not valid UTF-8") from exc
    if size > MAX_PATH_LENGTH:
        raise InvalidPathError(
            f"invalid object path {path[:40]!r}...: {size} bytes exceeds {MAX_PATH_LENGTH}"
        )
    return path


def validate_metadata(metadata: Mapping[str, str] | None) -> dict[str, str]:
    """Return a copy of user ``metadata`` (``None``: empty) if it maps strings to strings.

    Raises:
        InvalidRefError: a key or a value is not a string.
    """
    out = dict(metadata or {})
    for k, v in out.items():
        if not isinstance(k, str) or not isinstance(v, str):
            raise InvalidRefError(f"metadata must map strings to strings, got {k!r}: {v!r}")
    return out
