"""The soak benchmark for half a minute with one fault, so that ``bench.soak`` cannot rot.

Every process of the production path runs as in a long soak (per region dynalite, a moto
server, ``lakemirror server`` with two workers; two replicant replicas; the replication
process); the load runs 30 seconds in windows of 10, and one fault kills a region's dynalite
with SIGKILL and starts it again on its data. The report must have its tables, and the run must
have lost no acknowledged write and read no mirror head it should not have.
"""

from __future__ import annotations

import io
import re
from pathlib import Path

import pytest

from bench.soak.run import Options, soak

pytestmark = [pytest.mark.s3, pytest.mark.slow]

WINDOWS = 3
PROCESSES = [
    *(f"{r}.{p}" for r in "ab" for p in ("kv (dynalite)", "s3 (moto)", "server")),
    *(f"{r}.server worker {n}" for r in "ab" for n in (1, 2)),
    "b.replicant r1",
    "b.replicant r2",
    "replication",
]


def _row(text: str, first_cell: str) -> list[str]:
    for line in text.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if cells and cells[0] == first_cell:
            return cells
    raise AssertionError(f"no row {first_cell!r} in:\n{text}")


def _section(text: str, title: str) -> str:
    start = text.index(f"## {title}")
    end = text.find("\n## ", start + 1)
    return text[start : end if end != -1 else None]


def test_half_a_minute_of_mixed_load_with_a_kv_restart(tmp_path: Path) -> None:
    options = Options(
        minutes=0.5,
        window=10.0,
        fault_every=12.0,
        seed=3,
        faults=("kv",),
        max_faults=1,
        catch_up=60.0,
    )
    out = io.StringIO()
    text, _ = soak(options, tmp_path, out, command="test")
    assert out.getvalue().strip() == text.strip()

    windows = _section(text, "Per window")
    rows = [line for line in windows.splitlines() if re.match(r"\| \d+:\d\d-\d+:\d\d ", line)]
    assert len(rows) == WINDOWS, windows
    assert all(int(row.split("|")[2].replace(",", "")) > 0 for row in rows), windows

    processes = _section(text, "Processes")
    for label in PROCESSES:
        cells = _row(processes, label)
        assert len(cells) == WINDOWS + 2, cells  # the process, each window, the growth
        assert re.fullmatch(r"\d+ / \d+\*?( [AS])?", cells[1]), cells

    assert "refs/*/commits" in _section(text, "KV")
    kinds = _section(text, "Requests by kind")
    for kind in ("sdk.upload", "gw.put", "rest.merge", "task.merge_async", "b.sdk.read"):
        assert int(_row(kinds, kind)[1].replace(",", "")) > 0, kind

    faults = _section(text, "Faults")
    killed = [line for line in faults.splitlines() if re.match(r"\| \d+:\d\d ", line)]
    assert len(killed) == 1, faults
    assert "kv (dynalite)" in killed[0] and "never" not in killed[0], killed

    targets = _section(text, "Targets")
    lost = _row(targets, "acknowledged writes lost")
    assert lost[1].startswith("0 (") and lost[3] == "yes", lost
    unsafe = _row(targets, "mirror safety violations")
    assert unsafe[1].startswith("0 (") and unsafe[3] == "yes", unsafe
    caught_up = _row(targets, "mirror reaches the source's final state")
    assert caught_up[3] == "yes", caught_up
