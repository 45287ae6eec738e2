"""Server configuration, first-time setup, and the health check of lakeFS's API.

The first administrator's setup is recorded in the audit trail (``auth.setup``, anonymous: it
needs no credentials), with the user and the access key's ID.
"""

from __future__ import annotations

from fastapi import APIRouter, Request, Response

from mirror import __version__
from mirror.api.audit import audit_trail, request_actor
from mirror.api.deps import ApiState, CallerDep, StateDep
from mirror.api.models import (
    Config,
    CredentialsWithSecret,
    LoginConfig,
    Setup,
    SetupState,
    StorageConfig,
    VersionConfig,
)
from mirror.api.routers import async_ops
from mirror.api.routing import LakeFSRoute
from mirror.audit import kinds
from mirror.auth.tokens import LOGIN_COOKIE

__all__ = [
    "IMPORT_SCHEMES",
    "LOGIN_FAILED_MESSAGE",
    "login_config",
    "router",
    "storage_config",
    "version_config",
]

router = APIRouter(route_class=LakeFSRoute, tags=["config"])

LOGIN_FAILED_MESSAGE = "The credentials don't match."
"""What lakeFS's web UI shows when a sign-in answers 401 (lakeFS's default)."""

IMPORT_SCHEMES = frozenset({"local", "s3"})
"""Namespace schemes whose storage an import can list (``mirror.core.imports``; not ``mem``)."""


def login_config() -> LoginConfig:
    """Return the ``login_config`` of ``/setup_lakefs``, filled as lakeFS's defaults fill it.

    Except ``RBAC``: lakeFS's open-source default ``none`` makes the UI's users, groups and
    policies pages Enterprise placeholders, and ``simplified`` swaps policies for ACLs;
    LakeMirror serves all three, which the UI shows under ``internal``. The UI takes no sign-in
    URL (``login_url_method`` ``none``): it posts the access key to ``/auth/login`` and signs out
    through ``/logout``. The fallback link and the placeholders are left out, as lakeFS leaves
    them out unless configured.
    """
    return LoginConfig(
        RBAC="internal",
        login_url="",
        login_url_method="none",
        login_failed_message=LOGIN_FAILED_MESSAGE,
        login_cookie_names=[LOGIN_COOKIE],
        logout_url="",
    )


def version_config(state: ApiState) -> VersionConfig:
    """Return the version block of ``/config``."""
    return VersionConfig(version=state.version, version_context=f"lakemirror {__version__}")


def storage_config(state: ApiState) -> StorageConfig:
    """Return the storage block of ``/config`` (no pre-signed URLs: clients upload directly).

    ``import_support`` says, as lakeFS's adapters say it, whether the server imports from its
    storage (``…/branches/{branch}/import``): lakeFS's web UI offers its import only then.
    """
    schemes = sorted(state.namespace_schemes)
    regex = "^(" + "|".join(schemes) + ")://"
    return StorageConfig(
        blockstore_type="local" if schemes == ["local"] else schemes[0],
        blockstore_namespace_example=f"{schemes[0]}://example-repo",
        blockstore_namespace_ValidityRegex=regex,
        default_namespace_prefix="",
        pre_sign_support=False,
        pre_sign_support_ui=False,
        import_support=bool(IMPORT_SCHEMES & state.namespace_schemes),
        import_validity_regex=regex,
        # lakeFS ties this flag to an S3 block adapter; lakectl uses the API only in presign
        # mode, which pre_sign_support (false) keeps off, so no client takes it unasked
        pre_sign_multipart_upload="s3" in schemes,
        blockstore_id="",
        blockstore_description="",
    )


@router.get("/config", response_model=Config)
def get_config(request: Request, state: StateDep, caller: CallerDep) -> Config:
    """Return the server's version, storage configuration and optional capabilities."""
    storage = storage_config(state)
    return Config(
        version_config=version_config(state),
        storage_config=storage,
        storage_config_list=[storage],
        capabilities_config={"async_ops": async_ops.enabled(request.app)},
    )


@router.get("/config/version", response_model=VersionConfig)
def get_version(state: StateDep, caller: CallerDep) -> VersionConfig:
    """Return the server's version."""
    return version_config(state)


@router.get("/config/storage", response_model=StorageConfig)
def get_storage_config(state: StateDep, caller: CallerDep) -> StorageConfig:
    """Return the server's storage configuration."""
    return storage_config(state)


@router.get("/healthcheck", status_code=204, response_class=Response)
async def health_check() -> Response:
    """Answer 204 while the server runs (no authentication; on the event loop)."""
    return Response(status_code=204)


@router.get("/setup_lakefs", response_model=SetupState)
def get_setup_state(state: StateDep) -> SetupState:
    """Return whether the installation has its first administrator (no authentication)."""
    initialized = state.auth.is_initialized()
    return SetupState(
        state="initialized" if initialized else "not_initialized", login_config=login_config()
    )


@router.post("/setup_lakefs", response_model=CredentialsWithSecret)
def setup(body: Setup, state: StateDep, request: Request) -> CredentialsWithSecret:
    """Create the first administrator and its access key (once; 409 afterwards)."""
    key = body.key
    created = state.auth.setup(
        body.username,
        key.access_key_id if key else None,
        key.secret_access_key if key else None,
    )
    # anonymous: only the setup that happened is recorded, not every refused attempt
    audit_trail(request).record(
        kinds.AUTH_SETUP,
        request_actor(request, None, None),
        target={"user": body.username, "access_key_id": created.access_key_id},
    )
    return CredentialsWithSecret(
        access_key_id=created.access_key_id,
        secret_access_key=created.secret_access_key,
        creation_date=created.creation_date,
    )
