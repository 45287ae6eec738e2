"""What ``/proc`` says of a process and of its tree: CPU time, children, resident memory (Linux).

A benchmark measures servers and workers it started as processes of their own; these readings
are theirs, taken from outside. A process that is gone reads as nothing (``None`` or 0), never
as an error, since a tree can lose a member between listing it and reading it.
"""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["children", "descendants", "peak_rss", "process_cpu", "tree_cpu", "tree_rss"]

CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


def _stat(pid: int) -> list[str] | None:
    """Return the fields of ``/proc/<pid>/stat`` after the command (field 3 on), or ``None``."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    except OSError:
        return None


def _status_kib(pid: int, name: str) -> int:
    """Return a ``kB`` line of ``/proc/<pid>/status`` (``VmHWM``, ``VmRSS``) in KiB, 0 if gone."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith(name + ":"):
                return int(line.split()[1])
    except (OSError, ValueError, IndexError):
        pass
    return 0


def _parents() -> dict[int, list[int]]:
    """Return every live process's children, by parent PID."""
    found: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            fields = _stat(int(entry.name))
            if fields is not None and len(fields) > 1:
                found.setdefault(int(fields[1]), []).append(int(entry.name))
    return found


def process_cpu(pid: int) -> float | None:
    """Return the user + system CPU seconds of process ``pid`` so far (``None``: unknown)."""
    fields = _stat(pid)
    try:
        # utime and stime are fields 14 and 15 of stat(5); the fields here start at field 3
        return None if fields is None else (int(fields[11]) + int(fields[12])) / CLOCK_TICKS
    except (ValueError, IndexError):
        return None


def children(pid: int) -> list[int]:
    """Return the live processes whose parent is ``pid``."""
    return _parents().get(pid, [])


def descendants(pid: int) -> list[int]:
    """Return the processes started by ``pid``, its children's children included."""
    tree = _parents()
    out: list[int] = []
    pending = list(tree.get(pid, ()))
    while pending:
        child = pending.pop()
        out.append(child)
        pending += tree.get(child, ())
    return out


def tree_cpu(pid: int) -> float | None:
    """Return the CPU seconds of process ``pid`` and its live descendants (its workers)."""
    total = process_cpu(pid)
    if total is None:
        return None
    return total + sum(process_cpu(child) or 0.0 for child in descendants(pid))


def peak_rss(pid: int) -> int:
    """Return the peak resident bytes (``VmHWM``) of process ``pid``, 0 if it is gone."""
    return _status_kib(pid, "VmHWM") * 1024


def tree_rss(pid: int) -> int:
    """Return the resident bytes of process ``pid`` and its descendants (its workers)."""
    return sum(_status_kib(p, "VmRSS") * 1024 for p in [pid, *descendants(pid)])
