"""The built-in policies and groups every installation starts with (lakeFS's RBAC set)."""

from __future__ import annotations

from mirror.auth.model import Effect, Statement

__all__ = [
    "ADMINS",
    "BUILTIN_GROUPS",
    "BUILTIN_POLICIES",
    "READERS",
    "REPLICATOR",
    "SUPERUSERS",
    "WRITERS",
]

ADMINS = "Admins"
SUPERUSERS = "SuperUsers"
WRITERS = "Writers"
READERS = "Readers"
REPLICATOR = "Replicator"

_FS_READ_WRITE = (
    "fs:ListRepositories",
    "fs:ReadRepository",
    "fs:ReadCommit",
    "fs:ListCommits",
    "fs:ListBranches",
    "fs:ListTags",
    "fs:ListObjects",
    "fs:ReadObject",
    "fs:WriteObject",
    "fs:DeleteObject",
    "fs:RevertBranch",
    "fs:ReadBranch",
    "fs:ReadTag",
    "fs:CreateBranch",
    "fs:CreateTag",
    "fs:DeleteBranch",
    "fs:DeleteTag",
    "fs:CreateCommit",
    "fs:ReadConfig",
)

BUILTIN_POLICIES: dict[str, tuple[Statement, ...]] = {
    "FSFullAccess": (Statement(Effect.ALLOW, ("fs:*",), "*"),),
    "FSReadWriteAll": (Statement(Effect.ALLOW, _FS_READ_WRITE, "*"),),
    "FSReadAll": (Statement(Effect.ALLOW, ("fs:List*", "fs:Read*"), "*"),),
    "AuthFullAccess": (Statement(Effect.ALLOW, ("auth:*",), "*"),),
    "RepoManagementFullAccess": (
        Statement(
            Effect.ALLOW, ("ci:*", "retention:*", "branches:*", "pr:*", "fs:ReadConfig"), "*"
        ),
    ),
    "AuthManageOwnCredentials": (
        Statement(
            Effect.ALLOW,
            (
                "auth:CreateCredentials",
                "auth:DeleteCredentials",
                "auth:ListCredentials",
                "auth:ReadCredentials",
            ),
            "arn:lakefs:auth:::user/${user}",
        ),
    ),
    REPLICATOR: (Statement(Effect.ALLOW, ("fs:List*", "fs:Read*", "fs:MirrorRepository"), "*"),),
}
"""Policy ID -> statements."""

BUILTIN_GROUPS: dict[str, tuple[str, ...]] = {
    ADMINS: ("AuthFullAccess", "FSFullAccess", "RepoManagementFullAccess"),
    SUPERUSERS: ("FSFullAccess", "AuthManageOwnCredentials"),
    WRITERS: ("FSReadWriteAll", "AuthManageOwnCredentials"),
    READERS: ("FSReadAll", "AuthManageOwnCredentials"),
}
"""Group ID -> attached policy IDs."""
