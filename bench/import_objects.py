"""Benchmark of importing objects already in storage: objects per second and peak memory.

Run ``python -m bench.import_objects`` (options: ``--objects 100000,1000000``, ``--dir DIR`` to
keep the source files between runs, ``--per-dir N``). The bench writes as many small files as
the largest count (16 bytes, ``--per-dir`` per directory) under a ``local://`` location; for
each count it imports the first directories holding that many into an empty repository of an
in-process catalog (SQLite KV, local namespace), in a child
process of its own, with :func:`mirror.core.imports.import_objects`: the listing, the MD5 of
each file (written without the store's etag attribute, so each is read once), the merge into
ranges and the commit.

It prints one table: wall and CPU seconds of the import, objects per wall and per CPU second,
the child process's peak RSS (it holds only the catalog and the import), the ranges written,
and the 1-minute load average when the import ended (the machine is shared).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from bench.machine import describe
from bench.tables import markdown

__all__ = ["Row", "main", "run_import", "write_files"]

_DATA = b"0123456789abcdef"


@dataclass(frozen=True, slots=True)
class Row:
    """One import (see the module docstring for the columns)."""

    objects: int
    seconds: float
    cpu_seconds: float
    peak_rss_mib: float
    ranges: int
    load: float

    def cells(self) -> list[str]:
        """Return the table cells of this row."""
        return [
            f"{self.objects:,}",
            f"{self.seconds:.1f}",
            f"{self.cpu_seconds:.1f}",
            f"{self.objects / self.seconds:,.0f}",
            f"{self.objects / self.cpu_seconds:,.0f}",
            f"{self.peak_rss_mib:.0f}",
            f"{self.ranges:,}",
            f"{self.load:.1f}",
        ]


COLUMNS = [
    "objects",
    "wall s",
    "CPU s",
    "objects/s",
    "objects/CPU s",
    "peak RSS MiB",
    "ranges",
    "load 1m",
]


def write_files(root: Path, count: int, per_dir: int) -> None:
    """Write ``count`` small files under ``root`` unless a previous run left them there."""
    done = root.with_name(root.name + ".complete")
    if done.exists() and done.read_text() == f"{count}/{per_dir}":
        return
    for d in range((count + per_dir - 1) // per_dir):
        directory = root / f"part-{d:05d}"
        directory.mkdir(parents=True, exist_ok=True)
        for n in range(d * per_dir, min(count, (d + 1) * per_dir)):
            fd = os.open(directory / f"object-{n:07d}.bin", os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
            os.write(fd, _DATA)
            os.close(fd)
    done.write_text(f"{count}/{per_dir}")


def source_prefix(count: int, per_dir: int) -> str:
    """Return the prefix of the first ``count`` files: whole directories, a power of ten."""
    dirs = count // per_dir
    digits = len(str(dirs)) - 1
    if dirs * per_dir != count or dirs != 10**digits or digits > 5:
        raise ValueError(f"--objects {count}: use --per-dir times a power of ten")
    return "part-" + "0" * (5 - digits)


def run_import(local_root: Path, source: str, work: Path) -> dict[str, float]:
    """Import ``source`` into a new repository; return the figures (in the child process)."""
    from mirror.block.resolver import BlockResolver
    from mirror.core import Catalog
    from mirror.core.imports import ImportSource, import_objects
    from mirror.kv import SqliteKV

    kv = SqliteKV(str(work / "kv.sqlite"))
    catalog = Catalog(kv, BlockResolver(local_root))
    catalog.create_repository("bench-import", f"local://{work.name}/namespace")
    wall, cpu = time.perf_counter(), time.process_time()
    result = import_objects(
        catalog,
        "bench-import",
        "main",
        [ImportSource("common_prefix", source, "imported/")],
        committer="bench",
        message="",
        metadata=None,
    )
    seconds, cpu_seconds = time.perf_counter() - wall, time.process_time() - cpu
    kv.close()
    return {
        "objects": result.ingested,
        "seconds": seconds,
        "cpu_seconds": cpu_seconds,
        "peak_rss_kib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss,
        "ranges": result.stats.ranges_written,
        "load": os.getloadavg()[0],
    }


def measure(root: Path, count: int, per_dir: int) -> Row:
    """Import the first ``count`` source files in a child process."""
    source = f"local://source/{source_prefix(count, per_dir)}"
    with tempfile.TemporaryDirectory(dir=root) as work:
        out = subprocess.run(
            [sys.executable, "-m", "bench.import_objects", "--child", str(root), source, work],
            check=True,
            capture_output=True,
            text=True,
        ).stdout
    figures = json.loads(out.strip().splitlines()[-1])
    return Row(
        objects=int(figures["objects"]),
        seconds=figures["seconds"],
        cpu_seconds=figures["cpu_seconds"],
        peak_rss_mib=figures["peak_rss_kib"] / 1024,
        ranges=int(figures["ranges"]),
        load=figures["load"],
    )


def _measure_all(root: Path, counts: list[int], per_dir: int) -> list[Row]:
    write_files(root / "source", max(counts), per_dir)
    return [measure(root, n, per_dir) for n in counts]


def main(argv: Sequence[str] | None = None) -> int:
    """Run the benchmark and print its table."""
    parser = argparse.ArgumentParser(prog="python -m bench.import_objects")
    parser.add_argument("--objects", default="100000,1000000", help="counts, comma-separated")
    parser.add_argument("--per-dir", type=int, default=1000, help="files per directory")
    parser.add_argument("--dir", default=None, help="where the files go (kept between runs)")
    parser.add_argument(
        "--child", nargs=3, metavar=("ROOT", "SOURCE", "WORK"), help=argparse.SUPPRESS
    )
    args = parser.parse_args(argv)
    if args.child:
        root, source, work = args.child
        print(json.dumps(run_import(Path(root), source, Path(work))))
        return 0
    counts = [int(c) for c in args.objects.split(",")]
    if args.dir:
        root = Path(args.dir)
        root.mkdir(parents=True, exist_ok=True)
        rows = _measure_all(root, counts, args.per_dir)
    else:
        with tempfile.TemporaryDirectory() as tmp:
            rows = _measure_all(Path(tmp), counts, args.per_dir)
    print(describe())
    print()
    print(markdown(COLUMNS, [r.cells() for r in rows]))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
