"""A one-line description of the machine a benchmark ran on."""

from __future__ import annotations

import os
import platform
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
