"""Committed data: ranges and metaranges as immutable Parquet files under ``_lakefs/``.

A commit's tree is a metarange: a sorted list of ranges, each a sorted run of ``(path, entry)``
records. IDs are SHA-256 over the logical records, so any writer of the same records gets the
same ID. Range boundaries depend only on keys (``hash(key) % raggedness == 0``) or a size cap
counted from the range start, so a tree is a pure function of its records: applying a change
rewrites only the ranges whose key span it touches and reuses every other range by ID.
"""

from __future__ import annotations

import bisect
import functools
import hashlib
import io
import struct
import threading
from collections import OrderedDict
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from mirror.block.protocol import BlockStore
from mirror.core.ids import _INT64, _STRING, _STRING_MAP, Identity, MetaRangeID, RangeID
from mirror.core.model import AddressType, Entry

__all__ = [
    "METADATA_PREFIX",
    "ChunkingParams",
    "CommittedStore",
    "MetaRangeWriter",
    "RangeInfo",
    "TreeCursor",
    "WriteStats",
    "apply_changes",
    "decode_metarange",
    "decode_range",
]

METADATA_PREFIX = "_lakefs/"

Record = tuple[str, Entry]
Change = tuple[str, Entry | None]

_RANGE_FIELDS: list[pa.Field[Any]] = [
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
_RANGE_SCHEMA = pa.schema(_RANGE_FIELDS)
_RANGE_COLUMNS = [name for name in _RANGE_SCHEMA.names if name != "identity"]
_ADDRESS_TYPES = {t.value: t for t in AddressType}
_METARANGE_FIELDS: list[pa.Field[Any]] = [
    pa.field("range_id", pa.string()),
    pa.field("min_key", pa.string()),
    pa.field("max_key", pa.string()),
    pa.field("count", pa.int64()),
    pa.field("bytes", pa.int64()),
]
_METARANGE_SCHEMA = pa.schema(_METARANGE_FIELDS)


@dataclass(frozen=True, slots=True)
class ChunkingParams:
    """Where ranges split: at keys whose hash is 0 modulo ``raggedness``, or at ``max_bytes``."""

    raggedness: int = 512
    max_bytes: int = 8 << 20

    def is_boundary_key(self, key: str) -> bool:
        """Return whether a range ends after ``key`` by the hash rule."""
        return _key_hash(key) % self.raggedness == 0

    def ends_range(self, info: RangeInfo) -> bool:
        """Return whether a range closed at its last key by rule (not by running out of data)."""
        return info.bytes >= self.max_bytes or _range_end_hash(info.max_key) % self.raggedness == 0


def _key_hash(key: str) -> int:
    return int.from_bytes(hashlib.blake2b(key.encode(), digest_size=8).digest(), "big")


# Every commit asks this of each range it reuses, so the last keys of ranges are remembered.
_range_end_hash = functools.lru_cache(maxsize=1 << 16)(_key_hash)


@dataclass(frozen=True, slots=True)
class RangeInfo:
    """One range as its metarange lists it."""

    id: RangeID
    min_key: str
    max_key: str
    count: int
    bytes: int


@dataclass(slots=True)
class WriteStats:
    """What building a tree cost: files written and ranges read or reused."""

    ranges_written: int = 0
    metaranges_written: int = 0
    ranges_reused: int = 0
    ranges_read: int = 0
    added: int = 0
    removed: int = 0
    changed: int = 0
    written_keys: list[str] = field(default_factory=list)

    @property
    def files_written(self) -> int:
        """Return the number of new files put into the object store."""
        return self.ranges_written + self.metaranges_written

    @property
    def changes(self) -> int:
        """Return the number of records added, removed or changed."""
        return self.added + self.removed + self.changed


def _estimate(key: str, entry: Entry) -> int:
    size = len(key) + len(entry.address) + len(entry.checksum) + len(entry.content_type) + 48
    if entry.metadata:
        size += sum(len(k) + len(v) for k, v in entry.metadata.items())
    return size


# The canonical encoding of :class:`~mirror.core.ids.Encoder`, built as whole byte strings: one
# hash update per record instead of a dozen keeps range IDs affordable for large ranges.
_INT64_HEAD = struct.Struct(">BBq")
_SIZED_HEAD = struct.Struct(">BBBq")
_pack_int64 = functools.partial(_INT64_HEAD.pack, _INT64, 8)
_pack_string_head = functools.partial(_SIZED_HEAD.pack, _STRING, _INT64, 8)


def _string(value: str) -> bytes:
    data = value.encode()
    return _pack_string_head(len(data)) + data


@functools.lru_cache(maxsize=1024)
def _common_string(value: str) -> bytes:
    """Return :func:`_string` of a value repeated across records (address types, content types)."""
    return _string(value)


_EMPTY_MAP = _SIZED_HEAD.pack(_STRING_MAP, _INT64, 8, 0)


def _string_map(values: Mapping[str, str]) -> bytes:
    if not values:
        return _EMPTY_MAP
    parts = [_SIZED_HEAD.pack(_STRING_MAP, _INT64, 8, len(values))]
    for k in sorted(values, key=str.encode):
        parts.append(_string(k))
        parts.append(_string(values[k]))
    return b"".join(parts)


def _entry_encoding(e: Entry) -> bytes:
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
    size = _pack_int64(e.size)
    checksum = _pack_string_head(len(c)) + c
    content_type = _common_string(e.content_type)
    metadata = _string_map(e.metadata)
    encoded = b"".join(
        (
            _pack_string_head(len(a)),
            a,
            _common_string(e.address_type),
            size,
            _pack_int64(e.mtime),
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


def _range_digest(records: list[Record]) -> tuple[RangeID, list[str]]:
    """Return the ID of a range holding ``records`` and each record's ``entry.identity``.

    The identity hashes the same bytes as :func:`~mirror.core.ids.entry_identity`, reusing the
    fields already encoded for the range.
    """
    h = hashlib.sha256(_string("range:v1") + _pack_int64(len(records)))
    parts = []
    for key, e in records:
        k = key.encode()
        parts.append(_pack_string_head(len(k)))
        parts.append(k)
        parts.append(_entry_encoding(e))
    h.update(b"".join(parts))
    return RangeID(h.hexdigest()), [e.identity for _, e in records]


def range_id(records: list[Record]) -> RangeID:
    """Return the ID of a range holding ``records``."""
    return _range_digest(records)[0]


_ROWS: dict[str, tuple[RangeInfo, bytes]] = {}
_ROWS_MAX = 1 << 17


def _metarange_row(r: RangeInfo) -> bytes:
    """Return the encoding of one metarange row, cached by range ID (rows repeat across commits)."""
    hit = _ROWS.get(r.id)
    if hit is not None and (hit[0] is r or hit[0] == r):
        return hit[1]
    row = b"".join(
        (
            _string(r.id),
            _string(r.min_key),
            _string(r.max_key),
            _pack_int64(r.count),
            _pack_int64(r.bytes),
        )
    )
    if len(_ROWS) >= _ROWS_MAX:
        _ROWS.clear()
    _ROWS[r.id] = (r, row)
    return row


def metarange_id(ranges: list[RangeInfo]) -> MetaRangeID:
    """Return the ID of a metarange listing ``ranges``."""
    h = hashlib.sha256(_string("metarange:v1") + _pack_int64(len(ranges)))
    h.update(b"".join(map(_metarange_row, ranges)))
    return MetaRangeID(h.hexdigest())


def _to_parquet(table: pa.Table) -> bytes:
    buf = io.BytesIO()
    pq.write_table(table, buf, compression="zstd")
    return buf.getvalue()


def decode_metarange(data: bytes) -> list[RangeInfo]:
    """Return the ranges listed by the bytes of a metarange file, in key order."""
    cols = pq.read_table(io.BytesIO(data), use_threads=False).to_pydict()
    return [
        RangeInfo(RangeID(i), lo, hi, c, b)
        for i, lo, hi, c, b in zip(
            cols["range_id"],
            cols["min_key"],
            cols["max_key"],
            cols["count"],
            cols["bytes"],
            strict=True,
        )
    ]


def decode_range(data: bytes) -> tuple[list[str], list[Entry]]:
    """Return the sorted keys held by the bytes of a range file and their entries."""
    cols = pq.read_table(io.BytesIO(data), columns=_RANGE_COLUMNS, use_threads=False).to_pydict()
    types = _ADDRESS_TYPES
    entries = [
        Entry(a, s, c, m, ct, dict(md) if md else {}, types[at])
        for a, at, s, m, c, ct, md in zip(
            cols["address"],
            cols["address_type"],
            cols["size"],
            cols["mtime"],
            cols["checksum"],
            cols["content_type"],
            cols["metadata"],
            strict=True,
        )
    ]
    return list(cols["key"]), entries


class CommittedStore:
    """Read and write the range and metarange files of one storage namespace.

    Decoded ranges and metaranges are immutable, so they are kept in a small LRU cache.
    """

    def __init__(self, block: BlockStore, cache_size: int = 256) -> None:
        self.block = block
        self._cache: OrderedDict[str, object] = OrderedDict()
        self._cache_size = cache_size
        self._lock = threading.Lock()

    def _cached(self, key: str) -> object | None:
        with self._lock:
            value = self._cache.get(key)
            if value is not None:
                self._cache.move_to_end(key)
            return value

    def _remember(self, key: str, value: object) -> None:
        if self._cache_size <= 0:
            return
        with self._lock:
            self._cache[key] = value
            self._cache.move_to_end(key)
            while len(self._cache) > self._cache_size:
                self._cache.popitem(last=False)

    def write_range(
        self, records: list[Record], stats: WriteStats, size: int | None = None
    ) -> RangeInfo:
        """Write a range file for ``records`` (sorted, non-empty) unless it exists.

        ``size`` is the sum of the records' estimated sizes, when the caller has it already.
        """
        rid, identities = _range_digest(records)
        keys = [k for k, _ in records]
        entries = [e for _, e in records]
        if size is None:
            size = sum(map(_estimate, keys, entries))
        info = RangeInfo(rid, keys[0], keys[-1], len(records), size)
        table = pa.table(
            {
                "key": keys,
                "address": [e.address for e in entries],
                "address_type": [e.address_type for e in entries],
                "size": [e.size for e in entries],
                "mtime": [e.mtime for e in entries],
                "checksum": [e.checksum for e in entries],
                "content_type": [e.content_type for e in entries],
                "metadata": [list(e.metadata.items()) for e in entries],
                "identity": identities,
            },
            schema=_RANGE_SCHEMA,
        )
        if self.block.put_if_absent(METADATA_PREFIX + rid, _to_parquet(table)):
            stats.ranges_written += 1
            stats.written_keys.append(METADATA_PREFIX + rid)
        self._remember("r:" + rid, (keys, entries))
        return info

    def write_metarange(self, ranges: list[RangeInfo], stats: WriteStats) -> MetaRangeID:
        """Write a metarange file listing ``ranges`` unless it exists; return its ID."""
        mid = metarange_id(ranges)
        table = pa.table(
            {
                "range_id": [r.id for r in ranges],
                "min_key": [r.min_key for r in ranges],
                "max_key": [r.max_key for r in ranges],
                "count": [r.count for r in ranges],
                "bytes": [r.bytes for r in ranges],
            },
            schema=_METARANGE_SCHEMA,
        )
        if self.block.put_if_absent(METADATA_PREFIX + mid, _to_parquet(table)):
            stats.metaranges_written += 1
            stats.written_keys.append(METADATA_PREFIX + mid)
        self._remember("m:" + mid, list(ranges))
        return mid

    def read_metarange(self, mid: str) -> list[RangeInfo]:
        """Return the ranges of metarange ``mid`` (``""``, the empty tree, has none)."""
        if not mid:
            return []
        cached = self._cached("m:" + mid)
        if cached is not None:
            return cached  # type: ignore[return-value]
        ranges = decode_metarange(self.block.get(METADATA_PREFIX + mid))
        self._remember("m:" + mid, ranges)
        return ranges

    def max_keys(self, mid: str, ranges: list[RangeInfo]) -> list[str]:
        """Return the last key of each of ``ranges`` (those of metarange ``mid``), cached."""
        cached = self._cached("k:" + mid)
        if cached is not None:
            return cached  # type: ignore[return-value]
        keys = [r.max_key for r in ranges]
        self._remember("k:" + mid, keys)
        return keys

    def read_range(self, rid: str) -> tuple[list[str], list[Entry]]:
        """Return the sorted keys of range ``rid`` and their entries."""
        cached = self._cached("r:" + rid)
        if cached is not None:
            return cached  # type: ignore[return-value]
        value = decode_range(self.block.get(METADATA_PREFIX + rid))
        self._remember("r:" + rid, value)
        return value

    def lookup(self, mid: str, key: str) -> Entry | None:
        """Return the entry at ``key`` in metarange ``mid``, or ``None``."""
        ranges = self.read_metarange(mid)
        i = bisect.bisect_left(self.max_keys(mid, ranges), key)
        if i == len(ranges) or ranges[i].min_key > key:
            return None
        keys, entries = self.read_range(ranges[i].id)
        j = bisect.bisect_left(keys, key)
        if j < len(keys) and keys[j] == key:
            return entries[j]
        return None

    def iterate(self, mid: str, start: str = "") -> Iterator[Record]:
        """Yield the records of metarange ``mid`` with keys ``>= start``, in order."""
        ranges = self.read_metarange(mid)
        first = bisect.bisect_left(self.max_keys(mid, ranges), start) if start else 0
        for r in ranges[first:]:
            keys, entries = self.read_range(r.id)
            j = bisect.bisect_left(keys, start) if start > r.min_key else 0
            yield from zip(keys[j:], entries[j:], strict=True)


class MetaRangeWriter:
    """Build a tree from sorted records and reused ranges, split by :class:`ChunkingParams`."""

    def __init__(self, store: CommittedStore, params: ChunkingParams, stats: WriteStats) -> None:
        self._store = store
        self._params = params
        self.stats = stats
        self._ranges: list[RangeInfo] = []
        self._buf: list[Record] = []
        self._buf_bytes = 0

    @property
    def at_boundary(self) -> bool:
        """Return whether no range is open, so an existing range may be appended whole."""
        return not self._buf

    def add(self, key: str, entry: Entry) -> None:
        """Append one record; keys must strictly increase."""
        self._buf.append((key, entry))
        self._buf_bytes += _estimate(key, entry)
        if self._buf_bytes >= self._params.max_bytes or self._params.is_boundary_key(key):
            self._flush()

    def add_ranges(self, infos: list[RangeInfo]) -> None:
        """Append existing ranges unchanged; only allowed at a boundary."""
        if self._buf:
            raise AssertionError("add_ranges with an open range")
        self._ranges.extend(infos)
        self.stats.ranges_reused += len(infos)

    def _flush(self) -> None:
        if self._buf:
            info = self._store.write_range(self._buf, self.stats, self._buf_bytes)
            self._ranges.append(info)
            self._buf = []
            self._buf_bytes = 0

    def close(self) -> MetaRangeID:
        """Write the last range and the metarange; return the metarange ID.

        An empty tree gets a written metarange and a real ID too; only a repository's initial
        commit has the ID ``""`` (as in lakeFS, whose clients tell the two apart).
        """
        self._flush()
        return self._store.write_metarange(self._ranges, self.stats)


class _Peekable:
    __slots__ = ("_head", "_it")

    def __init__(self, it: Iterable[Change]) -> None:
        self._it = iter(it)
        self._head: Change | None = next(self._it, None)

    def peek(self) -> Change | None:
        return self._head

    def pop(self) -> Change:
        head = self._head
        assert head is not None
        self._head = next(self._it, None)
        return head


def apply_changes(
    store: CommittedStore,
    params: ChunkingParams,
    base: str,
    changes: Iterable[Change],
    stats: WriteStats | None = None,
) -> tuple[MetaRangeID, WriteStats]:
    """Apply sorted ``changes`` (``None`` deletes) onto tree ``base``; return the new tree.

    A change whose entry has the same identity as the base record keeps the base record.
    Ranges with no change in their key span are reused unread whenever the writer is at a
    boundary, which is the case after every range that ended by rule.
    """
    stats = stats or WriteStats()
    writer = MetaRangeWriter(store, params, stats)
    pending = _Peekable(changes)
    ranges = store.read_metarange(base)
    max_keys = store.max_keys(base, ranges)
    i = 0
    while i < len(ranges):
        if writer.at_boundary:
            # every range before the first one whose span holds the next change is untouched:
            # reuse the run whole; all but the tree's last range ended by rule
            nxt = pending.peek()
            j = len(ranges) if nxt is None else bisect.bisect_left(max_keys, nxt[0], i)
            if j > i:
                r = ranges[j - 1]
                tail_ok = params.ends_range(r) or (j == len(ranges) and nxt is None)
                reuse = j if tail_ok else j - 1
                writer.add_ranges(ranges[i:reuse])
                i = reuse
                if i == j:
                    continue
        r = ranges[i]
        i += 1
        keys, entries = store.read_range(r.id)
        stats.ranges_read += 1
        for key, entry in zip(keys, entries, strict=True):
            while (c := pending.peek()) is not None and c[0] < key:
                pending.pop()
                if c[1] is not None:
                    writer.add(c[0], c[1])
                    stats.added += 1
            c = pending.peek()
            if c is not None and c[0] == key:
                pending.pop()
                if c[1] is None:
                    stats.removed += 1
                    continue
                if c[1].identity != entry.identity:
                    writer.add(key, c[1])
                    stats.changed += 1
                    continue
            writer.add(key, entry)
        while (c := pending.peek()) is not None and c[0] <= r.max_key:
            pending.pop()
            if c[1] is not None:
                writer.add(c[0], c[1])
                stats.added += 1
    while (c := pending.peek()) is not None:
        pending.pop()
        if c[1] is not None:
            writer.add(c[0], c[1])
            stats.added += 1
    return writer.close(), stats


class TreeCursor:
    """Walk a tree record by record, able to skip whole ranges at range starts (for diffs)."""

    def __init__(self, store: CommittedStore, mid: str, stats: WriteStats | None = None) -> None:
        self._store = store
        self._ranges = store.read_metarange(mid)
        self._ri = 0
        self._keys: list[str] | None = None
        self._entries: list[Entry] = []
        self._pos = 0
        self._stats = stats

    def range_start(self) -> RangeInfo | None:
        """Return the next range if the cursor sits at its start, else ``None``."""
        if self._keys is None and self._ri < len(self._ranges):
            return self._ranges[self._ri]
        return None

    def skip_range(self) -> None:
        """Skip the range the cursor sits at the start of, without reading it."""
        self._ri += 1

    def peek(self) -> Record | None:
        """Return the next record without consuming it, or ``None`` at the end."""
        while True:
            if self._keys is None:
                if self._ri >= len(self._ranges):
                    return None
                self._keys, self._entries = self._store.read_range(self._ranges[self._ri].id)
                self._pos = 0
                if self._stats is not None:
                    self._stats.ranges_read += 1
            if self._pos < len(self._keys):
                return self._keys[self._pos], self._entries[self._pos]
            self._keys = None
            self._ri += 1

    def advance(self) -> None:
        """Consume the record returned by :meth:`peek`."""
        self._pos += 1
        if self._keys is not None and self._pos >= len(self._keys):
            self._keys = None
            self._ri += 1
