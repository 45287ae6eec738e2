"""Errors of the auth store, one subclass per entity under the shared tree."""

from __future__ import annotations

from mirror.errors import (
    AlreadyExistsError,
    AuthenticationError,
    InvalidValueError,
    NotFoundError,
    PermissionDeniedError,
)

__all__ = [
    "AuthenticationError",
    "CredentialsNotFoundError",
    "GroupExistsError",
    "GroupNotFoundError",
    "InvalidAuthValueError",
    "MembershipNotFoundError",
    "PermissionDeniedError",
    "PolicyAttachmentNotFoundError",
    "PolicyExistsError",
    "PolicyNotFoundError",
    "SecretKeyMismatchError",
    "SecretNotStoredError",
    "SetupDoneError",
    "SignInThrottledError",
    "UserExistsError",
    "UserNotFoundError",
]


class UserNotFoundError(NotFoundError):
    """No user of that ID."""


class GroupNotFoundError(NotFoundError):
    """No group of that ID."""


class PolicyNotFoundError(NotFoundError):
    """No policy of that ID."""


class CredentialsNotFoundError(NotFoundError):
    """No access key of that ID belongs to the user."""


class MembershipNotFoundError(NotFoundError):
    """The user is not a member of the group."""


class PolicyAttachmentNotFoundError(NotFoundError):
    """The policy is not attached to that user or group."""


class UserExistsError(AlreadyExistsError):
    """A user of that ID exists."""


class GroupExistsError(AlreadyExistsError):
    """A group of that ID exists."""


class PolicyExistsError(AlreadyExistsError):
    """A policy of that ID exists."""


class SetupDoneError(AlreadyExistsError):
    """The installation already has its first administrator."""


class InvalidAuthValueError(InvalidValueError):
    """A user, group, policy or key ID, or a policy statement, is malformed."""


class SecretNotStoredError(AuthenticationError):
    """The access key predates encrypted secrets: only its hash is stored, not the secret."""


class SecretKeyMismatchError(AuthenticationError):
    """The stored secret does not open with the configured ``auth.encrypt_secret_key``."""


class SignInThrottledError(AuthenticationError):
    """Too many failed sign-ins: the answer tells the client to wait (``Retry-After``).

    Attributes:
        retry_after: Whole seconds the client should wait before trying again.
    """

    def __init__(self, message: str, retry_after: int) -> None:
        super().__init__(message)
        self.retry_after = retry_after
