"""``python -m bench.soak``: the command line, and one run from start to report."""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from collections.abc import Sequence
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

import httpx

from bench.machine import describe, run_footer
from bench.soak.faults import KINDS, FaultSchedule
from bench.soak.final import final_checks
from bench.soak.ledger import Ledger
from bench.soak.load import Load
from bench.soak.meter import Meter
from bench.soak.mirror_watch import MirrorWatch
from bench.soak.report import Run, S3Count, render, targets
from bench.soak.samples import KVCount, ProcessSampler, count_items
from bench.soak.world import SoakWorld, soak_world
from tests.e2e.regions import SafetyChecker

__all__ = ["Options", "main", "soak"]

READING_LEAD = 3.0
"""Seconds before a window's end when the stores and processes are read for it."""


@dataclass(frozen=True)
class Options:
    """What one soak runs."""

    minutes: float = 20.0
    window: float = 300.0
    fault_every: float = 180.0
    seed: int = 1
    faults: tuple[str, ...] = KINDS
    max_faults: int | None = None
    catch_up: float = 300.0
    keep: int = 60
    think: float = 0.3


def _transient(response: httpx.Response) -> bool:
    """Return whether a mirror read's answer is a server refusing for now (its KV restarting),
    rather than an answer about the mirror (a file not yet replicated is one)."""
    return response.status_code == 503 and "not yet replicated" not in response.text


def _count_kv(world: SoakWorld) -> list[KVCount]:
    counts = []
    for region in "ab":
        client: Any = world.kv[region].dynalite.client()
        try:
            counts.append(count_items(client, world.tables[region], region))
        except Exception:  # a KV being restarted is counted at the next window's end
            continue
        finally:
            client.close()
    return counts


def _count_s3(world: SoakWorld) -> list[S3Count]:
    counts = []
    for region, server in world.s3.items():
        try:
            counts.append(S3Count(time.monotonic(), region, server.requests()))
        except httpx.HTTPError:
            continue  # counted at the next window's end
    return counts


def soak(options: Options, workdir: Path, out: TextIO, command: str = "") -> tuple[str, bool]:
    """Run one soak in ``workdir``; return its report and whether every target was met.

    Progress lines go to standard error; the report is also written to ``out``.
    """
    started_wall = time.perf_counter()
    load_average = os.getloadavg()[0]

    def log(text: str) -> None:
        print(text, file=sys.stderr, flush=True)

    with soak_world(workdir, options.seed, log) as world:
        meter = Meter()
        ledger = Ledger("a", world.source_repo, options.seed)
        checker = SafetyChecker(
            world.region("b"),
            world.mirror_repo,
            "main",
            source=(world.region("a"), world.source_repo),
            transient=_transient,
        ).start()
        watch = MirrorWatch(world.http("b", timeout=30.0), world.mirror_repo, ledger).start()
        sampler = ProcessSampler(world, every=min(10.0, options.window / 4)).start()
        load = Load(world, meter, ledger, options.seed, think=options.think, keep=options.keep)
        kv: list[KVCount] = _count_kv(world)
        loads: list[tuple[float, float]] = []
        s3 = _count_s3(world)
        began = time.monotonic()
        load.start()
        faults = FaultSchedule(
            world, options.fault_every, options.seed, options.faults, options.max_faults, log
        ).start()
        end = began + options.minutes * 60
        next_window = began + options.window
        log(f"load running for {options.minutes:g} min; windows of {options.window:g} s")
        while next_window < end + options.window:
            # read the stores and processes just before each window ends, so the readings
            # are the window's last
            closing = min(next_window, end) - READING_LEAD
            time.sleep(max(0.0, closing - time.monotonic()))  # a timed run: until then
            kv += _count_kv(world)
            sampler.sample()
            loads.append((time.monotonic(), os.getloadavg()[0]))
            s3 += _count_s3(world)
            log(
                f"{(time.monotonic() - began) / 60:.1f} min: {len(meter.requests):,} "
                f"requests, {len(ledger.acks):,} acks, mirror lags {len(ledger.lags):,}, "
                f"{len(faults.faults)} faults"
            )
            next_window += options.window
        time.sleep(max(0.0, end - time.monotonic()))  # a timed run: until its end
        ended = time.monotonic()
        log("stopping the faults and the load")
        faults.stop()
        load.stop()
        sampler.stop()
        log("final checks: the mirror catches up, every acknowledged write is read back")
        checking = time.monotonic()
        verdict = final_checks(world, ledger, options.catch_up)
        final_s = time.monotonic() - checking
        checker.stop()
        watch.stop()
        run = Run(
            started=began,
            ended=ended,
            window=options.window,
            requests=meter.snapshot(),
            lags=list(ledger.lags),
            processes=sampler.snapshot(),
            kv=kv,
            faults=list(faults.faults),
            verdict=verdict,
            violations=list(checker.violations),
            read_problems=list(load.read_problems),
            crashes=list(load.crashes),
            heads_checked=len(checker.checked),
            objects_checked=checker.objects_read,
            mirror_reads=load.mirror_reads,
            failures=list(meter.failures),
            loads=loads,
            final_s=final_s,
            s3=s3,
        )
    from importlib.metadata import version

    run.header = [
        f"machine: {describe(('moto', version('moto')))}",
        f"command: {command or 'python -m bench.soak'}",
        f"load: {options.minutes:g} min in windows of {options.window:g} s, a fault every "
        f"~{options.fault_every:g} s ({', '.join(options.faults)}), seed {options.seed}; "
        f"{run_footer(started_wall, load_average)}",
    ]
    text = render(run)
    print(text, file=out, flush=True)
    return text, all(t.met for t in targets(run))


def main(argv: Sequence[str] | None = None, out: TextIO | None = None) -> int:
    """Run the soak as the command line says; return the exit code (1: a target missed)."""
    parser = argparse.ArgumentParser(
        prog="python -m bench.soak", description=sys.modules["bench.soak"].__doc__
    )
    parser.add_argument("--minutes", type=float, default=20.0, help="load time (20)")
    parser.add_argument("--window", type=float, default=300.0, help="seconds per window (300)")
    parser.add_argument("--fault-every", type=float, default=180.0, help="seconds (180)")
    parser.add_argument("--seed", type=int, default=1, help="seed of faults and load (1)")
    parser.add_argument(
        "--faults",
        default=",".join(KINDS),
        help=f"kinds of fault, comma-separated, among {','.join(KINDS)} (all)",
    )
    parser.add_argument("--max-faults", type=int, help="stop injecting after this many")
    parser.add_argument("--catch-up", type=float, default=300.0, help="seconds (300)")
    parser.add_argument("--keep", type=int, default=60, help="objects kept on main (60)")
    parser.add_argument("--think", type=float, default=0.3, help="seconds between steps (0.3)")
    parser.add_argument("--workdir", type=Path, help="keep data and logs here (default: a temp)")
    args = parser.parse_args(argv)
    kinds = tuple(k for k in args.faults.split(",") if k)
    unknown = set(kinds) - set(KINDS)
    if unknown:
        parser.error(f"--faults: unknown kind(s) {', '.join(sorted(unknown))}")
    options = Options(
        minutes=args.minutes,
        window=args.window,
        fault_every=args.fault_every,
        seed=args.seed,
        faults=kinds,
        max_faults=args.max_faults,
        catch_up=args.catch_up,
        keep=args.keep,
        think=args.think,
    )
    command = "python -m bench.soak " + " ".join(argv if argv is not None else sys.argv[1:])
    with ExitStack() as stack:
        workdir = args.workdir
        if workdir is None:
            workdir = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="soak-")))
        workdir.mkdir(parents=True, exist_ok=True)
        _, met = soak(options, workdir, out or sys.stdout, command.strip())
    return 0 if met else 1
