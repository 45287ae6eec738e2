"""Latency and throughput of the lakeFS-compatible API, beside a bare FastAPI endpoint.

Run ``python -m bench.api`` (options: ``--requests``, ``--concurrency``, ``--workers``,
``--log-level``). It starts separate processes on free ports of 127.0.0.1, all under uvicorn with
the options ``lakemirror server`` uses (:data:`mirror.cli.serving.UVICORN_OPTIONS`, the same log
level):

- ``lakemirror server`` on the embedded default (SQLite KV + local disk) in a temporary data
  directory, with a bootstrap administrator whose key the requests sign with (HTTP Basic), once
  per value of ``--workers`` (``server.workers``: 1 by default; ``--workers 1,2`` runs a server
  of one worker process and one of two, side by side, each in a fresh data directory, and
  measures each cell on one right after the other). No
  ``LAKEMIRROR_*`` variable of the caller's environment reaches it (``LAKEMIRROR_CONFIG``
  included), so no configuration file or setting can move it off the embedded default;
- a bare FastAPI app (one process) with three endpoints: ``GET /small`` answers a small JSON
  body, ``GET /small-async`` answers the same body from an ``async def`` endpoint, and ``POST
  /upload`` reads a 1 KiB body and answers a small JSON body. FastAPI runs a plain ``def``
  endpoint such as ``/small`` on a worker thread, so the bare GET includes that thread hop; the
  async GET is the stack's own cost without it (protocol, middleware, routing, JSON).

Against the server it measures, at each concurrency (threads, one keep-alive ``httpx.Client``
each), ``--requests`` requests of:

- **stat**: ``GET /refs/main/objects/stat`` of one of 1,000 committed 1 KiB objects;
- **upload 1 KiB**: ``POST /branches/uploads/objects`` to a new path each time;
- **read 1 KiB**: ``GET /refs/main/objects`` of one of the 1,000 objects;
- **list 1,000**: ``GET /refs/main/objects/ls?amount=1000``, one full page;
- **get branch**: ``GET /branches/main`` (its head commit);
- **create branch**: ``POST /branches`` from ``main``, a new name each time;
- **commit 1 change**: ``POST /branches/{branch}/commits`` of one staged 1 KiB upload. The upload
  before each commit is not timed. Each thread commits to a branch of its own, so at concurrency
  16 the commits go to 16 branches: the figure is the server's, not one branch's contention.
  Its server CPU includes the upload's; a line under the table gives the commit's own (the
  commit cell's CPU per request minus the upload cell's).

Object operations are compared with the bare ``GET`` (stat, read, list) or ``POST`` (upload);
branch operations with the bare ``POST``, but get branch with the bare ``GET``. Each thread
makes one untimed request first (connection set-up, warm caches); percentiles are over the
timed requests, throughput is timed requests per second of the cell's wall time (for commits,
the untimed uploads are inside that wall time). Server CPU is that of the server's whole process
tree (its workers included).

With several worker counts, a second table compares each operation's throughput at the highest
concurrency across them. Each client thread keeps one connection, opened one after the other
before the cell runs, and the kernel hands each new connection to one worker: the notes show how
the connections were spread (at concurrency 1 only one worker is ever used).
"""

from __future__ import annotations

import argparse
import itertools
import os
import sys
import tempfile
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
from fastapi import FastAPI, Request

from bench.api_requests import (
    API,
    OBJECTS,
    REPO,
    BareGet,
    BareGetAsync,
    BarePost,
    Commit,
    CreateBranch,
    GetBranch,
    ListPage,
    Operation,
    Read,
    Stat,
    Upload,
    check,
    list_path,
    payload,
)
from bench.machine import describe, run_footer
from bench.processes import bare_server, lakemirror_server
from bench.procfs import tree_cpu
from bench.tables import markdown
from mirror.api.app import WORKER_HEADER
from mirror.cli.serving import UVICORN_OPTIONS, uvicorn_options

__all__ = ["COLUMNS", "commit_only", "main"]

REQUEST_TIMEOUT = 120.0
OBJECT_TARGET_MS = 25.0
BRANCH_TARGET_MS = 30.0
DEFAULT_REQUESTS = 300
DEFAULT_CONCURRENCY = (1, 16)
DEFAULT_WORKERS = (1,)
LOG_LEVELS = ("critical", "error", "warning", "info", "debug")

COLUMNS = (
    "operation",
    "workers",
    "conc.",
    "requests",
    "p50 ms",
    "p90 ms",
    "req/s",
    "server CPU ms/req",
    "bare p50 ms",
    "p50 ratio",
    "lakeFS p90 target",
)


@dataclass
class Cell:
    """The timed requests of one operation at one concurrency."""

    operation: Operation
    concurrency: int
    latencies: list[float]
    wall: float
    cpu: float | None
    workers: int = 1

    def percentile_ms(self, q: float) -> float:
        """Return the ``q``-th percentile (nearest rank) of the latencies in milliseconds."""
        ordered = sorted(self.latencies)
        rank = max(1, -(-len(ordered) * q // 100))
        return ordered[int(rank) - 1] * 1000.0

    @property
    def throughput(self) -> float:
        """Return timed requests per second of wall time."""
        return len(self.latencies) / self.wall if self.wall > 0 else 0.0

    @property
    def cpu_ms(self) -> float | None:
        """Return the server process's CPU milliseconds per timed request."""
        return None if self.cpu is None else self.cpu * 1000.0 / len(self.latencies)


def run_cell(
    operation: Operation,
    clients: Sequence[httpx.Client],
    concurrency: int,
    requests: int,
    server_pid: int,
    workers: int = 1,
) -> Cell:
    """Send ``requests`` timed requests of ``operation`` from ``concurrency`` threads."""
    operation.prepare(clients, concurrency)
    counter = itertools.count()
    latencies: list[list[float]] = [[] for _ in range(concurrency)]
    errors: list[BaseException] = []
    # Two barriers: the clock and the CPU reading start after every warm-up request and before
    # any timed one. Read after the release, they would wait for the main thread to get the
    # GIL back from busy client threads, and a fast cell could be over by then.
    warmed = threading.Barrier(concurrency + 1, timeout=REQUEST_TIMEOUT)
    go = threading.Barrier(concurrency + 1, timeout=REQUEST_TIMEOUT)

    def work(worker: int) -> None:
        client = clients[worker]
        try:
            operation.call(client, worker, -1)
        except Exception as exc:
            errors.append(exc)
        finally:
            warmed.wait()
            go.wait()
        while not errors:
            i = next(counter)
            if i >= requests:
                return
            try:
                latencies[worker].append(operation.call(client, worker, i))
            except Exception as exc:
                errors.append(exc)

    threads = [threading.Thread(target=work, args=(w,), daemon=True) for w in range(concurrency)]
    for t in threads:
        t.start()
    warmed.wait()
    cpu_before = tree_cpu(server_pid)
    start = time.perf_counter()
    go.wait()
    for t in threads:
        t.join()
    wall = time.perf_counter() - start
    cpu_after = tree_cpu(server_pid)
    if errors:
        raise SystemExit(f"{operation.name} at concurrency {concurrency}: {errors[0]}")
    cpu = None if cpu_before is None or cpu_after is None else cpu_after - cpu_before
    latencies_ = [x for part in latencies for x in part]
    return Cell(operation, concurrency, latencies_, wall, cpu, workers)


def bare_app() -> FastAPI:
    """Return the bare FastAPI app: a small JSON ``GET`` (from a ``def`` and from an ``async def``
    endpoint) and a 1 KiB body ``POST``."""
    app = FastAPI()

    @app.get("/small")
    def small() -> dict[str, Any]:
        return {"id": "main", "commit_id": "0" * 64}

    @app.get("/small-async")
    async def small_async() -> dict[str, Any]:
        return {"id": "main", "commit_id": "0" * 64}

    @app.post("/upload", status_code=201)
    async def upload(request: Request) -> dict[str, Any]:
        body = await request.body()
        return {"path": "upload", "size_bytes": len(body)}

    return app


def serve_bare(port: int, log_level: str) -> int:
    """Serve :func:`bare_app` on 127.0.0.1 with ``lakemirror server``'s uvicorn options."""
    import uvicorn

    uvicorn.run(bare_app(), host="127.0.0.1", port=port, log_level=log_level, **uvicorn_options())
    return 0


# An idle pooled connection is dropped by the client before the server's keep-alive timeout
# (server.keep_alive_timeout, 5 s) closes it: with both at 5 s, a request sent on a connection
# idle since the previous cell could meet the server's close and be reset.
_LIMITS = httpx.Limits(keepalive_expiry=2.0)


@contextmanager
def _clients(
    url: str, count: int, auth: tuple[str, str] | None = None
) -> Iterator[list[httpx.Client]]:
    with ExitStack() as stack:
        yield [
            stack.enter_context(
                httpx.Client(base_url=url, auth=auth, timeout=REQUEST_TIMEOUT, limits=_LIMITS)
            )
            for _ in range(count)
        ]


def _populate(clients: Sequence[httpx.Client]) -> None:
    """Create the repository with 1,000 committed 1 KiB objects under ``list/``."""
    body = {"name": REPO, "storage_namespace": f"local://{REPO}", "default_branch": "main"}
    check(clients[0].post(f"{API}/repositories", json=body), 201)
    url = f"{API}/repositories/{REPO}/branches/main/objects"
    paths = iter(range(OBJECTS))
    lock = threading.Lock()
    errors: list[BaseException] = []

    def upload(client: httpx.Client) -> None:
        while not errors:
            with lock:
                i = next(paths, None)
            if i is None:
                return
            path = list_path(i)
            try:
                check(client.post(url, params={"path": path}, content=payload(path)), 201)
            except Exception as exc:
                errors.append(exc)

    threads = [threading.Thread(target=upload, args=(c,), daemon=True) for c in clients]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise SystemExit(f"populating the repository: {errors[0]}")
    commit = f"{API}/repositories/{REPO}/branches/main/commits"
    check(clients[0].post(commit, json={"message": f"{OBJECTS} objects"}), 201)


def machine() -> str:
    """Return a one-line description of this machine, Python and the HTTP stack."""
    import fastapi
    import uvicorn

    return describe(
        ("FastAPI", fastapi.__version__),
        ("uvicorn", uvicorn.__version__),
        ("httpx", httpx.__version__),
    )


def _target(cell: Cell) -> str:
    limit = {"object": OBJECT_TARGET_MS, "branch": BRANCH_TARGET_MS}.get(cell.operation.kind)
    if limit is None:
        return "-"
    verdict = "met" if cell.percentile_ms(90) < limit else "missed"
    return f"< {limit:.0f} ms: {verdict}"


def _row(cell: Cell, bare: dict[tuple[str, int], Cell]) -> list[str]:
    p50 = cell.percentile_ms(50)
    base = bare.get((cell.operation.bare, cell.concurrency))
    if cell.operation.kind == "bare" or base is None:
        base_p50, ratio = "-", "-"
    else:
        base_p50 = f"{base.percentile_ms(50):.2f}"
        ratio = f"{p50 / base.percentile_ms(50):.1f}x"
    return [
        cell.operation.name,
        str(cell.workers),
        str(cell.concurrency),
        f"{len(cell.latencies):,}",
        f"{p50:.2f}",
        f"{cell.percentile_ms(90):.2f}",
        f"{cell.throughput:,.0f}",
        "-" if cell.cpu_ms is None else f"{cell.cpu_ms:.2f}",
        base_p50,
        ratio,
        _target(cell),
    ]


def format_table(cells: Sequence[Cell]) -> str:
    """Return the cells as a Markdown table, each server row beside its bare baseline."""
    bare = {(c.operation.bare, c.concurrency): c for c in cells if c.operation.kind == "bare"}
    return markdown(COLUMNS, [_row(c, bare) for c in cells])


def commit_only(cells: Sequence[Cell]) -> list[str]:
    """Return, per server and concurrency, a commit's server CPU without its staging upload.

    The commit cell's CPU includes the untimed upload before each commit; the upload cell,
    measured in the same run on the same server, costs what that upload costs, so the
    difference is the commit's own CPU (the figure issue 14's target is set on).
    """
    found = {(c.operation.name, c.workers, c.concurrency): c for c in cells}
    lines = []
    for (name, workers, concurrency), commit in found.items():
        upload = found.get((Upload.name, workers, concurrency))
        if name != Commit.name or upload is None:
            continue
        if commit.cpu_ms is None or upload.cpu_ms is None:
            continue
        lines.append(
            f"commit 1 change without its upload ({workers} worker(s), concurrency "
            f"{concurrency}): {commit.cpu_ms - upload.cpu_ms:.2f} server CPU ms/req "
            f"(commit {commit.cpu_ms:.2f} - upload {upload.cpu_ms:.2f})"
        )
    return lines


def format_workers_table(cells: Sequence[Cell], workers: Sequence[int]) -> str:
    """Return each server operation's throughput at each worker count, and the gain."""
    first = workers[0]
    header = [
        "operation",
        "conc.",
        *(f"req/s, {n} worker{'s' if n > 1 else ''}" for n in workers),
        *(f"{n} vs {first}" for n in workers[1:]),
        *(f"CPU ms/req, {n}" for n in workers),
    ]
    found = {(c.operation.name, c.concurrency, c.workers): c for c in cells}
    body = []
    for name, concurrency in dict.fromkeys(
        (c.operation.name, c.concurrency) for c in cells if c.operation.kind != "bare"
    ):
        row = [found[(name, concurrency, n)] for n in workers]
        body.append(
            [
                name,
                str(concurrency),
                *(f"{c.throughput:,.0f}" for c in row),
                *(f"{c.throughput / row[0].throughput:.2f}x" for c in row[1:]),
                *("-" if c.cpu_ms is None else f"{c.cpu_ms:.2f}" for c in row),
            ]
        )
    return markdown(header, body)


def _log(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


def _spread(clients: Sequence[httpx.Client]) -> list[int]:
    """Return how many of the clients' keep-alive connections each worker holds, most first."""
    counts: dict[str, int] = {}
    for client in clients:
        worker = check(client.get("/healthz"), 200).headers.get(WORKER_HEADER, "only")
        counts[worker] = counts.get(worker, 0) + 1
    return sorted(counts.values(), reverse=True)


@dataclass
class Run:
    """The cells of a run, and how each server's connections were spread over its workers."""

    cells: list[Cell]
    spread: dict[int, list[int]]


def _operations(seed: int) -> list[Operation]:
    return [Stat(seed), Upload(), Read(seed + 1), ListPage(), GetBranch(), CreateBranch(), Commit()]


def run(
    requests: int,
    concurrencies: Sequence[int],
    log_level: str,
    seed: int,
    workers: Sequence[int] = DEFAULT_WORKERS,
) -> Run:
    """Start the servers, measure every cell, stop the servers; return the cells.

    Every server (one per worker count) runs for the whole measurement, and the cells of one
    operation at one concurrency are measured back to back on each, so a change in the
    machine's load between cells touches every worker count alike.
    """
    most = max(concurrencies)
    cells: list[Cell] = []
    spread: dict[int, list[int]] = {}
    with tempfile.TemporaryDirectory(prefix="bench-api-") as name, ExitStack() as stack:
        tmp = Path(name)
        bare_url, bare_pid = stack.enter_context(bare_server(tmp, log_level))
        bare_clients = stack.enter_context(_clients(bare_url, most))
        servers: dict[int, tuple[int, list[httpx.Client], list[Operation]]] = {}
        for n in workers:
            url, key, pid = stack.enter_context(lakemirror_server(tmp, log_level, n))
            clients = stack.enter_context(_clients(url, most, key))
            # one connection after the other, as clients arriving over time do: a burst of
            # connections on an idle server tends to land on one worker
            spread[n] = _spread(clients)
            _log(f"{n} worker(s): populating {REPO!r} with {OBJECTS:,} objects")
            _populate(clients)
            servers[n] = (pid, clients, _operations(seed))
        for concurrency in concurrencies:
            for op in (BareGet(), BareGetAsync(), BarePost()):
                _log(f"{op.name} at concurrency {concurrency}")
                cells.append(run_cell(op, bare_clients, concurrency, requests, bare_pid))
        for concurrency in concurrencies:
            for k in range(len(_operations(seed))):
                for n, (pid, clients, ops) in servers.items():
                    _log(f"{n} worker(s): {ops[k].name} at concurrency {concurrency}")
                    cells.append(run_cell(ops[k], clients, concurrency, requests, pid, n))
    order = {op: k for k, op in enumerate(dict.fromkeys(c.operation.name for c in cells))}
    cells.sort(key=lambda c: (order[c.operation.name], c.workers, c.concurrency))
    return Run(cells, spread)


def _counts(values: Sequence[str]) -> list[int]:
    return sorted({int(v) for value in values for v in value.split(",") if v.strip()})


def main(argv: Sequence[str] | None = None) -> int:
    """Run the benchmark and print the table."""
    parser = argparse.ArgumentParser(
        prog="python -m bench.api",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--requests", type=int, default=DEFAULT_REQUESTS, help="timed requests per cell"
    )
    parser.add_argument(
        "--concurrency",
        type=int,
        nargs="+",
        default=list(DEFAULT_CONCURRENCY),
        help="client threads (one cell per value)",
    )
    parser.add_argument(
        "--workers",
        nargs="+",
        default=[",".join(map(str, DEFAULT_WORKERS))],
        metavar="N[,N...]",
        help="server.workers of the server, one server run per value (e.g. 1,2)",
    )
    parser.add_argument(
        "--log-level", default="warning", choices=LOG_LEVELS, help="uvicorn's, for both servers"
    )
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument("--serve-bare", type=int, metavar="PORT", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.serve_bare is not None:
        return serve_bare(args.serve_bare, args.log_level)
    try:
        workers = _counts(args.workers)
    except ValueError:
        parser.error("--workers takes positive whole numbers, e.g. 1,2")
    if args.requests < 1 or any(c < 1 for c in args.concurrency) or min(workers) < 1:
        parser.error("--requests, --concurrency and --workers must be positive")
    concurrencies = sorted(set(args.concurrency))
    started, load = time.perf_counter(), os.getloadavg()[0]
    result = run(args.requests, concurrencies, args.log_level, args.seed, workers)
    print(f"machine: {machine()}")
    print(
        f"command: python -m bench.api --requests {args.requests} "
        f"--concurrency {' '.join(map(str, concurrencies))} "
        f"--workers {','.join(map(str, workers))} --log-level {args.log_level}"
    )
    most = max(concurrencies)
    spread = "; ".join(
        f"{n} worker{'s' if n > 1 else ''}: {'/'.join(map(str, counts))}"
        for n, counts in result.spread.items()
    )
    for note in (
        "servers: lakemirror server (embedded SQLite + local disk, HTTP Basic auth; "
        f"one server per server.workers value: {', '.join(map(str, workers))}) and a bare "
        "FastAPI app (one process), under uvicorn on 127.0.0.1 with the same options "
        f"({', '.join(f'{k}={v!r}' for k, v in UVICORN_OPTIONS.items())}, "
        f"log_level={args.log_level!r})",
        f"client: one thread per unit of concurrency ({most} at most), one keep-alive "
        "httpx.Client each, on the same machine as the servers",
        f"connections per worker ({most} connections): {spread}",
        f"commit: one branch per thread ({most} branches at concurrency {most}, so no two "
        "commits contend for one branch); each commits one 1 KiB upload staged just before, "
        "untimed",
        "p50 ratio: p50 over the bare endpoint's p50 at the same concurrency (bare GET for "
        "stat, read, list and get branch; bare POST for upload, create branch and commit)",
        "server CPU ms/req: the server's user + system CPU (all its processes) during the "
        "cell per timed request (for commits it includes the staging upload)",
    ):
        print(note)
    print()
    print(format_table(result.cells))
    print()
    for line in commit_only(result.cells):
        print(line)
    if len(workers) > 1:
        print()
        print(format_workers_table(result.cells, workers))
    print()
    print(run_footer(started, load))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
