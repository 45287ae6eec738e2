"""Benchmark servers as processes of their own on 127.0.0.1, started healthy and stopped.

:func:`lakemirror_server` runs ``lakemirror server`` on the embedded default in a temporary data
directory, with a bootstrap administrator; :func:`bare_server` runs ``bench.api``'s bare FastAPI
app. Neither sees a ``LAKEMIRROR_*`` variable of the caller's environment, so no configuration
file or setting moves them off what the benchmark states; both can run another revision's
source tree (``root``), to compare it with this one.
"""

from __future__ import annotations

import os
import secrets
import socket
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

import httpx

__all__ = ["ROOT", "STARTUP_DEADLINE", "bare_server", "free_port", "lakemirror_server"]

ROOT = Path(__file__).resolve().parent.parent
"""The source tree the benchmarks run from."""
STARTUP_DEADLINE = 60.0
"""Seconds a server process has to answer its health check."""


def free_port() -> int:
    """Return a TCP port of 127.0.0.1 that is free now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def _wait_healthy(process: subprocess.Popen[bytes], url: str, log: Path) -> None:
    deadline = time.monotonic() + STARTUP_DEADLINE
    with httpx.Client(timeout=1.0) as client:
        while time.monotonic() < deadline:
            try:
                if client.get(url).status_code == 200:
                    return
            except httpx.TransportError:
                pass
            if process.poll() is not None:
                raise SystemExit(f"{url}: process exited with {process.returncode}:\n{_tail(log)}")
            time.sleep(0.05)
    raise SystemExit(f"{url}: not healthy within {STARTUP_DEADLINE:.0f} s:\n{_tail(log)}")


def _tail(log: Path) -> str:
    return "\n".join(log.read_text(errors="replace").splitlines()[-30:])


@contextmanager
def _process(
    command: Sequence[str], health_url: str, log: Path, env: dict[str, str], root: Path = ROOT
) -> Iterator[subprocess.Popen[bytes]]:
    with open(log, "ab") as out:
        process = subprocess.Popen(command, cwd=root, env=env, stdout=out, stderr=subprocess.STDOUT)
    try:
        _wait_healthy(process, health_url, log)
        yield process
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def _env(root: Path = ROOT) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("LAKEMIRROR_")}
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(root), env.get("PYTHONPATH", "")) if p)
    return env


@contextmanager
def lakemirror_server(
    tmp: Path,
    log_level: str,
    workers: int = 1,
    extra_env: dict[str, str] | None = None,
    root: Path = ROOT,
) -> Iterator[tuple[str, tuple[str, str], int]]:
    """Run ``lakemirror server`` with ``workers`` worker processes on a temporary data directory.

    Yields its URL, the administrator's key and the (parent) process ID. ``extra_env`` is added
    to its environment; ``root``: the source tree it runs from (another revision's, to compare).
    """
    key = ("AKIAJ" + secrets.token_hex(8).upper()[:15], secrets.token_urlsafe(30))
    env = {**_env(root), **(extra_env or {})}
    env["LAKEMIRROR_ADMIN_ACCESS_KEY_ID"], env["LAKEMIRROR_ADMIN_SECRET_ACCESS_KEY"] = key
    env["LAKEMIRROR_SERVER__WORKERS"] = str(workers)
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    command = [sys.executable, "-m", "mirror.cli.main", "server", "--host", "127.0.0.1"]
    command += ["--port", str(port), "--data-dir", str(tmp / f"data-{workers}")]
    command += ["--log-level", log_level]
    log = tmp / f"server-{workers}.log"
    with _process(command, f"{url}/healthz", log, env, root) as process:
        yield url, key, process.pid


@contextmanager
def bare_server(
    tmp: Path, log_level: str, extra_env: dict[str, str] | None = None, root: Path = ROOT
) -> Iterator[tuple[str, int]]:
    """Run ``bench.api``'s bare FastAPI app in its own process; yield its URL and PID.

    ``root``: the source tree it runs from, as for :func:`lakemirror_server`.
    """
    port = free_port()
    command = [sys.executable, "-m", "bench.api", "--serve-bare", str(port)]
    command += ["--log-level", log_level]
    url = f"http://127.0.0.1:{port}"
    env = {**_env(root), **(extra_env or {})}
    with _process(command, f"{url}/small", tmp / "bare.log", env, root) as process:
        yield url, process.pid
