"""A worker slower to start than the supervisor's health check is waited for, not killed.

A new worker answers no health check until its interpreter has started and imported what it
runs; on a busy machine that takes longer than a check's 5 s. The supervisor gives a new worker
``WORKER_START_GRACE`` seconds to answer its first check, instead of killing it at the first
unanswered one and starting another that would be killed the same way, forever. Here each
worker's start is slowed by 6 s (:mod:`tests.integration.slow_start_server`).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import httpx

from mirror.api.app import WORKER_HEADER
from tests.e2e.regions import wait_for
from tests.integration.harness import ADMIN_KEY_ENV, ADMIN_SECRET_ENV, free_port, stop_process
from tests.integration.slow_start_server import SECONDS_ENV

SLOW = 6.0
WORKERS = 2


def _workers_answering(url: str, seen: set[str]) -> set[str]:
    """Ask ``/healthz`` on a few fresh connections; return every worker that answered so far."""
    for _ in range(4):
        try:
            with httpx.Client(timeout=2.0) as http:  # a new connection: any worker's socket
                seen.add(http.get(f"{url}/healthz").headers[WORKER_HEADER])
        except httpx.TransportError:
            pass  # no worker serves that socket yet: the connection waits in its backlog
    return seen


def test_workers_slower_to_start_than_a_health_check_are_not_killed(tmp_path: Path) -> None:
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    env = {k: v for k, v in os.environ.items() if not k.startswith("LAKEMIRROR_")}
    env |= {
        ADMIN_KEY_ENV: "AKIASLOWSTART0000001",
        ADMIN_SECRET_ENV: "slow-start-secret-0000000000000000000000",
        "LAKEMIRROR_SERVER__WORKERS": str(WORKERS),
        SECONDS_ENV: str(SLOW),
    }
    command = [
        *(sys.executable, "-m", "tests.integration.slow_start_server", "server"),
        *("--host", "127.0.0.1", "--port", str(port), "--data-dir", str(tmp_path / "data")),
    ]
    log_path = tmp_path / "server.log"
    with open(log_path, "wb") as log:
        process = subprocess.Popen(command, env=env, stdout=log, stderr=subprocess.STDOUT)
    try:
        seen: set[str] = set()
        wait_for(
            lambda: process.poll() is None and len(_workers_answering(url, seen)) == WORKERS,
            SLOW + 40,
            "both slow workers answering",
            interval=0.5,
        )
        text = log_path.read_text()
        # every worker started once: none was killed for not answering while it started
        assert "died" not in text, text[-3000:]
        assert text.count('"event": "worker started"') == WORKERS, text[-3000:]
    finally:
        stop_process(process)
