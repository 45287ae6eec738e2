"""A :mod:`bench.s3_server` run as a process of its own, and the handle benchmarks use on it.

:func:`s3_process` starts the server (its buckets filled first, which may take minutes for a
million objects), waits until it answers and stops it when the block ends; :class:`S3Process`
gives the settings and the ``LAKEMIRROR_*`` variables that put a LakeMirror process's S3
namespaces there, and reads or resets the server's request counts.
"""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from bench.processes import ROOT, free_port
from mirror.block.s3 import S3Settings
from tests.integration.harness import stop_process

__all__ = ["ACCESS_KEY", "REGION", "SECRET_KEY", "S3Process", "poll", "s3_process"]

ACCESS_KEY = "AKIABENCHS3000000000"
SECRET_KEY = "bench-s3-secret"
REGION = "us-east-1"


def poll(condition: Any, timeout: float, what: str, interval: float = 0.2) -> Any:
    """Return ``condition()``'s first true value, asked every ``interval`` s for ``timeout`` s."""
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out after {timeout:.0f} s waiting for {what}")
        time.sleep(interval)  # polling interval of a deadline-bounded wait


@dataclass
class S3Process:
    """A running :mod:`bench.s3_server`."""

    url: str
    process: subprocess.Popen[bytes]
    http: httpx.Client

    def settings(self) -> S3Settings:
        """Return S3 settings reaching this server with path-style addressing."""
        return S3Settings(
            endpoint_url=self.url,
            region=REGION,
            access_key_id=ACCESS_KEY,
            secret_access_key=SECRET_KEY,
            addressing_style="path",
            max_attempts=3,
        )

    def env(self) -> dict[str, str]:
        """Return the ``LAKEMIRROR_*`` variables putting a process's S3 namespaces here."""
        return {
            "LAKEMIRROR_BLOCKSTORE__S3__ENDPOINT_URL": self.url,
            "LAKEMIRROR_BLOCKSTORE__S3__REGION": REGION,
            "LAKEMIRROR_BLOCKSTORE__S3__ACCESS_KEY_ID": ACCESS_KEY,
            "LAKEMIRROR_BLOCKSTORE__S3__SECRET_ACCESS_KEY": SECRET_KEY,
            "LAKEMIRROR_BLOCKSTORE__S3__ADDRESSING_STYLE": "path",
            "LAKEMIRROR_BLOCKSTORE__S3__MAX_ATTEMPTS": "3",
        }

    def requests(self) -> dict[str, dict[str, float]]:
        """Return ``{op: {"count", "seconds"}}`` counted since the last reset."""
        ops: dict[str, dict[str, float]] = self.http.get("/_bench/requests").json()["ops"]
        return ops

    def reset(self) -> None:
        """Zero the request counts."""
        self.http.post("/_bench/reset").raise_for_status()

    def indexed(self, on: bool) -> None:
        """Cut listing pages from the sorted key index (``True``) or with moto's own listing."""
        self.http.post("/_bench/listing", params={"indexed": "1" if on else "0"}).raise_for_status()


@contextmanager
def s3_process(
    log: Path,
    buckets: Sequence[str],
    fills: Sequence[str] = (),
    *,
    indexed: bool = True,
    keep_alive: bool = False,
) -> Iterator[S3Process]:
    """Run :mod:`bench.s3_server` filled as ``fills`` say until the block ends."""
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    command = [sys.executable, "-m", "bench.s3_server", "127.0.0.1", str(port)]
    command += [a for b in buckets for a in ("--bucket", b)]
    command += [a for f in fills for a in ("--fill", f)]
    if indexed:
        command.append("--indexed-listing")
    if keep_alive:
        command.append("--keep-alive")
    root = ROOT
    with open(log, "ab") as out:
        process = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, cwd=root)
    http = httpx.Client(base_url=url, timeout=600.0)

    def answers() -> bool:
        if process.poll() is not None:
            raise RuntimeError(f"S3 server exited with {process.returncode}: {log.read_text()}")
        try:
            return http.get("/_bench/requests", timeout=1.0).status_code == 200
        except httpx.TransportError:
            return False

    try:
        poll(answers, 1800.0, "the S3 server to fill its buckets and answer")
        yield S3Process(url, process, http)
    finally:
        http.close()
        stop_process(process)
