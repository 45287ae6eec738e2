"""lakeFS's action names and resource ARNs, and the permission a request needs."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = [
    "ALL_RESOURCES",
    "Action",
    "Permission",
    "branch_arn",
    "group_arn",
    "namespace_arn",
    "object_arn",
    "policy_arn",
    "repository_arn",
    "tag_arn",
    "user_arn",
]

ALL_RESOURCES = "*"


class Action:
    """Action names, spelled as lakeFS spells them."""

    READ_REPOSITORY = "fs:ReadRepository"
    CREATE_REPOSITORY = "fs:CreateRepository"
    UPDATE_REPOSITORY = "fs:UpdateRepository"
    DELETE_REPOSITORY = "fs:DeleteRepository"
    LIST_REPOSITORIES = "fs:ListRepositories"
    ATTACH_STORAGE_NAMESPACE = "fs:AttachStorageNamespace"
    READ_OBJECT = "fs:ReadObject"
    WRITE_OBJECT = "fs:WriteObject"
    DELETE_OBJECT = "fs:DeleteObject"
    LIST_OBJECTS = "fs:ListObjects"
    CREATE_COMMIT = "fs:CreateCommit"
    READ_COMMIT = "fs:ReadCommit"
    LIST_COMMITS = "fs:ListCommits"
    CREATE_BRANCH = "fs:CreateBranch"
    DELETE_BRANCH = "fs:DeleteBranch"
    READ_BRANCH = "fs:ReadBranch"
    REVERT_BRANCH = "fs:RevertBranch"
    LIST_BRANCHES = "fs:ListBranches"
    CREATE_TAG = "fs:CreateTag"
    DELETE_TAG = "fs:DeleteTag"
    READ_TAG = "fs:ReadTag"
    LIST_TAGS = "fs:ListTags"
    READ_CONFIG = "fs:ReadConfig"
    LIST_PULL_REQUESTS = "pr:ListPullRequests"
    READ_PULL_REQUEST = "pr:ReadPullRequest"
    WRITE_PULL_REQUEST = "pr:WritePullRequest"
    MIRROR_REPOSITORY = "fs:MirrorRepository"

    READ_USER = "auth:ReadUser"
    CREATE_USER = "auth:CreateUser"
    DELETE_USER = "auth:DeleteUser"
    LIST_USERS = "auth:ListUsers"
    READ_GROUP = "auth:ReadGroup"
    CREATE_GROUP = "auth:CreateGroup"
    DELETE_GROUP = "auth:DeleteGroup"
    LIST_GROUPS = "auth:ListGroups"
    ADD_GROUP_MEMBER = "auth:AddGroupMember"
    REMOVE_GROUP_MEMBER = "auth:RemoveGroupMember"
    READ_POLICY = "auth:ReadPolicy"
    CREATE_POLICY = "auth:CreatePolicy"
    UPDATE_POLICY = "auth:UpdatePolicy"
    DELETE_POLICY = "auth:DeletePolicy"
    LIST_POLICIES = "auth:ListPolicies"
    ATTACH_POLICY = "auth:AttachPolicy"
    DETACH_POLICY = "auth:DetachPolicy"
    READ_CREDENTIALS = "auth:ReadCredentials"
    CREATE_CREDENTIALS = "auth:CreateCredentials"
    DELETE_CREDENTIALS = "auth:DeleteCredentials"
    LIST_CREDENTIALS = "auth:ListCredentials"


@dataclass(frozen=True, slots=True)
class Permission:
    """One action on one resource, as a request needs it."""

    action: str
    resource: str


def repository_arn(repository: str) -> str:
    """Return the ARN of a repository."""
    return f"arn:lakefs:fs:::repository/{repository}"


def object_arn(repository: str, path: str) -> str:
    """Return the ARN of an object path in a repository."""
    return f"arn:lakefs:fs:::repository/{repository}/object/{path}"


def branch_arn(repository: str, branch: str) -> str:
    """Return the ARN of a branch."""
    return f"arn:lakefs:fs:::repository/{repository}/branch/{branch}"


def tag_arn(repository: str, tag: str) -> str:
    """Return the ARN of a tag."""
    return f"arn:lakefs:fs:::repository/{repository}/tag/{tag}"


def namespace_arn(namespace: str) -> str:
    """Return the ARN of a storage namespace."""
    return f"arn:lakefs:fs:::namespace/{namespace}"


def user_arn(user_id: str) -> str:
    """Return the ARN of a user."""
    return f"arn:lakefs:auth:::user/{user_id}"


def group_arn(group_id: str) -> str:
    """Return the ARN of a group."""
    return f"arn:lakefs:auth:::group/{group_id}"


def policy_arn(policy_id: str) -> str:
    """Return the ARN of a policy."""
    return f"arn:lakefs:auth:::policy/{policy_id}"
