"""Smoke test of ``python -m bench.commit_ratio`` on tiny repositories (no timing assertions)."""

from __future__ import annotations

import pytest

from bench.commit_ratio import main


def test_commit_ratio_prints_a_row_per_run(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--sizes", "300", "100", "--runs", "2", "--repeat", "2"]) == 0
    out = capsys.readouterr().out
    rows = [line for line in out.splitlines() if line.split("|")[1:2] in ([" 1 "], [" 2 "])]
    assert [row.split("|")[1].strip() for row in rows] == ["1", "2"]
    for row in rows:
        small, large, ratio = (cell.strip() for cell in row.split("|")[2:5])
        assert float(small) > 0 and float(large) > 0
        assert abs(float(ratio.removesuffix("x")) - float(large) / float(small)) < 0.05
    assert "| run | 100 objects | 300 objects |" in out
    assert "of 2 runs met" in out


def test_commit_ratio_rejects_bad_arguments() -> None:
    with pytest.raises(SystemExit):
        main(["--runs", "0"])
