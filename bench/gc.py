"""Benchmark of garbage collection: a mark and a sweep of a 1,000,000-object repository.

Run ``python -m bench.gc`` (options: ``--objects N``, ``--quick``, ``--cache-dir``, ``--cores``).
It builds, or reuses from the cache directory, a repository on the embedded default (SQLite +
``local://``) whose namespace holds N data objects, 10 % of them garbage:

- commit 1, 60 days old: 0.9 N objects (keys laid out as in ``bench.core``), one bulk
  :meth:`Catalog.commit_tree`;
- commit 2, 30 days old, the head: 0.05 N of those keys rewritten to new objects. With 7 days of
  retention only the head is retained, so the 0.05 N versions only commit 1 holds are garbage;
- 0.05 N objects nothing references (uncommitted garbage: written, never staged or dropped).

Data objects are hard links to a few tiny template files (as in ``bench.spark``), all 40 days
old. Then it starts a ``lakemirror server`` on the data directory and, in a fresh process (so
that peak memory is the run's own), runs :func:`mirror.spark.gc.run_gc` in local Spark: a dry run
(preparation over HTTP, the range files read, ``data/`` listed, the anti-join, the report), then
a sweep of that run's marks. Missing garbage objects are linked again before each run, so the
cached repository can be collected again and again.

It prints one table: wall time, records per second, and the peak resident memory (VmHWM) of the
Spark driver's JVM, of the driver's Python process and of the largest Python worker.
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from importlib.metadata import version
from pathlib import Path
from typing import Any

import httpx

from bench.core import Layout
from bench.machine import describe
from bench.procfs import children, peak_rss
from bench.tables import markdown
from mirror.core import Entry, open_embedded

__all__ = ["DEFAULT_OBJECTS", "QUICK_OBJECTS", "build", "main"]

DEFAULT_OBJECTS = 1_000_000
QUICK_OBJECTS = 100_000
REPO = "gcbench"
PARTITION = 10_000
DAY = 86_400
TEMPLATES = 4
DEFAULT_CACHE = Path("/tmp/lakemirror-bench-gc")
_LINKS_PER_TEMPLATE = 50_000


def _address(i: int) -> str:
    return f"data/g{i // PARTITION:07d}gcbench/{i:026d}"


class Plan:
    """Which objects are live, replaced (old versions: garbage) and orphans (garbage)."""

    def __init__(self, objects: int) -> None:
        self.objects = objects
        self.live = objects * 9 // 10
        self.replaced = objects // 20
        self.orphans = objects - self.live - self.replaced
        # every (live // replaced)-th key of commit 1 gets a new object in commit 2
        self.step = max(1, self.live // self.replaced)

    def first(self) -> Iterator[tuple[str, Entry | None]]:
        """Yield commit 1: keys 0 .. live-1 at addresses 0 .. live-1."""
        layout = Layout(self.live)
        for i in range(self.live):
            yield layout.key_at(i), _entry(i)

    def rewritten(self) -> list[int]:
        """Return the key indices commit 2 rewrites."""
        return list(range(0, self.live, self.step))[: self.replaced]

    def second(self) -> Iterator[tuple[str, Entry | None]]:
        """Yield commit 2: the rewritten keys at addresses live .. live+replaced-1."""
        layout = Layout(self.live)
        for n, i in enumerate(self.rewritten()):
            yield layout.key_at(i), _entry(self.live + n)

    def garbage(self) -> set[int]:
        """Return the object indices that are garbage: old versions and orphans."""
        return set(self.rewritten()) | set(range(self.live + self.replaced, self.objects))


def _entry(i: int) -> Entry:
    return Entry(_address(i), i % TEMPLATES, f"{i:032x}", 1_700_000_000)


def _link(root: Path, indices: Sequence[int], templates: Path) -> None:
    """Hard-link every object of ``indices`` (sorted) to a template of its size."""
    old = time.time() - 40 * DAY
    sources: list[str] = []
    made: set[str] = set()
    for n, i in enumerate(indices):
        if n % _LINKS_PER_TEMPLATE == 0:
            # ext4 allows 65,000 links to a file: a fresh set of templates every 50,000 objects
            sources = []
            for size in range(TEMPLATES):
                template = templates / f"{i}-{size}"
                template.write_bytes(b"x" * size)
                os.utime(template, (old, old))
                sources.append(str(template))
        path = root / _address(i)
        parent = str(path.parent)
        if parent not in made:
            os.makedirs(parent, exist_ok=True)
            made.add(parent)
        try:
            os.link(sources[i % TEMPLATES], path)
        except FileExistsError:
            pass


def build(cache: Path, objects: int) -> Path:
    """Build (or reuse) the repository under ``cache``; return its data directory."""
    data = cache / f"lake-{objects}" / "data"
    marker = data.parent / "lake.json"
    plan = Plan(objects)
    if marker.is_file() and json.loads(marker.read_text()).get("objects") == objects:
        return data
    shutil.rmtree(data.parent, ignore_errors=True)
    started = time.perf_counter()
    catalog = open_embedded(data)
    catalog.create_repository(REPO, f"local://{REPO}")
    now = int(time.time())
    catalog.commit_tree(REPO, "main", plan.first(), "bulk load", date=now - 60 * DAY)
    catalog.commit_tree(REPO, "main", plan.second(), "rewrite 5 %", date=now - 30 * DAY)
    catalog.kv.close()
    templates = data.parent / "templates"
    templates.mkdir()
    _link(data / REPO, range(objects), templates)
    marker.write_text(json.dumps({"objects": objects, "build_s": time.perf_counter() - started}))
    return data


def _log(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def _measure(args: argparse.Namespace) -> int:
    """Run the dry run and the sweep in this (fresh) process; print one JSON line of figures."""
    import resource

    from mirror.client.client import LakeFSClient
    from mirror.client.config import ClientConfig, api_base_url
    from mirror.spark.gc import gc_session, run_gc

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    started = time.perf_counter()
    spark = gc_session(f"local[{args.cores}]" if args.cores else "local[*]")
    session_s = time.perf_counter() - started
    sc: Any = spark.sparkContext
    jvm_pid = int(sc._jvm.java.lang.ProcessHandle.current().pid())
    config = ClientConfig(api_base_url(args.server), args.key, args.secret)
    try:
        with LakeFSClient(config, timeout=3600.0) as client:
            mark = run_gc(spark, REPO, client=client, local_root=args.data)
            sweep = run_gc(
                spark, REPO, client=client, sweep=True, mark_id=mark.run_id, local_root=args.data
            )
        workers = [peak_rss(p) for p in children(jvm_pid)]
        workers += [peak_rss(c) for p in children(jvm_pid) for c in children(p)]
        figures = {
            "session_s": session_s,
            "cores": sc.defaultParallelism,
            "mark": mark.summary(),
            "sweep_s": sweep.seconds,
            "deleted": sweep.deleted,
            "jvm_peak": peak_rss(jvm_pid),
            "python_peak": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
            "worker_peak": max(workers, default=0),
        }
    finally:
        spark.stop()
    print(json.dumps(figures))
    return 0


def _mib(value: int) -> str:
    return f"{value / (1 << 20):,.0f} MiB"


def main(argv: Sequence[str] | None = None) -> int:
    """Build or reuse the repository, collect it (dry run, then sweep), print the table."""
    parser = argparse.ArgumentParser(prog="python -m bench.gc", description=__doc__)
    parser.add_argument("--objects", type=int, help=f"data objects (default {DEFAULT_OBJECTS:,})")
    parser.add_argument("--quick", action="store_true", help=f"{QUICK_OBJECTS:,} objects")
    parser.add_argument("--cache-dir", type=Path, default=DEFAULT_CACHE)
    parser.add_argument("--cores", type=int, help="Spark's local cores (default: all)")
    parser.add_argument("--measure", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--server", help=argparse.SUPPRESS)
    parser.add_argument("--key", help=argparse.SUPPRESS)
    parser.add_argument("--secret", help=argparse.SUPPRESS)
    parser.add_argument("--data", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.measure:
        return _measure(args)
    objects = args.objects or (QUICK_OBJECTS if args.quick else DEFAULT_OBJECTS)
    if objects < 20:
        parser.error("--objects must be at least 20")
    plan = Plan(objects)
    begun, load = time.perf_counter(), os.getloadavg()[0]
    _log(f"building (or reusing) {objects:,} objects")
    data = build(args.cache_dir, objects)
    build_s = json.loads((data.parent / "lake.json").read_text())["build_s"]
    garbage = sorted(plan.garbage())
    _log(f"linking the {len(garbage):,} garbage objects again where a sweep removed them")
    _link(data / REPO, garbage, data.parent / "templates")

    key, secret = "AKIABENCHGC" + secrets.token_hex(5).upper(), secrets.token_urlsafe(30)
    port = _free_port()
    env = {
        **os.environ,
        "LAKEMIRROR_ADMIN_ACCESS_KEY_ID": key,
        "LAKEMIRROR_ADMIN_SECRET_ACCESS_KEY": secret,
        "LAKEMIRROR_LOGGING__LEVEL": "warning",
    }
    command = [sys.executable, "-m", "mirror.cli.main", "server", "--host", "127.0.0.1"]
    command += ["--port", str(port), "--data-dir", str(data)]
    log = open(data.parent / "server.log", "ab")
    server = subprocess.Popen(command, env=env, stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    try:
        with httpx.Client(base_url=f"{url}/api/v1", auth=(key, secret), timeout=30) as http:
            deadline = time.monotonic() + 60
            while True:
                try:
                    if http.get(f"{url}/healthz").status_code == 200:
                        break
                except httpx.TransportError:
                    pass
                if time.monotonic() > deadline or server.poll() is not None:
                    raise SystemExit(f"the server did not start; see {data.parent}/server.log")
                time.sleep(0.2)
            rules = {"default_retention_days": 7, "branches": []}
            answer = http.put(f"/repositories/{REPO}/settings/gc_rules", json=rules)
            answer.raise_for_status()
        _log("collecting (dry run, then a sweep of its marks) in a fresh process")
        measure = [sys.executable, "-m", "bench.gc", "--measure", "--server", url]
        measure += ["--key", key, "--secret", secret, "--data", str(data)]
        if args.cores:
            measure += ["--cores", str(args.cores)]
        done = subprocess.run(measure, capture_output=True, text=True, check=False)
    finally:
        server.terminate()
        server.wait(timeout=30)
        log.close()
    if done.returncode != 0:
        raise SystemExit(f"the run failed:\n{done.stderr[-4000:]}")
    figures = json.loads(done.stdout.strip().splitlines()[-1])
    mark = figures["mark"]
    assert mark["marked"] == len(garbage), (mark["marked"], len(garbage))
    assert figures["deleted"] == len(garbage)
    assert mark["objects_listed"] == objects

    import pyarrow

    print(f"machine: {describe(('pyarrow', pyarrow.__version__), ('pyspark', version('pyspark')))}")
    print(f"command: python -m bench.gc --objects {objects}")
    print(
        f"repository: {objects:,} data objects, {len(garbage):,} garbage "
        f"({plan.replaced:,} old versions of an expired commit, {plan.orphans:,} referenced by "
        f"nothing); {mark['ranges_read']:,} range files of {mark['retained_commits']} retained "
        f"commit(s); built in {build_s:.0f} s"
    )
    print(
        f"Spark: local[{figures['cores']}], session started in {figures['session_s']:.1f} s "
        "(not in the table)\n"
    )
    columns = ("step", "objects", "wall", "records/s", "JVM peak RSS", "Python peak RSS")
    python = f"{_mib(figures['python_peak'])} (worker {_mib(figures['worker_peak'])})"
    rows = [
        [
            "mark (dry run: prepare, ranges, listing, anti-join, report)",
            f"{mark['objects_listed']:,} listed, {mark['marked']:,} marked",
            f"{mark['seconds']:.1f} s",
            f"{mark['objects_listed'] / mark['seconds']:,.0f}",
            "",
            "",
        ],
        [
            "sweep (--sweep --mark-id)",
            f"{figures['deleted']:,} deleted",
            f"{figures['sweep_s']:.1f} s",
            f"{figures['deleted'] / figures['sweep_s']:,.0f}",
            "",
            "",
        ],
        [
            "whole run (peaks over both steps)",
            "",
            f"{mark['seconds'] + figures['sweep_s']:.1f} s",
            "",
            _mib(figures["jvm_peak"]),
            python,
        ],
    ]
    print(markdown(columns, rows))
    print()
    print(
        f"total wall time {time.perf_counter() - begun:.0f} s; 1-minute load average "
        f"{load:.2f} at start, {os.getloadavg()[0]:.2f} at end"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
