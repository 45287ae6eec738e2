"""Failures injected at every step of commit and merge lose nothing (DESIGN.md §3).

Faults come from real wrapper classes around the real drivers: :class:`FaultyKV` fails the N-th
KV call that matches an operation and key, :class:`FaultyBlockStore` fails the N-th write of a
range or metarange file. A fault fires either before the wrapped call (the step did not happen)
or after it (the step happened but its caller saw an error, like a lost response).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from mirror.block.errors import BlockUnavailableError
from mirror.block.memory import MemoryBlockStore
from mirror.block.protocol import BlockStore, ObjectInfo
from mirror.block.resolver import BlockResolver
from mirror.core import (
    Catalog,
    ChunkingParams,
    CommitID,
    DiffType,
    NoChangesError,
    ObjectNotFoundError,
)
from mirror.core.committed import METADATA_PREFIX
from mirror.kv.errors import KVUnavailableError
from mirror.kv.memory import MemoryKV
from mirror.kv.protocol import KV
from mirror.kv.sqlite import SqliteKV

REPO = "faults"
NAMESPACE = "faulty://faults"
NOW = 1_700_000_000

KeyMatch = Callable[[bytes], bool]


@dataclass
class _Trap:
    op: str
    match: KeyMatch
    nth: int
    after: bool
    seen: int = 0
    fired: bool = False


class FaultyKV:
    """A :class:`~mirror.kv.protocol.KV` that fails one chosen call of the store it wraps."""

    def __init__(self, inner: KV) -> None:
        self.inner = inner
        self._trap: _Trap | None = None
        self._lock = threading.Lock()

    def arm(self, op: str, match: KeyMatch, nth: int = 1, *, after: bool = False) -> None:
        """Fail the ``nth`` call of ``op`` whose key (a scan's prefix) satisfies ``match``."""
        self._trap = _Trap(op, match, nth, after)

    def disarm(self) -> bool:
        """Remove the trap; return whether it fired."""
        trap, self._trap = self._trap, None
        return trap is not None and trap.fired

    def _hit(self, op: str, key: bytes) -> _Trap | None:
        with self._lock:
            trap = self._trap
            if trap is None or trap.fired or trap.op != op or not trap.match(key):
                return None
            trap.seen += 1
            trap.fired = trap.seen == trap.nth
            return trap if trap.fired else None

    def _call(self, op: str, key: bytes, run: Callable[[], None]) -> None:
        trap = self._hit(op, key)
        if trap is not None and not trap.after:
            raise KVUnavailableError(f"injected fault before {op} {key!r}")
        run()
        if trap is not None:
            raise KVUnavailableError(f"injected fault after {op} {key!r}")

    def get(self, key: bytes) -> bytes:
        if self._hit("get", key) is not None:
            raise KVUnavailableError(f"injected fault on get {key!r}")
        return self.inner.get(key)

    def set(self, key: bytes, value: bytes) -> None:
        self._call("set", key, lambda: self.inner.set(key, value))

    def set_many(self, items: Iterable[tuple[bytes, bytes]]) -> None:
        self.inner.set_many(items)

    def set_if(self, key: bytes, value: bytes, expected: bytes | None) -> None:
        self._call("set_if", key, lambda: self.inner.set_if(key, value, expected))

    def delete(self, key: bytes) -> None:
        self._call("delete", key, lambda: self.inner.delete(key))

    def delete_many(self, keys: Iterable[bytes]) -> None:
        # a fault armed on "delete" fires on the matching key of a batch: the keys before it
        # are deleted, it and those after it are not (or it is, with ``after``)
        keys = list(keys)
        for i, key in enumerate(keys):
            trap = self._hit("delete", key)
            if trap is not None:
                self.inner.delete_many(keys[: i + 1] if trap.after else keys[:i])
                raise KVUnavailableError(f"injected fault on delete {key!r} of a batch")
        self.inner.delete_many(keys)

    def delete_if(self, key: bytes, expected: bytes) -> None:
        self._call("delete_if", key, lambda: self.inner.delete_if(key, expected))

    def scan(self, prefix: bytes, start: bytes = b"") -> Iterator[tuple[bytes, bytes]]:
        if self._hit("scan", prefix) is not None:
            raise KVUnavailableError(f"injected fault on scan {prefix!r}")
        yield from self.inner.scan(prefix, start)

    def close(self) -> None:
        self.inner.close()


def _file_kind(data: bytes) -> str:
    names = pq.read_schema(pa.BufferReader(data)).names
    return "metarange" if "range_id" in names else "range"


class FaultyBlockStore:
    """A :class:`~mirror.block.protocol.BlockStore` that fails the N-th write of a range or a
    metarange file under ``_lakefs/``."""

    def __init__(self, inner: MemoryBlockStore) -> None:
        self.inner = inner
        self._kind = ""
        self._nth = 0
        self._after = False
        self._seen = 0
        self.fired = False

    def arm(self, kind: str, nth: int = 1, *, after: bool = False) -> None:
        """Fail the ``nth`` write of a file of ``kind`` (``"range"`` or ``"metarange"``)."""
        self._kind, self._nth, self._after, self._seen, self.fired = kind, nth, after, 0, False

    def disarm(self) -> bool:
        """Remove the trap; return whether it fired."""
        fired, self._kind, self.fired = self.fired, "", False
        return fired

    @property
    def namespace(self) -> str:
        return self.inner.namespace

    def put(self, key: str, data: bytes | BinaryIO) -> ObjectInfo:
        return self.inner.put(key, data)

    def put_if_absent(self, key: str, data: bytes) -> bool:
        hit = False
        if self._kind and not self.fired and key.startswith(METADATA_PREFIX):
            if _file_kind(data) == self._kind:
                self._seen += 1
                hit = self.fired = self._seen == self._nth
        if hit and not self._after:
            raise BlockUnavailableError(f"injected fault before writing {key}")
        written = self.inner.put_if_absent(key, data)
        if hit:
            raise BlockUnavailableError(f"injected fault after writing {key}")
        return written

    def get(self, key: str, start: int = 0, end: int | None = None) -> bytes:
        return self.inner.get(key, start, end)

    def head(self, key: str) -> ObjectInfo:
        return self.inner.head(key)

    def exists(self, key: str) -> bool:
        return self.inner.exists(key)

    def list(self, prefix: str = "", start_after: str = "") -> Iterator[ObjectInfo]:
        return self.inner.list(prefix, start_after)

    def delete(self, key: str) -> None:
        self.inner.delete(key)


@dataclass
class Rig:
    catalog: Catalog
    kv: FaultyKV
    blocks: FaultyBlockStore


@pytest.fixture(params=["memory", "sqlite"])
def rig(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Rig]:
    inner: KV = MemoryKV() if request.param == "memory" else SqliteKV(tmp_path / "kv.sqlite")
    kv = FaultyKV(inner)
    resolver = BlockResolver()
    resolver.register("faulty", lambda ns: FaultyBlockStore(MemoryBlockStore(ns)))
    catalog = Catalog(
        kv,
        resolver,
        chunking=ChunkingParams(raggedness=16),
        clock=lambda: NOW,
        max_tries=3,
        backoff=(0.0, 0.0),
    )
    catalog.create_repository(REPO, NAMESPACE)
    blocks = resolver.open(NAMESPACE)
    assert isinstance(blocks, FaultyBlockStore)
    assert isinstance(blocks, BlockStore)
    yield Rig(catalog, kv, blocks)
    kv.close()


def branch_key(name: str) -> KeyMatch:
    suffix = b"/branches/" + name.encode()
    return lambda key: key.endswith(suffix)


def commit_record(key: bytes) -> bool:
    return b"/commits/" in key


def staging(key: bytes) -> bool:
    return key.startswith(b"staging/")


def seed(catalog: Catalog) -> CommitID:
    """Commit 300 objects on main, so a commit rewrites some ranges and reuses others."""
    for i in range(300):
        catalog.upload_object(REPO, "main", f"seed/{i:04d}", f"seed {i}".encode())
    return catalog.commit(REPO, "main", "seed").commit.id


STAGED_UPLOADS = {"seed/0007": b"changed 7", "seed/0150": b"changed 150", "new/a": b"new a"}
STAGED_DELETES = ["seed/0042", "seed/0299"]


def stage(catalog: Catalog) -> None:
    for path, data in STAGED_UPLOADS.items():
        catalog.upload_object(REPO, "main", path, data)
    for path in STAGED_DELETES:
        catalog.delete_object(REPO, "main", path)


def assert_staged_readable(catalog: Catalog, head: CommitID) -> None:
    assert catalog.get_branch(REPO, "main").commit_id == head
    for path, data in STAGED_UPLOADS.items():
        assert catalog.stat_object(REPO, "main", path).entry.size == len(data)
        assert catalog.read_object(REPO, "main", path) == data
    for path in STAGED_DELETES:
        with pytest.raises(ObjectNotFoundError):
            catalog.stat_object(REPO, "main", path)
        assert catalog.read_object(REPO, head, path) == f"seed {int(path[-4:])}".encode()
    listed = {s.path for s in catalog.iter_objects(REPO, "main")}
    assert set(STAGED_UPLOADS) <= listed
    assert not set(STAGED_DELETES) & listed
    assert len(listed) == 300 + 1 - len(STAGED_DELETES)
    diff = {(d.path, d.type) for d in catalog.diff_uncommitted(REPO, "main")}
    assert diff == {
        ("seed/0007", DiffType.CHANGED),
        ("seed/0150", DiffType.CHANGED),
        ("new/a", DiffType.ADDED),
        ("seed/0042", DiffType.REMOVED),
        ("seed/0299", DiffType.REMOVED),
    }


def assert_next_commit_takes_everything(rig: Rig, head: CommitID) -> None:
    catalog = rig.catalog
    catalog.upload_object(REPO, "main", "after/fault", b"staged after the fault")
    commit = catalog.commit(REPO, "main", "after the fault").commit
    assert commit.parents == (head,)
    assert catalog.get_branch(REPO, "main").commit_id == commit.id
    assert catalog.get_branch(REPO, "main").sealed_tokens == ()
    for path, data in {**STAGED_UPLOADS, "after/fault": b"staged after the fault"}.items():
        assert catalog.read_object(REPO, commit.id, path) == data
    for path in STAGED_DELETES:
        with pytest.raises(ObjectNotFoundError):
            catalog.stat_object(REPO, commit.id, path)
    assert sum(1 for _ in catalog.iter_objects(REPO, commit.id)) == 300 + 2 - len(STAGED_DELETES)
    assert list(catalog.diff_uncommitted(REPO, "main")) == []
    assert list(rig.kv.scan(b"staging/")) == [], "sealed staging records were not dropped"


Arm = Callable[[Rig], None]

COMMIT_FAULTS: list[tuple[str, Arm]] = [
    ("seal", lambda r: r.kv.arm("set_if", branch_key("main"))),
    ("after-seal", lambda r: r.kv.arm("set_if", branch_key("main"), after=True)),
    # the first staging scan is the seal's emptiness check, the second reads the sealed token
    ("read-staging", lambda r: r.kv.arm("scan", staging, nth=2)),
    ("write-range", lambda r: r.blocks.arm("range")),
    ("after-write-range", lambda r: r.blocks.arm("range", after=True)),
    ("write-metarange", lambda r: r.blocks.arm("metarange")),
    ("after-write-metarange", lambda r: r.blocks.arm("metarange", after=True)),
    ("add-commit", lambda r: r.kv.arm("set_if", commit_record)),
    ("after-add-commit", lambda r: r.kv.arm("set_if", commit_record, after=True)),
    ("cas-branch", lambda r: r.kv.arm("set_if", branch_key("main"), nth=2)),
]


def disarm(rig: Rig) -> bool:
    return rig.kv.disarm() | rig.blocks.disarm()


@pytest.mark.parametrize("arm", [a for _, a in COMMIT_FAULTS], ids=[n for n, _ in COMMIT_FAULTS])
def test_a_failed_commit_loses_no_staged_change(rig: Rig, arm: Arm) -> None:
    head = seed(rig.catalog)
    stage(rig.catalog)
    arm(rig)

    with pytest.raises((KVUnavailableError, BlockUnavailableError)):
        rig.catalog.commit(REPO, "main", "fails")

    assert disarm(rig), "the fault did not fire"
    assert_staged_readable(rig.catalog, head)
    assert_next_commit_takes_everything(rig, head)


@pytest.mark.parametrize("after", [False, True], ids=["cas-branch", "after-add-commit"])
def test_a_crash_between_add_commit_and_cas_leaves_only_an_unreferenced_commit(
    rig: Rig, after: bool
) -> None:
    catalog = rig.catalog
    head = seed(catalog)
    stage(catalog)
    records_before = dict(rig.kv.scan(b""))
    if after:
        rig.kv.arm("set_if", commit_record, after=True)
    else:
        rig.kv.arm("set_if", branch_key("main"), nth=2)

    with pytest.raises(KVUnavailableError):
        catalog.commit(REPO, "main", "crashes")

    assert disarm(rig)
    records_after = dict(rig.kv.scan(b""))
    added = set(records_after) - set(records_before)
    changed = {k for k in records_before if records_before[k] != records_after.get(k)}
    assert len(added) == 1 and commit_record(next(iter(added)))
    assert {k for k in changed if not branch_key("main")(k)} == set()
    orphan = CommitID(next(iter(added)).rsplit(b"/", 1)[1].decode())
    assert catalog.get_commit(REPO, orphan).parents == (head,)
    assert orphan not in {c.id for c in catalog.log(REPO, "main")}
    assert_staged_readable(catalog, head)
    assert_next_commit_takes_everything(rig, head)


def test_a_lost_reply_to_the_branch_cas_still_commits_everything_once(rig: Rig) -> None:
    catalog = rig.catalog
    head = seed(catalog)
    stage(catalog)
    rig.kv.arm("set_if", branch_key("main"), nth=2, after=True)

    with pytest.raises(KVUnavailableError):
        catalog.commit(REPO, "main", "moved, but the reply was lost")

    assert disarm(rig)
    moved = catalog.get_branch(REPO, "main")
    assert moved.commit_id != head
    assert moved.sealed_tokens == ()
    assert list(catalog.diff_uncommitted(REPO, "main")) == []
    for path, data in STAGED_UPLOADS.items():
        assert catalog.read_object(REPO, moved.commit_id, path) == data
    with pytest.raises(NoChangesError):
        catalog.commit(REPO, "main", "nothing left")


def test_a_failure_dropping_sealed_tokens_leaves_a_complete_commit(rig: Rig) -> None:
    catalog = rig.catalog
    head = seed(catalog)
    stage(catalog)
    rig.kv.arm("delete", staging)

    with pytest.raises(KVUnavailableError):
        catalog.commit(REPO, "main", "committed, cleanup fails")

    assert disarm(rig)
    moved = catalog.get_branch(REPO, "main")
    assert moved.commit_id != head
    assert catalog.get_commit(REPO, moved.commit_id).parents == (head,)
    assert list(catalog.diff_uncommitted(REPO, "main")) == []
    catalog.upload_object(REPO, "main", "after/fault", b"x")
    assert catalog.commit(REPO, "main", "next").commit.parents == (moved.commit_id,)


def prepare_merge(catalog: Catalog) -> tuple[CommitID, CommitID]:
    """Return the heads of main and feature after each changed different objects."""
    seed(catalog)
    catalog.create_branch(REPO, "feature", "main")
    catalog.upload_object(REPO, "feature", "seed/0010", b"feature 10")
    catalog.delete_object(REPO, "feature", "seed/0200")
    catalog.upload_object(REPO, "feature", "feature/new", b"feature new")
    feature = catalog.commit(REPO, "feature", "feature work").commit.id
    catalog.upload_object(REPO, "feature", "feature/staged", b"uncommitted on feature")
    catalog.upload_object(REPO, "main", "seed/0280", b"main 280")
    main = catalog.commit(REPO, "main", "main work").commit.id
    return main, feature


MERGE_FAULTS: list[tuple[str, Arm]] = [
    ("write-range", lambda r: r.blocks.arm("range")),
    ("write-metarange", lambda r: r.blocks.arm("metarange")),
    ("after-write-metarange", lambda r: r.blocks.arm("metarange", after=True)),
    ("add-commit", lambda r: r.kv.arm("set_if", commit_record)),
    ("after-add-commit", lambda r: r.kv.arm("set_if", commit_record, after=True)),
    ("cas-branch", lambda r: r.kv.arm("set_if", branch_key("main"))),
]


@pytest.mark.parametrize("arm", [a for _, a in MERGE_FAULTS], ids=[n for n, _ in MERGE_FAULTS])
def test_a_failed_merge_changes_nothing_and_can_be_retried(rig: Rig, arm: Arm) -> None:
    catalog = rig.catalog
    main, feature = prepare_merge(catalog)
    before = {s.path: s.entry for s in catalog.iter_objects(REPO, "main")}
    arm(rig)

    with pytest.raises((KVUnavailableError, BlockUnavailableError)):
        catalog.merge(REPO, "feature", "main")

    assert disarm(rig), "the fault did not fire"
    assert catalog.get_branch(REPO, "main").commit_id == main
    assert catalog.get_branch(REPO, "feature").commit_id == feature
    assert {s.path: s.entry for s in catalog.iter_objects(REPO, "main")} == before
    assert list(catalog.diff_uncommitted(REPO, "main")) == []
    assert catalog.read_object(REPO, "feature", "feature/staged") == b"uncommitted on feature"

    merged = catalog.merge(REPO, "feature", "main").commit
    assert merged.parents == (main, feature)
    assert catalog.get_branch(REPO, "main").commit_id == merged.id
    assert catalog.read_object(REPO, "main", "seed/0010") == b"feature 10"
    assert catalog.read_object(REPO, "main", "seed/0280") == b"main 280"
    assert catalog.read_object(REPO, "main", "feature/new") == b"feature new"
    with pytest.raises(ObjectNotFoundError):
        catalog.stat_object(REPO, "main", "seed/0200")
    with pytest.raises(ObjectNotFoundError):
        catalog.stat_object(REPO, "main", "feature/staged")
    assert [d.path for d in catalog.diff_uncommitted(REPO, "feature")] == ["feature/staged"]
