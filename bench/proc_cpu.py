"""CPU time of a process and of its process tree, read from ``/proc`` (Linux)."""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["process_cpu", "tree_cpu"]

CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


def _stat(pid: int) -> list[str] | None:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    except OSError:
        return None


def process_cpu(pid: int) -> float | None:
    """Return the user + system CPU seconds of process ``pid`` so far (``None``: unknown)."""
    fields = _stat(pid)
    try:
        return None if fields is None else (int(fields[11]) + int(fields[12])) / CLOCK_TICKS
    except (ValueError, IndexError):
        return None


def tree_cpu(pid: int) -> float | None:
    """Return the CPU seconds of process ``pid`` and its live descendants (its workers)."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            fields = _stat(int(entry.name))
            if fields is not None and len(fields) > 1:
                children.setdefault(int(fields[1]), []).append(int(entry.name))
    total = process_cpu(pid)
    if total is None:
        return None
    pending = list(children.get(pid, ()))
    while pending:
        child = pending.pop()
        total += process_cpu(child) or 0.0
        pending += children.get(child, ())
    return total
