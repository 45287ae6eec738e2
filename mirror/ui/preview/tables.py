"""CSV, TSV, JSON arrays and JSON lines read from an object's first bytes, as a bounded table.

Each reads only the bytes it is given (the start of the object) and stops at
:data:`MAX_ROWS` rows; a line or element cut by the end of those bytes is left out. Every cell
is a string, shortened to :data:`MAX_CELL` characters; the template escapes it.
"""

from __future__ import annotations

import csv
import io
import json
from dataclasses import dataclass
from typing import Any

__all__ = [
    "MAX_CELL",
    "MAX_COLUMNS",
    "MAX_ROWS",
    "TABLE_BYTES",
    "Table",
    "delimited_table",
    "json_lines_table",
    "json_table",
    "shaped_table",
]

TABLE_BYTES = 256 << 10
"""How much of an object a table preview reads (256 KiB)."""
MAX_ROWS = 100
"""Rows a table shows at most."""
MAX_COLUMNS = 50
"""Columns a table shows at most."""
MAX_CELL = 300
"""Characters a cell shows at most."""

_WHITESPACE = " \t\r\n"


@dataclass(frozen=True, slots=True)
class Table:
    """A table read from the start of an object.

    Attributes:
        columns: The column names.
        rows: The rows, each as many cells as there are columns.
        more_rows: More rows follow (or may follow, past the bytes read).
        hidden_columns: How many columns were left out.
    """

    columns: list[str]
    rows: list[list[str]]
    more_rows: bool
    hidden_columns: int


def _cell(value: Any) -> str:
    if isinstance(value, str):
        text = value
    elif value is None or isinstance(value, dict | list | tuple | int | float):
        text = json.dumps(value, ensure_ascii=False, default=str)
    else:
        text = str(value)  # a date, a decimal: as Python spells it
    return text if len(text) <= MAX_CELL else text[: MAX_CELL - 1] + "…"


def _whole_lines(text: str, truncated: bool) -> str:
    # the last line of a cut read is incomplete: leave it out
    return text[: text.rfind("\n") + 1] if truncated else text


def shaped_table(columns: list[str], rows: list[list[Any]], more_rows: bool) -> Table:
    """Return the table of ``rows`` under ``columns``, bounded, every cell a shortened string."""
    width = len(columns)
    shown = columns[:MAX_COLUMNS]
    cells = [[_cell(v) for v in (row + [""] * (width - len(row)))[:MAX_COLUMNS]] for row in rows]
    return Table(shown, cells, more_rows, max(0, width - MAX_COLUMNS))


def delimited_table(text: str, delimiter: str, truncated: bool) -> Table | None:
    """Return the table of CSV (comma) or TSV (tab) text, its first row as the header.

    Returns ``None`` when the text is not such a table (no rows, or malformed quoting).
    """
    reader = csv.reader(io.StringIO(_whole_lines(text, truncated)), delimiter=delimiter)
    try:
        header = next(reader, None)
        if header is None:
            return None
        rows: list[list[Any]] = []
        more = truncated
        for row in reader:
            if len(rows) == MAX_ROWS:
                more = True
                break
            rows.append(list(row))
    except csv.Error:
        return None
    width = max([len(header), *(len(r) for r in rows)])
    columns = header + [f"column {i + 1}" for i in range(len(header), width)]
    return shaped_table(columns, rows, more)


def _records(values: list[Any], more: bool) -> Table | None:
    if not values:
        return None
    if not all(isinstance(v, dict) for v in values):
        return shaped_table(["value"], [[v] for v in values], more)
    columns: dict[str, None] = {}
    for record in values:
        columns.update(dict.fromkeys(record))
    names = list(columns)
    missing = object()
    rows = [[r.get(n, missing) for n in names] for r in values]
    cells = [["" if v is missing else v for v in row] for row in rows]
    return shaped_table(names, cells, more)


def json_table(text: str, truncated: bool) -> Table | None:
    """Return the table of a JSON array's first elements (objects become rows of their keys).

    An array cut by the end of the bytes read gives the elements that are whole. Returns
    ``None`` when the text is not an array.
    """
    decoder = json.JSONDecoder()
    at = len(text) - len(text.lstrip(_WHITESPACE))
    if not text.startswith("[", at):
        return None
    at += 1
    values: list[Any] = []
    more = False
    while True:
        while at < len(text) and text[at] in _WHITESPACE:
            at += 1
        if text.startswith("]", at):
            break
        if len(values) == MAX_ROWS:
            more = True
            break
        try:
            value, at = decoder.raw_decode(text, at)
        except json.JSONDecodeError:
            # cut by the end of the read, or not JSON: what was whole is shown
            more = truncated
            if not truncated and not values:
                return None
            break
        values.append(value)
        while at < len(text) and text[at] in _WHITESPACE:
            at += 1
        if text.startswith(",", at):
            at += 1
        elif not text.startswith("]", at):
            more = truncated
            break
    return _records(values, more)


def json_lines_table(text: str, truncated: bool) -> Table | None:
    """Return the table of JSON lines (one value a line). ``None`` if a line is not JSON."""
    values: list[Any] = []
    more = truncated
    for line in _whole_lines(text, truncated).splitlines():
        if not line.strip():
            continue
        if len(values) == MAX_ROWS:
            more = True
            break
        try:
            values.append(json.loads(line))
        except json.JSONDecodeError:
            return None
    return _records(values, more)
