"""Benchmark of mirroring: what validating a commit in the destination region costs.

Run ``python -m bench.mirror`` (options: ``--objects N``, ``--new K``, ``--quick``). It builds an
N-object repository in memory (one bulk :meth:`Catalog.commit_tree`, keys laid out as in
``bench.core``: 8 tables, date partitions of 100 parts; data addresses in partitions of 50,000
objects, as ``DataPathProvider`` rotates them), then prints:

1. **first sync**: validating the N-object commit with no base and empty caches: requests,
   wall and CPU time, and memory (``tracemalloc`` peak of the validation, in a second run with
   fresh caches, and the process's peak RSS);
2. **requests per commit**: validating a commit that adds K objects (one new date partition,
   written as one upload batch under one data partition) with the previous commit as base and
   its ranges validated, by the warm validator of the first sync, by a restarted one (validated
   range IDs loaded from the KV, nothing else), and by :class:`NaiveChecker`, which ``HEAD``\\ s
   every object. Requests by operation, total, and the naive total over each.

The destination is an in-memory bucket holding every file of the source: the range and metarange
files in the catalog's ``MemoryBlockStore``, the data objects virtual (their keys and sizes follow
from their index, so a million of them cost no memory and listings are lazy, as S3's are; the
``MemoryBlockStore`` builds a whole listing up front). It answers without threads, and every
request is counted by :class:`CountingReader`, one ``list`` per page of 1,000 keys as S3 bills
``ListObjectsV2``.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import resource
import sys
import time
import tracemalloc
from collections import Counter
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from dataclasses import dataclass
from importlib.metadata import version

import anyio

from bench.core import TABLES, Layout
from bench.machine import describe, run_footer
from bench.tables import markdown
from mirror.block import BlockNotFoundError, MemoryBlockStore, ObjectInfo
from mirror.core import Catalog, ChunkingParams, Entry, open_memory
from mirror.core.committed import METADATA_PREFIX
from mirror.kv import MemoryKV
from mirror.validator import (
    CountingReader,
    KVValidatedRanges,
    NaiveChecker,
    ObjectCache,
    ValidationReport,
    Validator,
)

__all__ = ["DEFAULT_NEW", "DEFAULT_OBJECTS", "QUICK_OBJECTS", "Lake", "main"]

DEFAULT_OBJECTS = 1_000_000
QUICK_OBJECTS = 100_000
DEFAULT_NEW = 1_000
PARTITION = 50_000
REPO = "bench"
MTIME = 1_700_000_000
CONTENT_TYPE = "application/octet-stream"
KV_PREFIX = b"replicant/validated/bench/"


def address_of(i: int, bulk: int) -> str:
    """Return the data address of object ``i``: bulk-loaded ones first, then one upload batch."""
    if i < bulk:
        return f"data/g{i // PARTITION:07d}bulkload/{i:026d}"
    return f"data/h{(i - bulk) // PARTITION:07d}upload/{i:026d}"


def size_of(i: int) -> int:
    """Return the recorded size of object ``i``."""
    return 1_000_000 + (i * 7919) % 9_000_000


def entry_of(i: int, key: str, bulk: int) -> Entry:
    """Return the entry of object ``i`` at ``key``."""
    return Entry(
        address=address_of(i, bulk),
        size=size_of(i),
        checksum=hashlib.md5(key.encode()).hexdigest(),
        mtime=MTIME + i // 1000,
        content_type=CONTENT_TYPE,
    )


class Bucket:
    """The destination: committed files from a ``MemoryBlockStore``, data objects virtual.

    Data objects ``0 .. total-1`` exist with :func:`size_of` sizes at :func:`address_of`
    addresses, which sort by index, so a listing is a lazy walk over indices.
    """

    def __init__(self, files: MemoryBlockStore, bulk: int, total: int) -> None:
        self.files = files
        self.bulk = bulk
        self.total = total

    @property
    def namespace(self) -> str:
        """Return the namespace URI."""
        return "mem://bench-destination"

    def _index(self, key: str) -> int | None:
        digits = key.rpartition("/")[2]
        if not digits.isdigit():
            return None
        i = int(digits)
        return i if i < self.total and address_of(i, self.bulk) == key else None

    def _first_after(self, key: str) -> int:
        lo, hi = 0, self.total
        while lo < hi:
            mid = (lo + hi) // 2
            if address_of(mid, self.bulk) <= key:
                lo = mid + 1
            else:
                hi = mid
        return lo

    async def head(self, key: str) -> ObjectInfo:
        """Return the info of a data object or committed file."""
        if key.startswith(METADATA_PREFIX):
            return self.files.head(key)
        i = self._index(key)
        if i is None:
            raise BlockNotFoundError(key)
        return ObjectInfo(key, size_of(i), "")

    async def get(self, key: str) -> bytes:
        """Return a committed file (data objects have no bytes here)."""
        return self.files.get(key)

    async def list(self, prefix: str = "", start_after: str = "") -> AsyncIterator[ObjectInfo]:
        """Yield data objects under ``prefix`` after ``start_after`` (committed files: none)."""
        if not prefix.startswith("data/"):
            raise ValueError(f"the benchmark bucket lists data prefixes only, not {prefix!r}")
        i = self._first_after(max(start_after, prefix))
        while i < self.total:
            key = address_of(i, self.bulk)
            if not key.startswith(prefix):
                return
            yield ObjectInfo(key, size_of(i), "")
            i += 1


@dataclass
class Lake:
    """The source repository and its destination, with the commits the tables validate.

    ``base`` is the bulk-loaded tree; ``heads`` are the trees of two commits after it, each adding
    ``new`` objects in a new date partition of one table, uploaded under one data partition.
    """

    catalog: Catalog
    bucket: Bucket
    objects: int
    new: int
    base: str
    heads: tuple[str, str]
    base_ranges: int
    new_ranges: tuple[int, int]
    build_s: float

    @classmethod
    def build(cls, objects: int, new: int) -> Lake:
        """Bulk-load ``objects`` objects, then commit ``new`` more twice."""
        started = time.perf_counter()
        catalog = open_memory(chunking=ChunkingParams())
        repo = catalog.create_repository(REPO, "mem://bench")
        committed = catalog.committed(repo)
        layout = Layout(objects)

        def bulk() -> Iterator[tuple[str, Entry | None]]:
            for i in range(objects):
                key = layout.key_at(i)
                yield key, entry_of(i, key, objects)

        trees = [catalog.commit_tree(REPO, "main", bulk(), "bulk load").commit.metarange_id]
        new_ranges = []
        for n in range(2):
            first = objects + n * new
            added = [
                (Layout.key(TABLES[0], layout.days + n, part), entry_of(first + part, "", objects))
                for part in range(new)
            ]
            commit = catalog.commit_tree(REPO, "main", added, f"{new} new objects").commit
            before = {r.id for r in committed.read_metarange(trees[-1])}
            after = committed.read_metarange(commit.metarange_id)
            new_ranges.append(sum(1 for r in after if r.id not in before))
            trees.append(commit.metarange_id)
        files = catalog.block_store(repo)
        assert isinstance(files, MemoryBlockStore)
        return cls(
            catalog=catalog,
            bucket=Bucket(files, objects, objects + 2 * new),
            objects=objects,
            new=new,
            base=trees[0],
            heads=(trees[1], trees[2]),
            base_ranges=len(committed.read_metarange(trees[0])),
            new_ranges=(new_ranges[0], new_ranges[1]),
            build_s=time.perf_counter() - started,
        )

    def bound(self, n: int) -> int:
        """Return the DESIGN §9 request bound for commit ``n``: 1 + new ranges + ceil(k/1000)."""
        return 1 + self.new_ranges[n] + -(-self.new // 1000)


class Requests(Counter[str]):
    """Requests by operation."""

    def update_one(self, op: str) -> None:
        """Count one request."""
        self[op] += 1


def counting_reader(lake: Lake) -> tuple[CountingReader, Requests]:
    """Return a counting reader of the destination and its counter."""
    counts = Requests()
    return CountingReader(lake.bucket, counts.update_one), counts


def run(fn: Callable[[], object]) -> tuple[object, float, float]:
    """Return ``fn()``, its wall seconds and its CPU seconds."""
    wall, cpu = time.perf_counter(), time.process_time()
    result = fn()
    return result, time.perf_counter() - wall, time.process_time() - cpu


def _ops(counts: Counter[str]) -> list[str]:
    return [f"{counts['get']:,}", f"{counts['list']:,}", f"{counts['head']:,}"]


def _rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def _log(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


@dataclass
class Synced:
    """A validator that has validated the base commit, with the KV its range IDs live in."""

    validator: Validator
    counts: Requests
    kv: MemoryKV


def first_sync(lake: Lake) -> Synced:
    """Print the first-sync table; return the validator that did it (its caches are warm)."""
    _log(f"first sync of {lake.objects:,} objects (timed)")
    reader, counts = counting_reader(lake)
    kv = MemoryKV()
    check = Validator(reader, validated=KVValidatedRanges(kv, KV_PREFIX), objects=ObjectCache())
    report, wall, cpu = run(lambda: anyio.run(check.validate, lake.base))
    assert isinstance(report, ValidationReport) and report.complete, report

    _log(f"first sync of {lake.objects:,} objects (memory, fresh caches)")
    traced_reader, _ = counting_reader(lake)
    traced = Validator(
        traced_reader, validated=KVValidatedRanges(MemoryKV(), KV_PREFIX), objects=ObjectCache()
    )
    rss_before = _rss_mb()
    tracemalloc.start()
    anyio.run(traced.validate, lake.base)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    rss_after = _rss_mb()

    columns = (
        "objects",
        "ranges",
        "GET",
        "LIST",
        "HEAD",
        "requests",
        "wall",
        "CPU",
        "objects/s (CPU)",
        "traced peak",
        "peak RSS (before → after)",
    )
    row = [
        f"{lake.objects:,}",
        f"{lake.base_ranges:,}",
        *_ops(counts),
        f"{counts.total():,}",
        f"{wall:.1f} s",
        f"{cpu:.1f} s",
        f"{lake.objects / cpu:,.0f}",
        f"{peak / 2**20:.0f} MB",
        f"{rss_before:.0f} → {rss_after:.0f} MB",
    ]
    print("First sync: no base, empty caches\n")
    print(markdown(columns, [row]))
    print()
    return Synced(check, counts, kv)


def requests_per_commit(lake: Lake, synced: Synced) -> None:
    """Print the requests-per-commit table: validator (warm, restarted) against naive."""
    rows: list[tuple[str, int, Requests, float]] = []
    h1, h2 = lake.heads

    def check(name: str, n: int, validate: Callable[[], object], counts: Requests) -> None:
        before = Requests(counts)
        report, wall, _ = run(validate)
        assert isinstance(report, ValidationReport) and report.complete, report
        rows.append((name, n, Requests(counts - before), wall))

    # what a restarted replicant finds in its KV: the range IDs of the first sync
    restart_kv = MemoryKV()
    restart_kv.set_many(synced.kv.scan(KV_PREFIX))

    _log(f"validate +{lake.new:,} objects: warm validator")
    warm = synced.validator
    check(
        "validator, warm: first commit after the first sync",
        0,
        lambda: anyio.run(warm.validate, h1, lake.base),
        synced.counts,
    )
    check(
        "validator, warm: the commit after",
        1,
        lambda: anyio.run(warm.validate, h2, h1),
        synced.counts,
    )

    _log(f"validate +{lake.new:,} objects: restarted validator")
    reader, counts = counting_reader(lake)
    restarted = Validator(
        reader, validated=KVValidatedRanges(restart_kv, KV_PREFIX), objects=ObjectCache()
    )
    check(
        "validator, restarted (range IDs from the KV)",
        0,
        lambda: anyio.run(restarted.validate, h1, lake.base),
        counts,
    )

    _log(f"validate +{lake.new:,} objects: naive checker ({lake.objects + lake.new:,} HEADs)")
    reader, counts = counting_reader(lake)
    check("naive (HEAD every object)", 0, lambda: anyio.run(NaiveChecker(reader).check, h1), counts)
    naive = rows[-1][2].total()

    columns = (
        "checker",
        "commit",
        "new ranges",
        "GET",
        "LIST",
        "HEAD",
        "requests",
        "§9 bound",
        "naive / this",
        "wall",
    )
    table = [
        [
            name,
            f"+{lake.new:,} #{n + 1}",
            str(lake.new_ranges[n]),
            *_ops(c),
            f"{c.total():,}",
            "-" if name.startswith("naive") else str(lake.bound(n)),
            f"{naive / c.total():,.0f}x",
            f"{wall:.2f} s",
        ]
        for name, n, c, wall in rows
    ]
    print(
        f"Requests to validate a commit adding {lake.new:,} objects to {lake.objects:,}, "
        "the previous commit as base (validated); §9 bound: 1 + new ranges + ceil(k/1000)\n"
    )
    print(markdown(columns, table))
    print()


def machine() -> str:
    """Return a one-line description of this machine and Python."""
    import pyarrow

    return describe(("pyarrow", pyarrow.__version__), ("anyio", version("anyio")))


def main(argv: Sequence[str] | None = None) -> int:
    """Build the repository, then print each table."""
    parser = argparse.ArgumentParser(prog="python -m bench.mirror", description=__doc__)
    parser.add_argument(
        "--objects", type=int, help=f"repository size (default {DEFAULT_OBJECTS:,})"
    )
    parser.add_argument("--new", type=int, default=DEFAULT_NEW, help="objects the commit adds")
    parser.add_argument(
        "--quick", action="store_true", help=f"a {QUICK_OBJECTS:,}-object repository"
    )
    parser.add_argument(
        "--freshness",
        action="store_true",
        help="also print the catch-up and lag tables of bench.mirror_lag (starts processes)",
    )
    parser.add_argument("--commits", type=int, default=60, help="commits of the lag run")
    args = parser.parse_args(argv)
    objects = args.objects
    if objects is None:
        objects = QUICK_OBJECTS if args.quick else DEFAULT_OBJECTS
    if objects < 1 or args.new < 1:
        parser.error("--objects and --new must be positive")
    started, load = time.perf_counter(), os.getloadavg()[0]
    _log(f"building {objects:,} objects + {args.new:,}")
    lake = Lake.build(objects, args.new)
    print(f"machine: {machine()}")
    print(f"command: python -m bench.mirror --objects {objects} --new {args.new}")
    print(
        f"repository: {objects:,} objects in {lake.base_ranges:,} ranges, built in "
        f"{lake.build_s:.1f} s\n"
    )
    synced = first_sync(lake)
    requests_per_commit(lake, synced)
    if args.freshness:
        from bench.mirror_lag import catch_up_table, lag_table, quiet

        quiet()
        catch_up_table()
        lag_table(args.commits)
    print(run_footer(started, load))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
