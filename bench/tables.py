"""The Markdown tables benchmarks print."""

from __future__ import annotations

from collections.abc import Sequence

__all__ = ["markdown"]


def markdown(header: Sequence[str], body: Sequence[Sequence[str]], left: int = 1) -> str:
    """Return a Markdown table, padded to its columns' widths.

    The first ``left`` columns (names) are left-aligned, the others (figures) right-aligned;
    the header row is left-aligned throughout.
    """
    rows = [list(header), *(list(r) for r in body)]
    widths = [max(len(row[c]) for row in rows) for c in range(len(header))]
    rule = "|".join(
        "-" * (w + 2) if c < left else "-" * (w + 1) + ":" for c, w in enumerate(widths)
    )
    lines = []
    for k, row in enumerate(rows):
        cells = [
            cell.ljust(w) if c < left or not k else cell.rjust(w)
            for c, (cell, w) in enumerate(zip(row, widths, strict=True))
        ]
        lines.append("| " + " | ".join(cells) + " |")
        if k == 0:
            lines.append(f"|{rule}|")
    return "\n".join(lines)
