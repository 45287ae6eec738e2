"""Properties of the validator: what replication has not delivered yet is exactly what it reports.

One source tree (objects in several partitions, a few ranges, with a base tree under it), and for
each example a destination from which random range files and data objects are withheld.
"""

from __future__ import annotations

import functools
import hashlib
from dataclasses import dataclass

import anyio
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mirror.block import MemoryBlockStore
from mirror.core import ChunkingParams, Entry, open_memory
from mirror.core.committed import METADATA_PREFIX
from mirror.validator import (
    MemoryValidatedRanges,
    ObjectCache,
    ThreadedObjectReader,
    ValidationReport,
    Validator,
)

MTIME = 1_700_000_000


@dataclass(frozen=True)
class Tree:
    files: dict[str, bytes]
    head: str
    base: str
    base_ranges: frozenset[str]
    head_ranges: tuple[str, ...]
    objects: tuple[str, ...]
    range_of: dict[str, str]


def body_of(n: int) -> bytes:
    return b"x" * (n % 13)


@functools.cache
def tree() -> Tree:
    catalog = open_memory(chunking=ChunkingParams(raggedness=24))
    repo = catalog.create_repository("repo", "mem://src")
    store = catalog.block_store(repo)

    def commit(numbers: range) -> str:
        changes = []
        for n in numbers:
            address = f"data/p{n % 4}/{n:06d}"
            store.put(address, body_of(n))
            entry = Entry(address, n % 13, hashlib.md5(body_of(n)).hexdigest(), MTIME)
            changes.append((f"table/{n % 7}/part-{n:06d}", entry))
        return catalog.commit_tree("repo", "main", sorted(changes), "c").commit.metarange_id

    base = commit(range(200))
    head = commit(range(200, 320))
    committed = catalog.committed(repo)
    range_of: dict[str, str] = {}
    head_ranges = committed.read_metarange(head)
    for r in head_ranges:
        for entry in committed.read_range(r.id)[1]:
            range_of[entry.address] = METADATA_PREFIX + r.id
    files = {o.key: store.get(o.key) for o in store.list()}
    return Tree(
        files=files,
        head=head,
        base=base,
        base_ranges=frozenset(r.id for r in committed.read_metarange(base)),
        head_ranges=tuple(METADATA_PREFIX + r.id for r in head_ranges),
        objects=tuple(sorted(range_of)),
        range_of=range_of,
    )


def validate(
    withheld: set[str], threshold: int, concurrency: int, use_base: bool
) -> ValidationReport:
    t = tree()
    dst = MemoryBlockStore("mem://dst")
    for key, data in t.files.items():
        if key not in withheld:
            dst.put(key, data)
    check = Validator(
        ThreadedObjectReader(dst),
        validated=MemoryValidatedRanges(t.base_ranges if use_base else ()),
        objects=ObjectCache(),
        list_threshold=threshold,
        concurrency=concurrency,
    )
    base = t.base if use_base else ""
    return anyio.run(check.validate, t.head, base, backend="asyncio")


common = settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@common
@given(
    data=st.data(),
    threshold=st.sampled_from([1, 3, 8, 10_000]),
    concurrency=st.integers(1, 8),
    use_base=st.booleans(),
)
def test_missing_objects_are_exactly_those_withheld(
    data: st.DataObject, threshold: int, concurrency: int, use_base: bool
) -> None:
    t = tree()
    # with a base, only objects new since it are checked; withhold among those
    pool = [a for a in t.objects if not use_base or int(a[-6:]) >= 200]
    withheld = set(data.draw(st.lists(st.sampled_from(pool), max_size=40, unique=True)))
    report = validate(withheld, threshold, concurrency, use_base)
    assert report.complete == (not withheld)
    assert report.missing_count == len(withheld)
    assert set(report.missing) == withheld


@common
@given(
    data=st.data(),
    threshold=st.sampled_from([1, 8, 10_000]),
)
def test_objects_of_a_missing_range_are_not_reported(data: st.DataObject, threshold: int) -> None:
    t = tree()
    ranges = set(data.draw(st.lists(st.sampled_from(t.head_ranges), max_size=3, unique=True)))
    objects = set(data.draw(st.lists(st.sampled_from(t.objects), max_size=20, unique=True)))
    report = validate(ranges | objects, threshold, 4, False)
    expected = ranges | {o for o in objects if t.range_of[o] not in ranges}
    assert report.complete == (not expected)
    assert report.missing_count == len(expected)
    assert set(report.missing) == expected
    assert report.ranges_read == len(t.head_ranges) - len(ranges)
