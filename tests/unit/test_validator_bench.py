"""Smoke test of ``python -m bench.mirror`` on a small repository (no timing assertions)."""

from __future__ import annotations

import pytest

from bench.mirror import main


def cells(line: str) -> list[str]:
    return [cell.strip() for cell in line.strip("|").split("|")]


def test_bench_mirror_prints_both_tables(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--objects", "3000", "--new", "200"]) == 0
    out = capsys.readouterr().out
    lines = out.splitlines()
    assert any(line.startswith("machine: ") and "cores" in line for line in lines)
    first = next(line for line in lines if line.startswith("| 3,000"))
    assert len(cells(first)) == 11
    rows = {cells(line)[0]: cells(line) for line in lines if line.startswith("| ")}
    header = rows["checker"]
    head, total = header.index("HEAD"), header.index("requests")
    assert rows["naive (HEAD every object)"][head] == "3,200"  # one HEAD per object
    for name in (
        "validator, warm: first commit after the first sync",
        "validator, warm: the commit after",
        "validator, restarted (range IDs from the KV)",
    ):
        row = rows[name]
        assert int(row[total].replace(",", "")) < 10
        assert row[head] == "0"  # 200 new objects in one partition: listed, no HEAD


def test_bench_mirror_rejects_bad_sizes() -> None:
    with pytest.raises(SystemExit):
        main(["--objects", "0"])
