"""The web UI's first pages: server time to first byte and page weight, at any repository size.

Run ``python -m bench.ui`` (options: ``--objects 1000,1000000``, ``--commits 50000``,
``--requests``, ``--log-level``). It writes, through the core and before the server starts
(:mod:`bench.ui_data`), an ``objects-<n>`` repository per ``--objects`` count (``bench.core``'s
layout: ``tables/<table>/date=YYYY-MM-DD/part-NNNNN.parquet``) and a ``history`` repository
whose ``main`` has ``--commits`` commits, then starts ``lakemirror server`` on that data
directory (embedded SQLite + ``local://``, one worker, :func:`bench.processes.lakemirror_server`),
signs in with the administrator's key (``POST /api/v1/auth/login``, whose session cookie every
page request then carries) and opens a pull request ``feature`` → ``main`` in each
``objects-<n>`` repository through the API.

Pages, each on every ``objects-<n>`` repository (the commits and commit pages also on
``history``): the repositories list; a repository (``/ui/repositories/<r>``, its redirect and
the Objects tab it lands on, timed together); Objects at ``main`` at the top, in a table's folder
(its date partitions: 100 folders a page) and in a date partition (100 objects); Branches;
Commits of ``main``; a commit (an ``objects-<n>`` repository's bulk commit, whose diff against
its parent adds every object; the middle commit of ``history``, one change); Tags; Compare
``main`` with ``feature``; the pull requests and one pull request.

After one untimed pass (which checks every page answers 200 with what it must show), each
round requests every page once, in the same order, ``--requests`` rounds: the sizes of a page
are measured interleaved (A, B, A, B...), so a change in the machine's load touches all alike.
Per page it prints the time of its first request (the untimed pass: the server's caches cold),
the server time to first byte as the client sees it (wall, p50 and p90: the UI renders a page
whole before its first byte, so this is the page's server time plus the loopback), the server
process's CPU per request (``/proc/<pid>/stat``, user + system, all its
threads, read before and after each request), p50 against the smallest repository's, and the
≤ 50 ms target (DESIGN.md §9) checked on p90. Then each page's weight on a cold load (a new
client: the HTML and every asset it references, as transferred; :mod:`bench.page_weight`)
against the ≤ 300 KB target.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlencode

import httpx

from bench.api import LOG_LEVELS, machine
from bench.machine import run_footer
from bench.page_weight import PageWeight, page_weight
from bench.processes import lakemirror_server
from bench.procfs import process_cpu
from bench.tables import markdown
from bench.ui_data import (
    HISTORY,
    Built,
    build,
    deep_folder,
    objects_repository,
    table_folder,
)

__all__ = ["TIME_COLUMNS", "WEIGHT_COLUMNS", "Target", "main", "targets"]

DEFAULT_OBJECTS = (1_000, 1_000_000)
DEFAULT_COMMITS = 50_000
DEFAULT_REQUESTS = 50
TARGET_MS = 50.0
TARGET_BYTES = 300_000
REQUEST_TIMEOUT = 120.0
PULL_TITLE = "Merge feature into main"

TIME_COLUMNS = (
    "page",
    "repository",
    "requests",
    "1st request ms",
    "TTFB p50 ms",
    "TTFB p90 ms",
    "server CPU ms/req",
    "p50 vs smallest",
    "≤ 50 ms (p90)",
)
WEIGHT_COLUMNS = (
    "page",
    "repository",
    "HTML KB",
    "assets",
    "assets KB",
    "transferred KB",
    "encoding",
    "≤ 300 KB",
)


@dataclass(frozen=True, slots=True)
class Target:
    """One page of one repository.

    Attributes:
        page: What the page is (rows of one page compare across repositories).
        repository: Which repository, as the table says it (``1,000 objects``).
        url: The page's path and query.
        expect: Text the page must hold (checked on the untimed pass).
    """

    page: str
    repository: str
    url: str
    expect: str


@dataclass
class Samples:
    """The timed requests of one target."""

    target: Target
    first: float = 0.0
    ttfb: list[float] = field(default_factory=list)
    cpu: list[float] = field(default_factory=list)

    def percentile_ms(self, q: float) -> float:
        """Return the ``q``-th percentile (nearest rank) of the times to first byte, in ms."""
        ordered = sorted(self.ttfb)
        rank = max(1, -(-len(ordered) * q // 100))
        return ordered[int(rank) - 1] * 1000.0

    @property
    def cpu_ms(self) -> float | None:
        """Return the server's mean CPU milliseconds per request (``None``: unreadable)."""
        return statistics.fmean(self.cpu) * 1000.0 if self.cpu else None


def _ui(repository: str, tab: str = "", **query: str) -> str:
    path = f"/ui/repositories/{repository}" + (f"/{tab}" if tab else "")
    return f"{path}?{urlencode(query)}" if query else path


def targets(built: Built, pulls: dict[str, str]) -> list[Target]:
    """Return every page measured, the sizes of one page next to each other (smallest first).

    ``pulls`` maps each ``objects-<n>`` repository to the ID of its pull request.
    """
    sized = [(r, f"{r.objects:,} objects") for r in built.repositories]
    history = f"{built.commits:,} commits"
    rows: list[Target] = [
        Target(
            "repositories",
            "all",
            "/ui/repositories",
            objects_repository(built.repositories[0].objects),
        )
    ]

    def each(page: str, tab: str, expect: str, **query: str) -> None:
        rows.extend(Target(page, label, _ui(r.name, tab, **query), expect) for r, label in sized)

    rows += [Target("repository → objects", label, _ui(r.name), "tables/") for r, label in sized]
    each("objects, top", "objects", "tables/", ref="main")
    each(
        "objects, a table's folder", "objects", "date=2020-01-01/", ref="main", path=table_folder()
    )
    each(
        "objects, a date partition", "objects", "part-00000.parquet", ref="main", path=deep_folder()
    )
    each("branches", "branches", "feature")
    each("commits", "commits", "objects", ref="main")
    rows.append(Target("commits", history, _ui(HISTORY, "commits", ref="main"), "change "))
    rows += [
        Target("commit", label, _ui(r.name, f"commits/{r.bulk_commit}"), "tables/")
        for r, label in sized
    ]
    rows.append(
        Target("commit", history, _ui(HISTORY, f"commits/{built.middle_commit}"), "tables/")
    )
    each("tags", "tags", "v1")
    each("compare", "compare", "tables/", ref="main", compare="feature")
    each("pull requests", "pulls", PULL_TITLE)
    rows += [
        Target("pull request", label, _ui(r.name, f"pulls/{pulls[r.name]}"), PULL_TITLE)
        for r, label in sized
    ]
    return rows


def _check(response: httpx.Response, *expected: int) -> httpx.Response:
    if response.status_code not in expected:
        raise SystemExit(
            f"{response.request.method} {response.request.url} answered "
            f"{response.status_code}: {response.text[:300]}"
        )
    return response


def sign_in(client: httpx.Client, key: tuple[str, str]) -> None:
    """Sign ``client`` in: lakeFS's login, whose session cookie the client then keeps."""
    body = {"access_key_id": key[0], "secret_access_key": key[1]}
    _check(client.post("/api/v1/auth/login", json=body), 200)
    if not client.cookies:
        raise SystemExit("POST /api/v1/auth/login set no session cookie")


def open_pulls(client: httpx.Client, built: Built) -> dict[str, str]:
    """Open a pull request ``feature`` → ``main`` in each ``objects-<n>`` repository."""
    found = {}
    for r in built.repositories:
        body = {"title": PULL_TITLE, "source_branch": "feature", "destination_branch": "main"}
        answer = _check(client.post(f"/api/v1/repositories/{r.name}/pulls", json=body), 201)
        found[r.name] = str(answer.json()["id"])
    return found


def fetch(client: httpx.Client, pid: int, url: str) -> tuple[float, float | None, httpx.Response]:
    """Request ``url`` (following redirects); return the time to the last answer's first byte,
    the server's CPU seconds meanwhile (``None``: unreadable) and that answer."""
    cpu_before = process_cpu(pid)
    start = time.perf_counter()
    while True:
        with client.stream("GET", url) as response:
            ttfb = time.perf_counter() - start
            response.read()
        if not response.is_redirect:
            break
        url = response.headers["location"]
    cpu_after = process_cpu(pid)
    cpu = None if cpu_before is None or cpu_after is None else cpu_after - cpu_before
    return ttfb, cpu, response


def measure(
    client: httpx.Client, pid: int, pages: Sequence[Target], rounds: int
) -> tuple[list[Samples], list[float]]:
    """Check every page once, then time ``rounds`` rounds of them; return samples and loads.

    The check is each page's first request since the server started (its caches cold), and
    its time is kept apart.
    """
    samples = [Samples(t) for t in pages]
    for s in samples:
        s.first, _, response = fetch(client, pid, s.target.url)
        _check(response, 200)
        if s.target.expect not in response.text:
            raise SystemExit(f"{s.target.url} does not show {s.target.expect!r}")
    loads = []
    for k in range(rounds):
        _log(f"round {k + 1} of {rounds}")
        for s in samples:
            ttfb, cpu, response = fetch(client, pid, s.target.url)
            _check(response, 200)
            s.ttfb.append(ttfb)
            if cpu is not None:
                s.cpu.append(cpu)
        loads.append(os.getloadavg()[0])
    return samples, loads


def _verdict(ok: bool) -> str:
    return "met" if ok else "missed"


def format_times(samples: Sequence[Samples]) -> str:
    """Return the times as a Markdown table, each page beside its smallest repository's."""
    smallest: dict[str, Samples] = {}
    body = []
    for s in samples:
        first = smallest.setdefault(s.target.page, s)
        p50, p90 = s.percentile_ms(50), s.percentile_ms(90)
        body.append(
            [
                s.target.page,
                s.target.repository,
                f"{len(s.ttfb):,}",
                f"{s.first * 1000.0:.1f}",
                f"{p50:.1f}",
                f"{p90:.1f}",
                "-" if s.cpu_ms is None else f"{s.cpu_ms:.1f}",
                "-" if first is s else f"{p50 / first.percentile_ms(50):.2f}x",
                _verdict(p90 <= TARGET_MS),
            ]
        )
    return markdown(TIME_COLUMNS, body)


def _kb(size: int) -> str:
    return f"{size / 1000:.1f}"


def format_weights(weights: Sequence[tuple[Target, PageWeight]]) -> str:
    """Return each page's cold-load weight as a Markdown table."""
    body = [
        [
            t.page,
            t.repository,
            _kb(w.html_bytes),
            str(len(w.assets)),
            _kb(w.asset_bytes),
            _kb(w.total),
            w.encoding,
            _verdict(w.total <= TARGET_BYTES and not w.missing),
        ]
        for t, w in weights
    ]
    return markdown(WEIGHT_COLUMNS, body)


def weigh(
    url: str, cookies: httpx.Cookies, pages: Sequence[Target]
) -> list[tuple[Target, PageWeight]]:
    """Load each page cold (a new client with only the session's cookie); return the weights."""
    found = []
    for target in pages:
        with httpx.Client(base_url=url, cookies=cookies, timeout=REQUEST_TIMEOUT) as cold:
            found.append((target, page_weight(cold, target.url)))
    return found


@dataclass
class Run:
    """A whole run: what was built, the timings, the weights and the load during it."""

    built: Built
    samples: list[Samples]
    weights: list[tuple[Target, PageWeight]]
    loads: list[float]


def run(sizes: list[int], commits: int, rounds: int, log_level: str) -> Run:
    """Build the repositories, start the server, measure; return what was measured."""
    with tempfile.TemporaryDirectory(prefix="bench-ui-") as name:
        tmp = Path(name)
        _log(f"writing {', '.join(f'{n:,}' for n in sizes)} objects and {commits:,} commits")
        built = build(tmp / "data-1", sizes, commits)
        with lakemirror_server(tmp, log_level) as (url, key, pid):
            with httpx.Client(base_url=url, timeout=REQUEST_TIMEOUT) as client:
                sign_in(client, key)
                pages = targets(built, open_pulls(client, built))
                samples, loads = measure(client, pid, pages, rounds)
                _log("weighing each page on a cold load")
                weights = weigh(url, client.cookies, pages)
    return Run(built, samples, weights, loads)


def _log(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


def _counts(value: str) -> list[int]:
    return sorted({int(v) for v in value.split(",") if v.strip()})


def main(argv: Sequence[str] | None = None) -> int:
    """Run the benchmark and print its tables."""
    parser = argparse.ArgumentParser(
        prog="python -m bench.ui",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--objects",
        default=",".join(map(str, DEFAULT_OBJECTS)),
        metavar="N[,N...]",
        help="objects of each objects-<n> repository",
    )
    parser.add_argument(
        "--commits", type=int, default=DEFAULT_COMMITS, help="commits of the history's main"
    )
    parser.add_argument(
        "--requests", type=int, default=DEFAULT_REQUESTS, help="timed requests of each page"
    )
    parser.add_argument("--log-level", default="warning", choices=LOG_LEVELS, help="uvicorn's")
    args = parser.parse_args(argv)
    try:
        sizes = _counts(args.objects)
    except ValueError:
        parser.error("--objects takes positive whole numbers, e.g. 1000,1000000")
    if not sizes or min(sizes) < 1 or args.requests < 1 or args.commits < 3:
        parser.error("--objects and --requests must be positive, --commits at least 3")
    started, load = time.perf_counter(), os.getloadavg()[0]
    result = run(sizes, args.commits, args.requests, args.log_level)
    built = result.built
    print(f"machine: {machine()}")
    print(
        f"command: python -m bench.ui --objects {','.join(map(str, sizes))} "
        f"--commits {args.commits} --requests {args.requests} --log-level {args.log_level}"
    )
    for note in (
        "server: lakemirror server, embedded SQLite + local://, one worker, signed in with "
        "lakeFS's session cookie (POST /api/v1/auth/login)",
        "built before the server started: "
        + "; ".join(f"{r.name} in {r.seconds:.1f} s" for r in built.repositories)
        + f"; {HISTORY} ({built.commits:,} commits) in {built.history_seconds:.1f} s",
        "client: one keep-alive httpx.Client on the same machine; every page once a round, "
        f"{args.requests} rounds after one untimed pass",
        "TTFB: client-side wall time to the page's first byte (the repository row: its "
        "redirect and the page it lands on); 1st request: the untimed pass, each page's first "
        "request since the server started; server CPU: /proc/<pid>/stat around each request",
        f"1-minute load average during the rounds: {min(result.loads):.2f} to "
        f"{max(result.loads):.2f} (mean {statistics.fmean(result.loads):.2f})",
    ):
        print(note)
    print()
    print(format_times(result.samples))
    print()
    print(format_weights(result.weights))
    missing = [m for _, w in result.weights for m in w.missing]
    if missing:
        print()
        print("assets that did not load: " + "; ".join(missing))
    print()
    print(run_footer(started, load))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
