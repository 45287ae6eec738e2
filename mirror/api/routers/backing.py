"""Direct-to-storage writes: lakeFS's staging backing, and an object's underlying properties.

``GET …/staging/backing?path=`` hands out a fresh signed address under the namespace's
``data/`` prefix (:mod:`mirror.imports.links`); the client writes the bytes there itself (or to
the presigned URL, when the store can presign) and ``PUT …/staging/backing?path=`` links the
address to the path as a staged change, with the checksum and size the client reports. Large
files thus never pass through the server. ``GET …/objects/underlyingProperties`` reports the
storage class of an object's bytes.
"""

from __future__ import annotations

import time
from typing import Annotated

from fastapi import APIRouter, Header, Query, Request
from pydantic import BaseModel, ConfigDict

from mirror.api.convert import object_model
from mirror.api.deps import CallerDep, StateDep
from mirror.api.models import ObjectStats
from mirror.api.routing import LakeFSRoute
from mirror.auth.permissions import Action, Permission, object_arn
from mirror.block.resolver import split_namespace
from mirror.core.committed import METADATA_PREFIX
from mirror.core.errors import ObjectNotFoundError, RepositoryReadOnlyError
from mirror.core.model import DEFAULT_CONTENT_TYPE, AddressType, Entry, Repository
from mirror.core.protection import check_staging_write
from mirror.core.validate import validate_path
from mirror.errors import InvalidValueError, PreconditionFailedError
from mirror.httputil.errors import error_response
from mirror.imports.links import LinkAddressInvalidError, LinkSigner

__all__ = [
    "PRESIGN_EXPIRY",
    "StagingLocation",
    "StagingMetadata",
    "UnderlyingObjectProperties",
    "router",
    "signer",
]

router = APIRouter(route_class=LakeFSRoute, tags=["staging"])

PRESIGN_EXPIRY = 900
"""Seconds a presigned upload URL stays valid."""

_BACKING = "/repositories/{repository}/branches/{branch}/staging/backing"
PathQuery = Annotated[str, Query(description="relative to the branch")]


class StagingLocation(BaseModel):
    """Where to write an object's bytes before linking them."""

    physical_address: str | None = None
    presigned_url: str | None = None
    presigned_url_expiry: int | None = None


class _Request(BaseModel):
    model_config = ConfigDict(extra="ignore")


class StagingMetadata(_Request):
    """``PUT …/staging/backing`` body: the address written and what was written there."""

    staging: StagingLocation
    checksum: str
    size_bytes: int
    user_metadata: dict[str, str] | None = None
    content_type: str | None = None
    mtime: int | None = None
    force: bool = False


class UnderlyingObjectProperties(BaseModel):
    """The storage class of an object's bytes (``None``: the store has none)."""

    storage_class: str | None


class ChecksumRequiredError(InvalidValueError):
    """A link without a checksum (lakeFS's text)."""

    def __init__(self) -> None:
        super().__init__("checksum is required")


def signer(request: Request) -> LinkSigner:
    """Return the link signer of this installation (set by the server at start)."""
    found: LinkSigner | None = getattr(request.app.state, "link_signer", None)
    if found is None:
        # an app built without one is the only process of its installation
        found = LinkSigner.ephemeral()
        request.app.state.link_signer = found
    return found


def _writable(state: StateDep, repository: str) -> Repository:
    repo = state.catalog.get_repository(repository)
    if repo.read_only:
        raise RepositoryReadOnlyError(repo.id)
    return repo


@router.get(_BACKING, response_model=StagingLocation)
def get_physical_address(
    repository: str,
    branch: str,
    path: PathQuery,
    request: Request,
    state: StateDep,
    caller: CallerDep,
    presign: bool = False,
) -> StagingLocation:
    """Hand out a fresh signed address to write an object's bytes to."""
    caller.require(Permission(Action.WRITE_OBJECT, object_arn(repository, path)))
    repo = _writable(state, repository)
    validate_path(path)
    address = f"{repo.storage_namespace.rstrip('/')}/{state.catalog.paths.new_path()}"
    signed = signer(request).sign(repository, branch, path, address)
    location = StagingLocation(physical_address=signed)
    if presign:
        store = state.catalog.block_store(repo)
        presign_put = getattr(store, "presign_put", None)
        if presign_put is not None:
            key = signed[len(repo.storage_namespace.rstrip("/")) + 1 :]
            location.presigned_url = presign_put(key, PRESIGN_EXPIRY)
            location.presigned_url_expiry = int(time.time()) + PRESIGN_EXPIRY
    return location


def _entry(repo: Repository, address: str, body: StagingMetadata, now: int) -> Entry:
    namespace = repo.storage_namespace.rstrip("/") + "/"
    kind = AddressType.RELATIVE
    if address.startswith(namespace):
        stored = address[len(namespace) :]
        if stored.startswith(METADATA_PREFIX):
            raise LinkAddressInvalidError(f"address {address!r} holds committed metadata")
    else:
        # outside the namespace: stored as given, only its scheme is checked (as lakeFS does)
        scheme, _ = split_namespace(repo.storage_namespace)
        try:
            theirs, _ = split_namespace(address)
        except InvalidValueError as exc:
            raise LinkAddressInvalidError(f"address {address!r}: invalid address") from exc
        if theirs != scheme:
            raise LinkAddressInvalidError(
                f"address {address!r}: invalid address (the namespace's scheme is {scheme!r})"
            )
        stored, kind = address, AddressType.FULL
    return Entry(
        address=stored,
        size=body.size_bytes,
        checksum=body.checksum.strip('"'),
        mtime=body.mtime or now,
        content_type=body.content_type or DEFAULT_CONTENT_TYPE,
        metadata=dict(body.user_metadata or {}),
        address_type=kind,
    )


@router.put(_BACKING, response_model=ObjectStats)
def link_physical_address(
    repository: str,
    branch: str,
    path: PathQuery,
    body: StagingMetadata,
    request: Request,
    state: StateDep,
    caller: CallerDep,
    if_none_match: Annotated[str | None, Header()] = None,
    if_match: Annotated[str | None, Header()] = None,
) -> object:
    """Link a written address to ``path`` on the branch as a staged change."""
    caller.require(Permission(Action.WRITE_OBJECT, object_arn(repository, path)))
    if if_match is not None:
        return error_response(501, "Not Implemented")
    if if_none_match is not None and if_none_match.strip() != "*":
        raise InvalidValueError('Unsupported value for If-None-Match - Only "*" is supported')
    catalog = state.catalog
    repo = _writable(state, repository)
    validate_path(path)
    catalog.get_branch(repository, branch)
    check_staging_write(catalog.kv, repo, branch)
    if not body.checksum.strip('"'):
        raise ChecksumRequiredError()
    address = body.staging.physical_address or ""
    namespace = repo.storage_namespace.rstrip("/") + "/"
    if address.startswith(namespace):
        signer(request).verify(repository, branch, path, address)
    entry = _entry(repo, address, body, int(time.time()))
    if if_none_match is not None:
        try:
            catalog.stat_object(repository, branch, path)
        except ObjectNotFoundError:
            pass
        else:
            raise PreconditionFailedError(f"object {path!r} already exists on branch {branch!r}")
    stat = catalog.stage_object(repository, branch, path, entry, force=body.force)
    return object_model(stat)


@router.get(
    "/repositories/{repository}/refs/{ref}/objects/underlyingProperties",
    response_model=UnderlyingObjectProperties,
)
def get_underlying_properties(
    repository: str, ref: str, path: PathQuery, state: StateDep, caller: CallerDep
) -> UnderlyingObjectProperties:
    """Return the storage class of the bytes of ``path`` at ``ref`` (``null`` when none)."""
    caller.require(Permission(Action.READ_OBJECT, object_arn(repository, path)))
    catalog = state.catalog
    repo = catalog.get_repository(repository)
    stat = catalog.stat_object(repository, ref, path)
    store, key = catalog.open_entry(repo, stat.entry)
    storage_class = getattr(store, "storage_class", None)
    return UnderlyingObjectProperties(
        storage_class=storage_class(key) if storage_class is not None else None
    )
