"""Find the programs the deployment tests drive, and run them."""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Sequence
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
"""The project's root directory."""
CHART = ROOT / "helm" / "lakemirror"
"""The Helm chart."""
TOOLS_BIN = ROOT / ".tools" / "bin"
"""Where ``make tools`` puts the programs that are not Debian packages (helm, dynalite)."""


def require_tool(name: str) -> str:
    """Return the path of program ``name``; fail the test (never skip it) when it is missing."""
    found = shutil.which(name) or shutil.which(name, path=str(TOOLS_BIN))
    if found is None:
        pytest.fail(f"{name} is not installed: run `make tools` (tests/tools/install.sh)")
    return found


def run_tool(
    name: str, args: Sequence[str], *, timeout: float = 300.0, check: bool = True, **kwargs: object
) -> subprocess.CompletedProcess[str]:
    """Run program ``name`` with ``args``; on failure with ``check``, fail showing its output."""
    command = [require_tool(name), *args]
    done = subprocess.run(
        command, capture_output=True, text=True, timeout=timeout, check=False, **kwargs
    )
    if check and done.returncode != 0:
        pytest.fail(
            f"{' '.join(command)} exited with {done.returncode}:\n"
            f"--- stdout\n{done.stdout}\n--- stderr\n{done.stderr}"
        )
    return done
