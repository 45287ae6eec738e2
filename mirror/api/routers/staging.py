"""Bulk staging: link many already-written objects into a branch by physical address, at once.

Spark writers (``mirror.spark``) put their files under a fresh ``data/`` prefix of the
repository's storage namespace and stage them all with one call. Objects must lie inside the
namespace: only the namespace is replicated to mirrors, and only namespace objects are
garbage-collectable.
"""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor

from fastapi import APIRouter

from mirror.api.convert import object_model
from mirror.api.deps import CallerDep, StateDep
from mirror.api.models import StagingBulkCreation, StagingBulkObject, StagingBulkResult
from mirror.api.routing import LakeFSRoute
from mirror.auth.permissions import Action, Permission, object_arn
from mirror.block.errors import BlockNotFoundError
from mirror.block.protocol import BlockStore
from mirror.core.catalog import Catalog
from mirror.core.committed import METADATA_PREFIX
from mirror.core.errors import RepositoryReadOnlyError
from mirror.core.model import DEFAULT_CONTENT_TYPE, Entry, Repository
from mirror.core.protection import check_staging_write
from mirror.core.validate import validate_path
from mirror.errors import InvalidValueError

__all__ = ["MAX_BULK_STAGE", "router"]

router = APIRouter(route_class=LakeFSRoute, tags=["staging"])

MAX_BULK_STAGE = 10_000
"""The most objects one bulk staging call accepts."""

_HEAD_WORKERS = 16


def _key_in_namespace(repo: Repository, address: str) -> str:
    """Return the namespace-relative key of ``address``, refusing addresses outside it."""
    namespace = repo.storage_namespace.rstrip("/") + "/"
    if not address.startswith(namespace):
        raise InvalidValueError(
            f"physical address {address!r} lies outside the storage namespace "
            f"{repo.storage_namespace!r} of repository {repo.id!r}"
        )
    key = address[len(namespace) :]
    parts = key.split("/")
    if not key or "\x00" in key or any(p in ("", ".", "..") for p in parts):
        raise InvalidValueError(f"physical address {address!r}: invalid object key {key!r}")
    if key.startswith(METADATA_PREFIX):
        raise InvalidValueError(
            f"physical address {address!r} lies under {METADATA_PREFIX!r}, which holds "
            "committed metadata, not objects"
        )
    return key


def _entry(store: BlockStore, key: str, item: StagingBulkObject, mtime: int) -> Entry:
    """Build the entry of ``item``, reading size and checksum from the store when omitted."""
    size, checksum = item.size_bytes, item.checksum
    if size is None or not checksum:
        try:
            info = store.head(key)
        except BlockNotFoundError as exc:
            raise InvalidValueError(
                f"physical address {item.physical_address!r} of {item.path!r} does not exist"
            ) from exc
        if size is not None and size != info.size:
            raise InvalidValueError(
                f"physical address {item.physical_address!r}: size_bytes {size} differs from "
                f"the stored object's {info.size}"
            )
        size, checksum = info.size, checksum or info.etag
    return Entry(
        address=key,
        size=size,
        checksum=checksum,
        mtime=mtime,
        content_type=item.content_type or DEFAULT_CONTENT_TYPE,
        metadata=dict(item.user_metadata or {}),
    )


def _entries(
    catalog: Catalog, repository: str, branch: str, objects: list[StagingBulkObject]
) -> list[tuple[str, Entry]]:
    repo = catalog.get_repository(repository)
    if repo.read_only:
        raise RepositoryReadOnlyError(repo.id)
    catalog.get_branch(repository, branch)
    # refuse before any object is looked up in the store
    check_staging_write(catalog.kv, repo, branch)
    seen: set[str] = set()
    keys: list[str] = []
    for item in objects:
        validate_path(item.path)
        if item.path in seen:
            raise InvalidValueError(f"path {item.path!r} appears more than once")
        seen.add(item.path)
        keys.append(_key_in_namespace(repo, item.physical_address))
    store = catalog.block_store(repo)
    mtime = int(time.time())
    with ThreadPoolExecutor(max_workers=_HEAD_WORKERS) as pool:
        built = list(pool.map(lambda key, item: _entry(store, key, item, mtime), keys, objects))
    return [(item.path, entry) for item, entry in zip(objects, built, strict=True)]


@router.post(
    "/repositories/{repository}/branches/{branch}/staging/bulk",
    status_code=201,
    response_model=StagingBulkResult,
)
def stage_objects(
    repository: str,
    branch: str,
    body: StagingBulkCreation,
    state: StateDep,
    caller: CallerDep,
) -> StagingBulkResult:
    """Stage up to 10,000 objects already written inside the namespace, in one batch.

    Each object names its path on the branch and its physical address, which must lie inside
    the repository's storage namespace (outside ``_lakefs/``). ``size_bytes`` and ``checksum``,
    when omitted, are read from the object store (an MD5 etag); the object must then exist.
    Either every object is staged or none is. Mirrors (read-only repositories) answer 403.
    """
    count = len(body.objects)
    if not 0 < count <= MAX_BULK_STAGE:
        raise InvalidValueError(
            f"bulk staging: {count} objects; send between 1 and {MAX_BULK_STAGE}"
        )
    caller.require(
        *(Permission(Action.WRITE_OBJECT, object_arn(repository, o.path)) for o in body.objects)
    )
    catalog = state.catalog
    items = _entries(catalog, repository, branch, body.objects)
    staged = catalog.stage_objects(repository, branch, items)
    return StagingBulkResult(results=[object_model(s) for s in staged])
