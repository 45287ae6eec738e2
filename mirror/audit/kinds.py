"""The kinds of audit events: what changed, as ``<area>.<thing>.<verb>``.

A listing's ``kind`` filter matches a kind and every kind below it (``auth`` matches
``auth.user.create``), so the names nest: the first part is the area, the last the verb.
"""

from __future__ import annotations

__all__ = [
    "AUTH_CREDENTIALS_CREATE",
    "AUTH_CREDENTIALS_DELETE",
    "AUTH_GROUP_ACL_SET",
    "AUTH_GROUP_CREATE",
    "AUTH_GROUP_DELETE",
    "AUTH_GROUP_MEMBER_ADD",
    "AUTH_GROUP_MEMBER_REMOVE",
    "AUTH_POLICY_ATTACH",
    "AUTH_POLICY_CREATE",
    "AUTH_POLICY_DELETE",
    "AUTH_POLICY_DETACH",
    "AUTH_POLICY_UPDATE",
    "AUTH_SETUP",
    "AUTH_USER_CREATE",
    "AUTH_USER_DELETE",
    "BRANCH_HARD_RESET",
    "BRANCH_PROTECTION_CREATE",
    "BRANCH_PROTECTION_DELETE",
    "BRANCH_PROTECTION_SET",
    "GC_RULES_DELETE",
    "GC_RULES_SET",
    "GC_SWEEP",
    "KINDS",
    "MIRROR_ADOPT",
    "MIRROR_COPY_PRESERVED",
    "MIRROR_CREATE",
    "MIRROR_DELETE",
    "MIRROR_PROMOTE",
    "REPOSITORY_CREATE",
    "REPOSITORY_DELETE",
    "REPOSITORY_DEMOTE",
    "REPOSITORY_PROMOTE",
    "kind_matches",
]

AUTH_SETUP = "auth.setup"
AUTH_USER_CREATE = "auth.user.create"
AUTH_USER_DELETE = "auth.user.delete"
AUTH_GROUP_CREATE = "auth.group.create"
AUTH_GROUP_DELETE = "auth.group.delete"
AUTH_GROUP_MEMBER_ADD = "auth.group.member.add"
AUTH_GROUP_MEMBER_REMOVE = "auth.group.member.remove"
AUTH_GROUP_ACL_SET = "auth.group.acl.set"
AUTH_POLICY_CREATE = "auth.policy.create"
AUTH_POLICY_UPDATE = "auth.policy.update"
AUTH_POLICY_DELETE = "auth.policy.delete"
AUTH_POLICY_ATTACH = "auth.policy.attach"
AUTH_POLICY_DETACH = "auth.policy.detach"
AUTH_CREDENTIALS_CREATE = "auth.credentials.create"
AUTH_CREDENTIALS_DELETE = "auth.credentials.delete"
REPOSITORY_CREATE = "repository.create"
REPOSITORY_DELETE = "repository.delete"
REPOSITORY_DEMOTE = "repository.demote"
REPOSITORY_PROMOTE = "repository.promote"
BRANCH_HARD_RESET = "branch.hard_reset"
BRANCH_PROTECTION_SET = "branch_protection.set"
BRANCH_PROTECTION_CREATE = "branch_protection.create"
BRANCH_PROTECTION_DELETE = "branch_protection.delete"
GC_RULES_SET = "gc.rules.set"
GC_RULES_DELETE = "gc.rules.delete"
GC_SWEEP = "gc.sweep"
MIRROR_CREATE = "mirror.create"
MIRROR_ADOPT = "mirror.adopt"
MIRROR_DELETE = "mirror.delete"
MIRROR_PROMOTE = "mirror.promote"
MIRROR_COPY_PRESERVED = "mirror.copy_preserved"

KINDS: tuple[str, ...] = (
    AUTH_SETUP,
    AUTH_USER_CREATE,
    AUTH_USER_DELETE,
    AUTH_GROUP_CREATE,
    AUTH_GROUP_DELETE,
    AUTH_GROUP_MEMBER_ADD,
    AUTH_GROUP_MEMBER_REMOVE,
    AUTH_GROUP_ACL_SET,
    AUTH_POLICY_CREATE,
    AUTH_POLICY_UPDATE,
    AUTH_POLICY_DELETE,
    AUTH_POLICY_ATTACH,
    AUTH_POLICY_DETACH,
    AUTH_CREDENTIALS_CREATE,
    AUTH_CREDENTIALS_DELETE,
    REPOSITORY_CREATE,
    REPOSITORY_DELETE,
    REPOSITORY_DEMOTE,
    REPOSITORY_PROMOTE,
    BRANCH_HARD_RESET,
    BRANCH_PROTECTION_SET,
    BRANCH_PROTECTION_CREATE,
    BRANCH_PROTECTION_DELETE,
    GC_RULES_SET,
    GC_RULES_DELETE,
    GC_SWEEP,
    MIRROR_CREATE,
    MIRROR_ADOPT,
    MIRROR_DELETE,
    MIRROR_PROMOTE,
    MIRROR_COPY_PRESERVED,
)
"""Every kind LakeMirror records (docs/audit.md lists each with its fields)."""


def kind_matches(kind: str, pattern: str) -> bool:
    """Return whether ``kind`` is ``pattern`` or nests under it (``auth`` holds ``auth.user``)."""
    pattern = pattern.rstrip(".")
    return not pattern or kind == pattern or kind.startswith(pattern + ".")
