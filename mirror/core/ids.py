"""Identifier types and the canonical encoding that content-derived IDs are hashed over.

The encoding is versioned and length-prefixed: each value carries a one-byte type tag, integers
are 8-byte big-endian, strings are prefixed by their length, maps are written with sorted keys.
Anyone holding a commit record can recompute its ID with :func:`commit_id`.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from typing import NewType

__all__ = [
    "BranchID",
    "CommitID",
    "Encoder",
    "Identity",
    "MetaRangeID",
    "RangeID",
    "Ref",
    "RepositoryID",
    "StagingToken",
    "TagID",
    "commit_id",
    "entry_identity",
]

RepositoryID = NewType("RepositoryID", str)
BranchID = NewType("BranchID", str)
TagID = NewType("TagID", str)
CommitID = NewType("CommitID", str)
RangeID = NewType("RangeID", str)
MetaRangeID = NewType("MetaRangeID", str)
Ref = NewType("Ref", str)
StagingToken = NewType("StagingToken", str)
Identity = NewType("Identity", str)

_BYTES, _STRING, _INT64, _STRING_SLICE, _STRING_MAP, _EMBEDDED = range(6)


class Encoder:
    """Accumulate the canonical encoding of a record into a SHA-256 hash."""

    __slots__ = ("_hash",)

    def __init__(self) -> None:
        self._hash = hashlib.sha256()

    def int64(self, value: int) -> Encoder:
        """Append a signed 64-bit integer."""
        self._hash.update(bytes([_INT64, 8]) + value.to_bytes(8, "big", signed=True))
        return self

    def _sized(self, tag: int, data: bytes) -> None:
        self._hash.update(bytes([tag]))
        self.int64(len(data))
        self._hash.update(data)

    def bytes_(self, data: bytes) -> Encoder:
        """Append raw bytes."""
        self._sized(_BYTES, data)
        return self

    def string(self, value: str) -> Encoder:
        """Append a UTF-8 string."""
        self._sized(_STRING, value.encode())
        return self

    def string_opt(self, value: str) -> Encoder:
        """Append a string, or nothing at all when it is empty."""
        if value:
            self.string(value)
        return self

    def strings(self, values: Sequence[str]) -> Encoder:
        """Append a list of strings."""
        self._hash.update(bytes([_STRING_SLICE]))
        self.int64(len(values))
        for v in values:
            self.string(v)
        return self

    def string_map(self, values: Mapping[str, str]) -> Encoder:
        """Append a map of strings, keys sorted bytewise."""
        self._hash.update(bytes([_STRING_MAP]))
        self.int64(len(values))
        for k in sorted(values, key=str.encode):
            self.string(k)
            self.string(values[k])
        return self

    def embedded(self, digest: bytes) -> Encoder:
        """Append the digest of a nested record."""
        self._hash.update(bytes([_EMBEDDED]))
        self.bytes_(digest)
        return self

    def digest(self) -> bytes:
        """Return the SHA-256 digest of everything appended."""
        return self._hash.digest()

    def hexdigest(self) -> str:
        """Return the lowercase hex SHA-256 of everything appended."""
        return self._hash.hexdigest()


def commit_id(
    *,
    committer: str,
    message: str,
    metarange_id: str,
    creation_date: int,
    metadata: Mapping[str, str],
    parents: Sequence[str],
) -> CommitID:
    """Return the content-derived ID of a commit (creation date in whole seconds)."""
    parents_digest = Encoder().strings(parents).digest()
    enc = (
        Encoder()
        .string("commit:v1")
        .string(committer)
        .string(message)
        .string(metarange_id)
        .int64(creation_date)
        .string_map(metadata)
        .embedded(parents_digest)
    )
    return CommitID(enc.hexdigest())


def entry_identity(
    size: int, checksum: str, metadata: Mapping[str, str], content_type: str
) -> Identity:
    """Return the identity of an object: equal identities mean the same object version.

    Address and modification time are deliberately left out, so re-writing the same bytes with
    the same metadata is not a change.
    """
    enc = Encoder().int64(size).string(checksum).string_map(metadata).string_opt(content_type)
    return Identity(enc.hexdigest())
