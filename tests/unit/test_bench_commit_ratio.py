"""Smoke test of ``python -m bench.commit_ratio`` on tiny repositories (no timing assertions)."""

from __future__ import annotations

import pytest

from bench.commit_parts import PARTS, REST
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


def test_commit_ratio_parts_table_has_every_part(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--sizes", "100", "2000", "--runs", "1", "--repeat", "3", "--parts"]) == 0
    out = capsys.readouterr().out
    assert "--parts" in out
    rows = {
        line.split("|")[1].strip(): line.split("|")[2:5]
        for line in out.splitlines()
        if line.startswith("| ")
    }
    for label in [label for label, _, _ in PARTS] + [REST]:
        small, large, difference = (float(cell.strip()) for cell in rows[label])
        assert abs(large - small - difference) < 0.015
        if label != REST:
            assert small >= 0 and large >= 0
    # a clustered commit writes new range files and a metarange at every size
    for label in (PARTS[2][0], PARTS[3][0]):
        assert all(float(cell) > 0 for cell in rows[label][:2])
