"""Smoke test of ``python -m bench.api`` with a handful of requests (no timing assertions)."""

from __future__ import annotations

import pytest

from bench.api import COLUMNS, main

OPERATIONS = (
    "bare GET (small JSON)",
    "bare POST (1 KiB body)",
    "stat object",
    "upload 1 KiB",
    "read 1 KiB",
    "list 1,000 objects",
    "create branch",
    "commit 1 change",
)


def _cells(line: str) -> list[str]:
    return [cell.strip() for cell in line.strip().strip("|").split("|")]


def test_bench_api_prints_a_table(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--requests", "5", "--concurrency", "1", "4"]) == 0
    out = capsys.readouterr().out
    lines = out.splitlines()
    assert any(line.startswith("machine: ") and "cores" in line for line in lines)
    assert any(line.startswith("command: python -m bench.api --requests 5") for line in lines)
    header = next(line for line in lines if line.startswith("| operation"))
    assert _cells(header) == list(COLUMNS)
    rows = [_cells(line) for line in lines if line.startswith("| ") and line != header]
    assert [(r[0], r[1]) for r in rows] == [(op, c) for op in OPERATIONS for c in ("1", "4")]
    for row in rows:
        assert len(row) == len(COLUMNS)
        assert row[2] == "5"
        assert all(float(cell.replace(",", "")) >= 0 for cell in row[3:6])
        if row[0].startswith("bare"):
            assert row[-3:] == ["-", "-", "-"]
        else:
            assert row[-2].endswith("x")
            assert row[-1].startswith("< 25 ms") or row[-1].startswith("< 30 ms")
    assert "one branch per thread" in out


def test_bench_api_rejects_bad_counts() -> None:
    with pytest.raises(SystemExit):
        main(["--requests", "0"])
