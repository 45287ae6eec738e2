"""The commit-time ratio of a large repository to a small one, from interleaved commits.

Run ``python -m bench.commit_ratio`` (options: ``--sizes``, ``--runs``, ``--repeat``,
``--parts``).
``bench.core`` measures each repository size in a process of its own, one after the other, so
its ratio compares two stretches of time on a shared machine: the same code gave 1.13x and
2.04x on two runs minutes apart. Here every run starts one process per size (each builds its
repository in one bulk commit, as ``bench.core`` does), then asks them in turn for one
clustered commit at a time (95 new objects in a new date partition plus 5 overwrites in one
existing partition, staged untimed), alternating which size goes first, so both sizes are
measured under the same machine state. A run's ratio is the median CPU time of the larger
size's commits over the smaller's; each run builds its repositories anew, so the small one
stays small. With ``--parts`` each commit is also timed by part (:mod:`bench.commit_parts`),
and a table gives each part's median at both sizes: where the difference goes.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import IO, Any

from bench.commit_parts import PARTS, REST, PartClock, PartTimings
from bench.core import ROOT, Timings, Worker, machine, worker_env
from bench.machine import run_footer

__all__ = ["main"]

_READY = "ready"


def _serve(n: int, seed: int, parts: bool) -> None:
    """Worker side: build an ``n``-object repository, then commit once per line read."""
    clock = PartClock() if parts else None
    with tempfile.TemporaryDirectory(prefix="bench-ratio-") as tmp:
        worker = Worker(Path(tmp), n, 1, seed)
        built = worker.build()
        print(json.dumps({_READY: True, **built}), flush=True)
        for i, line in enumerate(sys.stdin):
            if line.strip() != "commit":
                break
            timing = Timings() if clock is None else PartTimings(clock)
            result, _ = worker.clustered_commit(timing, f"r{i}")
            answer = {
                "cpu_ms": timing.cpu[0] * 1000.0,
                "wall_ms": timing.wall[0] * 1000.0,
                "files": result.stats.files_written,
            }
            if isinstance(timing, PartTimings):
                answer["parts"] = timing.parts[0]
            print(json.dumps(answer), flush=True)


class _Size:
    """One worker process, asked for a commit at a time."""

    def __init__(self, n: int, seed: int, parts: bool) -> None:
        cmd = [sys.executable, "-m", "bench.commit_ratio", "--worker", str(n), "--seed", str(seed)]
        if parts:
            cmd.append("--parts")
        self.n = n
        self.proc = subprocess.Popen(
            cmd,
            cwd=ROOT,
            env=worker_env(),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        self.cpu_ms: list[float] = []
        self.parts: list[dict[str, float]] = []
        self.built: dict[str, Any] = {}

    def _answer(self) -> dict[str, Any]:
        out: IO[str] | None = self.proc.stdout
        line = out.readline() if out is not None else ""
        if not line:
            raise SystemExit(f"worker of {self.n:,} objects ended (exit {self.proc.wait()})")
        answer: dict[str, Any] = json.loads(line)
        return answer

    def ready(self) -> None:
        """Wait until the repository is built."""
        self.built = self._answer()

    def commit(self) -> None:
        """Have the worker make one clustered commit; keep its CPU time (and its parts)."""
        assert self.proc.stdin is not None
        self.proc.stdin.write("commit\n")
        self.proc.stdin.flush()
        answer = self._answer()
        self.cpu_ms.append(float(answer["cpu_ms"]))
        if "parts" in answer:
            self.parts.append(answer["parts"])

    def close(self) -> None:
        """End the worker."""
        if self.proc.stdin is not None:
            self.proc.stdin.close()
        self.proc.wait()
        if self.proc.stdout is not None:
            self.proc.stdout.close()


def run_once(sizes: Sequence[int], repeat: int, seed: int, parts: bool = False) -> list[_Size]:
    """Build one repository per size, then interleave ``repeat`` commits on each."""
    workers = [_Size(n, seed, parts) for n in sizes]
    try:
        for w in workers:
            w.ready()
        for r in range(repeat):
            for w in workers if r % 2 == 0 else reversed(workers):
                w.commit()
    finally:
        for w in workers:
            w.close()
    return workers


def format_parts(
    small: int, large: int, low: list[dict[str, float]], high: list[dict[str, float]]
) -> str:
    """Return the table of each part's median CPU ms a commit at both sizes, and the difference."""
    lines = [
        f"\nparts of a commit, CPU ms, median over the runs' commits ({len(low)} a size)\n",
        f"| part | {small:,} objects | {large:,} objects | difference |",
        "|---|---:|---:|---:|",
    ]
    for label in [label for label, _, _ in PARTS] + [REST]:
        a = statistics.median(p[label] for p in low)
        b = statistics.median(p[label] for p in high)
        lines.append(f"| {label} | {a:.2f} | {b:.2f} | {b - a:+.2f} |")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the interleaved runs and print each run's medians and ratio."""
    parser = argparse.ArgumentParser(prog="python -m bench.commit_ratio", description=__doc__)
    parser.add_argument("--sizes", type=int, nargs=2, default=[1_000, 1_000_000])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--repeat", type=int, default=21, help="commits per size and run")
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument("--target", type=float, default=1.2)
    parser.add_argument(
        "--parts",
        action="store_true",
        help="also time the parts of each commit and print where the difference goes",
    )
    parser.add_argument("--worker", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker is not None:
        _serve(args.worker, args.seed, args.parts)
        return 0
    if args.runs < 1 or args.repeat < 1 or min(args.sizes) < 1:
        parser.error("--sizes, --runs and --repeat must be positive")
    small, large = sorted(args.sizes)
    started, load = time.perf_counter(), os.getloadavg()[0]
    print(f"machine: {machine()}")
    print(
        f"command: python -m bench.commit_ratio --sizes {small} {large} --runs {args.runs} "
        f"--repeat {args.repeat}{' --parts' if args.parts else ''}"
    )
    print(f"commit 100 clustered, CPU ms, median of {args.repeat} interleaved commits a run\n")
    print(f"| run | {small:,} objects | {large:,} objects | ratio | target <= {args.target}x |")
    print("|----:|------:|------:|------:|:------|")
    ratios = []
    by_size: tuple[list[dict[str, float]], list[dict[str, float]]] = ([], [])
    for run in range(args.runs):
        low, high = run_once([small, large], args.repeat, args.seed + run, args.parts)
        by_size[0].extend(low.parts)
        by_size[1].extend(high.parts)
        a, b = statistics.median(low.cpu_ms), statistics.median(high.cpu_ms)
        ratios.append(b / a)
        verdict = "met" if b / a <= args.target else "missed"
        print(f"| {run + 1} | {a:.2f} | {b:.2f} | {b / a:.2f}x | {verdict} |", flush=True)
    met = sum(r <= args.target for r in ratios)
    print(f"\nratio median {statistics.median(ratios):.2f}x; {met} of {args.runs} runs met")
    if args.parts:
        print(format_parts(small, large, *by_size))
    print(run_footer(started, load))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
