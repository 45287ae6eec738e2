"""The records of the versioning core and their versioned KV encoding."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from mirror.core.ids import (
    BranchID,
    CommitID,
    Identity,
    MetaRangeID,
    RepositoryID,
    StagingToken,
    commit_id,
    entry_identity,
)

__all__ = [
    "DEFAULT_CONTENT_TYPE",
    "AddressType",
    "Branch",
    "Commit",
    "DiffEntry",
    "DiffType",
    "Entry",
    "ObjectStat",
    "Repository",
    "decode_json",
    "encode_json",
]

DEFAULT_CONTENT_TYPE = "application/octet-stream"
_VERSION = 1


def encode_json(record: dict[str, Any]) -> bytes:
    """Return the deterministic JSON encoding of ``record`` with a format version."""
    return json.dumps({"v": _VERSION, **record}, sort_keys=True, separators=(",", ":")).encode()


def decode_json(data: bytes) -> dict[str, Any]:
    """Decode a record written by :func:`encode_json`."""
    record: dict[str, Any] = json.loads(data)
    version = record.pop("v", None)
    if version != _VERSION:
        raise ValueError(f"unsupported record version {version!r}")
    return record


class AddressType(StrEnum):
    """How an entry's address is resolved."""

    RELATIVE = "relative"
    """Relative to the repository's storage namespace."""
    FULL = "full"
    """An absolute URI (``s3://…``, ``local://…``) outside the namespace."""


@dataclass(frozen=True, slots=True)
class Repository:
    """A repository: a storage namespace, a default branch and the refs that live in it."""

    id: RepositoryID
    storage_namespace: str
    default_branch: BranchID
    creation_date: int
    instance_uid: str
    read_only: bool = False
    mirror_of: str | None = None

    def encode(self) -> bytes:
        """Return the KV encoding of this record."""
        return encode_json(
            {
                "id": self.id,
                "storage_namespace": self.storage_namespace,
                "default_branch": self.default_branch,
                "creation_date": self.creation_date,
                "instance_uid": self.instance_uid,
                "read_only": self.read_only,
                "mirror_of": self.mirror_of,
            }
        )

    @classmethod
    def decode(cls, data: bytes) -> Repository:
        """Decode a record written by :meth:`encode`."""
        r = decode_json(data)
        return cls(
            id=RepositoryID(r["id"]),
            storage_namespace=r["storage_namespace"],
            default_branch=BranchID(r["default_branch"]),
            creation_date=int(r["creation_date"]),
            instance_uid=r["instance_uid"],
            read_only=bool(r["read_only"]),
            mirror_of=r["mirror_of"],
        )


@dataclass(frozen=True, slots=True)
class Branch:
    """A branch: its head commit, its current staging token and the sealed ones (newest first).

    ``fence`` changes only when the repository is demoted to a mirror: rewriting it makes every
    compare-and-swap prepared against the branch as it was before fail (see
    :mod:`mirror.core.roles`). Other updates leave it empty.
    """

    id: BranchID
    commit_id: CommitID
    staging_token: StagingToken
    sealed_tokens: tuple[StagingToken, ...] = ()
    fence: str = ""

    def encode(self) -> bytes:
        """Return the KV encoding of this record (the branch name is the key)."""
        record: dict[str, Any] = {
            "commit_id": self.commit_id,
            "staging_token": self.staging_token,
            "sealed_tokens": list(self.sealed_tokens),
        }
        if self.fence:
            record["fence"] = self.fence
        return encode_json(record)

    @classmethod
    def decode(cls, branch_id: BranchID, data: bytes) -> Branch:
        """Decode a record written by :meth:`encode`."""
        r = decode_json(data)
        return cls(
            id=branch_id,
            commit_id=CommitID(r["commit_id"]),
            staging_token=StagingToken(r["staging_token"]),
            sealed_tokens=tuple(StagingToken(t) for t in r["sealed_tokens"]),
            fence=str(r.get("fence", "")),
        )

    @property
    def tokens(self) -> tuple[StagingToken, ...]:
        """Return every staging token, newest first: the one that wins a read."""
        return (self.staging_token, *self.sealed_tokens)


@dataclass(frozen=True, slots=True)
class Commit:
    """An immutable commit. ``generation`` and ``version`` are not part of the ID."""

    id: CommitID
    committer: str
    message: str
    metarange_id: MetaRangeID
    creation_date: int
    parents: tuple[CommitID, ...]
    metadata: dict[str, str] = field(default_factory=dict)
    generation: int = 1
    version: int = 1

    def compute_id(self) -> CommitID:
        """Recompute the content-derived ID from the record's fields."""
        return commit_id(
            committer=self.committer,
            message=self.message,
            metarange_id=self.metarange_id,
            creation_date=self.creation_date,
            metadata=self.metadata,
            parents=self.parents,
        )

    def encode(self) -> bytes:
        """Return the KV encoding of this record."""
        return encode_json(
            {
                "id": self.id,
                "committer": self.committer,
                "message": self.message,
                "metarange_id": self.metarange_id,
                "creation_date": self.creation_date,
                "parents": list(self.parents),
                "metadata": self.metadata,
                "generation": self.generation,
                "version": self.version,
            }
        )

    @classmethod
    def decode(cls, data: bytes) -> Commit:
        """Decode a record written by :meth:`encode`."""
        r = decode_json(data)
        return cls(
            id=CommitID(r["id"]),
            committer=r["committer"],
            message=r["message"],
            metarange_id=MetaRangeID(r["metarange_id"]),
            creation_date=int(r["creation_date"]),
            parents=tuple(CommitID(p) for p in r["parents"]),
            metadata=dict(r["metadata"]),
            generation=int(r["generation"]),
            version=int(r["version"]),
        )


@dataclass(frozen=True, slots=True)
class Entry:
    """One object version: where its bytes are and what identifies them."""

    address: str
    size: int
    checksum: str
    mtime: int
    content_type: str = DEFAULT_CONTENT_TYPE
    metadata: dict[str, str] = field(default_factory=dict)
    address_type: AddressType = AddressType.RELATIVE
    _identity: Identity | None = field(default=None, init=False, repr=False, compare=False)
    _encoded: bytes | None = field(default=None, init=False, repr=False, compare=False)

    @property
    def identity(self) -> Identity:
        """Return the identity: equal for equal size, checksum, metadata and content type."""
        if self._identity is None:
            # computed once: diffs and merges compare identities of the same entries many times
            value = entry_identity(self.size, self.checksum, self.metadata, self.content_type)
            object.__setattr__(self, "_identity", value)
            return value
        return self._identity

    def to_dict(self) -> dict[str, Any]:
        """Return the fields as a JSON-ready dictionary."""
        return {
            "address": self.address,
            "address_type": self.address_type.value,
            "size": self.size,
            "checksum": self.checksum,
            "mtime": self.mtime,
            "content_type": self.content_type,
            "metadata": self.metadata,
        }

    @classmethod
    def from_dict(cls, r: dict[str, Any]) -> Entry:
        """Build an entry from :meth:`to_dict` output."""
        return cls(
            address=r["address"],
            size=int(r["size"]),
            checksum=r["checksum"],
            mtime=int(r["mtime"]),
            content_type=r["content_type"],
            metadata=dict(r["metadata"]),
            address_type=AddressType(r["address_type"]),
        )


@dataclass(frozen=True, slots=True)
class ObjectStat:
    """An object as seen at a ref: its path, its entry and the URI of its bytes."""

    path: str
    entry: Entry
    physical_address: str


class DiffType(StrEnum):
    """The kind of a difference between two trees."""

    ADDED = "added"
    REMOVED = "removed"
    CHANGED = "changed"
    CONFLICT = "conflict"


@dataclass(frozen=True, slots=True)
class DiffEntry:
    """One path that differs, with its entry on the left and on the right (``None``: absent)."""

    path: str
    type: DiffType
    left: Entry | None
    right: Entry | None
