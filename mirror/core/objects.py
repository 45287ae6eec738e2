"""Objects on a ref: where their bytes live, uploads, staged links and deletions, reads."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping
from typing import BinaryIO

from mirror.block.protocol import BlockStore
from mirror.block.resolver import split_namespace
from mirror.core.context import CatalogContext
from mirror.core.errors import ObjectNotFoundError
from mirror.core.model import DEFAULT_CONTENT_TYPE, AddressType, Entry, ObjectStat, Repository
from mirror.core.protection import check_staging_write
from mirror.core.resolve import resolve_ref
from mirror.core.staging import TOMBSTONE, Tombstone
from mirror.core.validate import validate_branch_id, validate_metadata, validate_path
from mirror.core.views import read_at, read_on_branch, value_at, write_staged

__all__ = [
    "delete_objects",
    "open_entry",
    "physical_address",
    "read_object",
    "stage_objects",
    "stat_object",
    "update_user_metadata",
    "upload_object",
]


def physical_address(repo: Repository, entry: Entry) -> str:
    """Return the absolute URI of an entry's bytes."""
    if entry.address_type is AddressType.FULL:
        return entry.address
    return f"{repo.storage_namespace}/{entry.address}"


def open_entry(ctx: CatalogContext, repo: Repository, entry: Entry) -> tuple[BlockStore, str]:
    """Return the store holding an entry's bytes and the key inside it."""
    if entry.address_type is AddressType.RELATIVE:
        return ctx.block_store(repo), entry.address
    scheme, rest = split_namespace(entry.address)
    lead = "/" if rest.startswith("/") else ""
    root, _, key = rest.lstrip("/").partition("/")
    return ctx.blocks.open(f"{scheme}://{lead}{root}"), key


def upload_object(
    ctx: CatalogContext,
    repository: str,
    branch: str,
    path: str,
    data: bytes | BinaryIO,
    *,
    content_type: str | None,
    metadata: Mapping[str, str] | None,
) -> ObjectStat:
    """Store ``data`` at a fresh address and stage it at ``path`` on ``branch``."""
    repo = ctx.writable(repository)
    branch_id = validate_branch_id(branch)
    validate_path(path)
    meta = validate_metadata(metadata)
    ctx.refs.get_branch(repo, branch_id)
    check_staging_write(ctx.kv, repo, branch_id)
    address = ctx.paths.new_path()
    info = ctx.block_store(repo).put(address, data)
    entry = Entry(
        address=address,
        size=info.size,
        checksum=info.etag,
        mtime=ctx.now(),
        content_type=content_type or DEFAULT_CONTENT_TYPE,
        metadata=meta,
    )
    write_staged(ctx, repo, branch_id, lambda t: ctx.staging.set(t, path, entry))
    return ObjectStat(path, entry, physical_address(repo, entry))


def stage_objects(
    ctx: CatalogContext,
    repository: str,
    branch: str,
    items: Iterable[tuple[str, Entry]],
    *,
    force: bool,
) -> list[ObjectStat]:
    """Stage many already-written entries in one KV batch."""
    repo = ctx.writable(repository, force)
    branch_id = validate_branch_id(branch)
    staged = [(validate_path(p), e) for p, e in items]
    ctx.refs.get_branch(repo, branch_id)
    check_staging_write(ctx.kv, repo, branch_id)
    write_staged(
        ctx,
        repo,
        branch_id,
        lambda t: ctx.staging.set_many(t, staged),
        require_writable=not force,
    )
    return [ObjectStat(p, e, physical_address(repo, e)) for p, e in staged]


def stat_object(
    ctx: CatalogContext, repository: str | Repository, ref: str, path: str
) -> ObjectStat:
    """Return an object's entry at ``ref`` (``repository``: a name, or a record just read).

    Raises:
        ObjectNotFoundError: nothing at ``path``.
    """
    repo = ctx.record(repository)
    validate_path(path)
    resolved = resolve_ref(ctx, repo, ref)
    entry = read_at(ctx, repo, resolved, lambda view: value_at(ctx, repo, view, path))
    if entry is None:
        raise ObjectNotFoundError(f"object {path!r} at {repo.id}/{ref}")
    return ObjectStat(path, entry, physical_address(repo, entry))


def read_object(
    ctx: CatalogContext, repository: str, ref: str, path: str, start: int, end: int | None
) -> bytes:
    """Return bytes ``[start, end)`` of the object at ``path`` of ``ref``."""
    repo = ctx.repository(repository)
    stat = stat_object(ctx, repo, ref, path)
    store, key = open_entry(ctx, repo, stat.entry)
    return store.get(key, start, end)


def delete_objects(
    ctx: CatalogContext, repository: str, branch: str, paths: Iterable[str]
) -> list[str]:
    """Stage deletions of every existing path in ``paths``; return the missing ones.

    Raises:
        ObjectNotFoundError: a single path was given and it does not exist.
    """
    repo = ctx.writable(repository)
    branch_id = validate_branch_id(branch)
    wanted = [validate_path(p) for p in paths]
    check_staging_write(ctx.kv, repo, branch_id)
    present = read_on_branch(
        ctx,
        repo,
        branch_id,
        lambda view: [p for p in wanted if value_at(ctx, repo, view, p) is not None],
    )
    found = set(present)
    missing = [p for p in wanted if p not in found]
    if len(wanted) == 1 and missing:
        raise ObjectNotFoundError(f"object {wanted[0]!r} on branch {branch!r}")
    tombs: list[tuple[str, Entry | Tombstone]] = [(p, TOMBSTONE) for p in present]
    write_staged(ctx, repo, branch_id, lambda t: ctx.staging.set_many(t, tombs))
    return missing


def update_user_metadata(
    ctx: CatalogContext, repository: str, branch: str, path: str, metadata: Mapping[str, str]
) -> ObjectStat:
    """Replace the user metadata of the object at ``path`` on ``branch``, as a staged change.

    Raises:
        ObjectNotFoundError: nothing at ``path`` on the branch.
        ProtectedBranchWriteError: a protection rule covers the branch.
    """
    repo = ctx.writable(repository)
    branch_id = validate_branch_id(branch)
    validate_path(path)
    meta = validate_metadata(metadata)
    check_staging_write(ctx.kv, repo, branch_id)
    entry = read_on_branch(ctx, repo, branch_id, lambda view: value_at(ctx, repo, view, path))
    if entry is None:
        raise ObjectNotFoundError(f"object {path!r} on branch {branch!r}")
    updated = dataclasses.replace(entry, metadata=meta)
    write_staged(ctx, repo, branch_id, lambda t: ctx.staging.set(t, path, updated))
    return ObjectStat(path, updated, physical_address(repo, updated))
