"""Smoke test of ``python -m bench.core`` on a tiny repository (no timing assertions)."""

from __future__ import annotations

import pytest

from bench.core import COLUMNS, main


def test_bench_core_prints_a_table(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--sizes", "200", "--repeat", "1"]) == 0
    out = capsys.readouterr().out
    lines = out.splitlines()
    assert any(line.startswith("machine: ") and "cores" in line for line in lines)
    header = next(line for line in lines if line.startswith("| objects"))
    assert [cell.strip() for cell in header.strip("|").split("|")] == list(COLUMNS)
    rows = [line for line in lines if line.startswith("|") and "200" in line.split("|")[1]]
    assert len(rows) == 1
    cells = [cell.strip() for cell in rows[0].strip("|").split("|")]
    assert len(cells) == len(COLUMNS)
    assert cells[-1].endswith("MB")
    assert "commit-time ratio" in out


def test_bench_core_rejects_bad_sizes() -> None:
    with pytest.raises(SystemExit):
        main(["--sizes", "0"])
