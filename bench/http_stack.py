"""The HTTP stack side by side: uvicorn's h11 protocol against the httptools one LakeMirror serves.

Run ``python -m bench.http_stack`` (options: ``--requests``, ``--concurrency``, ``--rounds``).
For each protocol it starts, as separate processes on free ports of 127.0.0.1, ``bench.api``'s
bare FastAPI app and a ``lakemirror server`` (embedded default, one worker), the h11 ones with
``mirror.cli.serving.HTTP_PROTOCOL_ENV=h11``; everything else is the same build and options.
It fills each server with ``bench.api``'s 1,000 objects, then measures ``bench.api``'s cells
(bare GET and POST, stat, read 1 KiB, list 1,000, upload, commit) on both protocols one right
after the other, ``--rounds`` times, alternating which goes first; the table shows, per cell,
the median over the rounds of each protocol's server CPU per request and throughput, and their
ratio. Commit CPU includes its staging upload (``bench.api`` says how to take it out).
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from collections.abc import Sequence
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path

import httpx

from bench.api import (
    BareGet,
    BarePost,
    Cell,
    Commit,
    ListPage,
    Operation,
    Read,
    Stat,
    Upload,
    _clients,
    _markdown,
    _populate,
    bare_server,
    lakemirror_server,
    machine,
    run_cell,
)
from bench.machine import run_footer
from mirror.cli.serving import HTTP_PROTOCOL_ENV

__all__ = ["main"]

PROTOCOLS = ("h11", "httptools")
"""``httptools``: :class:`mirror.cli.http_protocol.HttpToolsProtocol`, what LakeMirror serves."""
COLUMNS = (
    "operation",
    "conc.",
    "CPU ms/req h11",
    "CPU ms/req httptools",
    "CPU ratio",
    "req/s h11",
    "req/s httptools",
)


@dataclass
class _Target:
    """One protocol's two servers: the bare app and ``lakemirror server``."""

    bare_pid: int
    bare_clients: list[httpx.Client]
    pid: int
    clients: list[httpx.Client]
    ops: list[Operation]


def _operations(seed: int) -> list[Operation]:
    return [Stat(seed), Read(seed + 1), ListPage(), Upload(), Commit()]


def _log(text: str) -> None:
    print(f"[bench.http_stack] {text}", flush=True)


def _median(values: Sequence[float | None]) -> float | None:
    known = [v for v in values if v is not None]
    return statistics.median(known) if known else None


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f}"


def run(
    requests: int, concurrencies: Sequence[int], rounds: int, seed: int
) -> dict[tuple[str, int, str], list[Cell]]:
    """Measure every cell on both protocols ``rounds`` times; return the cells by key."""
    most = max(concurrencies)
    found: dict[tuple[str, int, str], list[Cell]] = {}
    with tempfile.TemporaryDirectory(prefix="bench-http-") as name, ExitStack() as stack:
        targets: dict[str, _Target] = {}
        for protocol in PROTOCOLS:
            tmp = Path(name) / protocol
            tmp.mkdir()
            env = {HTTP_PROTOCOL_ENV: protocol}
            bare_url, bare_pid = stack.enter_context(bare_server(tmp, "warning", env))
            bare_clients = stack.enter_context(_clients(bare_url, most))
            url, key, pid = stack.enter_context(lakemirror_server(tmp, "warning", 1, env))
            clients = stack.enter_context(_clients(url, most, key))
            _log(f"{protocol}: populating the server")
            _populate(clients)
            ops = [BareGet(), BarePost(), *_operations(seed)]
            targets[protocol] = _Target(bare_pid, bare_clients, pid, clients, ops)
        for r in range(rounds):
            order = PROTOCOLS if r % 2 == 0 else tuple(reversed(PROTOCOLS))
            for concurrency in concurrencies:
                for k in range(2 + len(_operations(seed))):
                    for protocol in order:
                        t = targets[protocol]
                        op = t.ops[k]
                        bare = op.kind == "bare"
                        pid, clients = (t.bare_pid, t.bare_clients) if bare else (t.pid, t.clients)
                        _log(f"round {r + 1}: {protocol}: {op.name} at concurrency {concurrency}")
                        cell = run_cell(op, clients, concurrency, requests, pid)
                        found.setdefault((op.name, concurrency, protocol), []).append(cell)
    return found


def format_table(found: dict[tuple[str, int, str], list[Cell]]) -> str:
    """Return the medians of each cell on both protocols as a Markdown table."""
    keys = list(dict.fromkeys((name, conc) for name, conc, _ in found))
    body = []
    for name, conc in keys:
        cpu = {p: _median([c.cpu_ms for c in found[(name, conc, p)]]) for p in PROTOCOLS}
        rate = {p: _median([c.throughput for c in found[(name, conc, p)]]) for p in PROTOCOLS}
        old, new = cpu["h11"], cpu["httptools"]
        ratio = "-" if old is None or new is None or old == 0 else f"{new / old:.2f}x"
        body.append(
            [
                name,
                str(conc),
                _ms(old),
                _ms(new),
                ratio,
                f"{rate['h11'] or 0:,.0f}",
                f"{rate['httptools'] or 0:,.0f}",
            ]
        )
    return _markdown(COLUMNS, body)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the comparison and print the table."""
    parser = argparse.ArgumentParser(
        prog="python -m bench.http_stack",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--requests", type=int, default=1000, help="timed requests per cell")
    parser.add_argument("--concurrency", type=int, nargs="+", default=[1, 16])
    parser.add_argument("--rounds", type=int, default=3, help="measurements of every cell")
    parser.add_argument("--seed", type=int, default=42)
    args = parser.parse_args(argv)
    if args.requests < 1 or args.rounds < 1 or any(c < 1 for c in args.concurrency):
        parser.error("--requests, --rounds and --concurrency must be positive")
    started, load = time.perf_counter(), os.getloadavg()[0]
    found = run(args.requests, sorted(set(args.concurrency)), args.rounds, args.seed)
    print(f"machine: {machine()}")
    print(
        f"command: python -m bench.http_stack --requests {args.requests} --concurrency "
        f"{' '.join(map(str, sorted(set(args.concurrency))))} --rounds {args.rounds}"
    )
    print(
        "CPU ms/req: the server process's user + system CPU per timed request, median of the "
        "rounds; CPU ratio: httptools over h11"
    )
    print()
    print(format_table(found))
    print()
    print(run_footer(started, load))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
