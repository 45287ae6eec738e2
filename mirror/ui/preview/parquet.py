"""A Parquet object's schema and first rows, read with pyarrow from a few bounded ranges.

Never the whole object: the footer is read from the end (:data:`TAIL_BYTES`, then all of it
if it is longer, up to :data:`MAX_FOOTER`), then the column chunks of the first row group only,
as many leading columns as fit in :data:`MAX_ROW_GROUP_BYTES`; pyarrow reads those ranges from
memory and decodes :data:`PARQUET_ROWS` rows. Each step that leaves something out says so.
"""

from __future__ import annotations

import io
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field, replace

import pyarrow as pa
import pyarrow.parquet as pq
from starlette.concurrency import run_in_threadpool

from mirror.ui.preview.tables import Table, shaped_table

__all__ = [
    "MAX_FOOTER",
    "MAX_ROW_GROUP_BYTES",
    "PARQUET_ROWS",
    "TAIL_BYTES",
    "Column",
    "ParquetPreview",
    "ParquetPreviewError",
    "RangeRead",
    "parquet_preview",
]

TAIL_BYTES = 64 << 10
"""The first read, from the end of the object: the footer of most files fits."""
MAX_FOOTER = 8 << 20
"""A longer footer (a very wide or very long file's) is not read."""
MAX_ROW_GROUP_BYTES = 32 << 20
"""The most bytes of the first row group read for its first rows."""
PARQUET_ROWS = 20
"""Rows shown (lakeFS's preview query says ``LIMIT 20``)."""
_SLACK = 1 << 10
"""Read a little past a column chunk's recorded end: some writers record it short."""
_MAGIC = b"PAR1"

RangeRead = Callable[[int, int], Awaitable[bytes]]
"""Read the object's bytes ``[start, end)``."""


class ParquetPreviewError(Exception):
    """The object cannot be previewed as Parquet; the message says why, for the person."""


@dataclass(frozen=True, slots=True)
class Column:
    """A top-level column of the schema."""

    name: str
    type: str
    nullable: bool


@dataclass(frozen=True, slots=True)
class ParquetPreview:
    """What the preview shows.

    Attributes:
        columns: The schema's top-level columns.
        num_rows: Rows in the file (from the footer).
        num_row_groups: Row groups in the file.
        created_by: The writer the footer names.
        table: The first rows, or ``None`` (``notes`` says why).
        notes: What was left out, and why.
        error: Why nothing could be read (then everything else is empty).
    """

    columns: list[Column] = field(default_factory=list)
    num_rows: int = 0
    num_row_groups: int = 0
    created_by: str = ""
    table: Table | None = None
    notes: list[str] = field(default_factory=list)
    error: str = ""


class _Ranges(io.RawIOBase):
    """A file of ``size`` bytes of which only some ranges were read; reading elsewhere fails."""

    def __init__(self, size: int) -> None:
        super().__init__()
        self._size = size
        self._pos = 0
        self._pieces: list[tuple[int, bytes]] = []

    def add(self, start: int, data: bytes) -> None:
        self._pieces.append((start, data))

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        return self._pos

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        base = {io.SEEK_SET: 0, io.SEEK_CUR: self._pos, io.SEEK_END: self._size}[whence]
        self._pos = base + offset
        return self._pos

    def read(self, size: int | None = -1) -> bytes:
        end = self._size if size is None or size < 0 else min(self._size, self._pos + size)
        for start, data in self._pieces:
            if start <= self._pos and end <= start + len(data):
                chunk = data[self._pos - start : end - start]
                self._pos = end
                return chunk
        raise OSError(f"bytes {self._pos}-{end} were not read for the preview")

    def readall(self) -> bytes:
        return self.read(-1)


def _cell(value: object) -> object:
    if isinstance(value, bytes):
        return value.hex() if len(value) <= 64 else value[:64].hex() + "…"
    return value


def _extents(metadata: pq.FileMetaData) -> dict[str, tuple[int, int]]:
    """Return each top-level column's byte range in the first row group."""
    group = metadata.row_group(0)
    found: dict[str, tuple[int, int]] = {}
    for j in range(group.num_columns):
        chunk = group.column(j)
        start = chunk.data_page_offset
        if chunk.has_dictionary_page and chunk.dictionary_page_offset:
            start = min(start, chunk.dictionary_page_offset)
        end = start + chunk.total_compressed_size
        top = chunk.path_in_schema.split(".", 1)[0]
        low, high = found.get(top, (start, end))
        found[top] = (min(low, start), max(high, end))
    return found


def _choose(names: list[str], extents: dict[str, tuple[int, int]]) -> tuple[list[str], int, int]:
    """Return the leading columns whose chunks fit the bound, and the range they span."""
    chosen: list[str] = []
    low = high = -1
    for name in names:
        start, end = extents.get(name, (low, high))
        new_low = start if low < 0 else min(low, start)
        new_high = max(high, end)
        if new_high - new_low > MAX_ROW_GROUP_BYTES:
            break
        chosen.append(name)
        low, high = new_low, new_high
    return chosen, low, high


def _open(ranges: _Ranges) -> pq.ParquetFile:
    return pq.ParquetFile(pa.PythonFile(ranges, mode="r"))


def _first_rows(parquet: pq.ParquetFile, columns: list[str]) -> list[list[object]]:
    batches = parquet.iter_batches(
        batch_size=PARQUET_ROWS, row_groups=[0], columns=columns, use_threads=False
    )
    batch = next(iter(batches), None)
    if batch is None:
        return []
    rows = batch.to_pylist()
    return [[_cell(row[name]) for name in columns] for row in rows[:PARQUET_ROWS]]


async def _footer(read: RangeRead, size: int, ranges: _Ranges) -> None:
    if size < 12:
        raise ParquetPreviewError("too short to be a Parquet file")
    start = max(0, size - TAIL_BYTES)
    tail = await read(start, size)
    if tail[-4:] != _MAGIC:
        raise ParquetPreviewError("not a Parquet file: it does not end with PAR1")
    length = int.from_bytes(tail[-8:-4], "little") + 8
    if length > size - 4:
        raise ParquetPreviewError("not a Parquet file: its footer length is past its start")
    if length > len(tail):
        if length > MAX_FOOTER:
            raise ParquetPreviewError(
                f"its footer is {length:,} bytes, more than the {MAX_FOOTER >> 20} MiB a "
                "preview reads"
            )
        start = size - length
        tail = await read(start, size)
    ranges.add(start, tail)


async def parquet_preview(read: RangeRead, size: int) -> ParquetPreview:
    """Return the schema and first rows of a Parquet object of ``size`` bytes."""
    ranges = _Ranges(size)
    try:
        await _footer(read, size, ranges)
        parquet = await run_in_threadpool(_open, ranges)
    except ParquetPreviewError as exc:
        return ParquetPreview(error=str(exc))
    except (OSError, pa.ArrowException) as exc:
        return ParquetPreview(error=f"its footer could not be read: {exc}")
    metadata = parquet.metadata
    schema = parquet.schema_arrow
    columns = [Column(f.name, str(f.type), f.nullable) for f in schema]
    preview = ParquetPreview(
        columns=columns,
        num_rows=metadata.num_rows,
        num_row_groups=metadata.num_row_groups,
        created_by=metadata.created_by or "",
    )
    if metadata.num_row_groups == 0 or metadata.num_rows == 0:
        return preview
    names = [c.name for c in columns]
    chosen, low, high = _choose(names, _extents(metadata))
    notes = []
    if not chosen:
        notes.append(
            f"Rows are not shown: the first column of the first row group is larger than the "
            f"{MAX_ROW_GROUP_BYTES >> 20} MiB a preview reads."
        )
        return replace(preview, table=None, notes=notes)
    if len(chosen) < len(names):
        notes.append(
            f"Showing {len(chosen)} of {len(names)} columns: the others' data in the first row "
            f"group goes past the {MAX_ROW_GROUP_BYTES >> 20} MiB a preview reads."
        )
    if low >= 0:
        ranges.add(low, await read(low, min(size, high + _SLACK)))
    try:
        rows = await run_in_threadpool(_first_rows, parquet, chosen)
    except (OSError, pa.ArrowException) as exc:
        return replace(
            preview, table=None, notes=[*notes, f"The first rows could not be read: {exc}"]
        )
    first_group = metadata.row_group(0).num_rows
    more = metadata.num_rows > len(rows)
    if more:
        notes.append(
            f"Showing the first {len(rows):,} of {metadata.num_rows:,} rows"
            + (f" (row group 1 of {metadata.num_row_groups:,})." if first_group else ".")
        )
    return replace(preview, table=shaped_table(chosen, rows, more), notes=notes)
