"""Conversions from the core's records to the wire models."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import orjson
import pydantic_core
from fastapi import Response
from pydantic import BaseModel

from mirror.api.models import (
    Commit,
    Diff,
    GroupModel,
    ObjectStats,
    PolicyModel,
    Repository,
    StatementModel,
    UserModel,
)
from mirror.auth.model import Group, Policy, User
from mirror.core.listing import ListedObject
from mirror.core.model import Commit as CoreCommit
from mirror.core.model import DiffEntry, DiffType, ObjectStat
from mirror.core.model import Repository as CoreRepository

__all__ = [
    "commit_model",
    "common_prefix_model",
    "common_prefix_row",
    "diff_model",
    "encode_rows",
    "group_model",
    "json_response",
    "model_response",
    "object_model",
    "object_row",
    "object_rows",
    "policy_model",
    "repository_model",
    "user_model",
]


def repository_model(repo: CoreRepository) -> Repository:
    """Return the wire form of a repository."""
    return Repository(
        id=repo.id,
        creation_date=repo.creation_date,
        default_branch=repo.default_branch,
        storage_id="",
        storage_namespace=repo.storage_namespace,
        read_only=repo.read_only,
        mirror_of=repo.mirror_of,
    )


def commit_model(commit: CoreCommit) -> Commit:
    """Return the wire form of a commit."""
    return Commit(
        id=commit.id,
        parents=list(commit.parents),
        committer=commit.committer,
        message=commit.message,
        creation_date=commit.creation_date,
        meta_range_id=commit.metarange_id,
        metadata=dict(commit.metadata),
        generation=commit.generation,
        version=commit.version,
    )


def object_model(stat: ObjectStat, *, user_metadata: bool = True) -> ObjectStats:
    """Return the wire form of an object."""
    entry = stat.entry
    return ObjectStats(
        path=stat.path,
        path_type="object",
        physical_address=stat.physical_address,
        checksum=entry.checksum,
        size_bytes=entry.size,
        mtime=entry.mtime,
        metadata=dict(entry.metadata) if user_metadata else {},
        content_type=entry.content_type,
    )


def common_prefix_model(path: str) -> ObjectStats:
    """Return a ``common_prefix`` row of a listing (with the fields clients require)."""
    return ObjectStats(
        path=path, path_type="common_prefix", physical_address="", checksum="", mtime=0
    )


def object_row(stat: ObjectStat, *, user_metadata: bool = True) -> dict[str, Any]:
    """Return the JSON fields of :func:`object_model`, in the model's order, nulls left out.

    The hot paths (stat, upload, listing) answer these rows through :func:`json_response`
    instead of building and re-validating one model per object; the rows serialise to the
    same bytes as the model does with ``exclude_none``.
    """
    return object_rows([(stat.path, stat.entry, stat.physical_address)], user_metadata)[0]


def object_rows(
    objects: Iterable[ListedObject], user_metadata: bool = True
) -> list[dict[str, Any]]:
    """Return :func:`object_row` of each ``(path, entry, physical address)`` of a listing."""
    return [
        {
            "path": path,
            "path_type": "object",
            "physical_address": address,
            "checksum": entry.checksum,
            "size_bytes": entry.size,
            "mtime": entry.mtime,
            "metadata": entry.metadata if user_metadata else {},
            "content_type": entry.content_type,
        }
        for path, entry, address in objects
    ]


def common_prefix_row(path: str) -> dict[str, Any]:
    """Return the JSON fields of :func:`common_prefix_model`, in the model's order."""
    return {
        "path": path,
        "path_type": "common_prefix",
        "physical_address": "",
        "checksum": "",
        "mtime": 0,
    }


def encode_rows(content: Any) -> bytes:
    """Return plain rows (strings, whole numbers, booleans, lists, string-keyed maps) as JSON.

    The bytes are pydantic's (FastAPI's encoding of a response model): orjson writes the same
    JSON for such rows in about a third of the time, and anything it does not encode (a string
    with a lone surrogate, a number past 64 bits) is left to pydantic's serializer.
    """
    try:
        return orjson.dumps(content)
    except orjson.JSONEncodeError:
        return pydantic_core.to_json(content)


def json_response(content: Any, status_code: int = 200) -> Response:
    """Return a JSON response of plain rows, encoded as FastAPI encodes a response model."""
    return Response(encode_rows(content), status_code=status_code, media_type="application/json")


def model_response(model: BaseModel, status_code: int = 200) -> Response:
    """Return a JSON response of a wire model, in the bytes FastAPI sends for a response model.

    A route that returns the model instead has FastAPI validate it again as its
    ``response_model``, on a worker thread when the route is not a coroutine (one more hop).
    """
    return Response(
        model.model_dump_json(exclude_none=True),
        status_code=status_code,
        media_type="application/json",
    )


def diff_model(entry: DiffEntry) -> Diff:
    """Return the wire form of one difference (a removed path has size 0, as in lakeFS)."""
    if entry.type is DiffType.REMOVED:
        size: int | None = 0
    else:
        side = entry.right if entry.right is not None else entry.left
        size = side.size if side is not None else None
    return Diff(type=entry.type.value, path=entry.path, path_type="object", size_bytes=size)


def user_model(user: User) -> UserModel:
    """Return the wire form of a user."""
    return UserModel(
        id=user.id,
        creation_date=user.creation_date,
        friendly_name=user.friendly_name,
        email=user.email,
    )


def group_model(group: Group) -> GroupModel:
    """Return the wire form of a group."""
    return GroupModel(
        id=group.id, name=group.id, description=group.description, creation_date=group.creation_date
    )


def policy_model(policy: Policy) -> PolicyModel:
    """Return the wire form of a policy."""
    return PolicyModel(
        id=policy.id,
        creation_date=policy.creation_date,
        statement=[
            StatementModel(effect=s.effect.value, resource=s.resource, action=list(s.actions))
            for s in policy.statements
        ],
    )
