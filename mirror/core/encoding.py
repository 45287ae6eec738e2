"""The canonical encoding of range records and the Parquet schema of range files.

A range ID is SHA-256 over the :class:`~mirror.core.ids.Encoder` encoding of its records: for
each record its key, then its entry's fields (:func:`entry_encoding`). The functions here build
that encoding as whole byte strings, one hash update per range instead of a dozen per record;
:mod:`mirror.core.columnar` builds the same bytes for whole Arrow columns at once.
"""

from __future__ import annotations

import functools
import hashlib
import struct
from collections.abc import Mapping
from typing import Any

import numpy as np
import pyarrow as pa

from mirror.core.ids import _INT64, _STRING, _STRING_MAP, Identity, RangeID
from mirror.core.model import AddressType, Entry

__all__ = [
    "ADDRESS_TYPES",
    "EMPTY_MAP",
    "RANGE_COLUMNS",
    "RANGE_SCHEMA",
    "boundary_positions",
    "entry_encoding",
    "estimate",
    "key_hash",
    "pack_int64",
    "pack_string_head",
    "range_digest",
    "range_end_hash",
    "range_header",
    "record_encoding",
    "string",
    "string_map",
]

Record = tuple[str, Entry]

RANGE_FIELDS: list[pa.Field[Any]] = [
    pa.field("key", pa.string()),
    pa.field("address", pa.string()),
    pa.field("address_type", pa.string()),
    pa.field("size", pa.int64()),
    pa.field("mtime", pa.int64()),
    pa.field("checksum", pa.string()),
    pa.field("content_type", pa.string()),
    pa.field("metadata", pa.map_(pa.string(), pa.string())),
    pa.field("identity", pa.string()),
]
RANGE_SCHEMA = pa.schema(RANGE_FIELDS)
RANGE_COLUMNS = [name for name in RANGE_SCHEMA.names if name != "identity"]
ADDRESS_TYPES = {t.value: t for t in AddressType}


def key_hash(key: str) -> int:
    """Return the 64-bit hash that decides whether a range ends after ``key``."""
    return int.from_bytes(hashlib.blake2b(key.encode(), digest_size=8).digest(), "big")


def boundary_positions(keys: list[str], raggedness: int) -> list[int]:
    """Return the positions of ``keys`` whose :func:`key_hash` is 0 modulo ``raggedness``."""
    # key_hash inlined: a range read to be rewritten, and every new batch, has each key hashed;
    # the digests are read as one array of big-endian integers and reduced at once
    blake2b = hashlib.blake2b
    if not 0 < raggedness < 1 << 64:  # outside what an unsigned 64-bit array divides by
        from_bytes = int.from_bytes
        return [
            i
            for i, k in enumerate(keys)
            if not from_bytes(blake2b(k.encode(), digest_size=8).digest(), "big") % raggedness
        ]
    digests = b"".join([blake2b(k.encode(), digest_size=8).digest() for k in keys])
    hashes = np.frombuffer(digests, ">u8")
    positions: list[int] = np.flatnonzero(hashes % np.uint64(raggedness) == 0).tolist()
    return positions


# Every commit asks this of each range it reuses, so the last keys of ranges are remembered.
range_end_hash = functools.lru_cache(maxsize=1 << 16)(key_hash)


def estimate(key: str, entry: Entry) -> int:
    """Return the size a record counts for towards a range's ``max_bytes``."""
    size = len(key) + len(entry.address) + len(entry.checksum) + len(entry.content_type) + 48
    if entry.metadata:
        size += sum(len(k) + len(v) for k, v in entry.metadata.items())
    return size


# The canonical encoding of :class:`~mirror.core.ids.Encoder`, built as whole byte strings: one
# hash update per record instead of a dozen keeps range IDs affordable for large ranges.
_INT64_HEAD = struct.Struct(">BBq")
_SIZED_HEAD = struct.Struct(">BBBq")
pack_int64 = functools.partial(_INT64_HEAD.pack, _INT64, 8)
pack_string_head = functools.partial(_SIZED_HEAD.pack, _STRING, _INT64, 8)


def string(value: str) -> bytes:
    """Return the encoding of one string: tag, 8-byte length, UTF-8 bytes."""
    data = value.encode()
    return pack_string_head(len(data)) + data


@functools.lru_cache(maxsize=1024)
def common_string(value: str) -> bytes:
    """Return :func:`string` of a value repeated across records (address types, content types)."""
    return string(value)


_RANGE_TAG = string("range:v1")
EMPTY_MAP = _SIZED_HEAD.pack(_STRING_MAP, _INT64, 8, 0)


def string_map(values: Mapping[str, str]) -> bytes:
    """Return the encoding of a string map, keys sorted by their UTF-8 bytes."""
    if not values:
        return EMPTY_MAP
    parts = [_SIZED_HEAD.pack(_STRING_MAP, _INT64, 8, len(values))]
    for k in sorted(values, key=str.encode):
        parts.append(string(k))
        parts.append(string(values[k]))
    return b"".join(parts)


def entry_encoding(e: Entry) -> bytes:
    """Return the encoding of an entry's fields in a range record, caching it on the entry.

    Entries are immutable and most records of a rewritten range come unchanged from the range
    cache, so each entry is encoded once. Its identity, which hashes a subset of the same fields,
    is cached alongside when not known yet.
    """
    cached = e._encoded
    if cached is not None:
        return cached
    a = e.address.encode()
    c = e.checksum.encode()
    size = pack_int64(e.size)
    checksum = pack_string_head(len(c)) + c
    content_type = common_string(e.content_type)
    metadata = string_map(e.metadata)
    encoded = b"".join(
        (
            pack_string_head(len(a)),
            a,
            common_string(e.address_type),
            size,
            pack_int64(e.mtime),
            checksum,
            content_type,
            metadata,
        )
    )
    object.__setattr__(e, "_encoded", encoded)
    if e._identity is None:
        identity = size + checksum + metadata
        if e.content_type:
            identity += content_type
        object.__setattr__(e, "_identity", Identity(hashlib.sha256(identity).hexdigest()))
    return encoded


def record_encoding(key: str, e: Entry) -> bytes:
    """Return the encoding of one range record: its key, then its entry's fields."""
    k = key.encode()
    return pack_string_head(len(k)) + k + entry_encoding(e)


def range_header(count: int) -> bytes:
    """Return the bytes a range ID hashes before the records of a range of ``count`` records."""
    return _RANGE_TAG + pack_int64(count)


def range_digest(records: list[Record]) -> tuple[RangeID, list[str]]:
    """Return the ID of a range holding ``records`` and each record's ``entry.identity``.

    The identity hashes the same bytes as :func:`~mirror.core.ids.entry_identity`, reusing the
    fields already encoded for the range.
    """
    h = hashlib.sha256(range_header(len(records)))
    parts = []
    for key, e in records:
        k = key.encode()
        parts.append(pack_string_head(len(k)))
        parts.append(k)
        parts.append(entry_encoding(e))
    h.update(b"".join(parts))
    return RangeID(h.hexdigest()), [e.identity for _, e in records]
