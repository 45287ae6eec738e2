"""Committed data: ranges and metaranges as immutable Parquet files under ``_lakefs/``.

A commit's tree is a metarange: a sorted list of ranges, each a sorted run of ``(path, entry)``
records. IDs are SHA-256 over the logical records, so any writer of the same records gets the
same ID. Range boundaries depend only on keys (``hash(key) % raggedness == 0``) or a size cap
counted from the range start, so a tree is a pure function of its records: applying a change
rewrites only the ranges whose key span it touches and reuses every other range by ID.
"""

from __future__ import annotations

import bisect
import hashlib
import threading
from collections import OrderedDict
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from mirror.block.protocol import BlockStore
from mirror.core.columnar import (
    RangeData,
    Run,
    boundaries_metadata,
    build_range,
    metarange_encoding,
    records_table,
    to_parquet,
)
from mirror.core.encoding import (
    estimate,
    key_hash,
    pack_int64,
    range_digest,
    range_end_hash,
    string,
)
from mirror.core.ids import MetaRangeID, RangeID
from mirror.core.model import Entry

__all__ = [
    "METADATA_PREFIX",
    "ChunkingParams",
    "CommittedStore",
    "RangeInfo",
    "WriteStats",
    "decode_metarange",
    "decode_range",
    "metarange_id",
    "range_id",
]

METADATA_PREFIX = "_lakefs/"

Record = tuple[str, Entry]
Change = tuple[str, Entry | None]

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
        return key_hash(key) % self.raggedness == 0

    def ends_range(self, info: RangeInfo) -> bool:
        """Return whether a range closed at its last key by rule (not by running out of data)."""
        return info.bytes >= self.max_bytes or range_end_hash(info.max_key) % self.raggedness == 0


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


def range_id(records: list[Record]) -> RangeID:
    """Return the ID of a range holding ``records``."""
    return range_digest(records)[0]


_ROWS: dict[str, tuple[RangeInfo, bytes]] = {}
_ROWS_MAX = 1 << 17


def _metarange_row(r: RangeInfo) -> bytes:
    """Return the encoding of one metarange row, cached by range ID (rows repeat across commits)."""
    hit = _ROWS.get(r.id)
    if hit is not None and (hit[0] is r or hit[0] == r):
        return hit[1]
    row = b"".join(
        (
            string(r.id),
            string(r.min_key),
            string(r.max_key),
            pack_int64(r.count),
            pack_int64(r.bytes),
        )
    )
    if len(_ROWS) >= _ROWS_MAX:
        _ROWS.clear()
    _ROWS[r.id] = (r, row)
    return row


_METARANGE_TAG = string("metarange:v1")


def metarange_id(ranges: list[RangeInfo]) -> MetaRangeID:
    """Return the ID of a metarange listing ``ranges``."""
    h = hashlib.sha256(_METARANGE_TAG + pack_int64(len(ranges)))
    h.update(b"".join(map(_metarange_row, ranges)))
    return MetaRangeID(h.hexdigest())


def _metarange_table(ranges: list[RangeInfo]) -> pa.Table:
    return pa.table(
        {
            "range_id": [r.id for r in ranges],
            "min_key": [r.min_key for r in ranges],
            "max_key": [r.max_key for r in ranges],
            "count": [r.count for r in ranges],
            "bytes": [r.bytes for r in ranges],
        },
        schema=_METARANGE_SCHEMA,
    )


class MetaRangeRows:
    """A metarange as Arrow columns and row encodings, to splice into the next metarange.

    Args:
        table: The metarange file's columns.
        ranges: The same rows as :class:`RangeInfo`.
    """

    __slots__ = ("_encoded", "_last_keys", "ranges", "table")

    def __init__(self, table: pa.Table, ranges: list[RangeInfo]) -> None:
        self.table = table
        self.ranges = ranges
        self._encoded: tuple[bytes, Any] | None = None
        self._last_keys: list[str] | None = None

    def encoding(self) -> tuple[bytes, Any]:
        """Return the canonical encoding of the rows and where each row starts (n + 1)."""
        if self._encoded is None:
            self._encoded = metarange_encoding(self.table)
        return self._encoded

    def last_keys(self) -> list[str]:
        """Return each row's last key, in order (what a key's range is found by bisecting)."""
        if self._last_keys is None:
            self._last_keys = [r.max_key for r in self.ranges]
        return self._last_keys


# Consecutive rows ``start`` to ``stop`` (excluded) of an existing metarange.
_RowRun = tuple[MetaRangeRows, int, int]


def _read_metarange_table(data: bytes) -> pa.Table:
    table = pq.ParquetFile(pa.BufferReader(data)).read(use_threads=False)
    return table.cast(_METARANGE_SCHEMA).combine_chunks()


def decode_metarange(data: bytes) -> list[RangeInfo]:
    """Return the ranges listed by the bytes of a metarange file, in key order."""
    return _ranges_of(_read_metarange_table(data))


def _ranges_of(table: pa.Table) -> list[RangeInfo]:
    cols = table.to_pydict()
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
    rows = RangeData.from_parquet(data)
    return rows.keys, rows.entries


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
        self,
        records: list[Record],
        stats: WriteStats,
        size: int | None = None,
        raggedness: int | None = None,
    ) -> RangeInfo:
        """Write a range file for ``records`` (sorted, non-empty) unless it exists.

        ``size`` is the sum of the records' estimated sizes, when the caller has it already.
        ``raggedness`` is given by a writer that split by that hash rule, so that no key but
        the last can be a boundary: the file then records its boundaries for later rewrites.
        """
        rid, identities = range_digest(records)
        keys = [k for k, _ in records]
        entries = [e for _, e in records]
        if size is None:
            size = sum(map(estimate, keys, entries))
        # entries are decoded again only if asked for: a bulk load writes many ranges in a row
        rows = RangeData(records_table(records, identities), keys)
        self._put_range(rid, rows, stats, raggedness)
        self._remember("r:" + rid, rows)
        return RangeInfo(rid, keys[0], keys[-1], len(records), size)

    def write_pieces(
        self,
        pieces: list[Run | list[Record]],
        stats: WriteStats,
        raggedness: int | None = None,
    ) -> RangeInfo:
        """Write the range made of runs of existing ranges and new records, unless it exists.

        The file and ID are those :meth:`write_range` gives for the same records.
        """
        rid, rows, size = build_range(pieces)
        self._put_range(rid, rows, stats, raggedness)
        self._remember("r:" + rid, rows)
        return RangeInfo(rid, rows.keys[0], rows.keys[-1], len(rows), size)

    def _put_range(
        self, rid: RangeID, rows: RangeData, stats: WriteStats, raggedness: int | None
    ) -> None:
        metadata = None
        if raggedness is not None:
            last = len(rows) - 1
            positions = [last] if range_end_hash(rows.keys[last]) % raggedness == 0 else []
            rows.know_boundaries(raggedness, positions)
            metadata = boundaries_metadata(raggedness, positions)
        if self.block.put_if_absent(METADATA_PREFIX + rid, to_parquet(rows.table, metadata)):
            stats.ranges_written += 1
            stats.written_keys.append(METADATA_PREFIX + rid)

    def write_metarange(self, ranges: list[RangeInfo], stats: WriteStats) -> MetaRangeID:
        """Write a metarange file listing ``ranges`` unless it exists; return its ID."""
        mid = metarange_id(ranges)
        table = _metarange_table(ranges)
        self._put_metarange(mid, table, stats)
        self._remember("m:" + mid, list(ranges))
        self._remember("t:" + mid, MetaRangeRows(table, list(ranges)))
        return mid

    def write_metarange_pieces(
        self, pieces: list[_RowRun | list[RangeInfo]], stats: WriteStats
    ) -> MetaRangeID:
        """Write the metarange made of runs of existing metaranges and new rows, in order.

        The file and ID are those :meth:`write_metarange` gives for the same rows.
        """
        tables: list[pa.Table] = []
        encoded: list[Any] = []
        offsets: list[Any] = []
        ranges: list[RangeInfo] = []
        last_keys: list[str] = []
        at = 0
        for piece in pieces:
            if isinstance(piece, list):
                tables.append(_metarange_table(piece))
                rows_encoded = list(map(_metarange_row, piece))
                lengths = np.fromiter(map(len, rows_encoded), np.int64, len(rows_encoded))
                offsets.append(at + np.cumsum(lengths) - lengths)
                at += int(lengths.sum())
                encoded.extend(rows_encoded)
                ranges.extend(piece)
                last_keys.extend(r.max_key for r in piece)
                continue
            rows, start, stop = piece
            blob, starts = rows.encoding()
            first, last = int(starts[start]), int(starts[stop])
            tables.append(rows.table.slice(start, stop - start))
            encoded.append(memoryview(blob)[first:last])
            offsets.append(starts[start:stop] + (at - first))
            at += last - first
            ranges.extend(rows.ranges[start:stop])
            # the next commit bisects these: slices of the base's keys, not a pass over rows
            last_keys.extend(rows.last_keys()[start:stop])
        joined = b"".join(encoded)
        h = hashlib.sha256(_METARANGE_TAG + pack_int64(len(ranges)))
        h.update(joined)
        mid = MetaRangeID(h.hexdigest())
        table = pa.concat_tables(tables).combine_chunks()
        self._put_metarange(mid, table, stats)
        written = MetaRangeRows(table, ranges)
        written._encoded = (joined, np.concatenate([*offsets, np.array([at], np.int64)]))
        written._last_keys = last_keys
        self._remember("m:" + mid, ranges)
        self._remember("t:" + mid, written)
        self._remember("k:" + mid, last_keys)
        return mid

    def _put_metarange(self, mid: MetaRangeID, table: pa.Table, stats: WriteStats) -> None:
        if self.block.put_if_absent(METADATA_PREFIX + mid, to_parquet(table)):
            stats.metaranges_written += 1
            stats.written_keys.append(METADATA_PREFIX + mid)

    def metarange_rows(self, mid: str) -> MetaRangeRows:
        """Return metarange ``mid`` as columns (``""``, the empty tree, has no rows)."""
        if not mid:
            return MetaRangeRows(_metarange_table([]), [])
        cached = self._cached("t:" + mid)
        if cached is not None:
            return cached  # type: ignore[return-value]
        table = _read_metarange_table(self.block.get(METADATA_PREFIX + mid))
        ranges = self._cached("m:" + mid)
        rows = MetaRangeRows(table, ranges if ranges is not None else _ranges_of(table))  # type: ignore[arg-type]
        self._remember("t:" + mid, rows)
        return rows

    def read_metarange(self, mid: str) -> list[RangeInfo]:
        """Return the ranges of metarange ``mid`` (``""``, the empty tree, has none)."""
        if not mid:
            return []
        cached = self._cached("m:" + mid)
        if cached is not None:
            return cached  # type: ignore[return-value]
        table = _read_metarange_table(self.block.get(METADATA_PREFIX + mid))
        ranges = _ranges_of(table)
        self._remember("m:" + mid, ranges)
        self._remember("t:" + mid, MetaRangeRows(table, ranges))
        return ranges

    def max_keys(self, mid: str, ranges: list[RangeInfo]) -> list[str]:
        """Return the last key of each of ``ranges`` (those of metarange ``mid``), cached."""
        cached = self._cached("k:" + mid)
        if cached is not None:
            return cached  # type: ignore[return-value]
        rows = self._cached("t:" + mid)
        if isinstance(rows, MetaRangeRows) and rows.ranges is ranges:
            keys = rows.last_keys()  # kept with the rows a commit splices from
        else:
            keys = [r.max_key for r in ranges]
        self._remember("k:" + mid, keys)
        return keys

    def read_rows(self, rid: str) -> RangeData:
        """Return the records of range ``rid`` as columns (see :class:`RangeData`)."""
        cached = self._cached("r:" + rid)
        if cached is not None:
            return cached  # type: ignore[return-value]
        rows = RangeData.from_parquet(self.block.get(METADATA_PREFIX + rid))
        self._remember("r:" + rid, rows)
        return rows

    def read_range(self, rid: str) -> tuple[list[str], list[Entry]]:
        """Return the sorted keys of range ``rid`` and their entries."""
        rows = self.read_rows(rid)
        return rows.keys, rows.entries

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
