"""`python -m bench.backends` runs both backends with tiny counts and prints its table."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from bench.backends import BACKENDS, Figures


def test_figures_percentiles() -> None:
    figures = Figures(tuple(float(i) for i in range(1, 11)))
    assert figures.p50() == 5.5
    assert figures.p90() == pytest.approx(9.1)
    assert Figures((3.0, 1.0, 2.0)).p90() == 3.0


@pytest.mark.s3
def test_bench_backends_smoke() -> None:
    root = Path(__file__).resolve().parents[2]
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "bench.backends",
            *("--changes", "3", "--commits", "2", "--objects", "4"),
            *("--reads", "3", "--lists", "2", "--size", "64"),
        ],
        cwd=root,
        env={**os.environ, "PYTHONPATH": str(root)},
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0].startswith("machine: ")
    header = next(ln for ln in lines if ln.startswith("| step"))
    assert all(name in header for name in BACKENDS)
    rows = {ln.split("|")[1].strip(): ln for ln in lines if ln.startswith("| ") and "ms" in ln}
    assert set(rows) == {"commit 3 staged", "read 64 B object", "list 4 objects"}
    for row in rows.values():
        cells = [c.strip() for c in row.strip("|").split("|")]
        assert all(re.fullmatch(r"\d+\.\d ms", c) for c in cells[1:5]), row
        assert re.fullmatch(r"\d+\.\d+x|infx", cells[5]), row
