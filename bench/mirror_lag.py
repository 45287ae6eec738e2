"""Mirroring freshness: validations to catch up, and lag under a commit a second.

``python -m bench.mirror_lag`` prints two tables (``python -m bench.mirror`` prints them too):

- catch-up: a mirror 100 commits behind its source is brought up to date by one pass of the
  replicant's worker (both regions' API apps in this process, their files copied in between):
  how many validations it ran, what it read;
- lag: the demo's two regions (a server process each, the replicant process, replication that
  delivers each file 0 to 2 s after it appears, in random order, noticing new files within
  10 ms), a commit every second; for every commit, the
  time from its creation until the mirror branch shows it or a later commit, and the
  validations the replicant ran per commit (read from its ``/metrics``).
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import threading
import time
import uuid
from pathlib import Path

import httpx

from bench.machine import describe

__all__ = ["catch_up_table", "lag_table", "main", "quiet"]

ADMIN = ("AKIABENCHADMIN000001", "bench-admin-secret")
REPLICATOR = ("AKIABENCHREPLICATOR1", "bench-replicator-secret")


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    index = min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))
    return ordered[index]


async def _catch_up(behind: int) -> dict[str, float]:
    from mirror.api.app import create_app
    from mirror.auth.store import AuthStore
    from mirror.block import BlockResolver
    from mirror.cli.repository_cleanups import register_repository_cleanups
    from mirror.core.catalog import Catalog
    from mirror.kv import MemoryKV
    from mirror.replicant.client import LakeFSClient
    from mirror.replicant.metrics import ReplicantMetrics
    from mirror.replicant.state import MirrorConfig, ReplicantStore
    from mirror.replicant.worker import MirrorWorker, WorkerSettings
    from mirror.validator import (
        CountingEvents,
        CountingReader,
        MemoryValidatedRanges,
        ThreadedObjectReader,
        Validator,
    )

    def region() -> tuple[Catalog, BlockResolver, object]:
        kv = MemoryKV()
        resolver = BlockResolver()
        catalog = Catalog(kv, resolver)
        register_repository_cleanups(catalog)
        auth = AuthStore(kv)
        auth.bootstrap_admin("admin", *ADMIN)
        auth.create_user("replicator")
        auth.attach_user_policy("replicator", "Replicator")
        auth.create_credentials("replicator", *REPLICATOR)
        return catalog, resolver, create_app(catalog, auth, namespace_schemes=("mem",))

    (a, a_blocks, a_app), (_, b_blocks, b_app) = region(), region()
    tag = uuid.uuid4().hex[:8]
    src_ns, dst_ns = f"mem://bench-src-{tag}", f"mem://bench-dst-{tag}"
    a.create_repository("origin", src_ns)
    for i in range(2000):
        a.upload_object("origin", "main", f"base/{i:05}.csv", b"x" * 100)
    a.commit("origin", "main", "base")

    def replicate() -> None:
        src, dst = a_blocks.open(src_ns), b_blocks.open(dst_ns)
        for info in src.list():
            if not dst.exists(info.key):
                dst.put(info.key, src.get(info.key))

    source = LakeFSClient("http://a", *ADMIN, transport=httpx.ASGITransport(app=a_app))  # type: ignore[arg-type]
    dest = LakeFSClient("http://b", *REPLICATOR, transport=httpx.ASGITransport(app=b_app))  # type: ignore[arg-type]
    await dest.create_mirror_repository("origin-mirror", dst_ns, "main", "a/origin")
    config = MirrorConfig("origin-mirror", "a", "origin", "b", dst_ns)
    events = CountingEvents()
    reader = CountingReader(ThreadedObjectReader(b_blocks.open(dst_ns)), events.request)
    validator = Validator(reader, validated=MemoryValidatedRanges(), events=events)
    metrics = ReplicantMetrics()
    worker = MirrorWorker(
        config,
        source,
        dest,
        validator,
        ReplicantStore(MemoryKV()),
        metrics,
        WorkerSettings(poll_interval=0.01),
    )
    replicate()
    await worker.sync_branch("main")
    before = dict(events.requests)
    # the first sync skips the source's commits before its head: count only the catch-up's
    skipped_before = (
        metrics.registry.get_sample_value(
            "lakemirror_commits_skipped_total", {"mirror": "origin-mirror", "branch": "main"}
        )
        or 0
    )
    for i in range(behind):
        a.upload_object("origin", "main", f"new/{i:04}.csv", f"{i}\n".encode())
        a.commit("origin", "main", f"commit {i}")
    replicate()
    started = time.perf_counter()
    await worker.sync_branch("main")
    seconds = time.perf_counter() - started
    sample = metrics.registry.get_sample_value
    labels = {"mirror": "origin-mirror"}
    branch = {**labels, "branch": "main"}
    requests = {op: events.requests.get(op, 0) - before.get(op, 0) for op in events.requests}
    await source.aclose()
    await dest.aclose()
    return {
        "validations": (
            sample("lakemirror_validations_total", {**labels, "result": "complete"}) or 0
        )
        - 1,
        "skipped": (sample("lakemirror_commits_skipped_total", branch) or 0) - skipped_before,
        "imported": sample("lakemirror_commits_imported_total", labels) or 0,
        "requests": float(sum(requests.values())),
        "seconds": seconds,
    }


def catch_up_table(behind: int = 100) -> None:
    """Print how a mirror ``behind`` commits behind catches up."""
    r = asyncio.run(_catch_up(behind))
    print(f"\nCatching up from {behind} commits behind (one worker pass, in-process regions)\n")
    print("| commits behind | validations | commits skipped | requests | seconds |")
    print("|---:|---:|---:|---:|---:|")
    print(
        f"| {behind} | {r['validations']:.0f} | {r['skipped']:.0f} | {r['requests']:.0f} "
        f"| {r['seconds']:.2f} |"
    )


def _validations(replicant: httpx.Client) -> dict[str, float]:
    """Return the replicant's validations so far by result, and its head advances."""
    from prometheus_client.parser import text_string_to_metric_families

    response = replicant.get("/metrics")
    response.raise_for_status()
    counts: dict[str, float] = {"complete": 0.0, "incomplete": 0.0, "advances": 0.0}
    for family in text_string_to_metric_families(response.text):
        for s in family.samples:
            if s.name == "lakemirror_validations_total":
                counts[s.labels["result"]] = counts.get(s.labels["result"], 0.0) + s.value
            elif s.name == "lakemirror_head_advances_total":
                counts["advances"] += s.value
    return counts


def lag_table(
    commits: int = 60, interval: float = 1.0, delay: tuple[float, float] = (0.0, 2.0)
) -> None:
    """Print the mirror lag of ``commits`` commits made every ``interval`` seconds."""
    from mirror.cli.demo import demo_regions

    with (
        tempfile.TemporaryDirectory(prefix="bench-lag-") as tmp,
        demo_regions(
            Path(tmp), delay=delay, drop_probability=0.0, replication_poll=0.01, seed=1
        ) as regions,
    ):
        src, dst = regions.source, regions.mirror
        repo, branch, mirror = regions.source_repo, regions.branch, regions.mirror_repo
        index: dict[str, int] = {}
        made: list[float] = []
        reached: dict[int, float] = {}
        shown_as_head: set[int] = set()
        stop = threading.Event()

        def head() -> str | None:
            response = dst.get(f"/repositories/{mirror}/branches/{branch}")
            return str(response.json()["commit_id"]) if response.status_code == 200 else None

        def sample() -> None:
            shown = -1
            while not stop.is_set():
                current = index.get(head() or "", -1)
                now = time.monotonic()
                for i in range(shown + 1, current + 1):
                    reached.setdefault(i, now)
                if current > shown:
                    shown_as_head.add(current)
                shown = max(shown, current)
                stop.wait(0.02)

        sampler = threading.Thread(target=sample, daemon=True)
        counted = _validations(regions.replicant)
        sampler.start()
        try:
            for i in range(commits):
                started = time.monotonic()
                for j in range(1 + i % 3):
                    body = (f"{i},{j}\n" * (10 ** (1 + (i + j) % 4))).encode()
                    src.post(
                        f"/repositories/{repo}/branches/{branch}/objects",
                        params={"path": f"events/{i:04}-{j}.csv"},
                        content=body,
                    ).raise_for_status()
                response = src.post(
                    f"/repositories/{repo}/branches/{branch}/commits", json={"message": f"c{i}"}
                )
                response.raise_for_status()
                index[str(response.json()["id"])] = i
                made.append(time.monotonic())
                stop.wait(max(0.0, interval - (time.monotonic() - started)))
            deadline = time.monotonic() + 30 + delay[1]
            while len(reached) < commits and time.monotonic() < deadline:
                stop.wait(0.1)
        finally:
            stop.set()
            sampler.join(timeout=10)
        ran = _validations(regions.replicant)
    work = {k: ran.get(k, 0.0) - counted.get(k, 0.0) for k in ran}
    lags = [reached[i] - made[i] for i in range(commits) if i in reached]
    heads = [reached[i] - made[i] for i in sorted(shown_as_head) if i >= 0]
    missing = commits - len(lags)
    print(
        f"\nMirror lag: {commits} commits, one every {interval:g} s, replication delay "
        f"{delay[0]:g}-{delay[1]:g} s, replicant poll 0.2 s\n"
    )
    print("| commits | count | p50 s | p90 s | p99 s | max s | mean s |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for label, values in (("all", lags), ("shown as the mirror head", heads)):
        print(
            f"| {label} | {len(values)} | {_percentile(values, 0.5):.2f} "
            f"| {_percentile(values, 0.9):.2f} | {_percentile(values, 0.99):.2f} "
            f"| {max(values):.2f} | {statistics.fmean(values):.2f} |"
        )
    print(f"\ncommits never shown within 30 s of the last one: {missing}")
    validations = work["complete"] + work["incomplete"]
    print(
        f"validations: {validations:.0f} ({work['complete']:.0f} complete, "
        f"{work['incomplete']:.0f} incomplete), {validations / commits:.2f} per commit; "
        f"head advances: {work['advances']:.0f}"
    )


def quiet() -> None:
    """Keep the components' info logs out of the tables."""
    from mirror.logging import configure_logging

    configure_logging("console", "warning")


def main(argv: list[str] | None = None) -> None:
    """Print the catch-up and lag tables."""
    parser = argparse.ArgumentParser(prog="python -m bench.mirror_lag", description=__doc__)
    parser.add_argument("--commits", type=int, default=60, help="commits of the lag run")
    parser.add_argument("--quick", action="store_true", help="20 commits")
    args = parser.parse_args(argv)
    quiet()
    print(describe())
    catch_up_table()
    lag_table(20 if args.quick else args.commits)


if __name__ == "__main__":
    main()
