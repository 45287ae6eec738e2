"""lakeFS's ACLs: a group's permission level, kept as one policy derived from it.

lakeFS's simplified authorization (``pkg/auth/acl``) gives a group one of four permission
levels. Setting it writes the policy ``ACL(_-_)<group>`` with the statements of that level and
the level itself, attaches it to the group and detaches every other policy of the group; the
group's ACL is then read back from the one policy attached to it.

=========  ============================================================================
level      statements (resource ``*`` unless noted)
=========  ============================================================================
``Read``   ``fs:List*``, ``fs:Read*``; ``fs:ReadConfig``; own credentials
``Write``  ``fs:Read*``, ``fs:List*`` and the writes of a branch; own credentials; reading
           CI, retention and branch settings (``ci:Read*``, ``retention:Get*``,
           ``branches:Get*``, ``fs:ReadConfig``)
``Super``  ``fs:*``; own credentials; reading CI, retention and branch settings
``Admin``  ``fs:*``, ``auth:*``, ``ci:*``, ``retention:*``, ``branches:*``
=========  ============================================================================

"Own credentials" is the credentials actions on ``arn:lakefs:auth:::user/${user}``.
"""

from __future__ import annotations

from mirror.auth.errors import InvalidAuthValueError
from mirror.auth.model import Effect, Statement
from mirror.auth.permissions import ALL_RESOURCES, Action, user_arn
from mirror.auth.records import ID_PATTERN
from mirror.errors import NotFoundError

__all__ = [
    "ACL_PERMISSIONS",
    "ACL_POLICY_PREFIX",
    "BadAclPermissionError",
    "NoAclError",
    "acl_policy_name",
    "acl_statements",
    "is_acl_policy_name",
]

ACL_POLICY_PREFIX = "ACL(_-_)"
"""What the name of a policy derived from an ACL starts with; the group's ID follows."""

_OWN_CREDENTIALS = Statement(
    Effect.ALLOW,
    (
        Action.CREATE_CREDENTIALS,
        Action.DELETE_CREDENTIALS,
        Action.LIST_CREDENTIALS,
        Action.READ_CREDENTIALS,
    ),
    user_arn("${user}"),
)
_REPO_MANAGEMENT_READ = Statement(
    Effect.ALLOW, ("ci:Read*", "retention:Get*", "branches:Get*", Action.READ_CONFIG), ALL_RESOURCES
)
_FS_READ_WRITE = (
    "fs:Read*",
    "fs:List*",
    Action.WRITE_OBJECT,
    Action.DELETE_OBJECT,
    Action.REVERT_BRANCH,
    Action.CREATE_BRANCH,
    Action.CREATE_TAG,
    Action.DELETE_BRANCH,
    Action.DELETE_TAG,
    Action.CREATE_COMMIT,
    "fs:CreateMetaRange",
)

_STATEMENTS: dict[str, tuple[Statement, ...]] = {
    "Read": (
        Statement(Effect.ALLOW, ("fs:List*", "fs:Read*"), ALL_RESOURCES),
        Statement(Effect.ALLOW, (Action.READ_CONFIG,), ALL_RESOURCES),
        _OWN_CREDENTIALS,
    ),
    "Write": (
        Statement(Effect.ALLOW, _FS_READ_WRITE, ALL_RESOURCES),
        _OWN_CREDENTIALS,
        _REPO_MANAGEMENT_READ,
    ),
    "Super": (
        Statement(Effect.ALLOW, ("fs:*",), ALL_RESOURCES),
        _OWN_CREDENTIALS,
        _REPO_MANAGEMENT_READ,
    ),
    "Admin": (
        Statement(
            Effect.ALLOW, ("fs:*", "auth:*", "ci:*", "retention:*", "branches:*"), ALL_RESOURCES
        ),
    ),
}

ACL_PERMISSIONS = tuple(_STATEMENTS)
"""The permission levels, weakest first."""


class BadAclPermissionError(InvalidAuthValueError):
    """An ACL names a permission level that is none of :data:`ACL_PERMISSIONS` (400)."""


class NoAclError(NotFoundError):
    """The group's policies are not one policy derived from an ACL (404, lakeFS's ``no_acl``)."""


def acl_policy_name(group_id: str) -> str:
    """Return the name of the policy that holds the ACL of ``group_id``."""
    return ACL_POLICY_PREFIX + group_id


def is_acl_policy_name(policy_id: str) -> bool:
    """Return whether ``policy_id`` names the ACL policy of a well-formed group ID."""
    group_id = policy_id.removeprefix(ACL_POLICY_PREFIX)
    return group_id != policy_id and ID_PATTERN.fullmatch(group_id) is not None


def acl_statements(group_id: str, permission: str) -> tuple[Statement, ...]:
    """Return the statements that grant ``permission`` to the members of ``group_id``.

    Raises:
        BadAclPermissionError: ``permission`` is not a level; the message is lakeFS's.
    """
    try:
        return _STATEMENTS[permission]
    except KeyError:
        # lakeFS wraps its validation error with the group and the ACL it could not translate
        raise BadAclPermissionError(
            f"{group_id}: translate ACL {{Permission:{permission}}} to statements: "
            f'validation error: Bad ACL permission "{permission}"'
        ) from None
