"""Benchmark of the production drivers (S3 + DynamoDB) beside the embedded ones (SQLite + local).

Run ``python -m bench.backends`` (options: ``--changes``, ``--commits``, ``--objects``,
``--reads``, ``--lists``, ``--size``). The S3 + DynamoDB side talks over HTTP to a ``moto_server``
process on this machine, started the way the integration tests start theirs
(:func:`tests.integration.moto_fixtures.running_moto`, one request at a time); the embedded side
is a SQLite file and a directory in a temporary directory. Both run the same steps through
:class:`~mirror.core.Catalog`, one backend after the other in the same run:

1. **commit**: ``--commits`` times, stage ``--changes`` new objects of ``--size`` bytes
   (not timed), then time the commit;
2. **read**: with ``--objects`` objects of ``--size`` bytes committed on ``main``, time
   ``--reads`` whole-object reads of objects drawn at random (stat + get);
3. **list**: time ``--lists`` listings of all ``--objects`` objects of ``main``, page by page
   (pages of 1,000).

Each step reports the median (p50) and 90th percentile (p90) of its samples and the ratio of the
S3 + DynamoDB p50 to the embedded p50. moto keeps everything in memory and answers from this
machine, so the figures show the cost of the drivers and of HTTP round trips, not of AWS's
network latency.
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from bench.machine import describe
from mirror.block.resolver import BlockResolver
from mirror.core import Catalog
from mirror.kv.sqlite import SqliteKV

__all__ = ["BACKENDS", "STEPS", "Figures", "main", "run_backend"]

REPO = "bench"
BACKENDS = ("SQLite + local", "DynamoDB + S3 (moto)")
STEPS = ("commit", "read", "list")
PAGE = 1000


@dataclass(frozen=True)
class Figures:
    """The samples of one step on one backend, in seconds."""

    samples: tuple[float, ...]

    def p50(self) -> float:
        """Return the median."""
        return statistics.median(self.samples)

    def p90(self) -> float:
        """Return the 90th percentile (the largest sample with fewer than 10 samples)."""
        if len(self.samples) < 10:
            return max(self.samples)
        return statistics.quantiles(self.samples, n=10, method="inclusive")[-1]


@contextmanager
def embedded_catalog(workdir: Path) -> Iterator[tuple[Catalog, str]]:
    """Yield a SQLite + local catalog under ``workdir`` and the namespace to create on it."""
    workdir.mkdir(parents=True, exist_ok=True)
    catalog = Catalog(SqliteKV(workdir / "kv.sqlite"), BlockResolver(workdir))
    try:
        yield catalog, f"local://{REPO}"
    finally:
        catalog.kv.close()


@contextmanager
def aws_catalog(workdir: Path) -> Iterator[tuple[Catalog, str]]:
    """Yield a DynamoDB + S3 catalog on a fresh moto server, and an ``s3://`` namespace."""
    from mirror.block.s3 import make_s3_client, s3_store_factory
    from mirror.kv.dynamodb import DynamoKV, create_table
    from tests.integration.moto_fixtures import (
        create_bucket,
        dynamo_settings,
        running_moto,
        s3_settings,
        unique_name,
    )

    workdir.mkdir(parents=True, exist_ok=True)
    with contextmanager(running_moto)("us-east-1", workdir) as server:
        table = unique_name("bench")
        kv_settings = dynamo_settings(server, table)
        create_table(kv_settings)
        block_settings = s3_settings(server)
        bucket = create_bucket(server, make_s3_client(block_settings))
        resolver = BlockResolver(workdir)
        resolver.register("s3", s3_store_factory(block_settings))
        catalog = Catalog(DynamoKV(kv_settings), resolver)
        try:
            yield catalog, f"s3://{bucket}/{REPO}"
        finally:
            catalog.kv.close()


def _timed(action: Callable[[], object]) -> float:
    start = time.perf_counter()
    action()
    return time.perf_counter() - start


def _stage(catalog: Catalog, prefix: str, count: int, body: bytes) -> list[str]:
    paths = [f"{prefix}/part-{i:05d}.bin" for i in range(count)]
    for path in paths:
        catalog.upload_object(REPO, "main", path, body)
    return paths


def _list_all(catalog: Catalog) -> int:
    seen, after = 0, ""
    while True:
        page = catalog.list_objects(REPO, "main", "data/", after=after, amount=PAGE)
        seen += len(page.objects)
        if not page.has_more:
            return seen
        after = page.next_offset


def run_backend(
    catalog: Catalog,
    namespace: str,
    *,
    changes: int,
    commits: int,
    objects: int,
    reads: int,
    lists: int,
    size: int,
    seed: int = 7,
) -> dict[str, Figures]:
    """Run the three steps on ``catalog``; return each step's samples."""
    rng = random.Random(seed)
    body = bytes(rng.getrandbits(8) for _ in range(size))
    catalog.create_repository(REPO, namespace)
    paths = _stage(catalog, "data", objects, body)
    catalog.commit(REPO, "main", f"{objects} objects")

    commit_samples = []
    for r in range(commits):
        _stage(catalog, f"commits/c{r:03d}", changes, body)
        commit_samples.append(_timed(lambda r=r: catalog.commit(REPO, "main", f"c{r}")))

    read_samples = []
    for _ in range(reads):
        path = rng.choice(paths)
        read_samples.append(_timed(lambda p=path: catalog.read_object(REPO, "main", p)))
    if catalog.read_object(REPO, "main", paths[0]) != body:
        raise RuntimeError("read returned other bytes than were written")

    list_samples = []
    for _ in range(lists):
        start = time.perf_counter()
        seen = _list_all(catalog)
        list_samples.append(time.perf_counter() - start)
        if seen != objects:
            raise RuntimeError(f"listed {seen} objects, expected {objects}")
    return {
        "commit": Figures(tuple(commit_samples)),
        "read": Figures(tuple(read_samples)),
        "list": Figures(tuple(list_samples)),
    }


def machine() -> str:
    """Return a one-line description of this machine and the drivers' libraries."""
    import boto3
    import moto

    return describe(("boto3", boto3.__version__), ("moto", moto.__version__))


def _ms(seconds: float) -> str:
    return f"{seconds * 1000:.1f} ms"


def table(results: dict[str, dict[str, Figures]], labels: dict[str, str]) -> str:
    """Return the figures as a Markdown table: one row a step, both backends side by side."""
    local, aws = results[BACKENDS[0]], results[BACKENDS[1]]
    head = [
        "step",
        f"{BACKENDS[0]} p50",
        "p90",
        f"{BACKENDS[1]} p50",
        "p90",
        "ratio (p50)",
    ]
    rows = [head, ["---"] + ["---:"] * (len(head) - 1)]
    for step in STEPS:
        a, b = local[step], aws[step]
        ratio = b.p50() / a.p50() if a.p50() > 0 else float("inf")
        rows.append(
            [labels[step], _ms(a.p50()), _ms(a.p90()), _ms(b.p50()), _ms(b.p90()), f"{ratio:.1f}x"]
        )
    return "\n".join("| " + " | ".join(row) + " |" for row in rows)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the benchmark on both backends and print the machine and the table."""
    parser = argparse.ArgumentParser(prog="python -m bench.backends", description=__doc__)
    parser.add_argument("--changes", type=int, default=100, help="objects staged per commit")
    parser.add_argument("--commits", type=int, default=10, help="commits timed")
    parser.add_argument("--objects", type=int, default=1000, help="objects read and listed")
    parser.add_argument("--reads", type=int, default=200, help="object reads timed")
    parser.add_argument("--lists", type=int, default=10, help="full listings timed")
    parser.add_argument("--size", type=int, default=1024, help="bytes per object")
    args = parser.parse_args(argv)
    for name in ("changes", "commits", "objects", "reads", "lists", "size"):
        if getattr(args, name) < 1:
            parser.error(f"--{name} must be at least 1")
    labels = {
        "commit": f"commit {args.changes:,} staged",
        "read": f"read {args.size:,} B object",
        "list": f"list {args.objects:,} objects",
    }
    print(f"machine: {machine()}", flush=True)
    results: dict[str, dict[str, Figures]] = {}
    with tempfile.TemporaryDirectory(prefix="bench-backends-") as tmp:
        for name, opener in zip(BACKENDS, (embedded_catalog, aws_catalog), strict=True):
            started = time.perf_counter()
            with opener(Path(tmp) / name.split()[0].lower()) as (catalog, namespace):
                results[name] = run_backend(
                    catalog,
                    namespace,
                    changes=args.changes,
                    commits=args.commits,
                    objects=args.objects,
                    reads=args.reads,
                    lists=args.lists,
                    size=args.size,
                )
            print(f"{name}: done in {time.perf_counter() - started:.1f} s", file=sys.stderr)
    print(
        f"samples: {args.commits} commits, {args.reads} reads, {args.lists} listings; "
        f"{args.objects:,} objects of {args.size:,} B",
        flush=True,
    )
    print(table(results, labels), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
