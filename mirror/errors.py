"""The shallow error tree shared by every LakeMirror package.

Each package subclasses these in its own ``errors`` module (one subclass per entity); the HTTP
layer maps this tree to status codes in one place.
"""

from __future__ import annotations

__all__ = [
    "AlreadyExistsError",
    "AuthenticationError",
    "ConflictError",
    "InvalidValueError",
    "LakeMirrorError",
    "NotFoundError",
    "PermissionDeniedError",
    "PreconditionFailedError",
    "ReadOnlyError",
    "UnavailableError",
]


class LakeMirrorError(Exception):
    """Base of every error LakeMirror raises on purpose."""


class NotFoundError(LakeMirrorError):
    """A named thing does not exist."""


class AlreadyExistsError(LakeMirrorError):
    """A thing that must be new already exists."""


class PreconditionFailedError(LakeMirrorError):
    """A compare-and-swap found a value other than the expected one."""


class InvalidValueError(LakeMirrorError, ValueError):
    """An argument is malformed; the message names the bad value."""


class ReadOnlyError(LakeMirrorError):
    """A write was attempted on something that only allows reads."""


class ConflictError(LakeMirrorError):
    """The operation conflicts with the current state (merge conflicts, dirty branches, ...)."""


class UnavailableError(LakeMirrorError):
    """A backend could not serve the request now; retrying later may succeed."""


class AuthenticationError(LakeMirrorError):
    """The caller's credentials are missing, malformed or wrong."""


class PermissionDeniedError(LakeMirrorError):
    """The authenticated caller holds no policy that allows the action."""
