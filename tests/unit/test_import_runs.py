"""An import streamed as runs of columns writes the tree the record-by-record import writes.

:func:`~mirror.core.import_listing.import_runs` (what :func:`import_objects` uses) and
:func:`~mirror.core.import_listing.import_changes` (an entry per object) are applied onto the same
base trees, from real directories listed by :class:`~mirror.block.local.LocalBlockStore`: one
source and several (overlapping, the later winning), onto a tree holding objects under the
destination (kept when unchanged, replaced, removed), and from a store that lists no details
(as S3 does). Metarange IDs, range files, counts and progress must all agree.
"""

from __future__ import annotations

import functools
import hashlib
import os
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from mirror.block.local import LocalBlockStore
from mirror.block.protocol import BlockStore, ObjectInfo
from mirror.block.resolver import BlockResolver
from mirror.core import Catalog, ChunkingParams
from mirror.core.committed import METADATA_PREFIX, WriteStats
from mirror.core.imports import ImportSource, import_changes, import_objects, import_runs
from mirror.core.tree_writer import apply_changes
from mirror.kv.memory import MemoryKV

PARAMS = ChunkingParams(raggedness=16, max_bytes=2000)


class ListingOnly:
    """A store that lists keys and sizes and heads objects, with no detailed listing (S3's)."""

    def __init__(self, store: BlockStore) -> None:
        self._store = store

    def list(self, prefix: str = "", start_after: str = "") -> Iterator[ObjectInfo]:
        return self._store.list(prefix, start_after)

    def head(self, key: str) -> ObjectInfo:
        return self._store.head(key)


@pytest.fixture
def root(tmp_path: Path) -> Path:
    src = tmp_path / "src"
    for n in range(700):
        d = src / "a" / f"d{n // 90:02d}"
        d.mkdir(parents=True, exist_ok=True)
        (d / f"f{n:04d}\u00e9").write_bytes(b"y" * (n % 5))
    for n in range(200):
        d = src / "b" / f"d{n // 50:02d}"
        d.mkdir(parents=True, exist_ok=True)
        (d / f"f{n:04d}").write_bytes(f"{n}".encode())
    return tmp_path


def compare(
    catalog: Catalog,
    sources: list[ImportSource],
    base: str,
    open_store: Callable[[str], BlockStore] | None = None,
) -> tuple[str, WriteStats]:
    """Apply both streams onto ``base`` in two namespaces; check they agree; return the tree."""
    opener = open_store or catalog.blocks.open
    results = []
    for name, stream in (("old", import_changes), ("new", import_runs)):
        repo = catalog.get_repository(name)
        store = catalog.committed(repo)
        told: list[int] = []
        mid, stats = apply_changes(
            store,
            PARAMS,
            base,
            stream(sources, opener, functools.partial(store.iterate, base), 7, told.append),
        )
        files = {r.id: store.block.get(METADATA_PREFIX + r.id) for r in store.read_metarange(mid)}
        results.append((mid, (stats.added, stats.changed, stats.removed), told, files))
    (old_mid, old_counts, old_told, old_files), (mid, counts, told, files) = results
    assert mid == old_mid
    assert counts == old_counts
    assert told == old_told == list(range(1, len(told) + 1))
    assert files == old_files
    return mid, stats


@pytest.fixture
def catalog(root: Path) -> Catalog:
    lake = Catalog(MemoryKV(), BlockResolver(root), chunking=PARAMS)
    unique = uuid.uuid4().hex[:8]
    for name in ("old", "new"):
        lake.create_repository(name, f"local://ns-{name}-{unique}")
    return lake


def test_one_source_and_then_changed_files(catalog: Catalog, root: Path) -> None:
    sources = [ImportSource("common_prefix", "local://src/a/", "in/")]
    first, stats = compare(catalog, sources, "")
    assert stats.added == 700 and stats.ranges_written > 20
    # the same files again, some rewritten, some removed, some added, one with only a new mtime
    a = root / "src" / "a"
    (a / "d00" / "f0003\u00e9").write_bytes(b"changed")
    (a / "d01" / "f0100\u00e9").unlink()
    (a / "d03" / "new").write_bytes(b"")
    (a / "d07" / "zzz").write_bytes(b"z")
    touched = a / "d05" / "f0451\u00e9"
    os.utime(touched, (1, 1))
    mid, stats = compare(catalog, sources, first)
    assert (stats.added, stats.changed, stats.removed) == (2, 1, 1)
    # an unchanged object keeps the base record (its old mtime), as the record path does
    store = catalog.committed(catalog.get_repository("new"))
    moved = dict(store.iterate(mid, "in/d05/f0451\u00e9"))
    assert moved["in/d05/f0451\u00e9"].mtime != 1


def test_several_sources_and_a_base_under_the_prefixes(catalog: Catalog) -> None:
    base, _ = compare(
        catalog,
        [
            ImportSource("common_prefix", "local://src/a/", "x/"),
            ImportSource("common_prefix", "local://src/b/", "x/zb/"),
        ],
        "",
    )
    sources = [
        ImportSource("common_prefix", "local://src/a/", "x/"),
        ImportSource("common_prefix", "local://src/b/", "x/"),  # overlaps a's paths: b wins
        ImportSource("object", "local://src/b/d00/f0001", "x/d00/f0001\u00e9"),
        ImportSource("common_prefix", "local://src/b/d01/", "y/"),
    ]
    _, stats = compare(catalog, sources, base)
    assert stats.removed == 200 and stats.changed == 1 and stats.added == 250


def test_a_store_listing_no_details(catalog: Catalog) -> None:
    sources = [ImportSource("common_prefix", "local://src/", "s3-like/")]

    def plain(namespace: str) -> BlockStore:
        return ListingOnly(catalog.blocks.open(namespace))  # type: ignore[return-value]

    mid, stats = compare(catalog, sources, "", plain)
    assert stats.added == 900
    again, stats = compare(catalog, sources, mid, plain)
    assert again == mid and stats.changed == 0


def test_import_objects_commits_the_record_path_tree(catalog: Catalog) -> None:
    sources = [ImportSource("common_prefix", "local://src/a/", "in/")]
    mid, _ = compare(catalog, sources, "")
    result = import_objects(catalog, "new", "main", sources, committer="u", message="", metadata={})
    assert result.ingested == 700
    assert result.commit.metarange_id == mid


def test_detailed_batches_list_what_list_detailed_lists(tmp_path: Path) -> None:
    store = LocalBlockStore(tmp_path / "store")
    store.put("tagged/one", b"1")  # written by the store: carries its etag attribute
    store.put("tagged/two", b"")
    big = os.urandom((1 << 20) + 5)
    for name, data in (("plain/empty", b""), ("plain/big", big), ("plain/small", b"abc")):
        path = tmp_path / "store" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
    store.put("tagged/three", b"33")
    (tmp_path / "store" / "tagged" / "zplain").write_bytes(b"p")
    listed = list(store.list_detailed())
    batches = list(store.list_detailed_batches(limit=2))
    assert [len(b.keys) for b in batches] == [2, 2, 2, 1]
    flat = [
        (k, s, e, m)
        for b in batches
        for k, s, e, m in zip(b.keys, b.sizes, b.etags, b.mtimes, strict=True)
    ]
    assert flat == [(o.key, o.size, o.etag, o.mtime) for o in listed]
    expected = {
        "plain/big": big,
        "plain/empty": b"",
        "plain/small": b"abc",
        "tagged/one": b"1",
        "tagged/three": b"33",
        "tagged/two": b"",
        "tagged/zplain": b"p",
    }
    assert [o.key for o in listed] == sorted(expected)
    for o in listed:
        assert o.etag == hashlib.md5(expected[o.key]).hexdigest()
        assert o.size == len(expected[o.key])
        assert store.head(o.key).etag == o.etag


def test_a_batch_ends_before_a_file_whose_opening_may_wait(tmp_path: Path) -> None:
    store = LocalBlockStore(tmp_path / "store")
    for name in ("f0", "f1", "f2", "f4"):
        store.put(f"d/{name}", name.encode())
    fifo = tmp_path / "store" / "d" / "f3"
    os.mkfifo(fifo)
    held = os.open(fifo, os.O_RDWR | os.O_NONBLOCK)  # a writer: opening it to read won't wait
    try:
        batches = [b.keys for b in store.list_detailed_batches("d/")]
    finally:
        os.close(held)
    assert batches == [["d/f0", "d/f1", "d/f2"], ["d/f3", "d/f4"]]
