"""Smoke test of ``python -m bench.ui`` at a tiny size (no timing assertions), and its parsers."""

from __future__ import annotations

import pytest

from bench.page_weight import asset_urls, css_urls
from bench.ui import TIME_COLUMNS, WEIGHT_COLUMNS, main

PAGES = [
    ("repositories", ["all"]),
    ("repository → objects", ["40 objects", "900 objects"]),
    ("objects, top", ["40 objects", "900 objects"]),
    ("objects, a table's folder", ["40 objects", "900 objects"]),
    ("objects, a date partition", ["40 objects", "900 objects"]),
    ("branches", ["40 objects", "900 objects"]),
    ("commits", ["40 objects", "900 objects", "120 commits"]),
    ("commit", ["40 objects", "900 objects", "120 commits"]),
    ("tags", ["40 objects", "900 objects"]),
    ("compare", ["40 objects", "900 objects"]),
    ("pull requests", ["40 objects", "900 objects"]),
    ("pull request", ["40 objects", "900 objects"]),
]


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


def test_bench_ui_prints_both_tables(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["--objects", "900,40", "--commits", "120", "--requests", "2"]
    assert main(argv) == 0
    out = capsys.readouterr().out
    lines = out.splitlines()
    assert any(line.startswith("machine: ") and "cores" in line for line in lines)
    assert "command: python -m bench.ui --objects 40,900 --commits 120 --requests 2" in out
    assert "history (120 commits) in " in out
    assert any(line.startswith("1-minute load average during the rounds: ") for line in lines)
    expected = [(page, repo) for page, repos in PAGES for repo in repos]

    times = _table(lines, TIME_COLUMNS)
    assert [(r[0], r[1]) for r in times] == expected
    for row in times:
        assert row[2] == "2"
        first, p50, p90, cpu = float(row[3]), float(row[4]), float(row[5]), float(row[6])
        assert first > 0 and 0 < p50 <= p90 and cpu >= 0
        assert row[8] == ("met" if p90 <= 50 else "missed")
    seen: set[str] = set()
    for row in times:
        # each page's first (smallest) repository is its reference; the others a ratio to it
        assert row[7].endswith("x") if row[0] in seen else row[7] == "-"
        seen.add(row[0])

    weights = _table(lines, WEIGHT_COLUMNS)
    assert [(r[0], r[1]) for r in weights] == expected
    for row in weights:
        html, assets, asset_kb, total = float(row[2]), int(row[3]), float(row[4]), float(row[5])
        # every page loads at least the shared stylesheet and script
        assert html > 1 and assets >= 2 and asset_kb > 1
        assert total == pytest.approx(html + asset_kb, abs=0.11)
        assert row[6] == "identity"
        assert row[7] == ("met" if total <= 300 else "missed")
    assert "assets that did not load" not in out


def test_bench_ui_rejects_bad_counts() -> None:
    for argv in (
        ["--objects", "0"],
        ["--objects", "many"],
        ["--requests", "0"],
        ["--commits", "2"],
    ):
        with pytest.raises(SystemExit):
            main(argv)


def test_assets_of_a_page_and_of_a_stylesheet() -> None:
    html = (
        '<link rel="icon" href="data:,"><link rel="stylesheet" href="/ui/static/ui.css">'
        '<link rel="canonical" href="/elsewhere"><script src="/ui/static/ui.js" defer></script>'
        '<script>inline()</script><img src="a.png" srcset="b.png 2x, c.png 3x">'
    )
    assert asset_urls(html) == [
        "data:,",
        "/ui/static/ui.css",
        "/ui/static/ui.js",
        "a.png",
        "b.png",
        "c.png",
    ]
    css = "@import 'base.css'; a { background: url(\"i.png\") } b { mask: url( m.svg ) }"
    assert css_urls(css) == ["base.css", "i.png", "m.svg"]
