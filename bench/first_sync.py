"""First sync of a large repository, end to end, against S3 server processes.

``python -m bench.first_sync`` (options: ``--objects N``, default 1,000,000; ``--quick``,
100,000; ``--spark`` / ``--no-spark``; ``--stock-listing``) runs, as separate processes on
127.0.0.1:

- **two S3 servers** (:mod:`bench.s3_server`: moto's S3 over HTTP, counting requests by
  operation), one per region. The destination's is started with the source's N data objects
  already in its bucket, put into moto's backend in-process before it serves (replication done);
  the source's holds the repository's range and metarange files;
- **the source region's server** (`lakemirror server`, SQLite KV, namespaces in its S3 server):
  the bench creates the repository through the API, then commits N objects onto ``main`` with
  one :meth:`Catalog.commit_tree` on the server's own KV and S3 bucket (keys as in ``bench.core``,
  data addresses in partitions of 50,000), and copies the committed files to the destination;
- **the destination region's server** and **a replicant process** (`lakemirror replicant`,
  its own YAML configuration, a replicator user), fresh for each run.

Each run creates the mirror through the configuration API and polls the mirror's ``main`` with
a deadline until it shows the source head. It reports the time from the creation call to that
head, the destination S3 server's requests by operation (and the seconds it spent answering
them), the replicant's ``lakemirror_validation_requests_total`` by op, the replicant's CPU time
and peak RSS (``VmHWM``), and those of its child processes (the Spark JVM) when the bulk
validator runs; then, for 10 s with the mirror in sync, the replicant's CPU per second (its
polling of the source and the mirror, which goes on during a first sync too: the part of the
first sync's CPU that grows with its duration rather than its work). The Spark run sets
``replicant.bulk_threshold`` just below N.

Then, against the destination S3 server alone, it times a burst of ``ListObjectsV2`` pages (with
the listing index and, a few pages, with moto's own listing) and of ``GetObject`` of range files:
the server's own request rate, to tell the time the requests cost from the replicant's CPU.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import json
import os
import secrets
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import yaml

from bench.core import Layout
from bench.machine import describe
from bench.procfs import descendants, peak_rss, process_cpu
from bench.s3_process import S3Process, poll, s3_process
from bench.s3_server import data_address, data_size
from bench.tables import markdown
from mirror.block import BlockResolver
from mirror.block.s3 import make_s3_client, s3_store_factory
from mirror.core import Catalog, Entry
from mirror.core.committed import METADATA_PREFIX
from mirror.kv import SqliteKV
from tests.integration.harness import Server, free_port, running_server, stop_process

__all__ = ["DEFAULT_OBJECTS", "QUICK_OBJECTS", "Lake", "SyncRun", "main", "run_bench"]

DEFAULT_OBJECTS = 1_000_000
QUICK_OBJECTS = 100_000
IN_SYNC_WINDOW = 10.0
"""Seconds over which the replicant's CPU rate is read once the mirror is in sync."""
SOURCE_BUCKET = "source-region"
DEST_BUCKET = "mirror-region"
PREFIX = "lake"
REPO = "lake"
MTIME = 1_700_000_000
MIRRORS = "/service/replication/v1/repositories/{repo}/mirrors"


def _log(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


@dataclass(frozen=True)
class Lake:
    """The source repository: its head commit and what it is made of."""

    objects: int
    commit_id: str
    ranges: int
    build_s: float


def _records(objects: int) -> Iterator[tuple[str, Entry | None]]:
    layout = Layout(objects)
    for i in range(objects):
        yield (
            layout.key_at(i),
            Entry(
                address=data_address(i),
                size=data_size(i),
                checksum=f"{i:032x}",
                mtime=MTIME + i // 1000,
                content_type="application/octet-stream",
            ),
        )


def _api(server: Server) -> httpx.Client:
    return httpx.Client(
        base_url=f"{server.url}/api/v1",
        auth=(server.access_key_id, server.secret_access_key),
        timeout=120.0,
    )


def build_source(server: Server, s3: S3Process, objects: int) -> Lake:
    """Create the repository on ``server`` and commit ``objects`` objects onto ``main``."""
    started = time.perf_counter()
    with _api(server) as api:
        api.post(
            "/repositories",
            json={"name": REPO, "storage_namespace": f"s3://{SOURCE_BUCKET}/{PREFIX}"},
        ).raise_for_status()
    resolver = BlockResolver(server.data_dir)
    resolver.register("s3", s3_store_factory(s3.settings()))
    kv = SqliteKV(server.data_dir / "kv.sqlite")
    try:
        catalog = Catalog(kv, resolver)
        commit = catalog.commit_tree(REPO, "main", _records(objects), "bulk load").commit
        repo = catalog.get_repository(REPO)
        ranges = len(catalog.committed(repo).read_metarange(commit.metarange_id))
    finally:
        kv.close()
    return Lake(objects, commit.id, ranges, time.perf_counter() - started)


def copy_committed(source: S3Process, dest: S3Process) -> int:
    """Copy every committed file (``_lakefs/``) of the source namespace to the destination's."""
    src = make_s3_client(source.settings())
    dst = make_s3_client(dest.settings())
    keys: list[str] = []
    for page in src.get_paginator("list_objects_v2").paginate(
        Bucket=SOURCE_BUCKET, Prefix=f"{PREFIX}/{METADATA_PREFIX}"
    ):
        keys += [o["Key"] for o in page.get("Contents", [])]

    def copy(key: str) -> None:
        body = src.get_object(Bucket=SOURCE_BUCKET, Key=key)["Body"].read()
        dst.put_object(Bucket=DEST_BUCKET, Key=key, Body=body)

    with concurrent.futures.ThreadPoolExecutor(8) as pool:
        list(pool.map(copy, keys))
    return len(keys)


MiB = 1 << 20


def _cpu(pid: int) -> float:
    return process_cpu(pid) or 0.0


@dataclass
class SyncRun:
    """What one first sync took."""

    spark: bool
    seconds: float
    s3: dict[str, dict[str, float]]
    validation_requests: dict[str, float]
    replicant_cpu_s: float
    replicant_rss_mb: float
    children_cpu_s: float
    children_rss_mb: float
    s3_server_cpu_s: float
    head: str
    in_sync_cpu_per_s: float = 0.0
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def s3_total(self) -> int:
        """Return the requests the destination S3 server answered."""
        return int(sum(v["count"] for v in self.s3.values()))


def _metrics(http: httpx.Client) -> dict[str, float]:
    from prometheus_client.parser import text_string_to_metric_families

    out: dict[str, float] = {}
    for family in text_string_to_metric_families(http.get("/metrics").text):
        for sample in family.samples:
            if sample.name == "lakemirror_validation_requests_total":
                op = sample.labels.get("op", "")
                out[op] = out.get(op, 0.0) + sample.value
    return out


def _make_replicator(server: Server) -> tuple[str, str]:
    with _api(server) as api:
        user = f"replicator-{secrets.token_hex(4)}"
        api.post("/auth/users", json={"id": user}).raise_for_status()
        api.put(f"/auth/users/{user}/policies/Replicator").raise_for_status()
        creds = api.post(f"/auth/users/{user}/credentials").json()
    return str(creds["access_key_id"]), str(creds["secret_access_key"])


def sync_once(
    tmp: Path, source: Server, dest_s3: S3Process, lake: Lake, *, spark: bool, deadline: float
) -> SyncRun:
    """Start a destination server and a replicant, create the mirror, time its first head."""
    name = f"mirror-{'spark' if spark else 'async'}"
    work = tmp / name
    work.mkdir()
    with running_server(
        work / "server",
        work / "server.log",
        access_key_id="AKIABENCHDEST0000001",
        secret_access_key=secrets.token_hex(20),
        env=dest_s3.env(),
        namespace_root=f"s3://{DEST_BUCKET}/",
    ) as dest:
        replicator = _make_replicator(dest)
        port = free_port()
        replicant: dict[str, Any] = {
            "region": "b",
            "host": "127.0.0.1",
            "port": port,
            "poll_interval": 0.5,
            "replica_id": name,
        }
        if spark:
            replicant["bulk_threshold"] = lake.objects - 1
        config = {
            "data_dir": str(dest.data_dir),
            "replicant": replicant,
            "regions": {
                "a": {
                    "server_url": source.url,
                    "access_key_id": source.access_key_id,
                    "secret_access_key": source.secret_access_key,
                },
                "b": {
                    "server_url": dest.url,
                    "access_key_id": replicator[0],
                    "secret_access_key": replicator[1],
                },
            },
            "logging": {"format": "json", "level": "info"},
        }
        config_path = work / "replicant.yaml"
        config_path.write_text(yaml.safe_dump(config))
        log_path = work / "replicant.log"
        env = {**os.environ, **dest_s3.env()}
        command = [sys.executable, "-m", "mirror.cli.main", "replicant", "--config"]
        with open(log_path, "ab") as log:
            process = subprocess.Popen(
                [*command, str(config_path)], env=env, stdout=log, stderr=subprocess.STDOUT
            )
        url = f"http://127.0.0.1:{port}"
        http = httpx.Client(base_url=url, auth=(dest.access_key_id, dest.secret_access_key))
        try:

            def healthy() -> bool:
                if process.poll() is not None:
                    raise RuntimeError(f"replicant exited: {log_path.read_text()}")
                try:
                    return http.get("/healthz", timeout=1.0).status_code == 200
                except httpx.TransportError:
                    return False

            poll(healthy, 60.0, "the replicant to answer")
            with _api(dest) as api:
                dest_s3.reset()
                server_cpu = _cpu(dest_s3.process.pid)
                cpu_before = _cpu(process.pid)
                started = time.perf_counter()
                body = {
                    "name": name,
                    "region": "b",
                    "storage_namespace": f"s3://{DEST_BUCKET}/{PREFIX}",
                }
                http.post(MIRRORS.format(repo=REPO), json=body, timeout=60.0).raise_for_status()

                def head() -> str | None:
                    if process.poll() is not None:
                        raise RuntimeError(f"replicant exited: {log_path.read_text()}")
                    got = api.get(f"/repositories/{name}/branches/main")
                    if got.status_code == 200 and got.json()["commit_id"] == lake.commit_id:
                        return str(got.json()["commit_id"])
                    return None

                commit = poll(head, deadline, "the mirror's first head")
                seconds = time.perf_counter() - started
            replicant_cpu = _cpu(process.pid) - cpu_before
            # the replicant's CPU rate with the mirror in sync (polling the source and the
            # mirror): the part of a first sync's CPU that grows with its duration, not its work
            in_sync = _cpu(process.pid)
            time.sleep(IN_SYNC_WINDOW)  # a measurement window, not a wait for a condition
            in_sync_rate = (_cpu(process.pid) - in_sync) / IN_SYNC_WINDOW
            children = descendants(process.pid)
            return SyncRun(
                spark=spark,
                seconds=seconds,
                s3=dest_s3.requests(),
                validation_requests=_metrics(http),
                replicant_cpu_s=replicant_cpu,
                replicant_rss_mb=peak_rss(process.pid) / MiB,
                children_cpu_s=sum(_cpu(p) for p in children),
                children_rss_mb=max((peak_rss(p) / MiB for p in children), default=0.0),
                s3_server_cpu_s=_cpu(dest_s3.process.pid) - server_cpu,
                head=commit,
                in_sync_cpu_per_s=in_sync_rate,
            )
        finally:
            http.close()
            stop_process(process, timeout=30.0)


@dataclass(frozen=True)
class Rate:
    """A burst of one request kind against the destination S3 server alone."""

    what: str
    requests: int
    seconds: float

    @property
    def per_second(self) -> float:
        """Return requests answered per second."""
        return self.requests / self.seconds if self.seconds else 0.0


def server_rates(
    dest: S3Process, objects: int, pages: int = 20, stock_pages: int = 3
) -> list[Rate]:
    """Time ListObjectsV2 pages (indexed and moto's own) and GetObjects of range files."""
    client = make_s3_client(dest.settings())
    base = f"{PREFIX}/"
    starts = [data_address(i * (objects // pages)) for i in range(pages)]

    def listing(count: int) -> float:
        began = time.perf_counter()
        for start in starts[:count]:
            client.list_objects_v2(
                Bucket=DEST_BUCKET, Prefix=base + "data/", StartAfter=base + start, MaxKeys=1000
            )
        return time.perf_counter() - began

    out = [Rate("ListObjectsV2, 1,000 keys (indexed)", pages, listing(pages))]
    dest.indexed(False)
    try:
        stock = listing(stock_pages)
        out.append(Rate("ListObjectsV2, 1,000 keys (moto's own)", stock_pages, stock))
    finally:
        dest.indexed(True)
    ranges = client.list_objects_v2(
        Bucket=DEST_BUCKET, Prefix=base + METADATA_PREFIX, MaxKeys=pages
    ).get("Contents", [])
    began = time.perf_counter()
    for obj in ranges:
        client.get_object(Bucket=DEST_BUCKET, Key=obj["Key"])["Body"].read()
    out.append(Rate("GetObject, range file", len(ranges), time.perf_counter() - began))
    return out


@dataclass
class Bench:
    """Everything one invocation measured."""

    lake: Lake
    setup: dict[str, float]
    runs: list[SyncRun]
    rates: list[Rate]
    load: tuple[float, float]


def run_bench(
    objects: int,
    tmp: Path,
    *,
    modes: Sequence[bool] = (False, True),
    deadline: float = 3600.0,
    indexed: bool = True,
    keep_alive: bool = False,
    pages: int = 20,
) -> Bench:
    """Set both regions up, run a first sync per mode (``True``: Spark), measure the server."""
    load_start = os.getloadavg()[0]
    setup: dict[str, float] = {}
    with ExitStack() as stack:
        began = time.perf_counter()
        source_s3 = stack.enter_context(s3_process(tmp / "s3-source.log", [SOURCE_BUCKET]))
        dest_s3 = stack.enter_context(
            s3_process(
                tmp / "s3-mirror.log",
                [DEST_BUCKET],
                [f"{DEST_BUCKET}/{PREFIX}:{objects}"],
                indexed=indexed,
                keep_alive=keep_alive,
            )
        )
        setup["S3 servers up, destination filled"] = time.perf_counter() - began
        _log(f"S3 servers up in {setup['S3 servers up, destination filled']:.1f} s")
        source = stack.enter_context(
            running_server(
                tmp / "source",
                tmp / "source.log",
                access_key_id="AKIABENCHSOURCE00001",
                secret_access_key=secrets.token_hex(20),
                env=source_s3.env(),
                namespace_root=f"s3://{SOURCE_BUCKET}/",
            )
        )
        lake = build_source(source, source_s3, objects)
        setup["source repository committed"] = lake.build_s
        _log(f"source: {objects:,} objects, {lake.ranges:,} ranges in {lake.build_s:.1f} s")
        began = time.perf_counter()
        copied = copy_committed(source_s3, dest_s3)
        setup[f"committed files copied ({copied:,})"] = time.perf_counter() - began
        runs = []
        for spark in modes:
            _log(f"first sync ({'Spark bulk validator' if spark else 'async validator'}) ...")
            runs.append(sync_once(tmp, source, dest_s3, lake, spark=spark, deadline=deadline))
            _log(f"  head after {runs[-1].seconds:.1f} s")
        rates = server_rates(dest_s3, objects, pages=pages, stock_pages=max(1, pages // 7))
    return Bench(lake, setup, runs, rates, (load_start, os.getloadavg()[0]))


def _n(value: float) -> str:
    return f"{value:,.0f}"


def report(bench: Bench) -> str:
    """Return the tables of a run."""
    ops = sorted({op for r in bench.runs for op in r.s3})
    rows = []
    for run in bench.runs:
        val = ", ".join(f"{k} {_n(v)}" for k, v in sorted(run.validation_requests.items()))
        rows.append(
            [
                "Spark bulk validator" if run.spark else "async validator",
                f"{run.seconds:.1f} s",
                *(_n(run.s3.get(op, {}).get("count", 0)) for op in ops),
                _n(run.s3_total),
                f"{sum(v['seconds'] for v in run.s3.values()):.1f} s",
                f"{run.s3_server_cpu_s:.1f} s",
                f"{run.replicant_cpu_s:.1f} s",
                f"{run.in_sync_cpu_per_s * 1000:.0f} ms/s",
                f"{run.replicant_rss_mb:.0f} MB",
                f"{run.children_cpu_s:.1f} s / {run.children_rss_mb:.0f} MB" if run.spark else "-",
                val or "-",
            ]
        )
    sync = markdown(
        [
            "replicant",
            "to first head",
            *ops,
            "S3 requests",
            "S3 answering",
            "S3 server CPU",
            "replicant CPU",
            "replicant CPU in sync",
            "replicant peak RSS",
            "JVM CPU / peak RSS",
            "validator's own count",
        ],
        rows,
    )
    rates = markdown(
        ["request (destination S3 server alone, one at a time)", "requests", "seconds", "per s"],
        [[r.what, str(r.requests), f"{r.seconds:.2f}", f"{r.per_second:.1f}"] for r in bench.rates],
    )
    setup = markdown(["set-up", "seconds"], [[k, f"{v:.1f}"] for k, v in bench.setup.items()])
    lines = [
        f"objects: {bench.lake.objects:,} in {bench.lake.ranges:,} ranges; "
        f"1-minute load average {bench.load[0]:.2f} at start, {bench.load[1]:.2f} at end",
        "",
        setup,
        "",
        sync,
        "",
        rates,
    ]
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> None:
    """Run the benchmark and print its tables."""
    parser = argparse.ArgumentParser(prog="python -m bench.first_sync", description=__doc__)
    parser.add_argument("--objects", type=int, default=DEFAULT_OBJECTS)
    parser.add_argument("--quick", action="store_true", help=f"{QUICK_OBJECTS:,} objects")
    parser.add_argument("--spark", action=argparse.BooleanOptionalAction, default=True)
    parser.add_argument(
        "--async", dest="async_", action=argparse.BooleanOptionalAction, default=True
    )
    parser.add_argument("--stock-listing", action="store_true", help="moto's own listing")
    parser.add_argument(
        "--keep-alive",
        action="store_true",
        help="the destination's S3 server keeps connections open, as S3 does",
    )
    parser.add_argument("--deadline", type=float, default=3600.0)
    parser.add_argument("--json", type=Path, help="also write the figures here")
    args = parser.parse_args(argv)
    objects = QUICK_OBJECTS if args.quick else args.objects
    modes = [m for m, on in ((False, args.async_), (True, args.spark)) if on]
    from importlib.metadata import version

    print(f"machine: {describe(('moto', version('moto')), ('pyspark', version('pyspark')))}")
    print(f"command: python -m bench.first_sync {' '.join(argv or sys.argv[1:])}")
    with tempfile.TemporaryDirectory(prefix="lakemirror-first-sync-") as tmp:
        bench = run_bench(
            objects,
            Path(tmp),
            modes=modes,
            deadline=args.deadline,
            indexed=not args.stock_listing,
            keep_alive=args.keep_alive,
        )
    print(report(bench))
    if args.json:
        args.json.write_text(
            json.dumps(
                {
                    "objects": objects,
                    "setup": bench.setup,
                    "load": bench.load,
                    "runs": [r.__dict__ for r in bench.runs],
                    "rates": [r.__dict__ for r in bench.rates],
                },
                indent=2,
            )
        )


if __name__ == "__main__":
    main()
