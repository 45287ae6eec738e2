"""Benchmark of first-sync validation: the Spark bulk validator against the async validator.

Run ``python -m bench.spark`` (options: ``--objects N``, ``--withhold K``, ``--quick``,
``--cache-dir``). It builds, or reuses from the cache directory, an N-object commit on a local
namespace (one bulk :meth:`Catalog.commit_tree`; keys laid out as in ``bench.core``, data
addresses in partitions of 10,000 objects) and a destination directory holding every file of the
source but K withheld data objects (hard links: the data objects are tiny files, a million of
them take a minute to link). Then it validates the commit in the destination, from scratch, with:

1. :func:`~mirror.spark.bulk_validator.bulk_validate` in a local Spark session using every core:
   the listing of the destination (an ``os.scandir`` walk into Parquet), the job reading the
   range files and anti-joining them with the listing; once cold (the first job of the JVM) and
   once warm;
2. :class:`~mirror.validator.Validator` over a :class:`ThreadedObjectReader` of the destination,
   with empty caches and no base (a first sync), counting requests as S3 would bill them.

Both must report the same missing objects. It prints one table of wall times.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import sys
import time
from collections import Counter
from collections.abc import Collection, Iterator, Sequence
from dataclasses import dataclass
from importlib.metadata import version
from pathlib import Path

import anyio

from bench.core import Layout
from bench.machine import describe, run_footer
from bench.tables import markdown
from mirror.block.local import LocalBlockStore
from mirror.core import Entry, open_embedded
from mirror.core.committed import METADATA_PREFIX
from mirror.validator import (
    CountingReader,
    MemoryValidatedRanges,
    ObjectCache,
    ThreadedObjectReader,
    ValidationReport,
    Validator,
)

__all__ = [
    "DEFAULT_OBJECTS",
    "QUICK_OBJECTS",
    "LocalLake",
    "address_of",
    "build_lake",
    "main",
    "size_of",
]

DEFAULT_OBJECTS = 1_000_000
QUICK_OBJECTS = 100_000
DEFAULT_WITHHOLD = 100
PARTITION = 10_000
SIZES = 4
REPO = "bench"
NAMESPACE = "local://source"
MTIME = 1_700_000_000
CONTENT_TYPE = "application/octet-stream"
DEFAULT_CACHE = Path("/tmp/lakemirror-bench-spark")
_LINKS_PER_TEMPLATE = 50_000


def address_of(i: int) -> str:
    """Return the data address of object ``i`` (addresses sort by index)."""
    return f"data/g{i // PARTITION:07d}bulkload/{i:026d}"


def size_of(i: int) -> int:
    """Return the size of object ``i``: a few bytes, so that its file is one of a few templates."""
    return i % SIZES


@dataclass(frozen=True)
class LocalLake:
    """An N-object commit in ``source`` and its destination ``destination`` minus ``withheld``.

    ``source`` and ``destination`` are the namespaces' directories; ``withheld`` are the
    addresses of the data objects the destination lacks, sorted.
    """

    root: Path
    objects: int
    metarange_id: str
    ranges: int
    withheld: tuple[str, ...]
    build_s: float

    @property
    def source(self) -> Path:
        """Return the source namespace's directory."""
        return self.root / "catalog" / "source"

    @property
    def destination(self) -> Path:
        """Return the destination namespace's directory."""
        return self.root / "destination"

    @property
    def namespace(self) -> str:
        """Return the destination namespace URI."""
        return f"local://{self.destination}"


def _records(objects: int) -> Iterator[tuple[str, Entry | None]]:
    layout = Layout(objects)
    for i in range(objects):
        yield (
            layout.key_at(i),
            Entry(
                address=address_of(i),
                size=size_of(i),
                checksum=f"{i:032x}",
                mtime=MTIME + i // 1000,
                content_type=CONTENT_TYPE,
            ),
        )


def _link_files(lake_root: Path, objects: int, withheld: Collection[int]) -> None:
    """Fill the destination: every committed file, and every data object but ``withheld``."""
    source = lake_root / "catalog" / "source"
    destination = lake_root / "destination"
    committed = destination / METADATA_PREFIX
    committed.mkdir(parents=True)
    for f in os.scandir(source / METADATA_PREFIX):
        os.link(f.path, committed / f.name)
    # ext4 allows 65,000 links to a file: a fresh set of templates every 50,000 objects
    templates = lake_root / "templates"
    templates.mkdir()
    sources: list[str] = []
    base = str(destination)
    for i in range(objects):
        if i % PARTITION == 0:
            os.makedirs(f"{base}/{address_of(i).rpartition('/')[0]}")
        if i % _LINKS_PER_TEMPLATE == 0:
            sources = []
            for size in range(SIZES):
                template = templates / f"{i}-{size}"
                template.write_bytes(b"x" * size)
                sources.append(str(template))
        if i not in withheld:
            os.link(sources[size_of(i)], f"{base}/{address_of(i)}")


def build_lake(
    root: Path, objects: int, *, withhold: Collection[int] = (), reuse: bool = False
) -> LocalLake:
    """Build an ``objects``-object commit and its destination under ``root``.

    ``withhold`` are the indices of data objects left out of the destination. With ``reuse``, a
    lake built before under ``root`` with the same parameters is returned as it is.
    """
    marker = root / "lake.json"
    wanted = {"objects": objects, "withheld": sorted(address_of(i) for i in withhold)}
    if reuse and marker.is_file():
        saved = json.loads(marker.read_text())
        if {k: saved[k] for k in wanted} == wanted:
            return LocalLake(
                root,
                objects,
                saved["metarange_id"],
                saved["ranges"],
                tuple(saved["withheld"]),
                saved["build_s"],
            )
    shutil.rmtree(root, ignore_errors=True)
    started = time.perf_counter()
    catalog = open_embedded(root / "catalog")
    repo = catalog.create_repository(REPO, NAMESPACE)
    commit = catalog.commit_tree(REPO, "main", _records(objects), "bulk load").commit
    ranges = len(catalog.committed(repo).read_metarange(commit.metarange_id))
    _link_files(root, objects, set(withhold))
    build_s = time.perf_counter() - started
    marker.write_text(
        json.dumps(
            {**wanted, "metarange_id": commit.metarange_id, "ranges": ranges, "build_s": build_s}
        )
    )
    return LocalLake(root, objects, commit.metarange_id, ranges, tuple(wanted["withheld"]), build_s)


def _log(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


def _async_validate(lake: LocalLake) -> tuple[ValidationReport, Counter[str], float]:
    counts: Counter[str] = Counter()
    reader = CountingReader(
        ThreadedObjectReader(LocalBlockStore(lake.destination)),
        lambda op: counts.update((op,)),
    )
    validator = Validator(reader, validated=MemoryValidatedRanges(), objects=ObjectCache())
    started = time.perf_counter()
    report = anyio.run(validator.validate, lake.metarange_id)
    return report, counts, time.perf_counter() - started


def main(argv: Sequence[str] | None = None) -> int:
    """Build or reuse the commit, validate it both ways, print the table."""
    parser = argparse.ArgumentParser(prog="python -m bench.spark", description=__doc__)
    parser.add_argument("--objects", type=int, help=f"commit size (default {DEFAULT_OBJECTS:,})")
    parser.add_argument("--quick", action="store_true", help=f"a {QUICK_OBJECTS:,}-object commit")
    parser.add_argument(
        "--withhold",
        type=int,
        default=DEFAULT_WITHHOLD,
        help=f"data objects missing from the destination (default {DEFAULT_WITHHOLD})",
    )
    parser.add_argument(
        "--cache-dir",
        type=Path,
        default=DEFAULT_CACHE,
        help=f"where commits are built and kept between runs (default {DEFAULT_CACHE})",
    )
    parser.add_argument("--cores", type=int, help="Spark's local cores (default: all)")
    args = parser.parse_args(argv)
    objects = args.objects or (QUICK_OBJECTS if args.quick else DEFAULT_OBJECTS)
    if objects < 1 or not 0 <= args.withhold <= objects:
        parser.error("--objects must be positive and --withhold between 0 and --objects")

    from mirror.spark.bulk_validator import bulk_validate, local_spark_session, write_listing

    started, load = time.perf_counter(), os.getloadavg()[0]
    withheld = random.Random(objects).sample(range(objects), args.withhold)
    _log(f"building (or reusing) {objects:,} objects, {args.withhold:,} withheld")
    lake = build_lake(args.cache_dir / f"lake-{objects}", objects, withhold=withheld, reuse=True)

    _log("starting Spark")
    t = time.perf_counter()
    spark = local_spark_session("bench-spark", args.cores)
    session_s = time.perf_counter() - t
    cores = spark.sparkContext.defaultParallelism
    try:
        _log("listing the destination")
        t = time.perf_counter()
        listed = write_listing(
            LocalBlockStore(lake.destination), args.cache_dir / "listing.parquet"
        )
        listing_s = time.perf_counter() - t
        _log("Spark bulk validator (cold, then warm)")
        cold = bulk_validate(spark, lake.namespace, lake.metarange_id, work_dir=args.cache_dir)
        warm = bulk_validate(spark, lake.namespace, lake.metarange_id, work_dir=args.cache_dir)
    finally:
        spark.stop()
    _log("async validator")
    report, counts, async_s = _async_validate(lake)

    for bulk in (cold, warm):
        assert bulk.missing_count == report.missing_count == len(lake.withheld), (bulk, report)
    if len(lake.withheld) <= len(report.missing):
        assert sorted(report.missing) == list(cold.missing) == list(lake.withheld)

    print(f"machine: {machine()}")
    print(f"command: python -m bench.spark --objects {objects} --withhold {args.withhold}")
    print(
        f"commit: {objects:,} objects in {lake.ranges:,} ranges, {len(lake.withheld):,} withheld "
        f"from the destination; built (catalog + hard links) in {lake.build_s:.0f} s"
    )
    print(f"Spark: local[{cores}], session started in {session_s:.1f} s (not in the table)\n")
    columns = ("validator", "missing found", "requests", "wall", "objects/s")
    rows = [
        [
            f"listing alone (os.scandir walk → Parquet, {listed:,} files)",
            "-",
            "-",
            f"{listing_s:.1f} s",
            f"{listed / listing_s:,.0f}",
        ],
        *(
            [
                f"Spark bulk validator, {name} (listing + job)",
                f"{bulk.missing_count:,}",
                "-",
                f"{bulk.seconds:.1f} s",
                f"{objects / bulk.seconds:,.0f}",
            ]
            for name, bulk in (("cold", cold), ("warm", warm))
        ),
        [
            "async validator (ThreadedObjectReader, LocalBlockStore)",
            f"{report.missing_count:,}",
            f"{counts.total():,} (GET {counts['get']:,}, LIST {counts['list']:,}, "
            f"HEAD {counts['head']:,})",
            f"{async_s:.1f} s",
            f"{objects / async_s:,.0f}",
        ],
    ]
    print(markdown(columns, rows))
    print()
    print(run_footer(started, load))
    return 0


def machine() -> str:
    """Return a one-line description of this machine, Python, pyarrow and PySpark."""
    import pyarrow

    return describe(("pyarrow", pyarrow.__version__), ("pyspark", version("pyspark")))


if __name__ == "__main__":
    raise SystemExit(main())
