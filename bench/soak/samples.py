"""Readings of the soak's processes (from ``/proc``) and of the regions' KV tables.

A :class:`ProcessSampler` thread reads, every few seconds, the resident set (``VmRSS``) and the
open file descriptors (``/proc/<pid>/fd``) of every process :meth:`SoakWorld.processes` names.
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


def read_process(pid: int) -> tuple[float, int] | None:
    """Return ``(RSS in MB, open file descriptors)`` of ``pid``, ``None`` if it is gone."""
    try:
        rss_kb = 0
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                rss_kb = int(line.split()[1])
                break
        fds = len(os.listdir(f"/proc/{pid}/fd"))
    except (OSError, ValueError):
        return None
    return rss_kb / 1024, fds


class ProcessSampler:
    """Read every process of ``world`` every ``every`` seconds, in a thread."""

    def __init__(self, world: SoakWorld, every: float) -> None:
        self.world = world
        self.every = every
        self.samples: list[ProcessSample] = []
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
        found = []
        for label, kind, pid in processes:
            reading = read_process(pid)
            if reading is not None:
                found.append(ProcessSample(now, label, kind, pid, *reading))
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
