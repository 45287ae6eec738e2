"""Stats and reads one server worker answers at concurrency 16, from clients that cost little.

Run ``python -m bench.throughput`` (options: ``--clients``, ``--seconds``, ``--rounds``,
``--objects``, ``--warm-up``). ``bench.api`` measures throughput with 16 Python threads of an
HTTP library, which on a 2-core machine take most of the core the server does not use and more:
its req/s say what those clients reach, not what the server serves. This bench starts ``lakemirror
server`` (embedded default, one worker, the default admission limits) as a separate process on
127.0.0.1, stores ``--objects`` committed 1 KiB objects, then, ``--rounds`` times, runs
``--clients`` closed-loop clients for ``--seconds`` per operation, stat (``GET
/refs/main/objects/stat``) and read (``GET /refs/main/objects``) alternately: each client one
keep-alive connection of raw asyncio sockets in one process of their own (``bench.flood``),
sending its next request as soon as it has its answer. It prints, per round and operation,
answered requests per second, their latency, the server's share of a core and its requests per
CPU second (what it would serve on a core of its own), and the clients' share of a core; then the
median of the rounds against the target of 1,200 req/s.
"""

from __future__ import annotations

import argparse
import base64
import os
import statistics
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

from bench.flood import DEFAULT_OBJECTS, DEFAULT_WARM_UP, Phase
from bench.machine import run_footer

__all__ = ["TARGET", "main"]

TARGET = 1200.0
"""Requests per second of one server worker at concurrency 16 (issue 24's target)."""


def _positive(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError("must be at least 1")
    return value


def _median(values: Sequence[float | None]) -> float | None:
    known = [v for v in values if v is not None]
    return statistics.median(known) if known else None


def main(argv: Sequence[str] | None = None) -> int:
    """Run the benchmark and print its tables."""
    from bench.api import machine
    from bench.overload import _populate, _watched, phase_table
    from bench.processes import lakemirror_server
    from bench.tables import markdown

    parser = argparse.ArgumentParser(
        prog="python -m bench.throughput",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--clients", type=_positive, default=16)
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--rounds", type=_positive, default=3)
    parser.add_argument("--objects", type=_positive, default=DEFAULT_OBJECTS)
    parser.add_argument("--warm-up", type=float, default=DEFAULT_WARM_UP)
    parser.add_argument("--log-level", default="warning")
    args = parser.parse_args(argv)
    if args.seconds <= 0 or args.warm_up < 0 or args.objects > 10_000:
        parser.error("--seconds must be positive, --warm-up >= 0, --objects at most 10000")
    started, load = time.perf_counter(), os.getloadavg()[0]
    phases: dict[str, list[Phase]] = {"stat": [], "read": []}
    with (
        tempfile.TemporaryDirectory(prefix="bench-throughput-") as tmp,
        lakemirror_server(Path(tmp), args.log_level) as (url, key, pid),
    ):
        host, port = url.removeprefix("http://").split(":")
        address = (host, int(port))
        auth = "Basic " + base64.b64encode(f"{key[0]}:{key[1]}".encode()).decode()
        _populate(url, key, args.objects)
        for n in range(args.rounds):
            # alternate which goes first, so a drift of the machine's load touches both alike
            for operation in ("stat", "read") if n % 2 == 0 else ("read", "stat"):
                phase = Phase(
                    f"{operation}, round {n + 1}",
                    args.clients,
                    args.seconds,
                    args.objects,
                    args.warm_up,
                    operation,
                )
                result, _ = _watched(pid, address, phase, auth, "after")
                if result.refused or result.errors:
                    raise SystemExit(f"{phase.name}: {result.refused} 503s, {dict(result.errors)}")
                phases[operation].append(result)
    print(f"machine: {machine()}")
    print(
        f"command: python -m bench.throughput --clients {args.clients} --seconds "
        f"{args.seconds:g} --rounds {args.rounds} --objects {args.objects} "
        f"--warm-up {args.warm_up:g}"
    )
    print(
        "server: lakemirror server (embedded SQLite + local disk, HTTP Basic), 1 worker; "
        f"requests: GET .../refs/main/objects[/stat]?path=o/NNNN of {args.objects:,} committed "
        "1 KiB objects; clients: one process of raw asyncio sockets, one keep-alive connection "
        "each"
    )
    print()
    pairs = zip(phases["stat"], phases["read"], strict=True)
    print(phase_table([p for pair in pairs for p in pair]))
    print()
    rows = []
    for operation, done in phases.items():
        rate = statistics.median(p.rate for p in done)
        per_cpu = _median([p.per_cpu_second for p in done])
        met = "met" if rate >= TARGET else "not met"
        rows.append(
            [
                operation,
                f"{rate:,.0f}",
                "-" if per_cpu is None else f"{per_cpu:,.0f}",
                f"{TARGET:,.0f}: {met}",
            ]
        )
    columns = ("operation", "req/s (median)", "per server CPU s (median)", "target req/s")
    print(markdown(columns, rows))
    print()
    print(run_footer(started, load))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
