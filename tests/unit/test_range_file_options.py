"""Range and metarange files are written with a codec and an encoding chosen per column.

Which column gets which (:func:`mirror.core.columnar.to_parquet`) is a cost choice measured by
``bench.parquet_options``; what must hold whatever the choice: every record reads back as
written (negative sizes, metadata maps, unicode), the boundaries metadata survives, files
written with the previous options (zstd on every column, plain encodings) still read the same,
and the IDs never depend on the file.
"""

from __future__ import annotations

import io

import pyarrow as pa
import pyarrow.parquet as pq
from hypothesis import given, settings
from hypothesis import strategies as st

from mirror.core import Entry
from mirror.core.columnar import (
    BOUNDARIES_KEY,
    RangeData,
    boundaries_metadata,
    records_table,
    to_parquet,
)
from mirror.core.committed import RangeInfo, _metarange_table, decode_metarange
from mirror.core.ids import RangeID
from tests.unit.entry_strategies import entries

records = st.dictionaries(
    st.text(alphabet="ab/=.é日", min_size=1, max_size=9), entries, max_size=60
)


def _range_table(tree: dict[str, Entry]) -> pa.Table:
    items = sorted(tree.items())
    return records_table(items, [e.identity for _, e in items])


def _columns(data: bytes) -> dict[str, tuple[str, tuple[str, ...]]]:
    metadata = pq.ParquetFile(pa.BufferReader(data)).metadata
    group = metadata.row_group(0)
    return {
        group.column(i).path_in_schema: (group.column(i).compression, group.column(i).encodings)
        for i in range(metadata.num_columns)
    }


def _previous_options(table: pa.Table) -> bytes:
    buf = io.BytesIO()
    pq.write_table(table, buf, compression="zstd", use_dictionary=False)
    return buf.getvalue()


@settings(max_examples=60, deadline=None)
@given(records)
def test_a_range_reads_back_as_written_in_either_format(tree: dict[str, Entry]) -> None:
    table = _range_table(tree)
    for data in (to_parquet(table), _previous_options(table)):
        rows = RangeData.from_parquet(data)
        assert rows.table.equals(table)
        assert rows.keys == sorted(tree)
        assert rows.entries == [tree[k] for k in sorted(tree)]


def test_boundaries_metadata_survives_the_options() -> None:
    tree = {
        f"k{i:03d}": Entry(address=f"a/{i}", size=i, checksum="ab" * 16, mtime=i) for i in range(40)
    }
    data = to_parquet(_range_table(tree), boundaries_metadata(512, [3, 17]))
    assert pq.read_schema(pa.BufferReader(data)).metadata[BOUNDARIES_KEY] == b"512:3,17"
    assert RangeData.from_parquet(data).boundaries(512) == [3, 17]


def test_each_column_has_its_codec_and_encoding() -> None:
    tree = {
        f"tables/t/date=2024-01-{i % 28 + 1:02d}/part-{i:05d}.parquet": Entry(
            address=f"data/g0000001/{i:026d}",
            size=1_000_000 + i,
            checksum=f"{i:032x}",
            mtime=1_700_000_000 + i // 10,
            content_type="application/octet-stream",
            metadata={"owner": "etl"} if i % 2 else {},
        )
        for i in range(300)
    }
    columns = _columns(to_parquet(_range_table(tree)))
    compressed = {name for name, (codec, _) in columns.items() if codec == "ZSTD"}
    assert compressed == {"key", "address", "checksum", "identity"}
    assert "DELTA_BYTE_ARRAY" in columns["address"][1]
    for digest in ("checksum", "identity"):
        assert "DELTA_LENGTH_BYTE_ARRAY" in columns[digest][1]
    for integer in ("size", "mtime"):
        assert "DELTA_BINARY_PACKED" in columns[integer][1]
    for repeated in (
        "address_type",
        "content_type",
        "metadata.key_value.key",
        "metadata.key_value.value",
    ):
        assert "RLE_DICTIONARY" in columns[repeated][1]


def _ranges(n: int) -> list[RangeInfo]:
    return [
        RangeInfo(RangeID(f"{i:064x}"), f"k{i:05d}a", f"k{i:05d}z", i + 1, -i * 1000)
        for i in range(n)
    ]


def test_metaranges_read_back_and_a_few_rows_are_not_compressed() -> None:
    for n, codecs in ((3, {"UNCOMPRESSED"}), (200, {"UNCOMPRESSED", "ZSTD"})):
        ranges = _ranges(n)
        table = _metarange_table(ranges)
        data = to_parquet(table)
        assert decode_metarange(data) == ranges
        assert decode_metarange(_previous_options(table)) == ranges
        columns = _columns(data)
        assert {codec for codec, _ in columns.values()} == codecs
        assert "DELTA_LENGTH_BYTE_ARRAY" in columns["range_id"][1]
        assert "DELTA_BINARY_PACKED" in columns["count"][1]
