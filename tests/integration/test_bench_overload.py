"""Smoke test of ``python -m bench.overload`` with a handful of clients (no timing assertions)."""

from __future__ import annotations

import pytest

from bench.overload import HEALTH_COLUMNS, PHASE_COLUMNS, RSS_COLUMNS, main


def _cells(line: str) -> list[str]:
    return [cell.strip() for cell in line.strip().strip("|").split("|")]


def _table(lines: list[str], columns: tuple[str, ...]) -> list[list[str]]:
    start = lines.index(next(line for line in lines if _cells(line) == list(columns)))
    rows = []
    for line in lines[start + 2 :]:
        if not line.startswith("| "):
            break
        rows.append(_cells(line))
    return rows


def test_bench_overload_prints_its_tables(capsys: pytest.CaptureFixture[str]) -> None:
    argv = [
        "--max-concurrent", "2", "--max-queued", "2", "--factor", "2", "--objects", "10",
        "--peak-seconds", "0.5", "--flood-seconds", "0.5", "--warm-up", "0", "--settle", "0",
    ]  # fmt: skip
    assert main(argv) == 0
    lines = capsys.readouterr().out.splitlines()
    assert any(line.startswith("machine: ") and "cores" in line for line in lines)
    assert any(
        line.startswith("command: python -m bench.overload --max-concurrent 2") for line in lines
    )
    phases = _table(lines, PHASE_COLUMNS)
    # 2 served + 1 (half the queue) at the peak; twice the capacity of 4 in the flood
    assert [(r[0], r[1]) for r in phases] == [("peak", "3"), ("flood (2x capacity)", "8")]
    for row in phases:
        assert float(row[3].replace(",", "")) > 0  # admitted requests per second
        assert row[7] == "0"  # no error but 503s
    assert any(line.startswith("admitted throughput during the flood: ") for line in lines)
    rss = _table(lines, RSS_COLUMNS)
    assert [r[0] for r in rss] == [
        "before the flood",
        "at most during the flood",
        "0 s after the flood",
    ]
    assert all(float(r[1].replace(",", "")) > 0 for r in rss)
    health = _table(lines, HEALTH_COLUMNS)
    assert [r[0] for r in health] == ["peak", "flood"]
    for row in health:
        answered, probes = (int(n) for n in row[1].split("/"))
        assert probes > 0 and answered == probes, row


def test_bench_overload_rejects_bad_arguments() -> None:
    for argv in (["--max-concurrent", "0"], ["--max-queued", "-1"], ["--flood-seconds", "0"]):
        with pytest.raises(SystemExit):
            main(argv)


def test_bench_throughput_prints_stats_and_reads(capsys: pytest.CaptureFixture[str]) -> None:
    from bench.throughput import main as throughput

    argv = ["--clients", "2", "--seconds", "0.5", "--rounds", "1", "--objects", "5"]
    assert throughput([*argv, "--warm-up", "0"]) == 0
    lines = capsys.readouterr().out.splitlines()
    phases = _table(lines, PHASE_COLUMNS)
    assert [(r[0], r[1], r[6], r[7]) for r in phases] == [
        ("stat, round 1", "2", "0", "0"),
        ("read, round 1", "2", "0", "0"),
    ]
    assert all(float(r[3].replace(",", "")) > 0 for r in phases)
    summary = _table(
        lines, ("operation", "req/s (median)", "per server CPU s (median)", "target req/s")
    )
    assert [r[0] for r in summary] == ["stat", "read"]
