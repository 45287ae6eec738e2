"""``bench.validated_ranges``: a short series runs, stays at its bound and prints its table."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench.validated_ranges import main, run


def test_a_short_series_stays_at_the_bound_while_the_unbounded_set_grows(tmp_path: Path) -> None:
    rows = run(advances=60, objects=800, heads_kept=2, every=20, kv_path=tmp_path / "kv.db")
    assert [r.advances for r in rows] == [20, 40, 60]
    assert all(r.size == r.bound for r in rows)
    assert rows[-1].unbounded > 2 * rows[-1].size
    assert rows[0].unbounded < rows[-1].unbounded


def test_the_command_prints_one_row_per_checkpoint(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--advances", "10", "--objects", "300", "--every", "5"]) == 0
    lines = [line for line in capsys.readouterr().out.splitlines() if line.startswith("| ")]
    assert [line.split("|")[1].strip() for line in lines[1:]] == ["5", "10"]
