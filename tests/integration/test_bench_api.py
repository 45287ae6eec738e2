"""Smoke test of ``python -m bench.api`` with a handful of requests (no timing assertions)."""

from __future__ import annotations

import pytest

from bench.api import COLUMNS, main

OPERATIONS = (
    "bare GET (small JSON)",
    "bare GET, async endpoint",
    "bare POST (1 KiB body)",
    "stat object",
    "upload 1 KiB",
    "read 1 KiB",
    "list 1,000 objects",
    "get branch",
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
    assert [(r[0], r[2]) for r in rows] == [(op, c) for op in OPERATIONS for c in ("1", "4")]
    for row in rows:
        assert len(row) == len(COLUMNS)
        assert row[1] == "1"
        assert row[3] == "5"
        assert all(float(cell.replace(",", "")) >= 0 for cell in row[4:7])
        if row[0].startswith("bare"):
            assert row[-3:] == ["-", "-", "-"]
        else:
            assert row[-2].endswith("x")
            assert row[-1].startswith("< 25 ms") or row[-1].startswith("< 30 ms")
    assert "one branch per thread" in out
    own = [line for line in lines if line.startswith("commit 1 change without its upload")]
    assert [line.split("concurrency ")[1].split(")")[0] for line in own] == ["1", "4"]


def test_bench_api_rejects_bad_counts() -> None:
    with pytest.raises(SystemExit):
        main(["--requests", "0"])
    with pytest.raises(SystemExit):
        main(["--workers", "0"])
    with pytest.raises(SystemExit):
        main(["--workers", "two"])


def test_bench_api_compares_worker_counts(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--requests", "4", "--concurrency", "4", "--workers", "1,2"]) == 0
    out = capsys.readouterr().out
    lines = out.splitlines()
    assert any("--workers 1,2" in line for line in lines if line.startswith("command: "))
    spread = next(line for line in lines if line.startswith("connections per worker"))
    # four keep-alive connections: all on the one worker, then spread over at most two
    ones, twos = spread.split(": ", 1)[1].split("; ")
    assert ones == "1 worker: 4"
    assert twos.startswith("2 workers: ")
    counts = [int(n) for n in twos.split(": ")[1].split("/")]
    assert sum(counts) == 4 and 1 <= len(counts) <= 2
    tables = [line for line in lines if line.startswith("| operation")]
    assert len(tables) == 2
    main_rows = [
        _cells(line)
        for line in lines
        if line.startswith("| ") and not line.startswith("| operation") and len(_cells(line)) == 11
    ]
    servers = [r for r in main_rows if not r[0].startswith("bare")]
    assert sorted({(r[0], r[1]) for r in servers}) == sorted(
        (op, w) for op in OPERATIONS if not op.startswith("bare") for w in ("1", "2")
    )
    header = _cells(tables[1])
    assert header == [
        "operation",
        "conc.",
        "req/s, 1 worker",
        "req/s, 2 workers",
        "2 vs 1",
        "CPU ms/req, 1",
        "CPU ms/req, 2",
    ]
    start = lines.index(tables[1])
    compared = [_cells(line) for line in lines[start + 2 :] if line.startswith("| ")]
    assert [r[0] for r in compared] == [op for op in OPERATIONS if not op.startswith("bare")]
    for row in compared:
        assert row[1] == "4" and row[4].endswith("x")
        assert float(row[2].replace(",", "")) > 0 and float(row[3].replace(",", "")) > 0


@pytest.mark.parametrize("comparison", ["protocol", "fast-reads", "revision"])
def test_bench_http_stack_compares_two_variants(
    capsys: pytest.CaptureFixture[str], comparison: str
) -> None:
    from bench.http_stack import COMPARISONS, _columns
    from bench.http_stack import main as stack_main

    argv = ["--compare", comparison, "--requests", "5", "--concurrency", "2", "--rounds", "1"]
    if comparison == "revision":
        argv += ["--before", "HEAD"]
    assert stack_main(argv) == 0
    lines = capsys.readouterr().out.splitlines()
    header = next(line for line in lines if line.startswith("| operation"))
    before, after = ("HEAD", "this checkout")
    if comparison != "revision":
        before, after = (v.name for v in COMPARISONS[comparison])
    assert _cells(header) == list(_columns(before, after))
    rows = [_cells(line) for line in lines if line.startswith("| ") and line != header]
    # the async bare endpoint is bench.api's alone: an older revision's bare app has none
    expected = [op for op in OPERATIONS if op not in ("create branch", "bare GET, async endpoint")]
    assert sorted(r[0] for r in rows) == sorted(expected)
    for row in rows:
        assert row[1] == "2"
        # each variant's server answered every request and used some CPU doing so
        assert float(row[5].replace(",", "")) > 0 and float(row[6].replace(",", "")) > 0
