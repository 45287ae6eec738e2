"""Rewriting ranges from columns writes the same IDs and file bytes as writing record by record.

A commit rewrites the ranges its changes fall in by splicing runs of the unchanged records
(Arrow slices and encoded bytes, :mod:`mirror.core.columnar`) around the changes. The references
are the record-by-record path: the same changes applied by adding every record of a touched
range one by one (:func:`record_by_record`), and, when the tree keeps one set of chunking
parameters, the whole resulting tree written from scratch. All must give the same metarange ID
and, file for file, the same bytes, whatever the changes: deletes, overwrites (with the same
identity or not), additions before, between and after existing keys, changes of a range's first
or last key, chains of commits over ranges written by earlier rewrites, ranges read cold from
their files, and trees written with other chunking parameters.
"""

from __future__ import annotations

import bisect
import hashlib
from collections.abc import Iterator

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mirror.block.memory import MemoryBlockStore
from mirror.core import AddressType, ChunkingParams, Entry, WriteStats
from mirror.core.columnar import (
    BOUNDARIES_KEY,
    RangeData,
    range_objects,
    records_table,
    to_parquet,
)
from mirror.core.committed import METADATA_PREFIX, CommittedStore
from mirror.core.encoding import (
    estimate,
    key_hash,
    range_digest,
    range_header,
    record_encoding,
)
from mirror.core.tree_writer import MetaRangeWriter, apply_changes
from tests.unit.entry_strategies import change_sets, entries

# small ranges, so that a few dozen records span many ranges, hash boundaries and size splits
PARAMS = (
    ChunkingParams(raggedness=8, max_bytes=1 << 20),
    ChunkingParams(raggedness=6, max_bytes=900),
    ChunkingParams(raggedness=1 << 30, max_bytes=700),
)

keys = st.text(alphabet="ab/=.é日", min_size=1, max_size=7)
trees = st.dictionaries(keys, entries, max_size=80)


def applied(tree: dict[str, Entry], changes: dict[str, Entry | None]) -> dict[str, Entry]:
    out = dict(tree)
    for key, entry in changes.items():
        if entry is None:
            out.pop(key, None)
        elif key not in out or out[key].identity != entry.identity:
            out[key] = entry
    return out


def files_of(store: CommittedStore, mid: str) -> dict[str, bytes]:
    """Return the bytes of the metarange ``mid`` and of each of its ranges, by key."""
    names = [METADATA_PREFIX + mid] + [METADATA_PREFIX + r.id for r in store.read_metarange(mid)]
    return {name: store.block.get(name) for name in names}


def record_by_record(
    store: CommittedStore, params: ChunkingParams, base: str, changes: dict[str, Entry | None]
) -> str:
    """Apply ``changes`` as commits did before columnar rewriting: every record of a touched
    range goes through :meth:`MetaRangeWriter.add`; untouched ranges are reused the same way."""
    writer = MetaRangeWriter(store, params, WriteStats())
    pending = sorted(changes.items())
    ranges = store.read_metarange(base)
    max_keys = [r.max_key for r in ranges]
    c = 0

    def before(bound: str, inclusive: bool) -> Iterator[tuple[str, Entry | None]]:
        nonlocal c
        while c < len(pending) and (pending[c][0] <= bound if inclusive else pending[c][0] < bound):
            c += 1
            yield pending[c - 1]

    i = 0
    while i < len(ranges):
        if writer.at_boundary:
            nxt = pending[c][0] if c < len(pending) else None
            j = len(ranges) if nxt is None else bisect.bisect_left(max_keys, nxt, i)
            if j > i:
                tail_ok = params.ends_range(ranges[j - 1]) or (j == len(ranges) and nxt is None)
                reuse = j if tail_ok else j - 1
                writer.add_ranges(ranges[i:reuse])
                i = reuse
                if i == j:
                    continue
        r = ranges[i]
        i += 1
        keys, entries = store.read_range(r.id)
        for key, entry in zip(keys, entries, strict=True):
            for k, e in before(key, inclusive=False):
                if e is not None:
                    writer.add(k, e)
            if c < len(pending) and pending[c][0] == key:
                new = pending[c][1]
                c += 1
                if new is None:
                    continue
                if new.identity != entry.identity:
                    writer.add(key, new)
                    continue
            writer.add(key, entry)
        for k, e in before(r.max_key, inclusive=True):
            if e is not None:
                writer.add(k, e)
    for k, e in pending[c:]:
        if e is not None:
            writer.add(k, e)
    return writer.close()


def reference(tree: dict[str, Entry], params: ChunkingParams) -> tuple[str, dict[str, bytes]]:
    """Return the tree written record by record from scratch, and its files."""
    store = CommittedStore(MemoryBlockStore("mem://reference"))
    mid, _ = apply_changes(store, params, "", sorted(tree.items()))
    return mid, files_of(store, mid)


@settings(max_examples=60, deadline=None)
@given(st.data(), trees, st.sampled_from(PARAMS), st.sampled_from(PARAMS))
def test_rewritten_tree_is_byte_identical_to_the_record_path(
    data: st.DataObject,
    base: dict[str, Entry],
    base_params: ChunkingParams,
    params: ChunkingParams,
) -> None:
    block = MemoryBlockStore("mem://columnar")
    warm = CommittedStore(block)
    mid, _ = apply_changes(warm, base_params, "", sorted(base.items()))
    by_record = CommittedStore(MemoryBlockStore("mem://by-record"), cache_size=0)
    old_mid, _ = apply_changes(by_record, base_params, "", sorted(base.items()))
    assert old_mid == mid
    tree = base
    for step in range(3):
        changes = data.draw(change_sets(tree, keys))
        # warm: ranges written by the previous step come from the cache; cold: from their files
        store = warm if step != 1 else CommittedStore(block, cache_size=0)
        mid, stats = apply_changes(store, params, mid, sorted(changes.items()), WriteStats())
        expected = applied(tree, changes)
        assert stats.added + stats.changed == sum(
            1 for k, e in expected.items() if tree.get(k) is not e
        )
        assert stats.removed == len(tree.keys() - expected.keys())
        tree = expected
        old_mid = record_by_record(by_record, params, old_mid, changes)
        assert mid == old_mid
        assert files_of(CommittedStore(block, cache_size=0), mid) == files_of(by_record, old_mid)
        assert list(warm.iterate(mid)) == sorted(tree.items())
        # the last keys lookups bisect: a rewrite splices them from its base's, as it does rows
        ranges = warm.read_metarange(mid)
        assert warm.max_keys(mid, ranges) == [r.max_key for r in ranges]
        assert all(warm.lookup(mid, k) == e for k, e in tree.items())
        if base_params == params:
            # one set of parameters: the tree is a function of its records alone
            want_mid, want_files = reference(tree, params)
            assert mid == want_mid
            assert files_of(CommittedStore(block, cache_size=0), mid) == want_files


@settings(max_examples=80, deadline=None)
@given(st.dictionaries(keys, entries, min_size=1, max_size=40))
def test_columns_encode_as_the_records_do(tree: dict[str, Entry]) -> None:
    records = sorted(tree.items())
    rid, identities = range_digest(records)
    rows = RangeData.from_parquet(to_parquet(records_table(records, identities)))
    blob, starts = rows.encoding()
    parts = [record_encoding(k, e) for k, e in records]
    assert blob == b"".join(parts)
    assert [int(s) for s in starts] == [sum(map(len, parts[:i])) for i in range(len(parts) + 1)]
    assert hashlib.sha256(range_header(len(records)) + blob).hexdigest() == rid
    sizes = [0]
    for k, e in records:
        sizes.append(sizes[-1] + estimate(k, e))
    assert rows.sizes().tolist() == sizes
    assert rows.keys == [k for k, _ in records]
    assert rows.entries == [e for _, e in records]
    assert [rows.identity(i) for i in range(len(records))] == identities
    for raggedness in (2, 3, 512):
        expected = [i for i, (k, _) in enumerate(records) if key_hash(k) % raggedness == 0]
        assert rows.boundaries(raggedness) == expected


@settings(max_examples=40, deadline=None)
@given(trees, st.sampled_from(PARAMS))
def test_range_files_record_their_boundaries(
    tree: dict[str, Entry], params: ChunkingParams
) -> None:
    """A range file written by the tree writer says where its hash-rule boundaries are, and a
    cold read trusts it only for the raggedness it was written with."""
    block = MemoryBlockStore("mem://boundaries")
    mid, _ = apply_changes(CommittedStore(block), params, "", sorted(tree.items()))
    cold = CommittedStore(block, cache_size=0)
    for info in cold.read_metarange(mid):
        data = block.get(METADATA_PREFIX + info.id)
        recorded = pq.ParquetFile(pa.BufferReader(data)).schema_arrow.metadata[BOUNDARIES_KEY]
        rows = RangeData.from_parquet(data)
        expected = [i for i, k in enumerate(rows.keys) if key_hash(k) % params.raggedness == 0]
        assert recorded == f"{params.raggedness}:{','.join(map(str, expected))}".encode()
        assert rows._boundaries == (params.raggedness, expected)
        other = params.raggedness + 1
        assert rows.boundaries(other) == [
            i for i, k in enumerate(rows.keys) if key_hash(k) % other == 0
        ]


@settings(max_examples=60, deadline=None)
@given(trees)
def test_range_objects_read_what_decoding_the_range_gives(tree: dict[str, Entry]) -> None:
    """The three columns a mirror's validation reads agree with the range's decoded entries."""
    records = sorted(tree.items())
    data = to_parquet(records_table(records, [e.identity for _, e in records]))
    relative, full = range_objects(data)
    want: dict[AddressType, dict[str, int]] = {t: {} for t in AddressType}
    for e in RangeData.from_parquet(data).entries:
        want[e.address_type][e.address] = e.size
    assert (relative, full) == (want[AddressType.RELATIVE], want[AddressType.FULL])


def test_range_objects_refuse_an_unknown_address_type() -> None:
    """A record whose address type this version does not know is an error, not a guess."""
    records = [("k", Entry("a", 1, "c", 0, "", {}, AddressType.RELATIVE))]
    table = records_table(records, [records[0][1].identity])
    kinds = table.schema.get_field_index("address_type")
    table = table.set_column(kinds, "address_type", pa.array(["symbolic"], pa.string()))
    with pytest.raises(ValueError, match="symbolic"):
        range_objects(to_parquet(table))
