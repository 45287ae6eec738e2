"""Start `lakemirror server` as a separate process and wait until it answers."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx
import lakefs
import pytest

# a poll's deadline, not a wait: a server starting on cores other jobs keep busy (its imports
# alone are seconds of CPU) is still waited for
STARTUP_DEADLINE = 90.0
ADMIN_KEY_ENV = "LAKEMIRROR_ADMIN_ACCESS_KEY_ID"
ADMIN_SECRET_ENV = "LAKEMIRROR_ADMIN_SECRET_ACCESS_KEY"


@dataclass(frozen=True)
class Server:
    """A running server: where it listens, its data, its log, and the admin's key."""

    url: str
    data_dir: Path
    log_path: Path
    access_key_id: str
    secret_access_key: str
    process: subprocess.Popen[bytes]
    namespace_root: str = "local://"

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def namespace(self, name: str) -> str:
        """Return the storage namespace a repository called ``name`` gets on this backend."""
        return f"{self.namespace_root}{name}"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def stop_process(process: subprocess.Popen[bytes], timeout: float = 10.0) -> None:
    """Stop ``process`` with SIGTERM; SIGKILL it when it is still running after ``timeout``."""
    if process.poll() is not None:
        return
    process.terminate()
    try:
        process.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


def wait_healthy(process: subprocess.Popen[bytes], url: str, log_path: Path) -> None:
    deadline = time.monotonic() + STARTUP_DEADLINE
    with httpx.Client(timeout=1.0) as client:
        while time.monotonic() < deadline:
            try:
                if client.get(f"{url}/healthz").status_code == 200:
                    return
            except httpx.TransportError:
                pass
            try:
                # waits for the process to exit, which is what a failed start looks like
                code = process.wait(timeout=0.05)
            except subprocess.TimeoutExpired:
                continue
            pytest.fail(f"server exited with {code}:\n{log_path.read_text()}")
    pytest.fail(f"server not healthy within {STARTUP_DEADLINE}s:\n{log_path.read_text()}")


@contextmanager
def running_server(
    data_dir: Path,
    log_path: Path,
    *,
    access_key_id: str = "",
    secret_access_key: str = "",
    args: Sequence[str] = (),
    env: Mapping[str, str] | None = None,
    namespace_root: str = "local://",
) -> Iterator[Server]:
    """Run `lakemirror server` on a free port of 127.0.0.1 until the block ends.

    The admin's key goes in through the environment when given; the log collects the
    process's stdout and stderr. ``env`` adds variables (``LAKEMIRROR_*`` ones choosing the
    backends, say); ``namespace_root`` is where :meth:`Server.namespace` puts repositories.
    """
    environment = {
        k: v for k, v in os.environ.items() if k not in (ADMIN_KEY_ENV, ADMIN_SECRET_ENV)
    }
    environment.update(env or {})
    if access_key_id:
        environment[ADMIN_KEY_ENV] = access_key_id
        environment[ADMIN_SECRET_ENV] = secret_access_key
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    command = [
        sys.executable,
        "-m",
        "mirror.cli.main",
        "server",
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--data-dir",
        str(data_dir),
        *args,
    ]
    with open(log_path, "ab") as log:
        process = subprocess.Popen(command, env=environment, stdout=log, stderr=subprocess.STDOUT)
    try:
        wait_healthy(process, url, log_path)
        yield Server(
            url, data_dir, log_path, access_key_id, secret_access_key, process, namespace_root
        )
    finally:
        stop_process(process)


@dataclass
class Principal:
    """A user made for a test: its key, an SDK client and an HTTP client of ``/api/v1``."""

    user_id: str
    access_key_id: str
    secret_access_key: str
    client: lakefs.Client
    http: httpx.Client


MakeUser = Callable[..., Principal]
"""``make_user(*groups, policies=(...))`` returns a new :class:`Principal`."""


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:10]}"
