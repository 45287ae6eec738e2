"""lakeFS's internal operations that its clients still call: preflight, symlinks, raw records.

- ``GET …/objects/stage_allowed``: may the caller write ``path`` on the branch (204), or why not.
- ``POST /setup_comm_prefs``: the setup wizard's communication preferences; validated and
  answered, kept nowhere (there is no usage service to send them to). Like lakeFS's setup
  calls it takes no credentials.
- ``POST …/refs/{branch}/symlink``: Hive symlink manifests. For each directory under
  ``location`` one object ``symlinks/<repository>/<branch>/<directory>/symlink.txt`` in the
  namespace lists the full addresses of the directory's objects, one a line; the answer is
  ``<namespace>/symlinks``. (lakeFS names each file after the next directory by mistake; here
  each file lists its own directory. Objects at the root go to ``…/<branch>/symlink.txt``.)
- ``POST /repositories/{r}/commits``: store a commit record as given (restore tooling). Its ID
  must be its content hash, as every commit ID here is; an existing ID is 409.
- ``PUT …/branches/{b}/objects``: the deprecated link of an already-written object. An address
  inside the namespace is stored relative to it, any other (same scheme) in full.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Iterator

from fastapi import APIRouter, Query, Response
from pydantic import BaseModel, ConfigDict, Field

from mirror.api.convert import object_model
from mirror.api.deps import CallerDep, StateDep
from mirror.api.models import ObjectStats
from mirror.api.routers.metadata import StorageURI
from mirror.api.routing import LakeFSRoute
from mirror.auth.permissions import Action, Permission, object_arn, repository_arn
from mirror.block.resolver import split_namespace
from mirror.core.committed import METADATA_PREFIX
from mirror.core.errors import LakeFSText, RepositoryReadOnlyError
from mirror.core.ids import CommitID, MetaRangeID
from mirror.core.model import DEFAULT_CONTENT_TYPE, AddressType, Commit, Entry, ObjectStat
from mirror.core.protection import check_staging_write
from mirror.core.validate import validate_path
from mirror.errors import AlreadyExistsError, InvalidValueError

__all__ = [
    "SYMLINKS_PREFIX",
    "CommPrefsInput",
    "CommitRecordCreation",
    "ObjectStageCreation",
    "router",
]

router = APIRouter(route_class=LakeFSRoute, tags=["internal"])

SYMLINKS_PREFIX = "symlinks"
"""Where symlink manifests go in a namespace (lakeFS's ``lakeFSPrefix``)."""

_REPO = "/repositories/{repository}"
_PAGE = 1000


class CommitExistsError(LakeFSText, AlreadyExistsError):
    """A commit record of that ID exists already."""

    lakefs_text = "commit already exists: not unique"


class CommPrefsInput(BaseModel):
    """The setup wizard's communication preferences."""

    model_config = ConfigDict(populate_by_name=True)

    first_name: str | None = Field(None, alias="firstName")
    last_name: str | None = Field(None, alias="lastName")
    email: str | None = None
    company_name: str | None = Field(None, alias="companyName")
    country: str | None = None
    feature_updates: bool = Field(alias="featureUpdates")
    security_updates: bool = Field(alias="securityUpdates")


_INT64_MIN = -(2**63)
_INT64_MAX = 2**63 - 1
"""Commit IDs hash dates and generations as signed 64-bit integers."""


class CommitRecordCreation(BaseModel):
    """A commit record, field for field."""

    commit_id: str
    version: int = Field(ge=0, le=1)
    committer: str
    message: str
    metarange_id: str
    creation_date: int = Field(ge=_INT64_MIN, le=_INT64_MAX)
    parents: list[str]
    metadata: dict[str, str] | None = None
    generation: int = Field(ge=0, le=_INT64_MAX)
    force: bool = False


class ObjectStageCreation(BaseModel):
    """An object already written to the store, to link at a path."""

    physical_address: str
    checksum: str
    size_bytes: int
    mtime: int | None = None
    metadata: dict[str, str] | None = None
    content_type: str | None = None
    force: bool = False


@router.get(
    _REPO + "/branches/{branch}/objects/stage_allowed", status_code=204, response_class=Response
)
def upload_object_preflight(
    repository: str,
    branch: str,
    state: StateDep,
    caller: CallerDep,
    path: str = Query(),
) -> Response:
    """Answer 204 when the caller may write ``path`` on the branch (403/404 when not)."""
    caller.require(Permission(Action.WRITE_OBJECT, object_arn(repository, path)))
    catalog = state.catalog
    repo = catalog.get_repository(repository)
    if repo.read_only:
        raise RepositoryReadOnlyError(repo.id)
    catalog.get_branch(repository, branch)
    check_staging_write(catalog.kv, repo, branch)
    return Response(status_code=204)


@router.post("/setup_comm_prefs", response_class=Response)
def setup_comm_prefs(body: CommPrefsInput) -> Response:
    """Accept the setup wizard's communication preferences (200, nothing kept).

    Like lakeFS's, this part of the setup takes no credentials (the SDK sends none).
    """
    return Response(status_code=200)


def _directory(path: str) -> str:
    return path.rpartition("/")[0]


@router.post(_REPO + "/refs/{branch}/symlink", status_code=201, response_model=StorageURI)
def create_symlink_file(
    repository: str,
    branch: str,
    state: StateDep,
    caller: CallerDep,
    location: str = "",
) -> StorageURI:
    """Write one Hive symlink manifest per directory under ``location`` of the branch."""
    caller.require(Permission(Action.WRITE_OBJECT, object_arn(repository, branch)))
    catalog = state.catalog
    repo = catalog.get_repository(repository)
    if repo.read_only:
        raise RepositoryReadOnlyError(repo.id)
    catalog.get_branch(repository, branch)
    store = catalog.block_store(repo)
    objects: Iterator[ObjectStat] = catalog.iter_objects(repository, branch, location)
    for directory, group in itertools.groupby(objects, key=lambda o: _directory(o.path)):
        key = "/".join(p for p in (SYMLINKS_PREFIX, repo.id, branch, directory) if p)
        addresses = "\n".join(o.physical_address for o in group)
        store.put(f"{key}/symlink.txt", addresses.encode())
    return StorageURI(location=f"{repo.storage_namespace.rstrip('/')}/{SYMLINKS_PREFIX}")


@router.post(_REPO + "/commits", status_code=204, response_class=Response)
def create_commit_record(
    repository: str, body: CommitRecordCreation, state: StateDep, caller: CallerDep
) -> Response:
    """Store a commit record as given; 409 if a commit of that ID exists."""
    caller.require(Permission(Action.CREATE_COMMIT, repository_arn(repository)))
    catalog = state.catalog
    repo = catalog.get_repository(repository)
    if repo.read_only:
        raise RepositoryReadOnlyError(repo.id)
    if catalog.refs.has_commit(repo, body.commit_id):
        raise CommitExistsError(f"commit {body.commit_id} in repository {repository!r}")
    commit = Commit(
        id=CommitID(body.commit_id),
        committer=body.committer,
        message=body.message,
        metarange_id=MetaRangeID(body.metarange_id),
        creation_date=body.creation_date,
        parents=tuple(CommitID(p) for p in body.parents),
        metadata=dict(body.metadata or {}),
        generation=body.generation,
        version=body.version,
    )
    catalog.import_commit(repository, commit)
    return Response(status_code=204)


def _address(namespace: str, address: str) -> tuple[str, AddressType]:
    """Return how to store ``address``: relative to ``namespace`` when inside it, else in full."""
    inside = namespace.rstrip("/") + "/"
    if address.startswith(inside):
        key = address[len(inside) :]
        if key and not key.startswith(METADATA_PREFIX) and ".." not in key.split("/"):
            return key, AddressType.RELATIVE
    try:
        scheme, _ = split_namespace(address)
        wanted, _ = split_namespace(namespace)
    except InvalidValueError as exc:
        raise InvalidValueError(f"physical address {address!r}: not a URI") from exc
    if scheme != wanted or address.startswith(inside + METADATA_PREFIX):
        raise InvalidValueError(
            f"physical address {address!r} is not valid for block adapter ({wanted}://)"
        )
    return address, AddressType.FULL


@router.put(_REPO + "/branches/{branch}/objects", status_code=201, response_model=ObjectStats)
def stage_object(
    repository: str,
    branch: str,
    body: ObjectStageCreation,
    state: StateDep,
    caller: CallerDep,
    path: str = Query(),
) -> ObjectStats:
    """Link an already-written object at ``path`` of the branch (deprecated in lakeFS)."""
    caller.require(Permission(Action.WRITE_OBJECT, object_arn(repository, path)))
    catalog = state.catalog
    repo = catalog.get_repository(repository)
    if repo.read_only:
        raise RepositoryReadOnlyError(repo.id)
    validate_path(path)
    address, address_type = _address(repo.storage_namespace, body.physical_address)
    entry = Entry(
        address=address,
        size=body.size_bytes,
        checksum=body.checksum.strip('"'),
        mtime=body.mtime if body.mtime is not None else int(time.time()),
        content_type=body.content_type or DEFAULT_CONTENT_TYPE,
        metadata=dict(body.metadata or {}),
        address_type=address_type,
    )
    return object_model(catalog.stage_object(repository, branch, path, entry))
