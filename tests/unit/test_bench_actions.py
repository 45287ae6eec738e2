"""Smoke test of ``python -m bench.actions`` with a few commits (no timing assertions)."""

from __future__ import annotations

import pytest

from bench.actions import CASES, main


def test_bench_prints_one_row_per_case(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--commits", "2", "--repeat", "1"]) == 0
    rows = [line for line in capsys.readouterr().out.splitlines() if line.startswith("| ")]
    assert [row.split(" | ")[0].removeprefix("| ") for row in rows[1:]] == list(CASES)
