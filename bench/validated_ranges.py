"""Benchmark of the validated-range set over a long series of advances: its size stays bounded.

Run ``python -m bench.validated_ranges`` (options: ``--advances N``, ``--objects N``,
``--heads-kept N``, ``--every N``, ``--quick``). An in-memory repository of ``--objects`` objects
(about 40 per range) takes ``--advances`` commits: on ``main`` each rewrites 1-8 random objects,
one in nine restores an earlier state (its ranges come back), and every fourth advance also
moves a second branch, ``dev``. After each commit the real :class:`~mirror.validator.Validator`
checks the new head against the previous one, with the set in a SQLite KV bounded by
``replicant.validated_heads_kept`` (``--heads-kept``), and the background prune is awaited.

It prints one table, a row every ``--every`` advances: the set's size, the bound (distinct
ranges of the heads the chains keep), the ranges an unbounded set would hold by then, the KV
keys of the retention state, and the mean milliseconds per advance spent recording the tree and
pruning (the validation itself excluded).
"""

from __future__ import annotations

import argparse
import hashlib
import random
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from importlib.metadata import version
from pathlib import Path

import anyio

from bench.machine import describe
from bench.tables import markdown
from mirror.block import MemoryBlockStore
from mirror.core import Catalog, ChunkingParams, Entry, open_memory
from mirror.kv import SqliteKV
from mirror.validator import KVValidatedRanges, ThreadedObjectReader, Validator

__all__ = ["Row", "main", "run"]

REPO = "ranges"
RANGES = b"replicant/ranges/bench/"
RETENTION = b"replicant/range-retention/bench/"
MTIME = 1_700_000_000


@dataclass(frozen=True, slots=True)
class Row:
    """The set after ``advances`` advances (see the module docstring for the columns)."""

    advances: int
    size: int
    bound: int
    unbounded: int
    retention_keys: int
    record_ms: float
    prune_ms: float


class _Timed(KVValidatedRanges):
    """The KV-backed set, timing the recording of trees (the validator calls it in a thread)."""

    record_seconds = 0.0

    def retain(
        self, metarange_id: str, base_metarange_id: str, ids: list[str], base_ids: list[str]
    ) -> None:
        started = time.perf_counter()
        super().retain(metarange_id, base_metarange_id, ids, base_ids)
        self.record_seconds += time.perf_counter() - started


class _Repo:
    def __init__(self, objects: int) -> None:
        self.catalog: Catalog = open_memory(chunking=ChunkingParams(raggedness=40))
        repo = self.catalog.create_repository(REPO, "mem://bench")
        store = self.catalog.block_store(repo)
        assert isinstance(store, MemoryBlockStore)
        self.store = store
        self.version = 0
        self.entries: dict[str, dict[str, Entry]] = {"main": {}}
        self.commit("main", {f"t/part-{n:07d}": self.entry() for n in range(objects)})

    def entry(self) -> Entry:
        self.version += 1
        body = f"v{self.version}".encode()
        address = f"data/p{self.version % 16}/{self.version:010d}"
        self.store.put(address, body)
        return Entry(address, len(body), hashlib.md5(body).hexdigest(), MTIME)

    def commit(self, branch: str, changes: dict[str, Entry]) -> str:
        commit = self.catalog.commit_tree(REPO, branch, sorted(changes.items()), "c").commit
        self.entries[branch].update(changes)
        return commit.metarange_id

    def ids(self, metarange_id: str) -> set[str]:
        committed = self.catalog.committed(self.catalog.get_repository(REPO))
        return {r.id for r in committed.read_metarange(metarange_id)}


def run(
    advances: int, objects: int, heads_kept: int, every: int, kv_path: Path, seed: int = 14
) -> list[Row]:
    """Run the series; return a row every ``every`` advances (and after the last)."""
    rng = random.Random(seed)
    repo = _Repo(objects)
    kv = SqliteKV(str(kv_path))
    validated = _Timed(kv, RANGES, retention_prefix=RETENTION, heads_kept=heads_kept)
    retention = validated.retention
    assert retention is not None
    validator = Validator(ThreadedObjectReader(repo.store), validated=validated)
    heads: dict[str, str] = {"main": ""}
    snapshots: list[dict[str, Entry]] = []
    seen: set[str] = set()
    rows: list[Row] = []
    prune_seconds = 0.0
    recorded = 0.0
    for n in range(1, advances + 1):
        moves = ["main"] if n % 4 else ["main", "dev"]
        if n == 4:
            repo.catalog.create_branch(REPO, "dev", "main")
            repo.entries["dev"] = dict(repo.entries["main"])
            heads["dev"] = ""
        for branch in moves:
            if branch == "main" and snapshots and n % 9 == 0:
                old = rng.choice(snapshots)
                current = repo.entries[branch]
                mid = repo.commit(branch, {p: e for p, e in old.items() if current[p] != e})
            else:
                paths = rng.sample(sorted(repo.entries[branch]), rng.randint(1, 8))
                mid = repo.commit(branch, {p: repo.entry() for p in paths})
            report = anyio.run(validator.validate, mid, heads[branch])
            if not report.complete:
                raise RuntimeError(f"advance {n}: {report.missing_count} missing")
            heads[branch] = mid
            seen |= repo.ids(mid)
        snapshots = [*snapshots[-30:], dict(repo.entries["main"])]
        started = time.perf_counter()
        validated.drain()
        prune_seconds += time.perf_counter() - started
        if n % every == 0 or n == advances:
            bound: set[str] = set()
            for mid in retention.retained_heads():
                bound |= repo.ids(mid)
            size = sum(1 for _ in kv.scan(RANGES))
            if size > len(bound):
                raise RuntimeError(f"advance {n}: {size} ranges kept, bound {len(bound)}")
            done = len(rows) * every
            rows.append(
                Row(
                    advances=n,
                    size=size,
                    bound=len(bound),
                    unbounded=len(seen),
                    retention_keys=sum(1 for _ in kv.scan(RETENTION)),
                    record_ms=1000 * (validated.record_seconds - recorded) / (n - done),
                    prune_ms=1000 * prune_seconds / (n - done),
                )
            )
            recorded = validated.record_seconds
            prune_seconds = 0.0
    validated.close()
    kv.close()
    return rows


def table(rows: Sequence[Row]) -> str:
    """Return the rows as a Markdown table."""
    columns = [
        "advances",
        "set size",
        "bound",
        "unbounded",
        "retention keys",
        "record ms/adv",
        "prune wait ms/adv",
    ]
    return markdown(
        columns,
        [
            [
                str(r.advances),
                str(r.size),
                str(r.bound),
                str(r.unbounded),
                str(r.retention_keys),
                f"{r.record_ms:.2f}",
                f"{r.prune_ms:.2f}",
            ]
            for r in rows
        ],
    )


def main(argv: Sequence[str] | None = None) -> int:
    """Run the benchmark and print its table."""
    parser = argparse.ArgumentParser(prog="python -m bench.validated_ranges")
    parser.add_argument("--advances", type=int, default=2_000)
    parser.add_argument("--objects", type=int, default=20_000)
    parser.add_argument("--heads-kept", type=int, default=3)
    parser.add_argument("--every", type=int, default=200)
    parser.add_argument("--quick", action="store_true", help="200 advances of 2,000 objects")
    args = parser.parse_args(argv)
    if args.quick:
        args.advances, args.objects, args.every = 200, 2_000, 20
    print(describe(("anyio", version("anyio"))))
    print(
        f"{args.advances} advances, {args.objects} objects, "
        f"validated_heads_kept={args.heads_kept}\n"
    )
    with tempfile.TemporaryDirectory(prefix="lakemirror-bench-ranges-") as tmp:
        rows = run(args.advances, args.objects, args.heads_kept, args.every, Path(tmp) / "kv.db")
    print(table(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
