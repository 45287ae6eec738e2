"""What the client commands print: aligned tables and fields for people, JSON for scripts."""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from datetime import datetime
from typing import Any, TextIO

__all__ = ["Output", "format_size", "format_time"]

_UNITS = ("B", "KiB", "MiB", "GiB", "TiB", "PiB")


def format_size(size: int | None) -> str:
    """Return a byte count for people (``1.5 KiB``); ``""`` for ``None``."""
    if size is None:
        return ""
    value = float(size)
    for unit in _UNITS:
        if value < 1024 or unit == _UNITS[-1]:
            return f"{size} B" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    raise AssertionError("unreachable")


def format_time(timestamp: int | None) -> str:
    """Return Unix seconds as a local date and time; ``""`` for ``None``."""
    if timestamp is None:
        return ""
    return datetime.fromtimestamp(timestamp).astimezone().strftime("%Y-%m-%d %H:%M:%S %Z")


class Output:
    """Print a command's result in the chosen format.

    Attributes:
        json: Whether results are printed as JSON.
        out: Where results go (standard output).
    """

    def __init__(self, mode: str, out: TextIO) -> None:
        self.json = mode == "json"
        self.out = out

    def data(self, value: Any) -> None:
        """Print one JSON document."""
        json.dump(value, self.out, indent=2, sort_keys=False, ensure_ascii=False)
        self.out.write("\n")

    def line(self, text: str = "") -> None:
        """Print a line of text."""
        self.out.write(text + "\n")

    def table(self, headers: Sequence[str], rows: Iterable[Sequence[object]]) -> None:
        """Print rows under upper-case headers, columns aligned, the last one not padded."""
        cells = [[("" if c is None else str(c)) for c in row] for row in rows]
        widths = [len(h) for h in headers]
        for row in cells:
            for i, cell in enumerate(row):
                widths[i] = max(widths[i], len(cell))
        for row in [[h.upper() for h in headers], *cells]:
            padded = [cell.ljust(widths[i]) for i, cell in enumerate(row[:-1])]
            self.out.write("  ".join([*padded, row[-1]]).rstrip() + "\n")

    def fields(self, pairs: Iterable[tuple[str, object]]) -> None:
        """Print ``Name: value`` lines with the values aligned."""
        items = [(name, "" if value is None else str(value)) for name, value in pairs]
        width = max((len(name) for name, _ in items), default=0) + 1
        for name, value in items:
            self.out.write(f"{(name + ':').ljust(width)} {value}".rstrip() + "\n")
