"""The validated-range set stays bounded by the ranges of retained heads over long runs.

A real :class:`~mirror.validator.Validator` checks trees a core catalog commits into its own
in-memory namespace (every file present), with the set in a KV and bounded by
:class:`~mirror.validator.RangeRetention`. After every advance the set must hold exactly the
ranges of the heads the chains keep: never more (the bound) and never fewer (no prune removes a
range of a retained head).
"""

from __future__ import annotations

import hashlib
import random
from collections.abc import Callable, Iterator
from pathlib import Path

import anyio
import pytest

from mirror.block import MemoryBlockStore
from mirror.core import Catalog, ChunkingParams, Entry, open_memory
from mirror.core.committed import CommittedStore
from mirror.kv import KV, MemoryKV, SqliteKV
from mirror.validator import (
    KVValidatedRanges,
    MemoryValidatedRanges,
    RangeRetention,
    ThreadedObjectReader,
    ValidationReport,
    Validator,
)

REPO = "repo"
RANGES = b"replicant/ranges/m/"
RETENTION = b"replicant/range-retention/m/"
MTIME = 1_700_000_000


class Repo:
    """A repository whose commits rewrite objects, writing each body where it is addressed."""

    def __init__(self, objects: int = 600, raggedness: int = 12) -> None:
        self.catalog: Catalog = open_memory(chunking=ChunkingParams(raggedness=raggedness))
        repo = self.catalog.create_repository(REPO, "mem://src")
        store = self.catalog.block_store(repo)
        assert isinstance(store, MemoryBlockStore)
        self.store = store
        self.version = 0
        self.entries: dict[str, dict[str, Entry]] = {"main": {}}
        self.commit("main", {f"t/part-{n:05d}": self.new_entry() for n in range(objects)})

    @property
    def committed(self) -> CommittedStore:
        return self.catalog.committed(self.catalog.get_repository(REPO))

    def new_entry(self) -> Entry:
        self.version += 1
        body = f"object version {self.version}\n".encode()
        address = f"data/p{self.version % 7}/{self.version:08d}"
        self.store.put(address, body)
        return Entry(address, len(body), hashlib.md5(body).hexdigest(), MTIME)

    def commit(self, branch: str, changes: dict[str, Entry]) -> str:
        """Commit ``changes`` to ``branch``; return the new tree's metarange ID."""
        commit = self.catalog.commit_tree(REPO, branch, sorted(changes.items()), "c").commit
        self.entries[branch].update(changes)
        return commit.metarange_id

    def rewrite(self, branch: str, rng: random.Random, count: int) -> str:
        paths = rng.sample(sorted(self.entries[branch]), count)
        return self.commit(branch, {p: self.new_entry() for p in paths})

    def restore(self, branch: str, snapshot: dict[str, Entry]) -> str:
        changed = {p: e for p, e in snapshot.items() if self.entries[branch][p] != e}
        return self.commit(branch, changed)

    def branch(self, name: str, source: str) -> None:
        self.catalog.create_branch(REPO, name, source)
        self.entries[name] = dict(self.entries[source])

    def range_ids(self, metarange_id: str) -> set[str]:
        return {r.id for r in self.committed.read_metarange(metarange_id)}


def retaining(kv: KV, heads_kept: int) -> KVValidatedRanges:
    return KVValidatedRanges(kv, RANGES, retention_prefix=RETENTION, heads_kept=heads_kept)


def validate(validator: Validator, mid: str, base: str = "") -> ValidationReport:
    report = anyio.run(validator.validate, mid, base)
    assert report.complete, report
    return report


def stored(kv: KV) -> set[str]:
    return {key[len(RANGES) :].decode() for key, _ in kv.scan(RANGES)}


def assert_bounded(kv: KV, repo: Repo, retention: RangeRetention) -> set[str]:
    """Assert the stored set is exactly the union of the retained heads' ranges; return it."""
    kept: set[str] = set()
    for mid in retention.retained_heads():
        kept |= repo.range_ids(mid)
    ids = stored(kv)
    assert kept <= ids, f"ranges of retained heads pruned: {sorted(kept - ids)[:5]}"
    assert len(ids) <= len(kept), f"{len(ids) - len(kept)} ranges beyond the bound"
    return ids


def windows(kv: KV) -> Iterator[list[list[object]]]:
    import json

    for _, raw in kv.scan(RETENTION + b"c/"):
        yield json.loads(raw)["window"]


@pytest.mark.parametrize("heads_kept", [1, 3])
def test_long_run_of_advances_stays_within_the_retained_heads(heads_kept: int) -> None:
    rng = random.Random(heads_kept)
    repo = Repo()
    kv = MemoryKV()
    validated = retaining(kv, heads_kept)
    validator = Validator(ThreadedObjectReader(repo.store), validated=validated)
    assert validated.retention is not None
    head = ""
    snapshots: list[dict[str, Entry]] = []
    seen: set[str] = set()
    pruned = 0
    for step in range(120):
        if snapshots and step % 9 == 0:
            mid = repo.restore("main", rng.choice(snapshots))  # ranges come back
        else:
            mid = repo.rewrite("main", rng, rng.randint(1, 6))
        validate(validator, mid, head)
        pruned += validated.drain()
        head = mid
        seen |= repo.range_ids(mid)
        snapshots = [*snapshots[-20:], dict(repo.entries["main"])]
        ids = assert_bounded(kv, repo, validated.retention)
        assert {r for r in ids if validated.contains(r)} == ids
        assert all(len(w) <= heads_kept for w in windows(kv))
    assert pruned > 0
    assert len(stored(kv)) < len(seen) // 4  # unbounded, the set would hold every range seen
    # a restarted replica loads the bounded set and skips the head's ranges unread
    again = Validator(ThreadedObjectReader(repo.store), validated=retaining(kv, heads_kept))
    report = validate(again, head)
    assert report.ranges_read == 0
    assert report.ranges_skipped == report.ranges_total


def test_branches_tags_and_shared_heads_keep_their_ranges() -> None:
    rng = random.Random(7)
    repo = Repo()
    kv = MemoryKV()
    validated = retaining(kv, 2)
    validator = Validator(ThreadedObjectReader(repo.store), validated=validated)
    assert validated.retention is not None
    main = repo.rewrite("main", rng, 3)
    validate(validator, main)
    tag = main  # a tag on main's head is validated without a base
    validate(validator, tag)
    repo.branch("dev", "main")
    dev = main
    validate(validator, dev)  # the new branch's first sync: the same tree, one chain holds it
    for _ in range(30):
        main = validate(validator, repo.rewrite("main", rng, 4), main).metarange_id
        dev = validate(validator, repo.rewrite("dev", rng, 4), dev).metarange_id
        validated.drain()
        ids = assert_bounded(kv, repo, validated.retention)
        assert repo.range_ids(main) | repo.range_ids(dev) <= ids
    # both branches moved off the shared tree: the second started a chain of its own
    assert sum(1 for _ in windows(kv)) == 2


def test_replicas_taking_turns_on_one_kv_stay_bounded() -> None:
    rng = random.Random(3)
    repo = Repo()
    kv = MemoryKV()
    replicas = [retaining(kv, 2), retaining(kv, 2)]
    validators = [Validator(ThreadedObjectReader(repo.store), validated=v) for v in replicas]
    head = ""
    for step in range(40):
        mid = repo.rewrite("main", rng, rng.randint(1, 5))
        validate(validators[step % 2], mid, head)
        replicas[step % 2].drain()
        head = mid
        retention = replicas[0].retention
        assert retention is not None
        assert_bounded(kv, repo, retention)


def test_replicas_advancing_two_branches_at_once_on_sqlite_stay_bounded(tmp_path: Path) -> None:
    rng = random.Random(13)
    repo = Repo()
    repo.branch("dev", "main")
    kv = SqliteKV(tmp_path / "kv.db")
    replicas = {"main": retaining(kv, 2), "dev": retaining(kv, 2)}
    validators = {
        b: Validator(ThreadedObjectReader(repo.store), validated=v) for b, v in replicas.items()
    }
    heads = {"main": "", "dev": ""}

    async def advance(branch: str, mid: str) -> None:
        report = await validators[branch].validate(mid, heads[branch])
        assert report.complete
        heads[branch] = mid

    async def both(trees: dict[str, str]) -> None:
        async with anyio.create_task_group() as group:
            for branch, mid in trees.items():
                group.start_soon(advance, branch, mid)

    for _ in range(25):
        trees = {b: repo.rewrite(b, rng, rng.randint(1, 5)) for b in heads}
        anyio.run(both, trees)  # the prunes of the last round may still run meanwhile
    for replica in replicas.values():
        replica.drain()
    retention = replicas["main"].retention
    assert retention is not None
    ids = assert_bounded(kv, repo, retention)
    assert repo.range_ids(heads["main"]) | repo.range_ids(heads["dev"]) <= ids
    kv.close()


def test_keep_only_ends_the_chains_of_deleted_branches() -> None:
    rng = random.Random(17)
    repo = Repo()
    kv = MemoryKV()
    validated = retaining(kv, 2)
    validator = Validator(ThreadedObjectReader(repo.store), validated=validated)
    retention = validated.retention
    assert retention is not None
    main = validate(validator, repo.rewrite("main", rng, 2)).metarange_id
    repo.branch("dev", "main")
    dev = main
    for _ in range(4):
        main = validate(validator, repo.rewrite("main", rng, 3), main).metarange_id
        dev = validate(validator, repo.rewrite("dev", rng, 3), dev).metarange_id
    validated.drain()
    assert len(retention.chains()) == 2
    # a chain that moved within idle_seconds is kept even if its branch is not listed
    assert anyio.run(lambda: validator.keep_only([main])) == 0
    assert len(retention.chains()) == 2
    chains = {c.head: c for c in retention.chains()}
    main_kept = set().union(*(repo.range_ids(m) for _, m in chains[main].window))
    dev_kept = set().union(*(repo.range_ids(m) for _, m in chains[dev].window))
    dev_only = dev_kept - main_kept
    assert dev_only
    # dev was deleted: its chain ends, its ranges leave, main's stay
    dropped = anyio.run(lambda: validator.keep_only([main], idle_seconds=0))
    assert [c.head for c in retention.chains()] == [main]
    assert dropped == len(dev_only)
    ids = assert_bounded(kv, repo, retention)
    assert not dev_only & ids
    assert not any(validated.contains(r) for r in dev_only)
    dev_chain = chains[dev].id.encode()
    assert not [k for k, _ in kv.scan(RETENTION) if dev_chain in k]
    # the next advance of main still prunes as before
    main = validate(validator, repo.rewrite("main", rng, 3), main).metarange_id
    validated.drain()
    assert_bounded(kv, repo, retention)


class DropHook(MemoryKV):
    """A KV that runs ``hook`` once, right after a validated range ID is deleted."""

    def __init__(self) -> None:
        super().__init__()
        self.hook: Callable[[str], None] | None = None

    def delete(self, key: bytes) -> None:
        super().delete(key)
        if key.startswith(RANGES) and self.hook is not None:
            hook, self.hook = self.hook, None
            hook(key[len(RANGES) :].decode())


def test_a_range_taken_while_it_is_dropped_is_written_back() -> None:
    rng = random.Random(5)
    repo = Repo()
    kv = DropHook()
    validated = retaining(kv, 1)
    validator = Validator(ThreadedObjectReader(repo.store), validated=validated)
    assert validated.retention is not None
    first = repo.rewrite("main", rng, 3)
    validate(validator, first)
    taken: list[str] = []

    def another_replica_takes(range_id: str) -> None:
        # another replica took the range (hold, then write-back) just before it was deleted
        kv.set(RETENTION + b"h/" + range_id.encode() + b"/other-chain", b"1")
        taken.append(range_id)

    kv.hook = another_replica_takes
    second = repo.rewrite("main", rng, 5)
    validate(validator, second, first)
    validated.drain()
    assert len(taken) == 1, "the prune removed no range"
    assert taken[0] in stored(kv)
    assert validated.contains(taken[0])
    dropped = (repo.range_ids(first) - repo.range_ids(second)) - set(taken)
    assert dropped and not dropped & stored(kv)


def test_an_incomplete_validation_retains_no_head() -> None:
    rng = random.Random(9)
    repo = Repo()
    kv = MemoryKV()
    validated = retaining(kv, 2)
    mid = repo.rewrite("main", rng, 2)
    partial = MemoryBlockStore("mem://dst")
    for info in repo.store.list(""):
        if not info.key.startswith("data/p3/"):
            partial.put(info.key, repo.store.get(info.key))
    report = anyio.run(Validator(ThreadedObjectReader(partial), validated=validated).validate, mid)
    assert not report.complete
    assert validated.retention is not None
    assert validated.retention.retained_heads() == []


def test_without_retention_the_set_keeps_every_range() -> None:
    rng = random.Random(11)
    repo = Repo()
    kv = MemoryKV()
    validated = KVValidatedRanges(kv, RANGES)
    validator = Validator(ThreadedObjectReader(repo.store), validated=validated)
    head = ""
    seen: set[str] = set()
    for _ in range(10):
        mid = repo.rewrite("main", rng, 4)
        validate(validator, mid, head)
        head = mid
        seen |= repo.range_ids(mid)
    assert validated.retention is None
    assert stored(kv) == seen


def test_a_memory_set_is_not_bounded_and_heads_kept_must_be_positive() -> None:
    repo = Repo(objects=50)
    validated = MemoryValidatedRanges()
    mid = repo.rewrite("main", random.Random(1), 2)
    validate(Validator(ThreadedObjectReader(repo.store), validated=validated), mid)
    assert len(validated) == len(repo.range_ids(mid))
    with pytest.raises(ValueError, match="heads_kept"):
        retaining(MemoryKV(), 0)
