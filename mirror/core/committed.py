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
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from mirror.block.protocol import BlockStore
from mirror.core.columnar import (
    RangeData,
    Run,
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
    "MetaRangeWriter",
    "RangeInfo",
    "TreeCursor",
    "WriteStats",
    "apply_changes",
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

    __slots__ = ("_encoded", "ranges", "table")

    def __init__(self, table: pa.Table, ranges: list[RangeInfo]) -> None:
        self.table = table
        self.ranges = ranges
        self._encoded: tuple[bytes, Any] | None = None

    def encoding(self) -> tuple[bytes, Any]:
        """Return the canonical encoding of the rows and where each row starts (n + 1)."""
        if self._encoded is None:
            self._encoded = metarange_encoding(self.table)
        return self._encoded


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
        self, records: list[Record], stats: WriteStats, size: int | None = None
    ) -> RangeInfo:
        """Write a range file for ``records`` (sorted, non-empty) unless it exists.

        ``size`` is the sum of the records' estimated sizes, when the caller has it already.
        """
        rid, identities = range_digest(records)
        keys = [k for k, _ in records]
        entries = [e for _, e in records]
        if size is None:
            size = sum(map(estimate, keys, entries))
        table = records_table(records, identities)
        self._put_range(rid, table, stats)
        # entries are decoded again only if asked for: a bulk load writes many ranges in a row
        self._remember("r:" + rid, RangeData(table, keys))
        return RangeInfo(rid, keys[0], keys[-1], len(records), size)

    def write_pieces(self, pieces: list[Run | list[Record]], stats: WriteStats) -> RangeInfo:
        """Write the range made of runs of existing ranges and new records, unless it exists.

        The file and ID are those :meth:`write_range` gives for the same records.
        """
        rid, rows, size = build_range(pieces)
        self._put_range(rid, rows.table, stats)
        self._remember("r:" + rid, rows)
        return RangeInfo(rid, rows.keys[0], rows.keys[-1], len(rows), size)

    def _put_range(self, rid: RangeID, table: pa.Table, stats: WriteStats) -> None:
        if self.block.put_if_absent(METADATA_PREFIX + rid, to_parquet(table)):
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
                continue
            rows, start, stop = piece
            blob, starts = rows.encoding()
            first, last = int(starts[start]), int(starts[stop])
            tables.append(rows.table.slice(start, stop - start))
            encoded.append(memoryview(blob)[first:last])
            offsets.append(starts[start:stop] + (at - first))
            at += last - first
            ranges.extend(rows.ranges[start:stop])
        joined = b"".join(encoded)
        h = hashlib.sha256(_METARANGE_TAG + pack_int64(len(ranges)))
        h.update(joined)
        mid = MetaRangeID(h.hexdigest())
        table = pa.concat_tables(tables).combine_chunks()
        self._put_metarange(mid, table, stats)
        written = MetaRangeRows(table, ranges)
        written._encoded = (joined, np.concatenate([*offsets, np.array([at], np.int64)]))
        self._remember("m:" + mid, ranges)
        self._remember("t:" + mid, written)
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


class MetaRangeWriter:
    """Build a tree from sorted records and reused ranges, split by :class:`ChunkingParams`.

    The open range is a list of pieces: runs of records of existing ranges (added with
    :meth:`add_run`, never decoded into entries) and lists of new records (:meth:`add`).
    """

    def __init__(self, store: CommittedStore, params: ChunkingParams, stats: WriteStats) -> None:
        self._store = store
        self._params = params
        self.stats = stats
        self._ranges: list[_RowRun | list[RangeInfo]] = []
        self._pieces: list[Run | list[Record]] = []
        self._buf_bytes = 0

    @property
    def at_boundary(self) -> bool:
        """Return whether no range is open, so an existing range may be appended whole."""
        return not self._pieces

    def add(self, key: str, entry: Entry) -> None:
        """Append one record; keys must strictly increase."""
        pieces = self._pieces
        if pieces and isinstance(pieces[-1], list):
            pieces[-1].append((key, entry))
        else:
            pieces.append([(key, entry)])
        self._buf_bytes += estimate(key, entry)
        if self._buf_bytes >= self._params.max_bytes or self._params.is_boundary_key(key):
            self._flush()

    def add_run(self, rows: RangeData, start: int, stop: int) -> None:
        """Append records ``start`` to ``stop`` (excluded) of an existing range, unchanged.

        The range ends where :meth:`add` of each record would have ended it: after a boundary
        key of the hash rule, or at the record that brings the open range to ``max_bytes``.
        """
        if start >= stop:
            return
        boundaries = rows.boundaries(self._params.raggedness)
        sums = rows.sizes()
        while start < stop:
            b = bisect.bisect_left(boundaries, start)
            end = boundaries[b] if b < len(boundaries) else stop
            # the first record with which the open range reaches max_bytes
            need = self._params.max_bytes - self._buf_bytes + sums[start]
            end = min(end, bisect.bisect_left(sums, need, start + 1) - 1)
            if end >= stop:
                self._pieces.append((rows, start, stop))
                self._buf_bytes += sums[stop] - sums[start]
                return
            self._pieces.append((rows, start, end + 1))
            self._buf_bytes += sums[end + 1] - sums[start]
            self._flush()
            start = end + 1

    def add_ranges(self, infos: list[RangeInfo]) -> None:
        """Append existing ranges unchanged; only allowed at a boundary."""
        if self._pieces:
            raise AssertionError("add_ranges with an open range")
        self._add_info(*infos)
        self.stats.ranges_reused += len(infos)

    def reuse_ranges(self, rows: MetaRangeRows, start: int, stop: int) -> None:
        """Append ranges ``start`` to ``stop`` (excluded) of a metarange unchanged."""
        if self._pieces:
            raise AssertionError("reuse_ranges with an open range")
        if stop > start:
            self._ranges.append((rows, start, stop))
            self.stats.ranges_reused += stop - start

    def _add_info(self, *infos: RangeInfo) -> None:
        if self._ranges and isinstance(self._ranges[-1], list):
            self._ranges[-1].extend(infos)
        elif infos:
            self._ranges.append(list(infos))

    def _flush(self) -> None:
        pieces = self._pieces
        if not pieces:
            return
        if len(pieces) == 1 and isinstance(pieces[0], list):
            info = self._store.write_range(pieces[0], self.stats, self._buf_bytes)
        else:
            info = self._store.write_pieces(pieces, self.stats)
        rows = self._store._cached("r:" + info.id)
        if isinstance(rows, RangeData):
            # every key but the last was checked while the range was open
            last = info.count - 1
            ends = range_end_hash(info.max_key) % self._params.raggedness == 0
            rows.know_boundaries(self._params.raggedness, [last] if ends else [])
        self._add_info(info)
        self._pieces = []
        self._buf_bytes = 0

    def close(self) -> MetaRangeID:
        """Write the last range and the metarange; return the metarange ID.

        An empty tree gets a written metarange and a real ID too; only a repository's initial
        commit has the ID ``""`` (as in lakeFS, whose clients tell the two apart).
        """
        self._flush()
        pieces = self._ranges
        if all(isinstance(p, list) for p in pieces):
            infos = [r for p in pieces if isinstance(p, list) for r in p]
            return self._store.write_metarange(infos, self.stats)
        return self._store.write_metarange_pieces(pieces, self.stats)


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
    boundary, which is the case after every range that ended by rule. A range a change falls
    in is rewritten as runs of its unchanged records around the changes (see
    :meth:`MetaRangeWriter.add_run`), so its cost follows the changes more than its size.
    """
    stats = stats or WriteStats()
    writer = MetaRangeWriter(store, params, stats)
    pending = _Peekable(changes)
    meta = store.metarange_rows(base)
    ranges = meta.ranges
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
                writer.reuse_ranges(meta, i, reuse)
                i = reuse
                if i == j:
                    continue
        r = ranges[i]
        i += 1
        rows = store.read_rows(r.id)
        stats.ranges_read += 1
        keys = rows.keys
        pos = 0
        while (c := pending.peek()) is not None and c[0] <= r.max_key:
            pending.pop()
            key, entry = c
            j = bisect.bisect_left(keys, key, pos)
            writer.add_run(rows, pos, j)
            pos = j
            if j < len(keys) and keys[j] == key:
                pos = j + 1
                if entry is None:
                    stats.removed += 1
                elif entry.identity != rows.identity(j):
                    writer.add(key, entry)
                    stats.changed += 1
                else:
                    writer.add_run(rows, j, j + 1)
            elif entry is not None:
                writer.add(key, entry)
                stats.added += 1
        writer.add_run(rows, pos, len(keys))
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
