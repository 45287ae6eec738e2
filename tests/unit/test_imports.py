"""Imports in the core: streamed into ranges identical to commit_tree's, in bounded memory.

Sources are real directories listed by :class:`~mirror.block.local.LocalBlockStore`; the
catalog runs on an in-memory KV. Memory is checked by counting records: at every ingested
object, how many were read from the sources but not yet written into a range.
"""

from __future__ import annotations

import hashlib
import uuid
from pathlib import Path

import pytest

from mirror.block.resolver import BlockResolver
from mirror.core import Catalog, ChunkingParams, import_listing, open_memory
from mirror.core.columnar import RangeData
from mirror.core.committed import METADATA_PREFIX, CommittedStore, WriteStats
from mirror.core.errors import DirtyBranchError, RepositoryReadOnlyError
from mirror.core.ids import RangeID
from mirror.core.imports import (
    DEFAULT_IMPORT_MESSAGE,
    ImportCanceledError,
    ImportNotSupportedError,
    ImportSource,
    InvalidImportSourceError,
    InvalidImportTypeError,
    import_changes,
    import_objects,
    validate_sources,
)
from mirror.core.model import AddressType
from mirror.core.threeway import MERGE_STRATEGY_KEY
from mirror.kv.memory import MemoryKV

FILES = 3000
PARAMS = ChunkingParams(raggedness=64)


def make_files(root: Path, count: int, per_dir: int = 100) -> None:
    for n in range(count):
        d = root / f"part-{n // per_dir:03d}"
        d.mkdir(parents=True, exist_ok=True)
        (d / f"f-{n:05d}.bin").write_bytes(b"x" * (n % 13))


@pytest.fixture(scope="module")
def sources(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The source files every test imports (read only), written once."""
    root = tmp_path_factory.mktemp("import-sources")
    make_files(root / "src" / "tables", FILES)
    return root


@pytest.fixture
def lake(sources: Path) -> Catalog:
    """A catalog whose local root holds the sources (``local://src/``) and fresh namespaces."""
    resolver = BlockResolver(sources)
    catalog = Catalog(MemoryKV(), resolver, chunking=PARAMS)
    unique = uuid.uuid4().hex[:8]
    catalog.create_repository("imp", f"local://ns-imp-{unique}")
    catalog.create_repository("ref", f"local://ns-ref-{unique}")
    return catalog


def range_files(catalog: Catalog, repo: str, mid: str) -> dict[str, bytes]:
    store = catalog.committed(catalog.get_repository(repo))
    return {r.id: store.block.get(METADATA_PREFIX + r.id) for r in store.read_metarange(mid)}


def test_import_writes_the_ranges_commit_tree_writes(lake: Catalog) -> None:
    sources = [ImportSource("common_prefix", "local://src/tables/", "imported/")]
    result = import_objects(
        lake, "imp", "main", sources, committer="u", message="", metadata={"k": "v"}
    )
    assert result.ingested == FILES
    commit = result.commit
    assert commit.message == DEFAULT_IMPORT_MESSAGE
    assert commit.metadata == {"k": "v", MERGE_STRATEGY_KEY: "source-wins"}

    # the same records through the core's own writer, in another namespace
    changes = list(import_changes(sources, lake.blocks.open, lambda start: iter(()), now=0))
    entries = [(p, lake.stat_object("imp", "main", p).entry) for p, _ in changes]
    expected = lake.commit_tree("ref", "main", entries, "same entries").commit
    assert commit.metarange_id == expected.metarange_id
    mine = range_files(lake, "imp", commit.metarange_id)
    theirs = range_files(lake, "ref", expected.metarange_id)
    assert len(mine) > 10
    assert mine == theirs

    stat = lake.stat_object("imp", "main", "imported/part-000/f-00005.bin")
    assert stat.entry.address_type is AddressType.FULL
    assert stat.physical_address == "local://src/tables/part-000/f-00005.bin"
    assert stat.entry.size == 5
    assert stat.entry.checksum == hashlib.md5(b"xxxxx").hexdigest()
    assert lake.read_object("imp", "main", "imported/part-000/f-00005.bin", 0, None) == b"xxxxx"


def test_import_holds_about_one_range_of_records(
    lake: Catalog, monkeypatch: pytest.MonkeyPatch
) -> None:
    written = [0]
    largest = [0]
    original = CommittedStore._put_range

    def counting(
        self: CommittedStore,
        rid: RangeID,
        rows: RangeData,
        stats: WriteStats,
        raggedness: int | None,
    ) -> None:
        written[0] += len(rows)
        largest[0] = max(largest[0], len(rows))
        original(self, rid, rows, stats, raggedness)

    monkeypatch.setattr(CommittedStore, "_put_range", counting)
    # listed in batches of 100 (two at a time: the one being written and the next one)
    monkeypatch.setattr(import_listing, "_BATCH", 100)
    held: list[int] = []
    sources = [ImportSource("common_prefix", "local://src/tables/", "t/")]
    import_objects(
        lake,
        "imp",
        "main",
        sources,
        committer="u",
        message="m",
        metadata=None,
        progress=lambda n: held.append(n - written[0]),
    )
    assert len(held) == FILES
    assert written[0] == FILES
    # read but not yet in a range: never more than the open range and two listed batches
    assert 0 < max(held) <= largest[0] + 2 * 100
    assert largest[0] < FILES // 5


def test_import_replaces_destination_prefixes_only(lake: Catalog, sources: Path) -> None:
    for path in ("a/f1", "a/f10", "a/g", "b/keep", "af"):
        lake.upload_object("imp", "main", path, b"old", content_type=None, metadata=None)
    lake.commit("imp", "main", "base")
    own = f"own-{uuid.uuid4().hex[:8]}"
    src = sources / own / "one"
    src.mkdir(parents=True)
    (src / "obj").write_bytes(b"new")
    (src / "x").write_bytes(b"xx")
    sources = [
        ImportSource("object", f"local://{own}/one/obj", "a/f1"),
        ImportSource("common_prefix", f"local://{own}/one/", "b/"),
    ]
    import_objects(lake, "imp", "main", sources, committer="u", message="m", metadata=None)
    paths = [s.path for s in lake.iter_objects("imp", "main")]
    # a/f1 replaced a/f1 and a/f10 (a prefix match); b/ holds exactly the source
    assert paths == ["a/f1", "a/g", "af", "b/obj", "b/x"]
    assert lake.read_object("imp", "main", "a/f1", 0, None) == b"new"


def test_import_errors(lake: Catalog) -> None:
    def run(*sources: ImportSource, repo: str = "imp") -> None:
        import_objects(lake, repo, "main", sources, committer="u", message="m", metadata=None)

    namespace = lake.get_repository("imp").storage_namespace
    with pytest.raises(InvalidImportSourceError) as err:
        run(ImportSource("common_prefix", f"{namespace}/data/", "d/"))
    assert str(err.value) == (
        f"import path ({namespace}/data/) in repository namespace ({namespace}) is "
        "prohibited: invalid import source"
    )
    with pytest.raises(InvalidImportSourceError):
        run(ImportSource("common_prefix", "s3://bucket/x/", "d/"))
    with pytest.raises(InvalidImportTypeError, match="invalid import type: dir"):
        run(ImportSource("dir", "local://src/tables/", "d/"))
    lake.upload_object("imp", "main", "dirty", b"1", content_type=None, metadata=None)
    with pytest.raises(DirtyBranchError, match=r"uncommitted changes \(dirty branch\)"):
        run(ImportSource("common_prefix", "local://src/tables/", "d/"))
    lake.demote_repository("ref", "elsewhere")
    with pytest.raises(RepositoryReadOnlyError):
        run(ImportSource("common_prefix", "local://src/tables/", "d/"), repo="ref")


def test_canceled_import_leaves_the_branch(lake: Catalog) -> None:
    head = lake.get_branch("imp", "main").commit_id

    def cancel(n: int) -> None:
        if n == 500:
            raise ImportCanceledError()

    with pytest.raises(ImportCanceledError):
        import_objects(
            lake,
            "imp",
            "main",
            [ImportSource("common_prefix", "local://src/tables/", "t/")],
            committer="u",
            message="m",
            metadata=None,
            progress=cancel,
        )
    assert lake.get_branch("imp", "main").commit_id == head


def test_sources_checked_against_the_namespace() -> None:
    memory = open_memory()
    repo = memory.create_repository("in-memory", "mem://in-memory")
    with pytest.raises(ImportNotSupportedError, match="import is not supported for this storage"):
        validate_sources(repo, [ImportSource("common_prefix", "mem://other/", "d/")])
    local = Catalog(MemoryKV(), BlockResolver("/nonexistent"))
    repo = local.create_repository("ns-parent", "local://lake/repo")
    for bad in ("local://lake/", "local://lake/repo/", "local://lake/repo/data/x"):
        prohibited = r"is prohibited: invalid import source$"
        with pytest.raises(InvalidImportSourceError, match=prohibited):
            validate_sources(repo, [ImportSource("common_prefix", bad, "d/")])
    with pytest.raises(InvalidImportSourceError, match="names no object"):
        validate_sources(repo, [ImportSource("object", "local://lake/other/", "d")])
    validate_sources(repo, [ImportSource("common_prefix", "local://lake/repo-2/", "d/")])
