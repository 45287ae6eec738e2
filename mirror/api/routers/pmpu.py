"""lakeFS's presigned multipart upload (``…/branches/{b}/staging/pmpu``, experimental API).

The client uploads a large object's parts straight to S3:

- ``POST …/staging/pmpu?path=&parts=`` (201) starts an S3 multipart upload at a fresh signed
  address of the namespace (the address scheme of ``…/staging/backing``,
  :mod:`mirror.imports.links`) and hands out ``parts`` presigned ``UploadPart`` URLs.
- ``PUT …/pmpu/{uploadId}/parts/{n}`` (200) hands out the URL of one more part.
- ``PUT …/pmpu/{uploadId}/parts/{n}/copy`` (204, the part's ETag in the ``ETag`` header) makes
  part ``n`` a server-side copy of another lakeFS object (``fs:ReadObject`` on it), or of a
  byte range of it.
- ``PUT …/pmpu/{uploadId}`` (200) completes the upload from the parts' numbers and ETags and
  stages the object at ``path``: its checksum is S3's ETag, its size a HEAD of the object.
- ``DELETE …/pmpu/{uploadId}`` (204) aborts it.

Every call needs ``fs:WriteObject`` on ``path``, and the signed address handed out for the same
repository, branch and path (400 otherwise). Mirrors refuse (403 ``read-only repository``), and
protected branches refuse staging writes.

A repository whose namespace is not on S3 (``local://``) cannot presign. As in lakeFS, create,
complete and abort answer 501 ``presign multipart upload API is not supported`` once the
repository is found. The two part calls make every check of lakeFS's handlers first (the
repository, the signed address, a copy's source object) and then ask the store, which answers
lakeFS's 400 ``operation not supported``: lakeFS's local block adapter cannot presign a part URL.
Its local adapter would copy a part, into the upload of that ID its S3 gateway started; the
gateway's uploads here are its own, so a part copied into a local namespace could never be
completed, and the copy is refused like the part URL.
"""

from __future__ import annotations

import time
from types import ModuleType
from typing import TYPE_CHECKING, Annotated

from fastapi import APIRouter, Query, Request, Response
from pydantic import BaseModel, ConfigDict
from starlette.exceptions import HTTPException

from mirror.api.convert import object_model
from mirror.api.deps import CallerDep, StateDep
from mirror.api.models import ObjectStats
from mirror.api.routers.backing import PRESIGN_EXPIRY, signer
from mirror.api.routing import LakeFSRoute
from mirror.auth.permissions import Action, Permission, object_arn
from mirror.core.committed import METADATA_PREFIX
from mirror.core.errors import LakeFSText, RepositoryReadOnlyError
from mirror.core.model import DEFAULT_CONTENT_TYPE, AddressType, Entry, Repository
from mirror.core.protection import check_staging_write
from mirror.core.validate import validate_path
from mirror.errors import InvalidValueError

if TYPE_CHECKING:
    from mirror.block.s3_multipart import S3Multipart

__all__ = [
    "AbortPresignMultipartUpload",
    "CompletePresignMultipartUpload",
    "CopyPartSource",
    "PresignMultipartUpload",
    "UploadPart",
    "UploadPartCopyFrom",
    "UploadPartFrom",
    "UploadTo",
    "router",
]

router = APIRouter(route_class=LakeFSRoute, tags=["experimental"])

_PMPU = "/repositories/{repository}/branches/{branch}/staging/pmpu"
UNSUPPORTED = "presign multipart upload API is not supported"
MAX_PARTS = 10_000
"""The most parts one upload may have (lakeFS's ``manager.MaxUploadParts``, S3's limit)."""
PathQuery = Annotated[str, Query(description="relative to the branch")]


class PmpuRequestError(LakeFSText, InvalidValueError):
    """A request lakeFS refuses with a text of its own (400); the text is the detail."""


class PartsNotSupportedError(LakeFSText, InvalidValueError):
    """The repository's store cannot take parts of a presigned upload (lakeFS's 400)."""

    lakefs_text = "operation not supported"


class _Request(BaseModel):
    model_config = ConfigDict(extra="ignore")


class PresignMultipartUpload(BaseModel):
    """A started upload: its ID, the signed address, and one URL per part asked for."""

    upload_id: str
    physical_address: str
    presigned_urls: list[str] | None = None


class UploadPartFrom(_Request):
    """``PUT …/parts/{n}`` body: the upload's signed address."""

    physical_address: str = ""


class UploadTo(BaseModel):
    """Where to PUT one part's bytes."""

    presigned_url: str


class CopyPartSource(_Request):
    """The lakeFS object (and optional ``bytes=first-last`` range) a part is copied from."""

    repository: str
    ref: str
    path: str
    range: str | None = None


class UploadPartCopyFrom(_Request):
    """``PUT …/parts/{n}/copy`` body: the upload's signed address and the part's source."""

    physical_address: str = ""
    copy_source: CopyPartSource | None = None


class UploadPart(_Request):
    """One uploaded part: its number and the ETag S3 answered for it."""

    part_number: int
    etag: str


class CompletePresignMultipartUpload(_Request):
    """``PUT …/pmpu/{uploadId}`` body: the address, the parts in order, and the object's details."""

    physical_address: str = ""
    parts: list[UploadPart] = []
    user_metadata: dict[str, str] | None = None
    content_type: str | None = None


class AbortPresignMultipartUpload(_Request):
    """``DELETE …/pmpu/{uploadId}`` body: the upload's signed address."""

    physical_address: str = ""


def _write_object(caller: CallerDep, repository: str, path: str) -> None:
    caller.require(Permission(Action.WRITE_OBJECT, object_arn(repository, path)))


def _s3() -> ModuleType:
    """Return :mod:`mirror.block.s3_multipart`, imported only where ``s3://`` is served.

    It needs the ``s3`` extra (botocore), which a server of local namespaces may not have;
    no repository of a server that serves no ``s3://`` namespace gets an uploader, so every
    handler answers before this there.
    """
    from mirror.block import s3_multipart

    return s3_multipart


def _uploader(state: StateDep, repo: Repository) -> S3Multipart | None:
    """Return the multipart uploader of the repository's store; ``None`` if it cannot presign."""
    if "s3" not in state.namespace_schemes:
        return None
    uploader: S3Multipart | None = _s3().multipart_for(state.catalog.block_store(repo))
    return uploader


def _open_upload(state: StateDep, repository: str) -> tuple[Repository, S3Multipart]:
    """Return the writable repository and its multipart uploader.

    The repository is looked up first (404, or 403 for a mirror), as lakeFS reads the storage
    configuration of the repository's store before it answers 501.

    Raises:
        HTTPException: 501, lakeFS's text: the repository's store cannot presign.
    """
    repo = _writable(state, repository)
    uploader = _uploader(state, repo)
    if uploader is None:
        raise HTTPException(501, UNSUPPORTED)
    return repo, uploader


def _part_uploader(state: StateDep, repo: Repository) -> S3Multipart:
    """Return the repository's multipart uploader, asked for after every check of a part call.

    Raises:
        PartsNotSupportedError: the store cannot presign (lakeFS's local adapter's answer).
    """
    uploader = _uploader(state, repo)
    if uploader is None:
        raise PartsNotSupportedError(
            f"the storage namespace of repository {repo.id!r} cannot take presigned upload parts"
        )
    return uploader


def _staging_branch(state: StateDep, repo: Repository, branch: str) -> None:
    """Check that the branch exists and takes staged writes (not protected)."""
    state.catalog.get_branch(repo.id, branch)
    check_staging_write(state.catalog.kv, repo, branch)


def _writable(state: StateDep, repository: str) -> Repository:
    repo = state.catalog.get_repository(repository)
    if repo.read_only:
        raise RepositoryReadOnlyError(repo.id)
    return repo


def _require(value: str, name: str) -> None:
    if not value:
        raise PmpuRequestError(f"{name} is required")


def _key(request: Request, repo: Repository, branch: str, path: str, address: str) -> str:
    """Return the namespace key of a signed upload address handed out for this path."""
    _require(address, "physical_address")
    namespace = repo.storage_namespace.rstrip("/") + "/"
    key = address[len(namespace) :] if address.startswith(namespace) else ""
    if not key or key.startswith(METADATA_PREFIX) or ".." in key.split("/"):
        raise PmpuRequestError("physical address must be relative to the storage namespace")
    signer(request).verify(repo.id, branch, path, address)
    return key


def _part_key(
    request: Request, repo: Repository, branch: str, path: str, number: int, address: str
) -> str:
    """Return the namespace key of a part call's upload, checking the path and part number."""
    _require(path, "path")
    if not 1 <= number <= MAX_PARTS:
        raise PmpuRequestError(f"part number must be between 1 and {MAX_PARTS}")
    return _key(request, repo, branch, path, address)


@router.post(_PMPU, status_code=201, response_model=PresignMultipartUpload)
def create_presign_multipart_upload(
    repository: str,
    branch: str,
    request: Request,
    state: StateDep,
    caller: CallerDep,
    path: str = Query(""),
    parts: int | None = Query(None),
) -> PresignMultipartUpload:
    """Start a multipart upload at a fresh signed address; hand out ``parts`` part URLs."""
    _write_object(caller, repository, path)
    repo, uploader = _open_upload(state, repository)
    _staging_branch(state, repo, branch)
    _require(path, "path")
    validate_path(path)
    if parts is not None and not 0 <= parts <= MAX_PARTS:
        raise PmpuRequestError(f"parts can be between 0 and {MAX_PARTS}")
    address = f"{repo.storage_namespace.rstrip('/')}/{state.catalog.paths.new_path()}"
    signed = signer(request).sign(repository, branch, path, address)
    key = signed[len(repo.storage_namespace.rstrip("/")) + 1 :]
    upload_id = uploader.create(key)
    urls = [
        uploader.presign_part(key, upload_id, number, PRESIGN_EXPIRY)
        for number in range(1, (parts or 0) + 1)
    ]
    return PresignMultipartUpload(
        upload_id=upload_id, physical_address=signed, presigned_urls=urls or None
    )


@router.put(_PMPU + "/{uploadId}/parts/{partNumber}", response_model=UploadTo)
def upload_part(
    repository: str,
    branch: str,
    uploadId: str,
    partNumber: int,
    body: UploadPartFrom,
    request: Request,
    state: StateDep,
    caller: CallerDep,
    path: str = Query(""),
) -> UploadTo:
    """Hand out the presigned URL of part ``partNumber`` of the upload."""
    _write_object(caller, repository, path)
    repo = _writable(state, repository)
    key = _part_key(request, repo, branch, path, partNumber, body.physical_address)
    uploader = _part_uploader(state, repo)
    return UploadTo(presigned_url=uploader.presign_part(key, uploadId, partNumber, PRESIGN_EXPIRY))


@router.put(_PMPU + "/{uploadId}/parts/{partNumber}/copy", status_code=204, response_class=Response)
def upload_part_copy(
    repository: str,
    branch: str,
    uploadId: str,
    partNumber: int,
    body: UploadPartCopyFrom,
    request: Request,
    state: StateDep,
    caller: CallerDep,
    path: str = Query(""),
) -> Response:
    """Make part ``partNumber`` a copy of another object (or a range of it) inside S3.

    The order of lakeFS's handler: the repository, the source's repository, the signed address,
    the source object, then the store (a store that can copy reads the range first).
    """
    _write_object(caller, repository, path)
    source = body.copy_source
    if source is not None:
        caller.require(Permission(Action.READ_OBJECT, object_arn(source.repository, source.path)))
    catalog = state.catalog
    repo = _writable(state, repository)
    if source is None:
        raise PmpuRequestError("copy_source is required")
    source_repo = catalog.get_repository(source.repository)
    key = _part_key(request, repo, branch, path, partNumber, body.physical_address)
    stat = catalog.stat_object(source.repository, source.ref, source.path)
    uploader = _part_uploader(state, repo)
    byte_range = _s3().parse_copy_range(source.range)
    store, source_key = catalog.open_entry(source_repo, stat.entry)
    located = _s3().source_of(store, source_key, byte_range)
    if located is None:
        raise InvalidValueError(
            f"copy source {source.repository}/{source.ref}/{source.path} is not stored on S3"
        )
    etag = uploader.copy_part(key, uploadId, partNumber, located)
    return Response(status_code=204, headers={"ETag": f'"{etag}"'})


@router.put(_PMPU + "/{uploadId}", response_model=ObjectStats)
def complete_presign_multipart_upload(
    repository: str,
    branch: str,
    uploadId: str,
    body: CompletePresignMultipartUpload,
    request: Request,
    state: StateDep,
    caller: CallerDep,
    path: str = Query(""),
) -> ObjectStats:
    """Complete the upload and stage the object at ``path`` (checksum: S3's ETag)."""
    _write_object(caller, repository, path)
    repo, uploader = _open_upload(state, repository)
    _require(path, "path")
    _require(body.physical_address, "physical_address")
    if not body.parts:
        raise PmpuRequestError("parts are required")
    validate_path(path)
    _staging_branch(state, repo, branch)
    key = _key(request, repo, branch, path, body.physical_address)
    written = uploader.complete(key, uploadId, [(p.part_number, p.etag) for p in body.parts])
    entry = Entry(
        address=key,
        size=written.size,
        checksum=written.etag,
        mtime=int(time.time()),
        content_type=body.content_type or DEFAULT_CONTENT_TYPE,
        metadata=dict(body.user_metadata or {}),
        address_type=AddressType.RELATIVE,
    )
    return object_model(state.catalog.stage_object(repository, branch, path, entry))


@router.delete(_PMPU + "/{uploadId}", status_code=204, response_class=Response)
def abort_presign_multipart_upload(
    repository: str,
    branch: str,
    uploadId: str,
    body: AbortPresignMultipartUpload,
    request: Request,
    state: StateDep,
    caller: CallerDep,
    path: str = Query(""),
) -> Response:
    """Abort the upload; S3 drops its parts."""
    _write_object(caller, repository, path)
    repo, uploader = _open_upload(state, repository)
    _require(path, "path")
    key = _key(request, repo, branch, path, body.physical_address)
    uploader.abort(key, uploadId)
    return Response(status_code=204)
