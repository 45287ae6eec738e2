"""A flood at many times a server's capacity: what it still serves, what it refuses, its memory.

Run ``python -m bench.overload`` (options: ``--max-concurrent``, ``--max-queued``, ``--workers``,
``--factor``, ``--peak-clients``, ``--peak-seconds``, ``--flood-seconds``, ``--retry``,
``--event-loop``, ``--objects``, ``--warm-up``, ``--settle``). It starts ``lakemirror server``
(embedded default, the administrator's key, ``server.max_concurrent_requests`` and
``server.max_queued_requests`` as given: the defaults are the server's) as a separate process on
a free port of 127.0.0.1, stores 1,000 committed 1 KiB objects, then runs two phases of
closed-loop clients, each client a keep-alive connection sending ``GET /refs/main/objects`` of
one of the objects (the read most clients send most) again as soon as it has its answer:

1. **peak**: a normal load, for ``--peak-seconds``: as many clients as the server serves at
   once plus half what it queues (``--peak-clients``; times the workers), so that it always has
   work and never refuses any: the throughput of admitted requests at its best;
2. **flood**: ``--factor`` (10) times the server's capacity (what it serves plus what it
   queues, per worker, times the workers) for ``--flood-seconds``. A client answered 503 waits
   ``Retry-After`` before its next request, as S3 SDKs back off (``--retry immediate``: sends
   again at once, a client that ignores it).

The clients are raw asyncio sockets (no HTTP library: the client must not be the bottleneck on
the same cores) in a process of their own. Meanwhile the bench process probes ``/healthz`` on a
new connection every 0.25 s (as a kubelet does) and samples the server's RSS and CPU (its whole
process tree). It prints, per phase, admitted requests per second and per CPU second of the
server, their latency, the 503s and every other error; the flood's admitted throughput against
the peak's (target: at least 80 %), also per CPU second (what it would be on cores of its own,
whatever else runs on shared ones); the server's RSS before, at most during and after the
flood; and the health checks' answers and latency. ``--event-loop`` runs the server on asyncio's
loop or uvloop (``mirror.cli.serving.EVENT_LOOP_ENV``) to compare them.
"""

from __future__ import annotations

import argparse
import base64
import os
import socket
import statistics
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from bench.flood import (
    API,
    CONNECTS_PER_SECOND,
    DEFAULT_OBJECTS,
    DEFAULT_WARM_UP,
    REPO,
    Phase,
    run_phase,
)
from bench.machine import run_footer
from bench.procfs import tree_cpu, tree_rss

# the clients' process imports this module again (multiprocessing's spawn): what only the bench
# process needs (the server's stack, an HTTP library) is imported where it is used

__all__ = ["Phase", "main"]

BODY = b"o" * 1024
TARGET = 0.80
HEALTH_INTERVAL = 0.25
HEALTH_TIMEOUT = 10.0
DEFAULT_SETTLE = 3.0
"""Seconds after the flood before the server's RSS is read again."""


# what the bench process watches meanwhile


@dataclass
class Watch:
    """RSS samples and health checks taken while a phase runs."""

    rss: list[int] = field(default_factory=list)
    cpu: list[tuple[float, float]] = field(default_factory=list)
    """``(time.monotonic(), CPU seconds of the server's process tree)`` samples."""
    health: list[float] = field(default_factory=list)
    """The latency in seconds of each probe answered 200."""
    failures: Counter[str] = field(default_factory=Counter)
    """Probes not answered 200, by what happened."""


def _probe(address: tuple[str, int]) -> tuple[float | None, str]:
    started = time.monotonic()
    try:
        with socket.create_connection(address, timeout=HEALTH_TIMEOUT) as sock:
            sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: bench\r\nConnection: close\r\n\r\n")
            answer = b""
            while chunk := sock.recv(4096):
                answer += chunk
    except TimeoutError:
        return None, f"no answer within {HEALTH_TIMEOUT:g} s"
    except OSError as exc:
        return None, type(exc).__name__
    if not answer.startswith(b"HTTP/1.1 200 "):
        return None, answer.split(b"\r\n", 1)[0].decode("latin-1") or "empty answer"
    return time.monotonic() - started, ""


def watch(pid: int, address: tuple[str, int], stop: threading.Event, into: Watch) -> None:
    """Sample the server's RSS and CPU and probe its health until ``stop`` is set."""
    # enough threads that every probe starts on time, however long the others take
    threads = int(HEALTH_TIMEOUT / HEALTH_INTERVAL) + 2
    with ThreadPoolExecutor(max_workers=threads) as pool:
        probes = []
        while not stop.wait(HEALTH_INTERVAL):
            probes.append(pool.submit(_probe, address))
            into.rss.append(tree_rss(pid))
            cpu = tree_cpu(pid)
            if cpu is not None:
                into.cpu.append((time.monotonic(), cpu))
        for probe in probes:
            latency, failure = probe.result()
            if latency is None:
                into.failures[failure] += 1
            else:
                into.health.append(latency)


def _watched(
    pid: int, address: tuple[str, int], phase: Phase, auth: str, retry: str
) -> tuple[Phase, Watch]:
    seen = Watch()
    stop = threading.Event()
    watcher = threading.Thread(target=watch, args=(pid, address, stop, seen))
    watcher.start()
    try:
        result = run_phase(address, auth, phase, retry, pid)
    finally:
        stop.set()
        watcher.join()
    result.server_cpu = window_cpu(seen.cpu, result.window)
    return result, seen


def window_cpu(samples: Sequence[tuple[float, float]], window: tuple[float, float]) -> float | None:
    """Return the CPU seconds between the samples nearest the window's ends (``None``: none)."""
    if len(samples) < 2:
        return None
    first = min(samples, key=lambda s: abs(s[0] - window[0]))
    last = min(samples, key=lambda s: abs(s[0] - window[1]))
    if last[0] <= first[0]:
        return None
    # scaled to the window's length: the samples are a quarter second apart
    return (last[1] - first[1]) * (window[1] - window[0]) / (last[0] - first[0])


# the server


def _populate(url: str, key: tuple[str, str], objects: int) -> None:
    import httpx

    with httpx.Client(base_url=url, auth=key, timeout=60) as http:
        body = {"name": REPO, "storage_namespace": f"local://{REPO}", "default_branch": "main"}
        http.post(f"{API}/repositories", json=body).raise_for_status()
        uploads = f"{API}/repositories/{REPO}/branches/main/objects"

        def upload(i: int) -> None:
            while True:
                answer = http.post(uploads, params={"path": f"o/{i:04d}"}, content=BODY)
                if answer.status_code != 503:
                    answer.raise_for_status()
                    return
                time.sleep(float(answer.headers.get("retry-after", "1")))

        with ThreadPoolExecutor(max_workers=4) as pool:
            list(pool.map(upload, range(objects)))
        commit = f"{API}/repositories/{REPO}/branches/main/commits"
        http.post(commit, json={"message": "objects"}).raise_for_status()


def _settled_rss(pid: int, seconds: float) -> int:
    time.sleep(seconds)  # the flood's connections close and their memory goes back
    return tree_rss(pid)


# the report


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value:,.1f}"


def _mib(value: int) -> str:
    return f"{value / (1 << 20):,.1f}"


def _share(cpu: float | None, wall: float) -> str:
    return "-" if cpu is None or wall <= 0 else f"{cpu / wall:.0%}"


def _errors(phase: Phase) -> str:
    if not phase.errors:
        return "0"
    return ", ".join(f"{kind}: {n}" for kind, n in sorted(phase.errors.items()))


PHASE_COLUMNS = (
    "phase",
    "clients",
    "seconds",
    "admitted req/s",
    "p50 ms",
    "p99 ms",
    "503s",
    "other errors",
    "server CPU",
    "admitted per CPU s",
    "clients' CPU",
)
HEALTH_COLUMNS = ("phase", "/healthz answered", "p50 ms", "p99 ms", "max ms", "unanswered")
RSS_COLUMNS = ("server RSS", "MiB")


def phase_table(phases: Sequence[Phase]) -> str:
    """Return the phases as a Markdown table."""
    rows = [
        [
            p.name,
            f"{p.clients:,}",
            f"{p.seconds:g}",
            f"{p.rate:,.0f}",
            _ms(p.percentile_ms(50)),
            _ms(p.percentile_ms(99)),
            f"{p.refused:,}",
            _errors(p),
            _share(p.server_cpu, p.seconds),
            "-" if p.per_cpu_second is None else f"{p.per_cpu_second:,.0f}",
            _share(p.client_cpu, p.wall),
        ]
        for p in phases
    ]
    from bench.tables import markdown

    return markdown(PHASE_COLUMNS, rows)


def health_table(watches: Sequence[tuple[str, Watch]]) -> str:
    """Return the health probes of each phase as a Markdown table."""
    rows = []
    for name, seen in watches:
        answered = sorted(seen.health)
        p50 = statistics.median(answered) * 1000 if answered else None
        p99 = answered[max(0, -(-len(answered) * 99 // 100) - 1)] * 1000 if answered else None
        top = answered[-1] * 1000 if answered else None
        probes = len(answered) + sum(seen.failures.values())
        missed = ", ".join(f"{kind}: {n}" for kind, n in sorted(seen.failures.items()))
        rows.append(
            [name, f"{len(answered)}/{probes}", _ms(p50), _ms(p99), _ms(top), missed or "-"]
        )
    from bench.tables import markdown

    return markdown(HEALTH_COLUMNS, rows)


def verdict(peak: Phase, flood: Phase) -> list[str]:
    """Return the lines comparing the flood's admitted throughput with the peak's."""
    lines = []
    share = flood.rate / peak.rate if peak.rate else 0.0
    met = "met" if share >= TARGET else "missed"
    lines.append(
        f"admitted throughput during the flood: {share:.0%} of the peak's "
        f"(target >= {TARGET:.0%}: {met})"
    )
    if peak.per_cpu_second and flood.per_cpu_second:
        lines.append(
            "admitted requests per CPU second of the server during the flood: "
            f"{flood.per_cpu_second / peak.per_cpu_second:.0%} of the peak's (what the "
            "throughput would be on cores of its own: on shared ones, the server's share of CPU "
            "moves with the other processes' load)"
        )
    return lines


def _positive(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError("must be at least 1")
    return value


def main(argv: Sequence[str] | None = None) -> int:
    """Run the benchmark and print its tables."""
    from bench.api import machine
    from bench.processes import lakemirror_server
    from bench.tables import markdown
    from mirror.cli.serving import EVENT_LOOP_ENV
    from mirror.config import ServerSettings

    defaults = ServerSettings()
    parser = argparse.ArgumentParser(
        prog="python -m bench.overload",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--max-concurrent", type=_positive, default=defaults.max_concurrent_requests
    )
    parser.add_argument("--max-queued", type=int, default=defaults.max_queued_requests)
    parser.add_argument("--workers", type=_positive, default=1, help="server.workers")
    parser.add_argument("--factor", type=_positive, default=10, help="flood clients per capacity")
    parser.add_argument(
        "--peak-clients",
        type=_positive,
        help="clients of the peak phase (default: max-concurrent + max-queued / 2, per worker)",
    )
    parser.add_argument("--peak-seconds", type=float, default=10.0)
    parser.add_argument("--flood-seconds", type=float, default=30.0)
    parser.add_argument("--retry", choices=("after", "immediate"), default="after")
    parser.add_argument("--objects", type=_positive, default=DEFAULT_OBJECTS)
    parser.add_argument(
        "--settle", type=float, default=DEFAULT_SETTLE, help="seconds before the last RSS reading"
    )
    parser.add_argument(
        "--warm-up", type=float, default=DEFAULT_WARM_UP, help="seconds not counted per phase"
    )
    parser.add_argument(
        "--event-loop", choices=("asyncio", "uvloop"), help="the server's (default: its own)"
    )
    parser.add_argument("--log-level", default="warning")
    args = parser.parse_args(argv)
    if args.max_queued < 0 or args.peak_seconds <= 0 or args.flood_seconds <= 0:
        parser.error("--max-queued must be >= 0 and the phases' seconds positive")
    if args.warm_up < 0 or args.settle < 0 or args.objects > 10_000:
        parser.error("--warm-up and --settle must be >= 0, --objects at most 10000")
    started, load = time.perf_counter(), os.getloadavg()[0]
    peak_clients = args.peak_clients or (args.max_concurrent + args.max_queued // 2) * args.workers
    capacity = (args.max_concurrent + args.max_queued) * args.workers
    env = {
        "LAKEMIRROR_SERVER__MAX_CONCURRENT_REQUESTS": str(args.max_concurrent),
        "LAKEMIRROR_SERVER__MAX_QUEUED_REQUESTS": str(args.max_queued),
    }
    if args.event_loop:
        env[EVENT_LOOP_ENV] = args.event_loop
    with (
        tempfile.TemporaryDirectory(prefix="bench-overload-") as tmp,
        lakemirror_server(Path(tmp), args.log_level, args.workers, env) as (url, key, pid),
    ):
        host, port = url.removeprefix("http://").split(":")
        address = (host, int(port))
        auth = "Basic " + base64.b64encode(f"{key[0]}:{key[1]}".encode()).decode()
        _populate(url, key, args.objects)
        peak, peak_seen = _watched(
            pid,
            address,
            Phase("peak", peak_clients, args.peak_seconds, args.objects, args.warm_up),
            auth,
            args.retry,
        )
        before = _settled_rss(pid, min(args.settle, 1.0))
        flood_phase = Phase(
            f"flood ({args.factor}x capacity)",
            args.factor * capacity,
            args.flood_seconds,
            args.objects,
            args.warm_up,
        )
        flood, flood_seen = _watched(pid, address, flood_phase, auth, args.retry)
        after = _settled_rss(pid, args.settle)
    print(f"machine: {machine()}")
    print(
        f"command: python -m bench.overload --max-concurrent {args.max_concurrent} "
        f"--max-queued {args.max_queued} --workers {args.workers} --factor {args.factor} "
        f"--peak-clients {peak_clients} "
        f"--peak-seconds {args.peak_seconds:g} --flood-seconds {args.flood_seconds:g} "
        f"--retry {args.retry} --objects {args.objects} --warm-up {args.warm_up:g} "
        f"--settle {args.settle:g}"
        + (f" --event-loop {args.event_loop}" if args.event_loop else "")
    )
    for note in (
        f"server: lakemirror server (embedded SQLite + local disk, HTTP Basic), "
        f"{args.workers} worker(s), server.max_concurrent_requests={args.max_concurrent}, "
        f"server.max_queued_requests={args.max_queued}: capacity {capacity} "
        f"(served at once + queued, all workers)",
        f"request: GET {API}/repositories/{REPO}/refs/main/objects?path=o/NNNN, one of "
        f"{args.objects:,} committed 1 KiB objects; each client one keep-alive connection, "
        "its next request as soon as it has its answer",
        "503: "
        + (
            "the client waits Retry-After before its next request"
            if args.retry == "after"
            else "the client sends its next request at once"
        ),
        f"counted: answers in each phase's window, after the clients connected "
        f"({CONNECTS_PER_SECOND:,} a second) and {args.warm_up:g} s of warm-up; the clients: one "
        "process of raw asyncio sockets",
        f"health: GET /healthz on a new connection every {HEALTH_INTERVAL:g} s "
        f"(timeout {HEALTH_TIMEOUT:g} s); RSS: the server's process tree",
    ):
        print(note)
    print()
    print(phase_table([peak, flood]))
    print()
    for line in verdict(peak, flood):
        print(line)
    print()
    flood_rss = max(flood_seen.rss, default=0)
    print(
        markdown(
            RSS_COLUMNS,
            [
                ["before the flood", _mib(before)],
                ["at most during the flood", _mib(flood_rss)],
                [f"{args.settle:g} s after the flood", _mib(after)],
            ],
        )
    )
    print()
    print(health_table([("peak", peak_seen), ("flood", flood_seen)]))
    print()
    print(run_footer(started, load))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
