"""New records given as columns write the same ranges as the same records added one by one.

:func:`~mirror.core.record_columns.rows_of_columns` turns columns into range rows with their
identities, and :func:`~mirror.core.tree_writer.apply_changes` takes runs of such rows among
its changes. The reference is the record path: an :class:`Entry` per record, its identity, and
``(key, entry)`` changes. Both must give the same identities, tables, range IDs, metarange IDs
and file bytes, on any base tree: keys that end ranges by the hash rule, runs crossing
``max_bytes``, new records equal (by identity) to the base's, deletions among the runs.
"""

from __future__ import annotations

import pyarrow as pa
import pyarrow.parquet as pq
from hypothesis import given, settings
from hypothesis import strategies as st

from mirror.block.memory import MemoryBlockStore
from mirror.core import AddressType, ChunkingParams, Entry, WriteStats
from mirror.core.columnar import Run, build_range, records_table
from mirror.core.committed import METADATA_PREFIX, CommittedStore
from mirror.core.encoding import boundary_positions, key_hash, range_digest, record_encoding
from mirror.core.record_columns import rows_of_columns, rows_of_records
from mirror.core.tree_writer import apply_changes
from tests.unit.entry_strategies import change_sets, entries

PARAMS = (
    ChunkingParams(raggedness=5, max_bytes=1 << 20),
    ChunkingParams(raggedness=7, max_bytes=600),
    ChunkingParams(raggedness=1 << 30, max_bytes=500),
)

keys = st.text(alphabet="ab/=.é日\U0001f600", min_size=1, max_size=7)
records = st.dictionaries(keys, entries, min_size=1, max_size=60).map(lambda d: sorted(d.items()))
settled = settings(max_examples=40, deadline=None, derandomize=True)


@settled
@given(records)
def test_rows_of_columns_are_the_records_table_and_encoding(
    recs: list[tuple[str, Entry]],
) -> None:
    rows = rows_of_records(recs)
    expected_id, identities = range_digest(recs)
    assert identities == [e.identity for _, e in recs]
    assert rows.table.equals(records_table(recs, identities))
    assert [rows.identity(i) for i in range(len(recs))] == identities
    blob, starts = rows.encoding()
    parts = [record_encoding(k, e) for k, e in recs]
    assert blob == b"".join(parts)
    assert starts.tolist()[1:] == [sum(map(len, parts[: i + 1])) for i in range(len(parts))]
    rid, built, _ = build_range([(rows, 0, len(recs))])
    assert rid == expected_id
    assert built.table.equals(rows.table)


def test_rows_of_columns_with_shared_values() -> None:
    """One content type and address type for all, no metadata: what an import gives."""
    paths = ["a", "b/\u00e9", "c"]
    rows = rows_of_columns(
        paths,
        ["local://s/a", "local://s/b", "local://s/c"],
        [0, 5, 2**40],
        ["d41d8cd98f00b204e9800998ecf8427e", "", "ff"],
        [1, 2, 3],
        address_types=AddressType.FULL,
    )
    recs = [(k, e) for k, e in zip(paths, [_full(rows, i) for i in range(3)], strict=True)]
    assert rows.table.equals(records_table(recs, [e.identity for _, e in recs]))
    assert rows.table.column("address_type").to_pylist() == ["full"] * 3
    assert rows.table.column("content_type").to_pylist() == ["application/octet-stream"] * 3
    empty = rows_of_columns([], [], [], [], [])
    assert len(empty) == 0 and empty.table.num_rows == 0


def _full(rows: object, i: int) -> Entry:
    table = rows.table  # type: ignore[attr-defined]
    return Entry(
        address=table.column("address")[i].as_py(),
        size=table.column("size")[i].as_py(),
        checksum=table.column("checksum")[i].as_py(),
        mtime=table.column("mtime")[i].as_py(),
        address_type=AddressType.FULL,
    )


def test_boundary_positions_match_the_hash_rule() -> None:
    ks = [f"k{i}\u00e9" for i in range(2000)]
    for raggedness in (1, 2, 7, 64, 1 << 30, 1 << 64, -3):
        expected = [i for i, k in enumerate(ks) if key_hash(k) % raggedness == 0]
        assert boundary_positions(ks, raggedness) == expected
    assert boundary_positions([], 8) == []


def files_of(store: CommittedStore, mid: str) -> dict[str, bytes]:
    """Return the range files of a tree, by range ID."""
    return {r.id: store.block.get(METADATA_PREFIX + r.id) for r in store.read_metarange(mid)}


@st.composite
def runs_and_changes(
    draw: st.DrawFn, base: dict[str, Entry]
) -> tuple[list[tuple[str, Entry | None]], list[tuple[str, Entry | None] | Run]]:
    """Return changes to ``base`` record by record, and the same with new records as runs.

    New records are new keys, base keys with another entry, and base keys with an entry of the
    same identity (which keeps the base record); deletions of other base keys fall among them.
    """
    changes = draw(change_sets(base, keys, touched=20, added=60, absent=0))
    ordered = sorted(changes.items())
    # cut the changes into batches; a batch's new records are one rows object, given as runs
    # between its deletions (cut further at random)
    batched: list[tuple[str, Entry | None] | Run] = []
    at = 0
    while at < len(ordered):
        end = draw(st.integers(at + 1, len(ordered)))
        batch = ordered[at:end]
        at = end
        new = [(k, e) for k, e in batch if e is not None]
        rows = rows_of_records(new) if new else None
        i = 0
        extend = False  # whether the last change is a run of this batch, open to extend
        for key, entry in batch:
            if entry is None:
                batched.append((key, None))
                extend = False
                continue
            if extend and draw(st.integers(0, 3)):
                r, a, _ = batched[-1]  # type: ignore[misc]
                batched[-1] = (r, a, i + 1)
            else:
                batched.append((rows, i, i + 1))  # type: ignore[arg-type]
            extend = True
            i += 1
    return ordered, batched


@settled
@given(
    st.data(),
    st.dictionaries(keys, entries, max_size=80),
    st.sampled_from(PARAMS),
    st.sampled_from(PARAMS),
)
def test_runs_of_new_records_write_the_tree_of_the_record_path(
    data: st.DataObject,
    base: dict[str, Entry],
    base_params: ChunkingParams,
    params: ChunkingParams,
) -> None:
    ordered, batched = data.draw(runs_and_changes(base))
    by_record = CommittedStore(MemoryBlockStore("mem://by-record"))
    by_runs = CommittedStore(MemoryBlockStore("mem://by-runs"))
    cold = CommittedStore(by_runs.block, cache_size=0)
    mid, _ = apply_changes(by_record, base_params, "", sorted(base.items()))
    assert apply_changes(by_runs, base_params, "", sorted(base.items()))[0] == mid
    expected, expected_stats = apply_changes(by_record, params, mid, ordered, WriteStats())
    got, stats = apply_changes(cold, params, mid, batched, WriteStats())
    assert got == expected
    assert (stats.added, stats.changed, stats.removed) == (
        expected_stats.added,
        expected_stats.changed,
        expected_stats.removed,
    )
    assert files_of(by_runs, got) == files_of(by_record, expected)
    # the files read back hold exactly the records
    for data_bytes in files_of(by_runs, got).values():
        table = pq.ParquetFile(pa.BufferReader(data_bytes)).read()
        assert table.num_rows > 0
