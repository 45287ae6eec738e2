"""Benchmark of what lakeFS actions cost a commit, on the embedded default (SQLite KV + local).

Run ``python -m bench.actions`` (options: ``--commits``, ``--repeat``). Each case commits
``--commits`` times one staged object onto ``main`` and reports the median CPU time per commit
of the process (every thread, so post-event hooks running in the background count) and its
ratio to the case without hooks, measured in the same run:

- ``no hooks``: ``actions.enabled=false``;
- ``enabled, no files``: no ``_lakefs_actions/`` at all (every event lists an empty prefix);
- ``enabled, 1 other file``: one action on ``pre-delete-tag`` (listed and matched, never run);
- ``pre-commit webhook``: one action calling a webhook on 127.0.0.1 before each commit (its
  wall time per commit is reported too: the hook runs in the request).

Staging (the uploads) is not part of a commit's time.
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from bench.machine import describe
from mirror.actions import ActionsService
from mirror.core.embedded import open_embedded

__all__ = ["CASES", "main", "measure"]

CASES = ("no hooks", "enabled, no files", "enabled, 1 other file", "pre-commit webhook")


@contextmanager
def _webhook() -> Iterator[str]:
    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            self.rfile.read(int(self.headers.get("Content-Length", "0")))
            self.send_response(200)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, format: str, *args: object) -> None:
            return

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}/hook"
    finally:
        httpd.shutdown()
        httpd.server_close()


def _action(event: str, url: str) -> bytes:
    return (
        f"name: Bench\non:\n  {event}:\nhooks:\n"
        f"  - {{id: hook1, type: webhook, properties: {{url: '{url}'}}}}\n"
    ).encode()


def measure(case: str, commits: int, url: str) -> tuple[float, float]:
    """Return the CPU and wall seconds per commit of one case, in a fresh repository."""
    with tempfile.TemporaryDirectory() as tmp:
        catalog = open_embedded(tmp)
        catalog.create_repository("bench", "local://bench")
        if case == "enabled, 1 other file":
            catalog.upload_object(
                "bench", "main", "_lakefs_actions/a.yaml", _action("pre-delete-tag", url)
            )
        if case == "pre-commit webhook":
            catalog.upload_object(
                "bench", "main", "_lakefs_actions/a.yaml", _action("pre-commit", url)
            )
        if case != "no hooks":
            catalog.commit("bench", "main", "actions", allow_empty=True)
            service = ActionsService(catalog)
            catalog.hooks = service
        cpu = wall = 0.0
        for i in range(commits):
            catalog.upload_object("bench", "main", f"data/{i:06d}", b"x" * 100)
            c0, w0 = time.process_time(), time.perf_counter()
            catalog.commit("bench", "main", f"commit {i}")
            cpu += time.process_time() - c0
            wall += time.perf_counter() - w0
        if case != "no hooks":
            c0 = time.process_time()
            service.close(wait=True)  # background post-hooks count against the commits
            cpu += time.process_time() - c0
        catalog.kv.close()
    return cpu / commits, wall / commits


def main(argv: Sequence[str] | None = None) -> int:
    """Print one table row per case."""
    parser = argparse.ArgumentParser(prog="python -m bench.actions")
    parser.add_argument("--commits", type=int, default=200)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args(argv)
    print(describe())
    print(f"load average (1 min) at start: {os.getloadavg()[0]:.2f}")
    with _webhook() as url:
        results = {
            case: [measure(case, args.commits, url) for _ in range(args.repeat)] for case in CASES
        }
    base = statistics.median(cpu for cpu, _ in results["no hooks"])
    print("| case | CPU ms/commit | ratio | wall ms/commit |")
    print("|---|---|---|---|")
    for case in CASES:
        cpu = statistics.median(c for c, _ in results[case])
        wall = statistics.median(w for _, w in results[case])
        print(f"| {case} | {cpu * 1e3:.2f} | {cpu / base:.2f} | {wall * 1e3:.2f} |")
    print(f"load average (1 min) at end: {os.getloadavg()[0]:.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
