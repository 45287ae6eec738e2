"""Authentication and authorization in lakeFS's form: access keys, users, groups, policies."""

from mirror.auth.builtin import ADMINS, BUILTIN_GROUPS, BUILTIN_POLICIES, READERS, WRITERS
from mirror.auth.errors import (
    AuthenticationError,
    CredentialsNotFoundError,
    GroupExistsError,
    GroupNotFoundError,
    InvalidAuthValueError,
    PermissionDeniedError,
    PolicyExistsError,
    PolicyNotFoundError,
    SetupDoneError,
    UserExistsError,
    UserNotFoundError,
)
from mirror.auth.model import Credential, Effect, Group, NewCredential, Policy, Statement, User
from mirror.auth.permissions import Action, Permission
from mirror.auth.policy import is_allowed, matches
from mirror.auth.store import AuthStore

__all__ = [
    "ADMINS",
    "BUILTIN_GROUPS",
    "BUILTIN_POLICIES",
    "READERS",
    "WRITERS",
    "Action",
    "AuthStore",
    "AuthenticationError",
    "Credential",
    "CredentialsNotFoundError",
    "Effect",
    "Group",
    "GroupExistsError",
    "GroupNotFoundError",
    "InvalidAuthValueError",
    "NewCredential",
    "Permission",
    "PermissionDeniedError",
    "Policy",
    "PolicyExistsError",
    "PolicyNotFoundError",
    "SetupDoneError",
    "Statement",
    "User",
    "UserExistsError",
    "UserNotFoundError",
    "is_allowed",
    "matches",
]
