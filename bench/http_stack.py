"""The HTTP stack side by side: two variants of the same build, one cell right after the other.

Run ``python -m bench.http_stack`` (options: ``--compare``, ``--before``, ``--requests``,
``--concurrency``, ``--rounds``). ``--compare`` picks the two variants (:data:`COMPARISONS`):

- ``protocol`` (the default): uvicorn's h11 protocol against the httptools one LakeMirror
  serves (``mirror.cli.serving.HTTP_PROTOCOL_ENV=h11`` selects h11);
- ``fast-reads``: every request through FastAPI's routes against the fast routes of stat, read
  and list (:mod:`mirror.api.fast_reads`; ``mirror.cli.serving.FAST_READS_ENV=off`` turns them
  off);
- ``revision``: the sources of the git revision ``--before`` (exported to a temporary
  directory, run with the same installed packages) against this checkout's.

For each variant it starts, as separate processes on free ports of 127.0.0.1, ``bench.api``'s
bare FastAPI app and a ``lakemirror server`` (embedded default, one worker); everything but the
variant's environment is the same build and options. It fills each server with ``bench.api``'s
1,000 objects, then measures ``bench.api``'s cells (bare GET and POST, stat, read 1 KiB, list
1,000, get branch, upload, commit) on both variants one right after the other, ``--rounds`` times,
alternating which goes first; the table shows, per cell, the median over the rounds of each
variant's server CPU per request and throughput, and their ratio. Commit CPU includes its
staging upload (``bench.api`` says how to take it out).
"""

from __future__ import annotations

import argparse
import io
import os
import statistics
import subprocess
import tarfile
import tempfile
import time
from collections.abc import Sequence
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path

import httpx

from bench.api import Cell, _clients, _populate, machine, run_cell
from bench.api_requests import (
    BareGet,
    BarePost,
    Commit,
    GetBranch,
    ListPage,
    Operation,
    Read,
    Stat,
    Upload,
)
from bench.machine import run_footer
from bench.processes import ROOT, bare_server, lakemirror_server
from bench.tables import markdown
from mirror.cli.serving import FAST_READS_ENV, HTTP_PROTOCOL_ENV

__all__ = ["main"]


@dataclass(frozen=True)
class Variant:
    """What one side of a comparison runs: its name, its servers' environment and sources."""

    name: str
    env: dict[str, str] = field(default_factory=dict)
    root: Path = ROOT


COMPARISONS: dict[str, tuple[Variant, Variant]] = {
    # httptools: mirror.cli.http_protocol.HttpToolsProtocol, what LakeMirror serves
    "protocol": (Variant("h11", {HTTP_PROTOCOL_ENV: "h11"}), Variant("httptools")),
    "fast-reads": (Variant("routed", {FAST_READS_ENV: "off"}), Variant("fast")),
}
"""Each comparison's variants: the one before, then the one LakeMirror serves
(``revision``'s are made from ``--before``: :func:`revision_variants`)."""


def export_revision(revision: str, into: Path) -> Path:
    """Write the sources of git ``revision`` of this checkout under ``into``; return that tree."""
    tree = into / "before"
    tree.mkdir()
    archive = subprocess.run(
        ["git", "-C", str(ROOT), "archive", "--format=tar", revision, "mirror", "bench"],
        capture_output=True,
        check=True,
    )
    with tarfile.open(fileobj=io.BytesIO(archive.stdout)) as tar:
        tar.extractall(tree, filter="data")
    return tree


def revision_variants(revision: str, tree: Path) -> tuple[Variant, Variant]:
    """Return ``--compare revision``'s variants: ``revision`` (from ``tree``), then this one."""
    return Variant(revision, root=tree), Variant("this checkout")


def _columns(before: str, after: str) -> tuple[str, ...]:
    return (
        "operation",
        "conc.",
        f"CPU ms/req {before}",
        f"CPU ms/req {after}",
        "CPU ratio",
        f"req/s {before}",
        f"req/s {after}",
    )


@dataclass
class _Target:
    """One variant's two servers: the bare app and ``lakemirror server``."""

    bare_pid: int
    bare_clients: list[httpx.Client]
    pid: int
    clients: list[httpx.Client]
    ops: list[Operation]


def _operations(seed: int) -> list[Operation]:
    return [Stat(seed), Read(seed + 1), ListPage(), GetBranch(), Upload(), Commit()]


def _log(text: str) -> None:
    print(f"[bench.http_stack] {text}", flush=True)


def _median(values: Sequence[float | None]) -> float | None:
    known = [v for v in values if v is not None]
    return statistics.median(known) if known else None


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f}"


def run(
    variants: tuple[Variant, Variant],
    requests: int,
    concurrencies: Sequence[int],
    rounds: int,
    seed: int,
) -> dict[tuple[str, int, str], list[Cell]]:
    """Measure every cell on both variants ``rounds`` times; return the cells by key."""
    most = max(concurrencies)
    names = tuple(v.name for v in variants)
    found: dict[tuple[str, int, str], list[Cell]] = {}
    with tempfile.TemporaryDirectory(prefix="bench-http-") as name, ExitStack() as stack:
        targets: dict[str, _Target] = {}
        for n, variant in enumerate(variants):
            env, root = variant.env, variant.root
            tmp = Path(name) / str(n)
            tmp.mkdir()
            bare_url, bare_pid = stack.enter_context(bare_server(tmp, "warning", env, root))
            bare_clients = stack.enter_context(_clients(bare_url, most))
            url, key, pid = stack.enter_context(lakemirror_server(tmp, "warning", 1, env, root))
            clients = stack.enter_context(_clients(url, most, key))
            _log(f"{variant.name}: populating the server")
            _populate(clients)
            ops = [BareGet(), BarePost(), *_operations(seed)]
            targets[variant.name] = _Target(bare_pid, bare_clients, pid, clients, ops)
        for r in range(rounds):
            order = names if r % 2 == 0 else tuple(reversed(names))
            for concurrency in concurrencies:
                for k in range(2 + len(_operations(seed))):
                    for label in order:
                        t = targets[label]
                        op = t.ops[k]
                        bare = op.kind == "bare"
                        pid, clients = (t.bare_pid, t.bare_clients) if bare else (t.pid, t.clients)
                        _log(f"round {r + 1}: {label}: {op.name} at concurrency {concurrency}")
                        cell = run_cell(op, clients, concurrency, requests, pid)
                        found.setdefault((op.name, concurrency, label), []).append(cell)
    return found


def format_table(found: dict[tuple[str, int, str], list[Cell]], before: str, after: str) -> str:
    """Return the medians of each cell on both variants as a Markdown table."""
    keys = list(dict.fromkeys((name, conc) for name, conc, _ in found))
    body = []
    for name, conc in keys:
        cpu = {p: _median([c.cpu_ms for c in found[(name, conc, p)]]) for p in (before, after)}
        rate = {p: _median([c.throughput for c in found[(name, conc, p)]]) for p in (before, after)}
        old, new = cpu[before], cpu[after]
        ratio = "-" if old is None or new is None or old == 0 else f"{new / old:.2f}x"
        body.append(
            [
                name,
                str(conc),
                _ms(old),
                _ms(new),
                ratio,
                f"{rate[before] or 0:,.0f}",
                f"{rate[after] or 0:,.0f}",
            ]
        )
    return markdown(_columns(before, after), body)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the comparison and print the table."""
    parser = argparse.ArgumentParser(
        prog="python -m bench.http_stack",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--compare",
        choices=[*sorted(COMPARISONS), "revision"],
        default="protocol",
        help="the two variants",
    )
    parser.add_argument("--before", metavar="REV", help="with --compare revision: the git revision")
    parser.add_argument("--requests", type=int, default=1000, help="timed requests per cell")
    parser.add_argument("--concurrency", type=int, nargs="+", default=[1, 16])
    parser.add_argument("--rounds", type=int, default=3, help="measurements of every cell")
    parser.add_argument("--seed", type=int, default=42)
    args = parser.parse_args(argv)
    if args.requests < 1 or args.rounds < 1 or any(c < 1 for c in args.concurrency):
        parser.error("--requests, --rounds and --concurrency must be positive")
    started, load = time.perf_counter(), os.getloadavg()[0]
    if (args.compare == "revision") != bool(args.before):
        parser.error("--before REV goes with --compare revision, and only with it")
    with tempfile.TemporaryDirectory(prefix="bench-rev-") as exported:
        if args.before:
            variants = revision_variants(args.before, export_revision(args.before, Path(exported)))
        else:
            variants = COMPARISONS[args.compare]
        before, after = (v.name for v in variants)
        found = run(variants, args.requests, sorted(set(args.concurrency)), args.rounds, args.seed)
    print(f"machine: {machine()}")
    print(
        f"command: python -m bench.http_stack --compare {args.compare} "
        f"{f'--before {args.before} ' if args.before else ''}"
        f"--requests {args.requests} --concurrency "
        f"{' '.join(map(str, sorted(set(args.concurrency))))} --rounds {args.rounds}"
    )
    print(
        "CPU ms/req: the server process's user + system CPU per timed request, median of the "
        f"rounds; CPU ratio: {after} over {before}"
    )
    print()
    print(format_table(found, before, after))
    print()
    print(run_footer(started, load))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
