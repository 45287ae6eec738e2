"""Benchmark of the versioning core on the embedded default (SQLite KV + local object store).

Run ``python -m bench.core`` (options: ``--sizes``, ``--repeat``). For each repository size, in a
subprocess of its own so that peak memory is per size, it:

1. builds the repository in one bulk :meth:`Catalog.commit_tree` (timed on its own);
2. commits 100 changes staged with :meth:`Catalog.upload_object`, clustered the way a data lake
   writes them: 95 new objects under one new date partition plus 5 overwrites in one existing
   partition;
3. diffs that commit against its parent (two-dot) on a freshly opened catalog, so that both
   metaranges and every differing range are read from disk;
4. commits 100 overwrites scattered uniformly at random over the whole key space (the worst
   case for range reuse, reported in its own column);
5. merges a branch carrying 100 new objects into ``main``, which has 100 new objects of its
   own in another table.

Each timed step runs ``--repeat`` times and the median is reported; staging (the uploads) is
not part of a commit's time. Keys look like ``tables/<table>/date=YYYY-MM-DD/part-NNNNN.parquet``:
8 tables, 100 parts per date partition.
"""

from __future__ import annotations

import argparse
import datetime as dt
import hashlib
import json
import os
import random
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

from bench.machine import describe, run_footer
from mirror.core import Catalog, CommitResult, Entry, WriteStats, open_embedded
from mirror.core.diff import diff_trees

__all__ = ["COLUMNS", "ROOT", "Timings", "Worker", "main", "worker_env"]

DEFAULT_SIZES = (1_000, 100_000, 1_000_000)
TABLES = (
    "clicks",
    "events",
    "impressions",
    "orders",
    "pageviews",
    "payments",
    "sessions",
    "signups",
)
PARTS_PER_PARTITION = 100
CHANGES = 100
OVERWRITES = 5
REPO = "bench"
EPOCH = dt.date(2020, 1, 1)
CONTENT_TYPE = "application/octet-stream"

COLUMNS = (
    "objects",
    "ranges",
    "build, bulk (wall / cpu)",
    "commit 100 clustered (wall / cpu)",
    "files",
    "commit 100 scattered (wall / cpu)",
    "files",
    "diff (wall)",
    "ranges read",
    "merge (wall)",
    "files",
    "peak RSS",
)


class Layout:
    """The keys of an ``n``-object repository, addressable by their index in sorted order."""

    def __init__(self, n: int) -> None:
        self.n = n
        self.per_table = -(-n // len(TABLES))
        self.days = -(-self.per_table // PARTS_PER_PARTITION)
        self.tables = -(-n // self.per_table)

    @staticmethod
    def key(table: str, day: int, part: int) -> str:
        """Return the key of one part of a date partition."""
        date = EPOCH + dt.timedelta(days=day)
        return f"tables/{table}/date={date.isoformat()}/part-{part:05d}.parquet"

    def key_at(self, i: int) -> str:
        """Return the ``i``-th key in sorted order."""
        t, j = divmod(i, self.per_table)
        day, part = divmod(j, PARTS_PER_PARTITION)
        return self.key(TABLES[t], day, part)

    def partition(self, rng: random.Random) -> list[str]:
        """Return the keys of one existing date partition drawn at random."""
        t = rng.randrange(self.tables)
        first = t * self.per_table + rng.randrange(self.days) * PARTS_PER_PARTITION
        last = min(first + PARTS_PER_PARTITION, (t + 1) * self.per_table, self.n)
        return [self.key_at(i) for i in range(first, last)]

    def records(self) -> Iterator[tuple[str, Entry | None]]:
        """Yield every ``(key, entry)`` of the repository in key order."""
        for i in range(self.n):
            key = self.key_at(i)
            yield (
                key,
                Entry(
                    address=f"data/g{i // 50_000:07d}bulkload/{i:026d}",
                    size=1_000_000 + (i * 7919) % 9_000_000,
                    checksum=hashlib.md5(key.encode()).hexdigest(),
                    mtime=1_700_000_000 + i // 1000,
                    content_type=CONTENT_TYPE,
                ),
            )


class Timings:
    """Wall-clock and CPU seconds of repeated runs of one step."""

    def __init__(self) -> None:
        self.wall: list[float] = []
        self.cpu: list[float] = []

    def run(self, fn: Callable[[], Any]) -> Any:
        """Call ``fn``, record how long it took, and return its result."""
        wall, cpu = time.perf_counter(), time.process_time()
        result = fn()
        self.cpu.append(time.process_time() - cpu)
        self.wall.append(time.perf_counter() - wall)
        return result

    def medians_ms(self, name: str) -> dict[str, float]:
        """Return the median wall and CPU milliseconds as ``<name>_ms`` and ``<name>_cpu_ms``."""
        return {
            f"{name}_ms": statistics.median(self.wall) * 1000.0,
            f"{name}_cpu_ms": statistics.median(self.cpu) * 1000.0,
        }


class Worker:
    """Run every measurement for one repository size in a fresh data directory."""

    def __init__(self, data_dir: Path, n: int, repeat: int, seed: int) -> None:
        self.data_dir = data_dir
        self.layout = Layout(n)
        self.repeat = repeat
        self.rng = random.Random(seed)
        self.next_day = self.layout.days
        self.uploads = 0
        self.catalog = open_embedded(data_dir)

    def fresh(self) -> Catalog:
        """Return a newly opened catalog over the same data directory (no warm caches)."""
        return open_embedded(self.data_dir)

    def _upload(self, branch: str, key: str) -> None:
        self.uploads += 1
        body = f"{key}\n{self.uploads}\n".encode().ljust(1024, b".")
        self.catalog.upload_object(REPO, branch, key, body, content_type=CONTENT_TYPE)

    def _new_partition(self, branch: str, table: str, count: int) -> None:
        day = self.next_day
        self.next_day += 1
        for part in range(count):
            self._upload(branch, self.layout.key(table, day, part))

    def _table(self) -> str:
        return TABLES[self.rng.randrange(self.layout.tables)]

    def build(self) -> dict[str, Any]:
        """Create the repository and bulk-load its objects in one commit."""
        self.catalog.create_repository(REPO, f"local://{REPO}")
        timing = Timings()
        result = timing.run(
            lambda: self.catalog.commit_tree(REPO, "main", self.layout.records(), "bulk load")
        )
        self.catalog = self.fresh()
        repo = self.catalog.get_repository(REPO)
        ranges = self.catalog.committed(repo).read_metarange(result.commit.metarange_id)
        return {
            "build_s": timing.wall[0],
            "build_cpu_s": timing.cpu[0],
            "build_files": result.stats.files_written,
            "ranges": len(ranges),
        }

    def clustered_commit(self, timing: Timings, message: str) -> tuple[CommitResult, int]:
        """Stage one clustered change set (not timed), commit it under ``timing``.

        Returns the commit and how many changes it had to make (checked).
        """
        self._new_partition("main", self._table(), CHANGES - OVERWRITES)
        overwritten = self.layout.partition(self.rng)[:OVERWRITES]
        for key in overwritten:
            self._upload("main", key)
        result: CommitResult = timing.run(lambda: self.catalog.commit(REPO, "main", message))
        expected = CHANGES - OVERWRITES + len(overwritten)
        if result.stats.changes != expected:
            raise AssertionError(f"expected {expected} changes, got {result.stats.changes}")
        return result, expected

    def clustered(self) -> dict[str, Any]:
        """Commit new partitions plus a few overwrites; diff each commit against its parent."""
        commits, diffs = Timings(), Timings()
        files, diff_read = [], []
        for r in range(self.repeat):
            result, expected = self.clustered_commit(commits, f"c{r}")
            files.append(result.stats.files_written)
            cold = self.fresh()
            count = diffs.run(lambda c=cold: sum(1 for _ in c.diff(REPO, "main~1", "main")))
            if count != expected:
                raise AssertionError(f"diff found {count} changes, expected {expected}")
            cold = self.fresh()
            repo = cold.get_repository(REPO)
            stats = WriteStats()
            left = cold.get_commit(REPO, result.commit.parents[0]).metarange_id
            list(diff_trees(cold.committed(repo), left, result.commit.metarange_id, stats))
            diff_read.append(stats.ranges_read)
        return {
            **commits.medians_ms("clustered"),
            "clustered_files": statistics.median(files),
            **diffs.medians_ms("diff"),
            "diff_ranges_read": statistics.median(diff_read),
        }

    def scattered(self) -> dict[str, Any]:
        """Commit overwrites of keys drawn uniformly at random from the whole repository."""
        commits, files = Timings(), []
        for r in range(self.repeat):
            for i in sorted(self.rng.sample(range(self.layout.n), min(CHANGES, self.layout.n))):
                self._upload("main", self.layout.key_at(i))
            result = commits.run(lambda r=r: self.catalog.commit(REPO, "main", f"s{r}"))
            files.append(result.stats.files_written)
        return {**commits.medians_ms("scattered"), "scattered_files": statistics.median(files)}

    def merges(self) -> dict[str, Any]:
        """Merge a branch with 100 new objects into main, which has 100 of its own elsewhere."""
        merges, files = Timings(), []
        for r in range(self.repeat):
            branch = f"feature-{r}"
            self.catalog.create_branch(REPO, branch, "main")
            ours = self._table()
            self._new_partition(branch, ours, CHANGES)
            self.catalog.commit(REPO, branch, f"feature {r}")
            theirs = self._table()
            while theirs == ours and self.layout.tables > 1:
                theirs = self._table()
            self._new_partition("main", theirs, CHANGES)
            self.catalog.commit(REPO, "main", f"main {r}")
            result = merges.run(lambda b=branch: self.catalog.merge(REPO, b, "main"))
            files.append(result.stats.files_written)
        return {**merges.medians_ms("merge"), "merge_files": statistics.median(files)}

    def run(self) -> dict[str, Any]:
        """Return every measurement, peak RSS included."""
        out: dict[str, Any] = {"objects": self.layout.n, "repeat": self.repeat}
        for step in (self.build, self.clustered, self.scattered, self.merges):
            _log(f"{self.layout.n:>9,} objects: {step.__name__}")
            out.update(step())
        out["peak_rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0
        return out


def _log(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


def _run_worker(n: int, repeat: int, seed: int) -> None:
    with tempfile.TemporaryDirectory(prefix="bench-core-") as tmp:
        result = Worker(Path(tmp), n, repeat, seed).run()
    print(json.dumps(result))


ROOT = Path(__file__).resolve().parent.parent
"""The source tree the benchmark runs from (its worker processes run from it too)."""


def worker_env() -> dict[str, str]:
    """Return the environment of a worker process: this one's, with :data:`ROOT` importable."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH", "")) if p)
    return env


def _measure(n: int, repeat: int, seed: int) -> dict[str, Any]:
    cmd = [sys.executable, "-m", "bench.core", "--worker", str(n), "--repeat", str(repeat)]
    cmd += ["--seed", str(seed)]
    env = worker_env()
    proc = subprocess.run(cmd, cwd=ROOT, env=env, stdout=subprocess.PIPE, text=True, check=False)
    if proc.returncode != 0:
        raise SystemExit(f"benchmark of {n} objects failed (exit {proc.returncode})")
    result: dict[str, Any] = json.loads(proc.stdout.strip().splitlines()[-1])
    return result


def machine() -> str:
    """Return a one-line description of this machine and Python."""
    import pyarrow

    return describe(("pyarrow", pyarrow.__version__))


def _row(r: dict[str, Any]) -> list[str]:
    return [
        f"{r['objects']:,}",
        f"{r['ranges']:,}",
        f"{r['build_s']:.1f} / {r['build_cpu_s']:.1f} s",
        f"{r['clustered_ms']:.1f} / {r['clustered_cpu_ms']:.1f} ms",
        f"{r['clustered_files']:g}",
        f"{r['scattered_ms']:.1f} / {r['scattered_cpu_ms']:.1f} ms",
        f"{r['scattered_files']:g}",
        f"{r['diff_ms']:.1f} ms",
        f"{r['diff_ranges_read']:g}",
        f"{r['merge_ms']:.1f} ms",
        f"{r['merge_files']:g}",
        f"{r['peak_rss_mb']:.0f} MB",
    ]


def format_table(results: Sequence[dict[str, Any]]) -> str:
    """Return the results as a Markdown table."""
    rows = [list(COLUMNS), *(_row(r) for r in results)]
    widths = [max(len(row[c]) for row in rows) for c in range(len(COLUMNS))]
    lines = []
    for k, row in enumerate(rows):
        cells = [cell.rjust(w) if k else cell.ljust(w) for cell, w in zip(row, widths, strict=True)]
        lines.append("| " + " | ".join(cells) + " |")
        if k == 0:
            lines.append("|" + "|".join("-" * (w + 1) + ":" for w in widths) + "|")
    return "\n".join(lines)


def format_ratios(results: Sequence[dict[str, Any]]) -> str:
    """Return the commit-time ratio of the largest repository to the smallest."""
    if len(results) < 2:
        return "commit-time ratio: needs two sizes"
    small = min(results, key=lambda r: r["objects"])
    large = max(results, key=lambda r: r["objects"])

    def ratio(column: str) -> float:
        return float(large[column] / small[column])

    wall, cpu = ratio("clustered_ms"), ratio("clustered_cpu_ms")
    # CPU time, not wall time: on a shared machine wall time measures the other processes too
    verdict = "meets" if cpu <= 1.5 else "misses"
    return (
        f"commit-time ratio {large['objects']:,} / {small['objects']:,} objects:\n"
        f"  clustered: {wall:.2f}x wall, {cpu:.2f}x cpu ({verdict} the <= 1.5x target)\n"
        f"  scattered: {ratio('scattered_ms'):.2f}x wall, {ratio('scattered_cpu_ms'):.2f}x cpu "
        "(no target: 100 random keys touch up to 100 ranges)"
    )


def main(argv: Sequence[str] | None = None) -> int:
    """Run the benchmark and print the table."""
    parser = argparse.ArgumentParser(prog="python -m bench.core", description=__doc__)
    parser.add_argument("--sizes", type=int, nargs="+", default=list(DEFAULT_SIZES))
    parser.add_argument("--repeat", type=int, default=5, help="runs per timed step (median)")
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument("--worker", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.repeat < 1 or any(n < 1 for n in args.sizes):
        parser.error("--sizes and --repeat must be positive")
    if args.worker is not None:
        _run_worker(args.worker, args.repeat, args.seed)
        return 0
    started, load = time.perf_counter(), os.getloadavg()[0]
    results = [_measure(n, args.repeat, args.seed) for n in sorted(args.sizes)]
    print(f"machine: {machine()}")
    print(
        f"command: python -m bench.core --sizes {' '.join(map(str, args.sizes))} "
        f"--repeat {args.repeat}"
    )
    print(f"median of {args.repeat} runs per step; each size in its own process\n")
    print(format_table(results))
    print()
    print(format_ratios(results))
    print(run_footer(started, load))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
