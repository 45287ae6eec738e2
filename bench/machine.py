"""A one-line description of the machine a benchmark ran on."""

from __future__ import annotations

import os
import platform
import time
from pathlib import Path


def describe(*libraries: tuple[str, str]) -> str:
    """Return CPU model, cores, Python and the given ``(name, version)`` pairs on one line."""
    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    parts = [
        cpu,
        f"{os.cpu_count()} cores",
        f"Python {platform.python_version()} ({platform.python_implementation()})",
        *(f"{name} {version}" for name, version in libraries),
        f"{platform.system()} {platform.release()}",
    ]
    return ", ".join(parts)


def run_footer(started: float, load: float) -> str:
    """Return the closing line of a benchmark: its wall time and the load before and after.

    Args:
        started: ``time.perf_counter()`` when the run started.
        load: The 1-minute load average when it started.
    """
    return (
        f"total wall time {time.perf_counter() - started:.0f} s; 1-minute load average "
        f"{load:.2f} at start, {os.getloadavg()[0]:.2f} at end"
    )
