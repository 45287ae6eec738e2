"""Committed metadata and merge bases: where a metarange or range lives, its bytes, a merge base.

A repository's committed trees are immutable files ``_lakefs/<id>`` of its storage namespace
(:mod:`mirror.core.committed`), the same layout as lakeFS's, so the locations answered here are
lakeFS's: relative to the namespace, readable by prefixing it. They are Parquet files here,
not lakeFS's SSTables; ``/metadata/object`` serves their bytes.
"""

from __future__ import annotations

from typing import Literal

from fastapi import APIRouter, Response
from pydantic import BaseModel

from mirror.api.deps import CallerDep, StateDep
from mirror.api.routing import LakeFSRoute
from mirror.auth.permissions import Action, Permission, repository_arn
from mirror.core.committed import METADATA_PREFIX
from mirror.core.errors import INVALID_VALUE, LakeFSText
from mirror.errors import InvalidValueError

__all__ = ["FindMergeBaseResult", "StorageURI", "router"]

router = APIRouter(route_class=LakeFSRoute, tags=["metadata", "refs"])

_REPO = "/repositories/{repository}"


class FindMergeBaseResult(BaseModel):
    """The commits a merge of source into destination would start from."""

    source_commit_id: str
    destination_commit_id: str
    base_commit_id: str


class StorageURI(BaseModel):
    """A location in the object store."""

    location: str


class InvalidMetadataIDError(LakeFSText, InvalidValueError):
    """A metarange or range ID that cannot name a metadata file."""

    lakefs_text = INVALID_VALUE


def _metadata_key(object_id: str) -> str:
    if not object_id or not all(c.isalnum() or c in "-_" for c in object_id):
        raise InvalidMetadataIDError(f"metadata id {object_id!r}")
    return METADATA_PREFIX + object_id


@router.get(
    _REPO + "/refs/{sourceRef}/merge/{destinationBranch}", response_model=FindMergeBaseResult
)
def find_merge_base(
    repository: str, sourceRef: str, destinationBranch: str, state: StateDep, caller: CallerDep
) -> FindMergeBaseResult:
    """Return the merge base of a ref and a branch (source and destination as named)."""
    caller.require(Permission(Action.LIST_COMMITS, repository_arn(repository)))
    catalog = state.catalog
    source = catalog.resolve_ref(repository, sourceRef).commit_id
    destination = catalog.resolve_ref(repository, destinationBranch).commit_id
    base = catalog.merge_base(repository, source, destination)
    return FindMergeBaseResult(
        source_commit_id=source, destination_commit_id=destination, base_commit_id=base.id
    )


def _location(repository: str, object_id: str, state: StateDep, caller: CallerDep) -> Response:
    caller.require(Permission(Action.LIST_OBJECTS, repository_arn(repository)))
    state.catalog.get_repository(repository)
    location = _metadata_key(object_id)
    body = StorageURI(location=location).model_dump_json()
    return Response(body, media_type="application/json", headers={"Location": location})


@router.get(_REPO + "/metadata/meta_range/{meta_range}", response_model=StorageURI)
def get_meta_range(
    repository: str, meta_range: str, state: StateDep, caller: CallerDep
) -> Response:
    """Return where a metarange lives, relative to the namespace (also in ``Location``)."""
    return _location(repository, meta_range, state, caller)


@router.get(_REPO + "/metadata/range/{range}", response_model=StorageURI)
def get_range(repository: str, range: str, state: StateDep, caller: CallerDep) -> Response:
    """Return where a range lives, relative to the namespace (also in ``Location``)."""
    return _location(repository, range, state, caller)


@router.get(_REPO + "/metadata/object/{type}/{object_id}", response_class=Response)
def get_metadata_object(
    repository: str,
    type: Literal["range", "meta_range"],
    object_id: str,
    state: StateDep,
    caller: CallerDep,
    presign: bool = False,
) -> Response:
    """Return the bytes of a metarange or range file (404 when it is missing).

    The stores here cannot presign, so ``presign`` streams the bytes as well.
    """
    caller.require(Permission(Action.LIST_OBJECTS, repository_arn(repository)))
    catalog = state.catalog
    repo = catalog.get_repository(repository)
    data = catalog.block_store(repo).get(_metadata_key(object_id))
    return Response(data, media_type="application/octet-stream")
