"""The JSON bodies of lakeFS's ``/api/v1``, as pydantic models (field names are the wire's)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

__all__ = [
    "AccessKeyCredentials",
    "BranchCreation",
    "CherryPickCreation",
    "Commit",
    "CommitCreation",
    "CommitList",
    "Config",
    "CredentialsList",
    "CredentialsModel",
    "CredentialsWithSecret",
    "CurrentUser",
    "Diff",
    "DiffList",
    "Error",
    "GroupCreation",
    "GroupList",
    "GroupModel",
    "LoginConfig",
    "Merge",
    "MergeResult",
    "MirrorBranchUpdate",
    "MirrorDemotion",
    "MirrorPreservation",
    "MirrorPromotion",
    "MirrorRepositoryCreation",
    "MirrorTagCreation",
    "ObjectCopyCreation",
    "ObjectError",
    "ObjectErrorList",
    "ObjectStats",
    "ObjectStatsList",
    "Pagination",
    "PathList",
    "PolicyList",
    "PolicyModel",
    "Ref",
    "RefList",
    "Repository",
    "RepositoryCreation",
    "RepositoryList",
    "ResetCreation",
    "RevertCreation",
    "Setup",
    "SetupState",
    "StagingBulkCreation",
    "StagingBulkObject",
    "StagingBulkResult",
    "StatementModel",
    "StorageConfig",
    "TagCreation",
    "UpdateObjectUserMetadata",
    "UserCreation",
    "UserList",
    "UserModel",
    "VersionConfig",
]


class _Request(BaseModel):
    model_config = ConfigDict(extra="ignore")


class Error(BaseModel):
    """lakeFS's error body."""

    message: str


class Pagination(BaseModel):
    """The paging state of a listing; all four fields are always present."""

    has_more: bool
    next_offset: str
    results: int
    max_per_page: int


class VersionConfig(BaseModel):
    """The server's version: a numeric lakeFS-compatible version and what runs it."""

    version: str
    version_context: str = ""
    latest_version: str | None = None
    upgrade_recommended: bool = False


class StorageConfig(BaseModel):
    """How the server stores data; clients read ``pre_sign_support`` and ``blockstore_type``."""

    model_config = ConfigDict(populate_by_name=True, serialize_by_alias=True)

    blockstore_type: str
    blockstore_namespace_example: str
    blockstore_namespace_validity_regex: str = Field(alias="blockstore_namespace_ValidityRegex")
    default_namespace_prefix: str = ""
    pre_sign_support: bool
    pre_sign_support_ui: bool
    import_support: bool
    import_validity_regex: str
    pre_sign_multipart_upload: bool = False
    blockstore_id: str = ""
    blockstore_description: str = ""


class Config(BaseModel):
    """``GET /config``."""

    version_config: VersionConfig
    storage_config: StorageConfig
    storage_config_list: list[StorageConfig]
    capabilities_config: dict[str, bool] | None = None
    """Optional features the server offers (``async_ops``: asynchronous commit and merge)."""


class RepositoryCreation(_Request):
    """``POST /repositories`` body."""

    name: str
    storage_namespace: str
    default_branch: str = "main"
    sample_data: bool = False
    read_only: bool = False
    storage_id: str | None = None


class Repository(BaseModel):
    """A repository."""

    id: str
    creation_date: int
    default_branch: str
    storage_id: str = ""
    storage_namespace: str
    read_only: bool = False
    mirror_of: str | None = Field(
        default=None, description='the repository a read-only mirror follows, "region/repo"'
    )


class RepositoryList(BaseModel):
    """A page of repositories."""

    pagination: Pagination
    results: list[Repository]


class Ref(BaseModel):
    """A branch or tag and the commit it points at."""

    id: str
    commit_id: str


class RefList(BaseModel):
    """A page of branches or tags."""

    pagination: Pagination
    results: list[Ref]


class BranchCreation(_Request):
    """``POST /branches`` body."""

    name: str
    source: str
    force: bool = False
    hidden: bool = False


class ResetCreation(_Request):
    """``PUT /branches/{branch}`` body: drop staged changes."""

    type: Literal["object", "common_prefix", "reset"]
    path: str | None = None
    force: bool = False


class UpdateObjectUserMetadata(_Request):
    """``PUT /branches/{branch}/objects/stat/user_metadata`` body: the new user metadata."""

    set: dict[str, str]


class CommitCreation(_Request):
    """``POST /branches/{branch}/commits`` body."""

    message: str
    metadata: dict[str, str] | None = None
    date: int | None = None
    allow_empty: bool = False
    force: bool = False


class Commit(BaseModel):
    """A commit."""

    id: str
    parents: list[str]
    committer: str
    message: str
    creation_date: int
    meta_range_id: str
    metadata: dict[str, str]
    generation: int
    version: int


class CommitList(BaseModel):
    """A page of commits."""

    pagination: Pagination
    results: list[Commit]


class Diff(BaseModel):
    """One difference (or, with a delimiter, a common prefix that holds some)."""

    type: Literal["added", "removed", "changed", "conflict", "prefix_changed"]
    path: str
    path_type: Literal["object", "common_prefix"]
    size_bytes: int | None = None


class DiffList(BaseModel):
    """A page of differences."""

    pagination: Pagination
    results: list[Diff]


class Merge(_Request):
    """``POST /refs/{source}/merge/{destination}`` body."""

    message: str | None = None
    metadata: dict[str, str] | None = None
    strategy: str | None = None
    force: bool = False
    allow_empty: bool = False
    squash_merge: bool = False


class MergeResult(BaseModel):
    """The commit a merge made."""

    reference: str


class RevertCreation(_Request):
    """``POST /branches/{branch}/revert`` body."""

    ref: str
    parent_number: int = 0
    allow_empty: bool = False
    force: bool = False
    commit_overrides: dict[str, object] | None = None


class CherryPickCreation(_Request):
    """``POST /branches/{branch}/cherry-pick`` body."""

    ref: str
    parent_number: int | None = None
    force: bool = False


class TagCreation(_Request):
    """``POST /tags`` body."""

    id: str
    ref: str
    force: bool = False


class MirrorRepositoryCreation(_Request):
    """``POST /mirror/repositories`` body: a read-only repository mirroring another region's."""

    name: str
    storage_namespace: str
    default_branch: str = "main"
    mirror_of: str = Field(description='the mirrored repository, e.g. "us-east-1/origin"')


class MirrorBranchUpdate(_Request):
    """``PUT /repositories/{repo}/mirror/branches/{branch}`` body: a compare-and-swap of the head.

    ``expected`` ``null`` (or left out) creates the branch, which must not exist yet.
    """

    commit_id: str
    expected: str | None = None


class MirrorTagCreation(_Request):
    """``PUT /repositories/{repo}/mirror/tags/{tag}`` body."""

    commit_id: str


class MirrorDemotion(_Request):
    """``POST /repositories/{repo}/mirror/demote`` body: the repository it will mirror."""

    mirror_of: str = Field(min_length=1, description='e.g. "us-west-2/origin"')


class MirrorPromotion(_Request):
    """``POST /repositories/{repo}/mirror/promote`` body: the record kept of the promotion.

    ``promotion`` is free JSON, kept as given ("from", "at", "forced", "heads", ... by
    convention).
    """

    promotion: dict[str, Any]


class MirrorPreservation(_Request):
    """``POST /repositories/{repo}/mirror/preserve`` body: commits to keep on a new branch.

    ``commits`` are records as ``GET .../commits/{id}`` returns them, parents first.
    """

    branch: str
    head: str
    commits: list[Commit] = Field(default_factory=list)


class ObjectStats(BaseModel):
    """An object (``path_type: object``) or a common prefix (``common_prefix``) in a listing."""

    path: str
    path_type: Literal["object", "common_prefix"]
    physical_address: str
    physical_address_expiry: int | None = None
    checksum: str
    size_bytes: int | None = None
    mtime: int
    metadata: dict[str, str] | None = None
    content_type: str | None = None


class ObjectStatsList(BaseModel):
    """A page of objects and common prefixes."""

    pagination: Pagination
    results: list[ObjectStats]


class PathList(_Request):
    """``POST /objects/delete`` body."""

    paths: list[str]


class ObjectError(BaseModel):
    """Why one path of a bulk delete failed."""

    status_code: int
    message: str
    path: str | None = None


class ObjectErrorList(BaseModel):
    """The failures of a bulk delete."""

    errors: list[ObjectError]


class ObjectCopyCreation(_Request):
    """``POST /objects/copy`` body."""

    src_path: str
    src_ref: str | None = None
    force: bool = False
    shallow: bool = False


class AccessKeyCredentials(_Request):
    """An access key pair chosen by the caller of setup."""

    access_key_id: str = Field(min_length=1)
    secret_access_key: str = Field(min_length=1)


class Setup(_Request):
    """``POST /setup_lakefs`` body."""

    username: str
    key: AccessKeyCredentials | None = None


class LoginConfig(BaseModel):
    """How lakeFS's web UI signs in: ``login_config`` of ``GET /setup_lakefs``.

    ``RBAC`` picks the UI's access-control pages (``none``: Enterprise placeholders only;
    ``simplified``: ACLs; ``internal`` or ``external``: users, groups and policies).
    """

    model_config = ConfigDict(populate_by_name=True)

    rbac: Literal["none", "simplified", "internal", "external"] = Field(alias="RBAC")
    username_ui_placeholder: str | None = None
    password_ui_placeholder: str | None = None
    login_url: str
    login_url_method: Literal["none", "redirect", "select"] | None = None
    login_failed_message: str | None = None
    fallback_login_url: str | None = None
    fallback_login_label: str | None = None
    login_cookie_names: list[str]
    logout_url: str


class SetupState(BaseModel):
    """``GET /setup_lakefs``."""

    state: Literal["initialized", "not_initialized"]
    comm_prefs_missing: bool = False
    login_config: LoginConfig | None = None


class CredentialsWithSecret(BaseModel):
    """A new access key with its secret: returned once, at creation."""

    access_key_id: str
    secret_access_key: str
    creation_date: int


class CredentialsModel(BaseModel):
    """An access key (never with its secret)."""

    access_key_id: str
    creation_date: int


class CredentialsList(BaseModel):
    """A page of access keys."""

    pagination: Pagination
    results: list[CredentialsModel]


class UserCreation(_Request):
    """``POST /auth/users`` body.

    ``email`` is LakeMirror's: lakeFS's schema has none, its users get an address only when
    invited by e-mail (which LakeMirror does not send).
    """

    id: str
    invite_as_email: bool = False
    email: str | None = None


class UserModel(BaseModel):
    """A user."""

    id: str
    creation_date: int
    friendly_name: str | None = None
    email: str | None = None


class UserList(BaseModel):
    """A page of users."""

    pagination: Pagination
    results: list[UserModel]


class CurrentUser(BaseModel):
    """``GET /user``: who signed the request."""

    user: UserModel


class GroupCreation(_Request):
    """``POST /auth/groups`` body."""

    id: str
    description: str | None = None


class GroupModel(BaseModel):
    """A group."""

    id: str
    name: str
    description: str | None = None
    creation_date: int


class GroupList(BaseModel):
    """A page of groups."""

    pagination: Pagination
    results: list[GroupModel]


class StatementModel(BaseModel):
    """One statement of a policy."""

    effect: Literal["allow", "deny"]
    resource: str
    action: list[str] = Field(min_length=1)


class PolicyModel(BaseModel):
    """A policy (``creation_date`` is ignored on input)."""

    model_config = ConfigDict(extra="ignore")

    id: str
    creation_date: int | None = None
    statement: list[StatementModel] = Field(min_length=1)


class PolicyList(BaseModel):
    """A page of policies."""

    pagination: Pagination
    results: list[PolicyModel]


class StagingBulkObject(_Request):
    """One already-written object to stage by its physical address.

    ``size_bytes`` and ``checksum`` may be left out: the server then reads them from the object
    store.
    """

    path: str
    physical_address: str
    size_bytes: int | None = Field(default=None, ge=0)
    checksum: str | None = None
    content_type: str | None = None
    user_metadata: dict[str, str] | None = None


class StagingBulkCreation(_Request):
    """``POST /branches/{branch}/staging/bulk`` body."""

    objects: list[StagingBulkObject]


class StagingBulkResult(BaseModel):
    """The staged objects, in request order."""

    results: list[ObjectStats]
