"""Smoke test of ``python -m bench.parquet_options`` (no timing assertions)."""

from __future__ import annotations

import pytest

from bench.parquet_options import main


def test_parquet_options_prints_a_row_per_table(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--rounds", "1", "--files", "1"]) == 0
    lines = capsys.readouterr().out.splitlines()
    rows = [line for line in lines if line.startswith(("| range", "| metarange"))]
    assert len(rows) == 5
    for row in rows:
        cells = [cell.strip() for cell in row.split("|")[2:-1]]
        before, now, ratio = float(cells[0]), float(cells[1]), float(cells[2].removesuffix("x"))
        assert before > 0 and now > 0 and abs(ratio - now / before) < 0.01
        assert int(cells[5].replace(",", "")) > 0 and int(cells[6].replace(",", "")) > 0


def test_parquet_options_rejects_bad_arguments() -> None:
    with pytest.raises(SystemExit):
        main(["--rounds", "0"])
