"""``bench.mirror_lag``: the catch-up table runs and shows one validation for many commits."""

from __future__ import annotations

import pytest

from bench.mirror_lag import catch_up_table


def test_catching_up_from_ten_behind_takes_one_validation(
    capsys: pytest.CaptureFixture[str],
) -> None:
    catch_up_table(behind=10)
    row = next(line for line in capsys.readouterr().out.splitlines() if line.startswith("| 10 "))
    cells = [c.strip() for c in row.strip("|").split("|")]
    assert cells[1:3] == ["1", "9"]
