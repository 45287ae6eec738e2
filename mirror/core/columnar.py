"""Ranges held as Arrow columns, so that rewriting a range costs its changes, not its records.

A commit rewrites each range its changes fall in. Decoding every record of such a range into an
:class:`~mirror.core.model.Entry`, encoding it again for the range ID and converting it back to
Arrow for the Parquet file costs some microseconds per record: most of a small commit in a large
repository. A :class:`RangeData` keeps a range as it was read: its Arrow table, its keys, and the
canonical encoding of its records (:mod:`mirror.core.encoding`) computed for whole columns at
once with Arrow kernels. A rewritten range is then assembled from runs of unchanged records (table
slices and byte slices) and the few changed records, which alone go through Python objects
(:func:`build_range`). The bytes hashed and written are exactly those of the record-by-record
path, so range IDs and files do not depend on which path wrote them.
"""

from __future__ import annotations

import functools
import hashlib
from collections.abc import Sequence
from typing import Any

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from mirror.core.encoding import (
    ADDRESS_TYPES,
    EMPTY_MAP,
    RANGE_SCHEMA,
    boundary_positions,
    estimate,
    range_header,
    record_encoding,
    string_map,
)
from mirror.core.ids import _INT64, _STRING, RangeID
from mirror.core.model import AddressType, Entry

__all__ = [
    "BOUNDARIES_KEY",
    "RangeData",
    "Run",
    "boundaries_metadata",
    "build_range",
    "range_objects",
    "records_table",
    "to_parquet",
]

Record = tuple[str, Entry]
Ints = npt.NDArray[np.int64]
Bytes = npt.NDArray[np.uint8]
# A binary Arrow array (values are byte strings); pyarrow's stubs do not type compute on them.
_Binary = Any


# How each column of range and metarange files is written. Range and metarange IDs hash the
# records, not the file, so none of this changes them, and a reader needs no option to read it.
# - Columns whose values repeat across records keep Parquet's dictionary encoding; keys,
#   addresses, checksums and identities are unique per record, where a dictionary only costs.
# - Addresses share long prefixes with their neighbours: prefix (delta) encoding takes most of
#   their bytes before compression, which then costs less.
# - Hex digests are stored with their lengths apart from their characters, which zstd then
#   compresses in about two thirds of the time it takes over lengths and characters interleaved.
# - Integers are delta-encoded (sizes repeat, times grow slowly): small without compression.
# - Only the columns that still hold bytes worth it are compressed (zstd): keys, addresses and
#   digests; the dictionary pages and delta-coded integers are tiny, and compressing a column
#   costs a fixed ~20 us before its first byte. A file of a few rows is not compressed at all.
# Files are read whole, so they carry no column statistics either. `bench.parquet_options`
# measures each choice.
_DICTIONARY_COLUMNS = frozenset(
    ["address_type", "content_type", "metadata.key_value.key", "metadata.key_value.value"]
)
_PREFIXED_COLUMNS = frozenset(["address"])
_DIGEST_COLUMNS = frozenset(["checksum", "identity", "range_id"])
_INTEGER_COLUMNS = frozenset(["size", "mtime", "count", "bytes"])
_COMPRESSED_COLUMNS = _PREFIXED_COLUMNS | _DIGEST_COLUMNS | {"key", "min_key", "max_key"}
_COMPRESS_FROM_ROWS = 16


@functools.cache
def _write_options(schema: pa.Schema, compressed: bool) -> dict[str, Any]:
    """Return :func:`pyarrow.parquet.write_table`'s column options for files of ``schema``."""
    leaves: list[str] = []
    for field in schema:
        if pa.types.is_map(field.type):
            leaves += [f"{field.name}.key_value.key", f"{field.name}.key_value.value"]
        else:
            leaves.append(field.name)
    encodings = {name: "DELTA_BYTE_ARRAY" for name in leaves if name in _PREFIXED_COLUMNS}
    encodings |= {name: "DELTA_LENGTH_BYTE_ARRAY" for name in leaves if name in _DIGEST_COLUMNS}
    encodings |= {name: "DELTA_BINARY_PACKED" for name in leaves if name in _INTEGER_COLUMNS}
    zstd = _COMPRESSED_COLUMNS if compressed else frozenset()
    codec = {name: "zstd" if name in zstd else "none" for name in leaves}
    return {
        "compression": codec,
        "use_dictionary": [name for name in leaves if name in _DICTIONARY_COLUMNS],
        "column_encoding": encodings,
        "write_statistics": False,
    }


# Key-value metadata of a range file: the raggedness its writer split by, and the positions of
# the keys that end a range by that hash rule (``512:`` or ``512:1203``). A reader that rewrites
# the range then needs no hash of its keys; files without it have their keys hashed when read.
BOUNDARIES_KEY = b"lakemirror.boundaries"


def boundaries_metadata(raggedness: int, positions: list[int]) -> dict[bytes, bytes]:
    """Return the file metadata recording a range's hash-rule boundaries."""
    return {BOUNDARIES_KEY: f"{raggedness}:{','.join(map(str, positions))}".encode()}


def _boundaries_of(metadata: dict[bytes, bytes] | None) -> tuple[int, list[int]] | None:
    value = (metadata or {}).get(BOUNDARIES_KEY)
    if value is None:
        return None
    try:
        raggedness, _, positions = value.decode().partition(":")
        return int(raggedness), [int(p) for p in positions.split(",") if p]
    except ValueError:
        return None


def to_parquet(table: pa.Table, metadata: dict[bytes, bytes] | None = None) -> bytes:
    """Return the bytes of a range or metarange file holding ``table`` (and ``metadata``)."""
    if metadata:
        table = table.replace_schema_metadata(metadata)
    options = _write_options(table.schema.remove_metadata(), len(table) >= _COMPRESS_FROM_ROWS)
    # the writer itself, into Arrow's own buffer: the same bytes as ``pq.write_table`` into a
    # Python file, without its wrapper's set-up (a tenth of a small file's cost)
    sink = pa.BufferOutputStream()
    with pq.ParquetWriter(sink, table.schema, **options) as writer:
        writer.write_table(table)
    return sink.getvalue().to_pybytes()


def records_table(records: Sequence[Record], identities: Sequence[str]) -> pa.Table:
    """Return the Arrow table of a range file for ``records`` and their identities."""
    entries = [e for _, e in records]
    return pa.table(
        {
            "key": [k for k, _ in records],
            "address": [e.address for e in entries],
            "address_type": [e.address_type for e in entries],
            "size": [e.size for e in entries],
            "mtime": [e.mtime for e in entries],
            "checksum": [e.checksum for e in entries],
            "content_type": [e.content_type for e in entries],
            "metadata": [list(e.metadata.items()) for e in entries],
            "identity": list(identities),
        },
        schema=RANGE_SCHEMA,
    )


def _offsets(array: Any) -> Ints:
    """Return the offsets (n + 1) of the values of a string or binary array without nulls."""
    if array.null_count:
        raise ValueError("range column holds nulls")
    offsets = array.buffers()[1]
    return np.frombuffer(offsets, np.int32, len(array) + 1, array.offset * 4).astype(np.int64)


def _rows(rows: Bytes) -> _Binary:
    """Return an ``(n, width)`` array of byte rows as a binary array of n values (no copy)."""
    n, width = rows.shape
    data = pa.py_buffer(np.ascontiguousarray(rows).data)
    offsets = pa.py_buffer(np.arange(0, (n + 1) * width, width, dtype=np.int32).data)
    return pa.Array.from_buffers(pa.binary(), n, [None, offsets, data])


def _string_fields(array: Any) -> list[_Binary]:
    """Return the encoding heads (tag, 8-byte big-endian length) of strings, and the strings."""
    offsets = _offsets(array)
    rows = np.empty((len(array), 11), np.uint8)
    rows[:, 0] = _STRING
    rows[:, 1] = _INT64
    rows[:, 2] = 8
    rows[:, 3:] = (offsets[1:] - offsets[:-1]).astype(">i8").view(np.uint8).reshape(-1, 8)
    return [_rows(rows), array.view(pa.binary())]


def _int64s(values: Ints) -> _Binary:
    rows = np.empty((len(values), 10), np.uint8)
    rows[:, 0] = _INT64
    rows[:, 1] = 8
    rows[:, 2:] = values.astype(">i8").view(np.uint8).reshape(-1, 8)
    return _rows(rows)


_NOTHING = pa.scalar(b"", pa.binary())


def _join(fields: list[_Binary]) -> tuple[bytes, Ints]:
    """Return the records whose fields are the values of ``fields`` in turn, and their offsets."""
    if not len(fields[0]):
        return b"", np.zeros(1, np.int64)
    joined = pc.binary_join_element_wise(*fields, _NOTHING)
    starts = _offsets(joined)
    data = joined.buffers()[2]
    return memoryview(data)[starts[0] : starts[-1]].tobytes(), starts - starts[0]


def _maps(column: Any) -> tuple[_Binary, list[int] | None]:
    """Return the encoded metadata maps of a range, and their estimated sizes if any is set."""
    n = len(column)
    offsets = column.offsets
    if not n or offsets[n].as_py() == offsets[0].as_py():
        return _rows(np.tile(np.frombuffer(EMPTY_MAP, np.uint8), (n, 1))), None
    values = [dict(m) if m else {} for m in column.to_pylist()]
    encoded = pa.array([string_map(m) for m in values], pa.binary())
    sizes = [sum(len(k) + len(v) for k, v in m.items()) for m in values]
    return encoded, sizes


class RangeData:
    """One range's records: Arrow table, sorted keys, and (computed when asked) encodings.

    Args:
        table: The range file's columns, with the schema of range files.
        keys: The keys of ``table``, as Python strings.
        entries: The records' entries when already at hand; decoded from ``table`` otherwise.
    """

    __slots__ = ("_boundaries", "_encoded", "_entries", "_identities", "_sizes", "keys", "table")

    def __init__(self, table: pa.Table, keys: list[str], entries: list[Entry] | None = None):
        self.table = table
        self.keys = keys
        self._entries = entries
        self._encoded: tuple[bytes, Ints] | None = None
        self._sizes: Ints | None = None
        self._identities: list[str] | None = None
        self._boundaries: tuple[int, list[int]] | None = None

    @classmethod
    def from_parquet(cls, data: bytes) -> RangeData:
        """Return the records of the bytes of a range file."""
        table = pq.ParquetFile(pa.BufferReader(data)).read(use_threads=False)
        boundaries = _boundaries_of(table.schema.metadata)
        if "identity" not in table.column_names:
            entries = _decode_entries(table)
            ids = pa.array([e.identity for e in entries], pa.string())
            table = table.append_column("identity", ids)
        table = table.select(RANGE_SCHEMA.names).cast(RANGE_SCHEMA).combine_chunks()
        keys: list[str] = table.column("key").to_pylist()  # type: ignore[assignment]
        rows = cls(table, keys)
        if boundaries is not None and all(0 <= p < len(keys) for p in boundaries[1]):
            rows._boundaries = boundaries
        return rows

    def __len__(self) -> int:
        return len(self.keys)

    @property
    def entries(self) -> list[Entry]:
        """Return the records' entries, decoding them once."""
        if self._entries is None:
            self._entries = _decode_entries(self.table)
        return self._entries

    def identity(self, i: int) -> str:
        """Return the identity of record ``i`` as stored in the range."""
        if self._identities is None:
            self._identities = self.table.column("identity").to_pylist()  # type: ignore[assignment]
        return self._identities[i]  # type: ignore[index]

    def encoding(self) -> tuple[bytes, Ints]:
        """Return the canonical encoding of the records and where each record starts (n + 1)."""
        if self._encoded is None:
            self._encoded = self._encode()
        return self._encoded

    def sizes(self) -> Ints:
        """Return the running total of the records' estimated sizes (n + 1, from 0)."""
        if self._sizes is None:
            self._encode()
        assert self._sizes is not None
        return self._sizes

    def boundaries(self, raggedness: int) -> list[int]:
        """Return the positions of the keys a range ends after by the hash rule."""
        known = self._boundaries
        if known is None or known[0] != raggedness:
            known = (raggedness, boundary_positions(self.keys, raggedness))
            self._boundaries = known
        return known[1]

    def know_boundaries(self, raggedness: int, positions: list[int]) -> None:
        """Record the hash-rule boundaries of the keys, known to the writer of the range."""
        self._boundaries = (raggedness, positions)

    def _encode(self) -> tuple[bytes, Ints]:
        cols = self.table.columns
        arrays: list[Any] = [
            c.chunk(0) if c.num_chunks == 1 else c.combine_chunks() for c in cols[:8]
        ]
        key, address, address_type, size, mtime, checksum, content_type, metadata = arrays
        fields: list[_Binary] = []
        for column in (key, address, address_type):
            fields += _string_fields(column)
        fields.append(_int64s(size.to_numpy(zero_copy_only=False)))
        fields.append(_int64s(mtime.to_numpy(zero_copy_only=False)))
        for column in (checksum, content_type):
            fields += _string_fields(column)
        maps, map_sizes = _maps(metadata)
        fields.append(maps)
        encoded = _join(fields)
        self._encoded = encoded
        per_record = np.full(len(self.keys), 48, np.int64)
        for column in (key, address, checksum, content_type):
            per_record += pc.utf8_length(column).to_numpy(zero_copy_only=False)
        if map_sizes is not None:
            per_record = per_record + np.asarray(map_sizes, np.int64)
        sums = np.zeros(len(self.keys) + 1, np.int64)
        np.cumsum(per_record, out=sums[1:])
        self._sizes = sums
        return encoded


_OBJECT_COLUMNS = ["address", "address_type", "size"]


def range_objects(data: bytes) -> tuple[dict[str, int], dict[str, int]]:
    """Return the objects the records of a range file point at, with their sizes.

    The first map holds addresses relative to the storage namespace, the second full addresses.
    Only the three columns that say where an object is and how large are read: no entry is
    built, so it costs a fraction of decoding the range (what validating a mirror needs).

    Raises:
        ValueError: a record has an address type this version does not know.
    """
    table = pq.ParquetFile(pa.BufferReader(data)).read(columns=_OBJECT_COLUMNS, use_threads=False)
    addresses: list[str] = table.column("address").to_pylist()  # type: ignore[assignment]
    sizes: list[int] = table.column("size").to_pylist()  # type: ignore[assignment]
    kinds = set(table.column("address_type").unique().to_pylist())
    unknown = kinds - ADDRESS_TYPES.keys()
    if unknown:
        raise ValueError(f"range records of unknown address types {sorted(map(str, unknown))}")
    if AddressType.FULL not in kinds:
        return dict(zip(addresses, sizes, strict=True)), {}
    relative: dict[str, int] = {}
    full: dict[str, int] = {}
    types: list[str] = table.column("address_type").to_pylist()  # type: ignore[assignment]
    for address, kind, size in zip(addresses, types, sizes, strict=True):
        (full if kind == AddressType.FULL else relative)[address] = size
    return relative, full


def _decode_entries(table: pa.Table) -> list[Entry]:
    cols = table.select(
        ["address", "address_type", "size", "mtime", "checksum", "content_type", "metadata"]
    ).to_pydict()
    types = ADDRESS_TYPES
    return [
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


# A run of unchanged records: records ``start`` to ``stop`` (excluded) of a range.
Run = tuple[RangeData, int, int]


def build_range(pieces: Sequence[Run | list[Record]]) -> tuple[RangeID, RangeData, int]:
    """Return the ID, records and estimated size of the range made of ``pieces`` in order.

    Runs contribute slices of their range's table and encoding; lists of records are encoded
    one by one. The result hashes and stores the same bytes as
    :func:`~mirror.core.encoding.range_digest` and :func:`records_table` over the same records.
    """
    tables: list[pa.Table] = []
    encoded: list[Any] = []
    offsets: list[Ints] = []
    keys: list[str] = []
    entries: list[Entry] | None = []
    sizes: list[Ints] = [np.zeros(1, np.int64)]
    size = 0
    at = 0
    for piece in pieces:
        if isinstance(piece, list):
            # encoding an entry caches its identity too
            parts = [record_encoding(k, e) for k, e in piece]
            tables.append(records_table(piece, [e.identity for _, e in piece]))
            lengths = np.fromiter(map(len, parts), np.int64, len(parts))
            offsets.append(at + np.cumsum(lengths) - lengths)
            at += int(lengths.sum())
            encoded.extend(parts)
            keys.extend(k for k, _ in piece)
            estimates = np.fromiter((estimate(k, e) for k, e in piece), np.int64, len(piece))
            sizes.append(size + np.cumsum(estimates))
            size += int(estimates.sum())
            if entries is not None:
                entries.extend(e for _, e in piece)
            continue
        data, start, stop = piece
        blob, starts = data.encoding()
        sums = data.sizes()
        tables.append(data.table.slice(start, stop - start))
        first, last = int(starts[start]), int(starts[stop])
        encoded.append(memoryview(blob)[first:last])
        offsets.append(starts[start:stop] + (at - first))
        at += last - first
        keys.extend(data.keys[start:stop])
        sizes.append(sums[start + 1 : stop + 1] + (size - int(sums[start])))
        size += int(sums[stop] - sums[start])
        if entries is not None:
            entries = entries + data._entries[start:stop] if data._entries is not None else None
    blob = b"".join(encoded)
    rid = RangeID(hashlib.sha256(range_header(len(keys)) + blob).hexdigest())
    table = pa.concat_tables(tables).combine_chunks()
    result = RangeData(table, keys, entries)
    result._encoded = (blob, np.concatenate([*offsets, np.array([at], np.int64)]))
    result._sizes = np.concatenate(sizes)
    return rid, result, size


def metarange_encoding(table: pa.Table) -> tuple[bytes, Ints]:
    """Return the canonical encoding of each row of a metarange table, and the row offsets.

    A row is its range ID, first and last keys, record count and estimated bytes, as the
    metarange ID hashes it.
    """
    arrays: list[Any] = [
        c.chunk(0) if c.num_chunks == 1 else c.combine_chunks() for c in table.columns
    ]
    range_ids, min_keys, max_keys, counts, sizes = arrays
    fields: list[_Binary] = []
    for column in (range_ids, min_keys, max_keys):
        fields += _string_fields(column)
    fields.append(_int64s(counts.to_numpy(zero_copy_only=False)))
    fields.append(_int64s(sizes.to_numpy(zero_copy_only=False)))
    return _join(fields)
