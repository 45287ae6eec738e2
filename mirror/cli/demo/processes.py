"""Start ``lakemirror`` child processes, wait until they answer, and make sure they all end."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import httpx

from mirror.cli.demo.errors import DemoError, DemoInterruptedError

__all__ = ["Child", "Children", "clean_environment", "free_port", "tail"]

_STARTUP_DEADLINE = 30.0
_STOP_DEADLINE = 10.0


@dataclass(frozen=True, slots=True)
class Child:
    """A started ``lakemirror`` process, where it answers and where it logs."""

    name: str
    url: str
    log_path: Path
    process: subprocess.Popen[bytes]


def free_port() -> int:
    """Return a TCP port of 127.0.0.1 that is free now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def clean_environment() -> dict[str, str]:
    """Return this process's environment without ``LAKEMIRROR_*`` variables.

    The demo runs on the embedded default whatever the shell configures for real deployments.
    """
    return {k: v for k, v in os.environ.items() if not k.upper().startswith("LAKEMIRROR_")}


def tail(path: Path, lines: int = 15) -> str:
    """Return the last ``lines`` lines of a log (empty when it cannot be read)."""
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return ""
    return "\n".join(text.splitlines()[-lines:])


class Children:
    """Start ``lakemirror`` processes and make sure they all end."""

    def __init__(self, stop: threading.Event) -> None:
        self._stop = stop
        self._children: list[Child] = []

    def spawn(
        self, name: str, args: list[str], port: int, log_path: Path, env: dict[str, str]
    ) -> Child:
        """Start ``lakemirror ARGS`` answering on ``port``, its output going to ``log_path``."""
        command = [sys.executable, "-m", "mirror.cli.main", *args]
        with open(log_path, "wb") as log:
            # a session of its own: Ctrl-C at the terminal reaches the demo only, which then
            # finishes its report before stopping the children
            # our own argv, no shell
            process = subprocess.Popen(  # nosec B603
                command,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        child = Child(name, f"http://127.0.0.1:{port}", log_path, process)
        self._children.append(child)
        return child

    def wait_healthy(self, child: Child) -> None:
        """Wait until ``child`` answers ``/healthz``.

        Raises:
            DemoError: it exited, did not answer within the deadline, or the demo was stopped.
        """
        deadline = time.monotonic() + _STARTUP_DEADLINE
        with httpx.Client(timeout=2.0) as client:
            while True:
                try:
                    if client.get(f"{child.url}/healthz").status_code == 200:
                        return
                except httpx.TransportError:
                    pass
                code = child.process.poll()
                if code is not None:
                    raise DemoError(
                        f"{child.name} exited with code {code} while starting; the end of "
                        f"{child.log_path}:\n{tail(child.log_path)}"
                    )
                if time.monotonic() > deadline:
                    raise DemoError(
                        f"{child.name} did not answer within {_STARTUP_DEADLINE:g}s; the end of "
                        f"{child.log_path}:\n{tail(child.log_path)}"
                    )
                if self._stop.wait(0.1):
                    raise DemoInterruptedError("interrupted while starting")

    def check_alive(self) -> None:
        """Raise :class:`DemoError` if a child has exited."""
        for child in self._children:
            code = child.process.poll()
            if code is not None:
                raise DemoError(
                    f"{child.name} exited with code {code}; the end of {child.log_path}:\n"
                    f"{tail(child.log_path)}"
                )

    def stop_all(self) -> None:
        """Terminate every child (last started first); kill those left at the deadline."""
        for child in reversed(self._children):
            if child.process.poll() is None:
                child.process.terminate()
        deadline = time.monotonic() + _STOP_DEADLINE
        for child in reversed(self._children):
            try:
                child.process.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                child.process.kill()
                child.process.wait()
        self._children.clear()
