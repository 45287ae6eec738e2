"""Failover: how long writes stop (RTO) and what an outage loses (RPO).

``python -m bench.failover`` runs trials on the demo's two regions (a server process per region,
the replicant process of region ``b`` polling every 0.2 s, replication delivering each file a
random 0 to ``max`` seconds after it appears, in random order, no drops) while a writer commits
one object a second to region ``a``. Each trial starts its regions afresh. After ten commits:

- **planned**: the writer goes on; the mirror in ``b`` is promoted without force (the replicant
  demotes ``a``, waits for ``b`` to show ``a``'s last commit, promotes ``b``);
- **forced**: the failure: replication stops (nothing more reaches ``b``) and so does the writer;
  the mirror is promoted at once with force.

From the promote call on, a prober tries a write (upload and commit) in ``b`` every 10 ms. RTO is
the time from the promote call to the prober's first acknowledged commit. RPO is what ``b``'s
history at the promoted head lacks of the commits ``a`` acknowledged: their number, and how long
writes to ``a`` went on after the newest commit ``b`` has.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import httpx

from bench.machine import describe

__all__ = ["Trial", "main", "rpo_table", "rto_table", "trial"]

PROMOTE = "/service/replication/v1/repositories/{source}/mirrors/{name}/promote"
DELAYS = ((0.0, 0.0), (0.0, 1.0), (0.0, 2.0))


@dataclass(frozen=True)
class Trial:
    """What one promotion took and lost."""

    planned: bool
    delay: tuple[float, float]
    call_seconds: float
    """The promote call, request to answer."""
    rto_seconds: float
    """From the promote call to the first commit acknowledged in region b."""
    writes_refused_seconds: float | None
    """The replicant's figure: from the source's demotion to the promotion (planned only)."""
    commits_written: int
    commits_lost: int
    seconds_lost: float
    """From the newest commit b has to the last commit a acknowledged (0 when none is lost)."""


def _commit(client: httpx.Client, repo: str, path: str, message: str) -> httpx.Response:
    base = f"/repositories/{repo}/branches/main"
    upload = client.post(
        base + "/objects",
        params={"path": path},
        content=f"{path}\n".encode() * 50,
        headers={"Content-Type": "application/octet-stream"},
    )
    if upload.status_code != 201:
        return upload
    return client.post(base + "/commits", json={"message": message})


def _history(client: httpx.Client, repo: str, ref: str) -> set[str]:
    ids: set[str] = set()
    after = ""
    while True:
        response = client.get(
            f"/repositories/{repo}/refs/{ref}/commits", params={"after": after, "amount": 1000}
        )
        response.raise_for_status()
        body = response.json()
        ids.update(str(c["id"]) for c in body["results"])
        if not body["pagination"]["has_more"]:
            return ids
        after = body["pagination"]["next_offset"]


def trial(planned: bool, delay: tuple[float, float], before: int = 10, seed: int = 1) -> Trial:
    """Run one promotion after ``before`` commits, a commit a second; return its figures."""
    from mirror.cli.demo import demo_regions

    with (
        tempfile.TemporaryDirectory(prefix="bench-failover-") as tmp,
        demo_regions(
            Path(tmp), delay=delay, drop_probability=0.0, replication_poll=0.01, seed=seed
        ) as regions,
    ):
        a, b, repo, name = regions.source, regions.mirror, regions.source_repo, regions.mirror_repo
        acks: list[tuple[str, float]] = []
        stop_writer = threading.Event()

        def write() -> None:
            i = 0
            while not stop_writer.is_set():
                started = time.monotonic()
                response = _commit(a, repo, f"events/{i:05}.csv", f"event {i}")
                if response.status_code != 201:
                    return  # a is read-only now: the writer's part is over
                acks.append((str(response.json()["id"]), time.monotonic()))
                i += 1
                stop_writer.wait(max(0.0, 1.0 - (time.monotonic() - started)))

        writer = threading.Thread(target=write, name="writer", daemon=True)
        writer.start()
        deadline = time.monotonic() + before * 3 + 30
        while len(acks) < before:
            if time.monotonic() > deadline or not writer.is_alive():
                raise RuntimeError(f"the writer made {len(acks)} of {before} commits")
            stop_writer.wait(0.05)
        if not planned:
            stop_writer.set()
            writer.join(timeout=30)
            regions.simulator.stall()
        first_write: list[float] = []
        stop_prober = threading.Event()

        def probe() -> None:
            i = 0
            while not stop_prober.is_set():
                if _commit(b, name, f"after/{i:05}.csv", f"after {i}").status_code == 201:
                    first_write.append(time.monotonic())
                    return
                i += 1
                stop_prober.wait(0.01)

        started = time.monotonic()
        prober = threading.Thread(target=probe, name="prober", daemon=True)
        prober.start()
        response = regions.replicant.post(
            PROMOTE.format(source=repo, name=name),
            json={"force": not planned, "timeout": 60},
            timeout=120,
        )
        answered = time.monotonic()
        prober.join(timeout=60)
        stop_prober.set()
        stop_writer.set()
        writer.join(timeout=30)
        if response.status_code != 200:
            raise RuntimeError(f"promote answered {response.status_code}: {response.text}")
        if not first_write:
            raise RuntimeError("no write was acknowledged in region b within 60 s")
        report = response.json()
        has = _history(b, name, str(report["heads"]["main"]))
        lost = [(c, t) for c, t in acks if c not in has]
        kept = [t for c, t in acks if c in has]
        seconds_lost = acks[-1][1] - kept[-1] if lost and kept else 0.0
        return Trial(
            planned,
            delay,
            answered - started,
            first_write[0] - started,
            report.get("writes_refused_seconds"),
            len(acks),
            len(lost),
            seconds_lost,
        )


def _run(trials: int, before: int) -> list[Trial]:
    out: list[Trial] = []
    for delay in DELAYS:
        for planned in (True, False):
            for n in range(trials):
                out.append(trial(planned, delay, before, seed=n + 1))
    return out


def _fmt(values: list[float]) -> str:
    return f"{statistics.median(values):.2f} / {max(values):.2f}"


def rto_table(results: list[Trial]) -> None:
    """Print the RTO of each kind of promotion and replication delay (median / max)."""
    print("\nRTO: from the promote call to the first acknowledged write in b (median / max s)\n")
    print("| promotion | replication delay | trials | promote call s | writes refused s | RTO s |")
    print("|---|---|---:|---:|---:|---:|")
    for delay in DELAYS:
        for planned in (True, False):
            rows = [r for r in results if r.planned == planned and r.delay == delay]
            if not rows:
                continue
            refused = [
                r.writes_refused_seconds for r in rows if r.writes_refused_seconds is not None
            ]
            print(
                f"| {'planned' if planned else 'forced'} | {delay[0]:g}-{delay[1]:g} s "
                f"| {len(rows)} | {_fmt([r.call_seconds for r in rows])} "
                f"| {_fmt(refused) if refused else '—'} | {_fmt([r.rto_seconds for r in rows])} |"
            )


def rpo_table(results: list[Trial]) -> None:
    """Print the RPO of each kind of promotion and replication delay."""
    print("\nRPO: commits a acknowledged that b lacks at the promoted head (a commit a second)\n")
    print(
        "| promotion | replication delay | trials | commits written | lost: mean | max "
        "| writes lost: mean s | max s |"
    )
    print("|---|---|---:|---:|---:|---:|---:|---:|")
    for delay in DELAYS:
        for planned in (True, False):
            rows = [r for r in results if r.planned == planned and r.delay == delay]
            if not rows:
                continue
            lost = [float(r.commits_lost) for r in rows]
            seconds = [r.seconds_lost for r in rows]
            print(
                f"| {'planned' if planned else 'forced'} | {delay[0]:g}-{delay[1]:g} s "
                f"| {len(rows)} | {statistics.fmean(r.commits_written for r in rows):.0f} "
                f"| {statistics.fmean(lost):.1f} | {max(lost):.0f} "
                f"| {statistics.fmean(seconds):.2f} | {max(seconds):.2f} |"
            )


def main(argv: list[str] | None = None) -> None:
    """Print the RTO and RPO tables."""
    from bench.mirror_lag import quiet

    parser = argparse.ArgumentParser(prog="python -m bench.failover", description=__doc__)
    parser.add_argument("--trials", type=int, default=3, help="trials per kind and delay")
    parser.add_argument("--before", type=int, default=10, help="commits before the promotion")
    parser.add_argument("--quick", action="store_true", help="one trial each, 5 commits before")
    args = parser.parse_args(argv)
    quiet()
    print(describe())
    trials, before = (1, 5) if args.quick else (args.trials, args.before)
    results = _run(trials, before)
    rto_table(results)
    rpo_table(results)


if __name__ == "__main__":
    main()
