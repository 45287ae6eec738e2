"""Readings of the soak's processes (from ``/proc``) and of the regions' KV tables.

A :class:`ProcessSampler` thread reads, every few seconds, the resident set (``VmRSS``) and the
open file descriptors (``/proc/<pid>/fd``) of every process :meth:`SoakWorld.processes` names,
and which of them are connections its clients opened to it (a socket on a port the process
listens on: their number follows the clients, not the process), and each replicant replica's
role (``active`` while it holds the mirror's lease, else ``standby``).
:func:`count_items` scans a region's DynamoDB table (keys only) and counts its items by kind of
key (``repos/*/commits``, ``staging``, ``tasks/records``, ...).
"""

from __future__ import annotations

import os
import threading
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.soak.world import SoakWorld

__all__ = ["KVCount", "ProcessSample", "ProcessSampler", "count_items", "key_kind"]


@dataclass(frozen=True, slots=True)
class ProcessSample:
    """One reading of one process."""

    at: float
    label: str
    kind: str
    pid: int
    rss_mb: float
    fds: int
    client_fds: int = 0
    """Of ``fds``, connections clients opened to a port the process listens on."""
    cpu_s: float = 0.0
    """CPU seconds (user and system) the process has used since it started."""
    role: str = ""
    """A replicant replica's: ``active`` (it holds the mirror's lease) or ``standby``."""

    @property
    def own_fds(self) -> int:
        """Return the descriptors the process opened itself (``fds`` less its clients')."""
        return self.fds - self.client_fds


_LISTEN = "0A"


def tcp_sockets() -> dict[int, tuple[int, str]]:
    """Return every TCP socket of this network namespace: inode → (local port, state)."""
    found: dict[int, tuple[int, str]] = {}
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            port = int(fields[1].rpartition(":")[2], 16)
            found[int(fields[9])] = (port, fields[3])
    return found


def read_process(
    pid: int, sockets: dict[int, tuple[int, str]]
) -> tuple[float, int, int, float] | None:
    """Return ``(RSS in MB, open descriptors, client connections, CPU seconds)`` of ``pid``,
    ``None`` if it is gone; ``sockets`` is :func:`tcp_sockets`'s answer."""
    try:
        # utime and stime are fields 14 and 15 of stat(5); the split starts at field 3
        times = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[11:13]
        cpu = (int(times[0]) + int(times[1])) / os.sysconf("SC_CLK_TCK")
        rss_kb = 0
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                rss_kb = int(line.split()[1])
                break
        links = []
        for fd in os.listdir(f"/proc/{pid}/fd"):
            try:
                links.append(os.readlink(f"/proc/{pid}/fd/{fd}"))
            except OSError:
                continue  # closed meanwhile
    except (OSError, ValueError):
        return None
    inodes = [int(link[8:-1]) for link in links if link.startswith("socket:[")]
    mine = [sockets[i] for i in inodes if i in sockets]
    listening = {port for port, state in mine if state == _LISTEN}
    clients = sum(1 for port, state in mine if state != _LISTEN and port in listening)
    return rss_kb / 1024, len(links), clients, cpu


class ProcessSampler:
    """Read every process of ``world`` every ``every`` seconds, in a thread."""

    def __init__(self, world: SoakWorld, every: float) -> None:
        self.world = world
        self.every = every
        self.samples: list[ProcessSample] = []
        self._roles: dict[tuple[str, int], str] = {}
        """(label, pid) → the last role read, kept while the replica does not answer."""
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="process-sampler", daemon=True)

    def start(self) -> ProcessSampler:
        """Start sampling."""
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop sampling."""
        self._stop.set()
        self._thread.join(timeout=30)

    def sample(self) -> None:
        """Read every process once."""
        now = time.monotonic()
        try:
            processes = self.world.processes()
        except (OSError, AttributeError):
            return  # a process being restarted has no handle yet: read them all next time
        roles = self.world.replica_roles()
        sockets = tcp_sockets()
        found = []
        for label, kind, pid in processes:
            reading = read_process(pid, sockets)
            if reading is not None:
                rss, fds, clients, cpu = reading
                role = roles.get(label, "") or self._roles.get((label, pid), "")
                self._roles[(label, pid)] = role
                found.append(ProcessSample(now, label, kind, pid, rss, fds, clients, cpu, role))
        with self._lock:
            self.samples.extend(found)

    def _run(self) -> None:
        while not self._stop.is_set():
            self.sample()
            self._stop.wait(self.every)

    def snapshot(self) -> list[ProcessSample]:
        """Return the samples so far."""
        with self._lock:
            return list(self.samples)


@dataclass(frozen=True, slots=True)
class KVCount:
    """A region's KV items at one moment, by kind of key."""

    at: float
    region: str
    kinds: dict[str, int]

    @property
    def total(self) -> int:
        """Return the number of items."""
        return sum(self.kinds.values())


def key_kind(key: bytes) -> str:
    """Return the kind of a KV key: its leading segments, a repository or staging area as ``*``.

    ``refs/<repo>:<uid>/commits/<id>`` is ``refs/*/commits``, ``staging/<token>/<path>`` is
    ``staging/*``, ``tasks/records/<id>`` is ``tasks/records``.
    """
    parts = key.decode(errors="replace").split("/")
    if parts[0] == "refs" and len(parts) > 2:
        return f"refs/*/{parts[2]}"
    if parts[0] == "staging":
        return "staging/*"
    if len(parts) > 2:
        return "/".join(parts[:2])
    return parts[0]


def count_items(client: Any, table: str, region: str) -> KVCount:
    """Scan ``table`` (keys only) and count its items by :func:`key_kind`."""
    kinds: Counter[str] = Counter()
    paginator = client.get_paginator("scan")
    for page in paginator.paginate(TableName=table, ProjectionExpression="sk"):
        for item in page.get("Items", []):
            kinds[key_kind(bytes(item["sk"]["B"])[1:])] += 1
    return KVCount(time.monotonic(), region, dict(kinds))
