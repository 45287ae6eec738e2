"""The closed-loop clients of ``bench.overload`` and ``bench.throughput``, in a process apart.

Each client is one keep-alive connection of raw asyncio sockets (no HTTP library: the clients
must not be the bottleneck on the cores they share with the server) sending ``GET
/refs/main/objects`` (or ``/objects/stat``) of one of the bench's objects again as soon as it
has its answer; a client answered 503 waits ``Retry-After`` first, or not at all
(``retry="immediate"``). The process imports this module alone (multiprocessing's spawn), not
the server's stack.
"""

from __future__ import annotations

import asyncio
import multiprocessing
import resource
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "API",
    "CONNECTS_PER_SECOND",
    "DEFAULT_OBJECTS",
    "DEFAULT_WARM_UP",
    "OPERATIONS",
    "REPO",
    "Phase",
    "run_phase",
]

API = "/api/v1"
REPO = "flood"
DEFAULT_OBJECTS = 1000
CONNECTS_PER_SECOND = 1000
"""How fast a phase's clients open their connections (a burst would overflow the backlog)."""
DEFAULT_WARM_UP = 2.0
"""Seconds at the start of a phase whose answers are not counted."""
ANSWER_TIMEOUT = 60.0
OPERATIONS = {"read": "objects", "stat": "objects/stat"}
"""The path under ``/refs/main/`` of each operation a phase's clients may send."""


@dataclass
class Phase:
    """What one phase's clients saw, in its counted window."""

    name: str
    clients: int
    seconds: float
    objects: int = DEFAULT_OBJECTS
    warm_up: float = DEFAULT_WARM_UP
    operation: str = "read"
    """What each request does to one of the objects: ``read`` (its bytes) or ``stat``."""
    admitted: int = 0
    refused: int = 0
    errors: Counter[str] = field(default_factory=Counter)
    latencies: list[float] = field(default_factory=list)
    client_cpu: float = 0.0
    """CPU seconds of the clients' process over the whole phase."""
    window: tuple[float, float] = (0.0, 0.0)
    """The counted window, in ``time.monotonic()`` seconds (one clock for every process)."""
    server_cpu: float | None = None
    """CPU seconds of the server's process tree in the counted window."""
    wall: float = 0.0
    """Seconds the whole phase took (connecting and warm-up included)."""

    @property
    def rate(self) -> float:
        """Return admitted requests per second of the counted window."""
        return self.admitted / self.seconds if self.seconds > 0 else 0.0

    @property
    def per_cpu_second(self) -> float | None:
        """Return admitted requests per CPU second of the server in the counted window."""
        if not self.server_cpu:
            return None
        return self.admitted / self.server_cpu

    def percentile_ms(self, q: float) -> float | None:
        """Return the ``q``-th percentile (nearest rank) of admitted latencies, in ms."""
        if not self.latencies:
            return None
        ordered = sorted(self.latencies)
        rank = max(1, -(-len(ordered) * q // 100))
        return ordered[int(rank) - 1] * 1000.0


# the clients (run in a process of their own)


async def _answer(reader: asyncio.StreamReader) -> tuple[int, dict[bytes, bytes]]:
    head = await reader.readuntil(b"\r\n\r\n")
    lines = head.split(b"\r\n")
    status = int(lines[0].split(b" ", 2)[1])
    headers = {}
    for line in lines[1:]:
        if b":" in line:
            name, _, value = line.partition(b":")
            headers[name.strip().lower()] = value.strip()
    length = int(headers.get(b"content-length", b"0"))
    if length:
        await reader.readexactly(length)
    return status, headers


async def _client(
    number: int,
    address: tuple[str, int],
    auth: str,
    window: tuple[float, float],
    retry: str,
    phase: Phase,
) -> None:
    start, end = window
    await asyncio.sleep(number / CONNECTS_PER_SECOND)
    writer: asyncio.StreamWriter | None = None
    i = number
    while time.monotonic() < end:
        try:
            if writer is None:
                reader, writer = await asyncio.open_connection(*address)
            path = f"{API}/repositories/{REPO}/refs/main/{OPERATIONS[phase.operation]}"
            path += f"?path=o/{i % phase.objects:04d}"
            i += 1
            sent = time.monotonic()
            writer.write(
                f"GET {path} HTTP/1.1\r\nHost: bench\r\nAuthorization: {auth}\r\n\r\n".encode()
            )
            status, headers = await asyncio.wait_for(_answer(reader), ANSWER_TIMEOUT)
            done = time.monotonic()
        except (OSError, asyncio.IncompleteReadError, asyncio.LimitOverrunError) as exc:
            if start <= time.monotonic() < end:
                phase.errors[type(exc).__name__] += 1
            if writer is not None:
                writer.close()
            writer = None
            continue
        except TimeoutError:
            if start <= time.monotonic() < end:
                phase.errors["no answer within 60 s"] += 1
            if writer is not None:
                writer.close()
            writer = None
            continue
        counted = start <= done < end
        if status == 200:
            if counted:
                phase.admitted += 1
                phase.latencies.append(done - sent)
        elif status == 503:
            if counted:
                phase.refused += 1
            if headers.get(b"connection") == b"close":
                writer.close()
                writer = None
            if retry == "after":
                await asyncio.sleep(float(headers.get(b"retry-after", b"1")))
        else:
            if counted:
                phase.errors[f"HTTP {status}"] += 1
    if writer is not None:
        writer.close()


async def _run_phase(address: tuple[str, int], auth: str, phase: Phase, retry: str) -> Phase:
    begin = time.monotonic()
    start = begin + phase.clients / CONNECTS_PER_SECOND + phase.warm_up
    window = (start, start + phase.seconds)
    phase.window = window
    await asyncio.gather(
        *(_client(n, address, auth, window, retry, phase) for n in range(phase.clients))
    )
    return phase


def _phase_process(address: tuple[str, int], auth: str, phase: Phase, retry: str, out: Any) -> None:
    """Run one phase's clients (the entry point of the clients' process)."""
    result = asyncio.run(_run_phase(address, auth, phase, retry))
    usage = resource.getrusage(resource.RUSAGE_SELF)
    result.client_cpu = usage.ru_utime + usage.ru_stime
    out.send(result)


def run_phase(
    address: tuple[str, int], auth: str, phase: Phase, retry: str, server_pid: int
) -> Phase:
    """Run one phase's clients in a process of their own; return what they saw."""
    started = time.monotonic()
    context = multiprocessing.get_context("spawn")
    receiving, sending = context.Pipe(duplex=False)
    process = context.Process(target=_phase_process, args=(address, auth, phase, retry, sending))
    process.start()
    sending.close()
    try:
        result: Phase = receiving.recv()
    except EOFError as exc:
        raise SystemExit(f"the clients of {phase.name} died (exit {process.exitcode})") from exc
    process.join()
    result.wall = time.monotonic() - started
    return result
