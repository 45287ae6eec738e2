"""Range and metarange IDs, and stored identities, equal the canonical :class:`Encoder` hashes."""

from __future__ import annotations

import io

import pyarrow.parquet as pq
from hypothesis import given, settings
from hypothesis import strategies as st

from mirror.block.memory import MemoryBlockStore
from mirror.core import AddressType, Entry, RangeID, RangeInfo, WriteStats
from mirror.core.committed import METADATA_PREFIX, CommittedStore, metarange_id, range_id
from mirror.core.ids import Encoder

text = st.text(max_size=20)
int64 = st.integers(min_value=-(2**63), max_value=2**63 - 1)
entries = st.builds(
    Entry,
    address=text,
    size=int64,
    checksum=text,
    mtime=int64,
    content_type=st.sampled_from(["", "application/octet-stream", "text/csv"]) | text,
    metadata=st.dictionaries(text, text, max_size=4),
    address_type=st.sampled_from(list(AddressType)),
)
records = st.dictionaries(st.text(min_size=1, max_size=30), entries, min_size=1, max_size=30).map(
    lambda d: sorted(d.items())
)
range_infos = st.lists(
    st.builds(RangeInfo, st.text(max_size=64).map(RangeID), text, text, int64, int64), max_size=20
)


def reference_range_id(recs: list[tuple[str, Entry]]) -> str:
    enc = Encoder().string("range:v1").int64(len(recs))
    for key, e in recs:
        (
            enc.string(key)
            .string(e.address)
            .string(e.address_type.value)
            .int64(e.size)
            .int64(e.mtime)
            .string(e.checksum)
            .string(e.content_type)
            .string_map(e.metadata)
        )
    return enc.hexdigest()


def reference_metarange_id(ranges: list[RangeInfo]) -> str:
    enc = Encoder().string("metarange:v1").int64(len(ranges))
    for r in ranges:
        enc.string(r.id).string(r.min_key).string(r.max_key).int64(r.count).int64(r.bytes)
    return enc.hexdigest()


@settings(deadline=None)
@given(records)
def test_range_id_is_the_canonical_encoding(recs: list[tuple[str, Entry]]) -> None:
    assert range_id(recs) == reference_range_id(recs)


@settings(deadline=None)
@given(range_infos)
def test_metarange_id_is_the_canonical_encoding(ranges: list[RangeInfo]) -> None:
    assert metarange_id(ranges) == reference_metarange_id(ranges)


@settings(max_examples=50, deadline=None)
@given(records)
def test_written_range_stores_identities_and_reads_back(recs: list[tuple[str, Entry]]) -> None:
    store = CommittedStore(MemoryBlockStore("mem://enc"), cache_size=0)
    info = store.write_range(recs, WriteStats())
    assert info.id == reference_range_id(recs)
    table = pq.read_table(io.BytesIO(store.block.get(METADATA_PREFIX + info.id)))
    assert table.column("identity").to_pylist() == [e.identity for _, e in recs]
    assert table.column("address_type").to_pylist() == [e.address_type.value for _, e in recs]
    keys, read = store.read_range(info.id)
    assert list(zip(keys, read, strict=True)) == recs
