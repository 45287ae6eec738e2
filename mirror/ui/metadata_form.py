"""Commit metadata typed into a form as key/value rows.

A commit (and a merge) carries string metadata. The form shows one row per pair, named
``meta_key`` and ``meta_value`` (repeated, in order); a button named :data:`ADD_ROW` sends the
form back to get one more row without committing, so the form works without script (a script
adds the row in place instead). Rows left blank are ignored.
"""

from __future__ import annotations

from dataclasses import dataclass

from starlette.datastructures import FormData

from mirror.ui.forms import texts

__all__ = ["ADD_ROW", "MetadataRow", "blank_rows", "metadata_of", "rows_from"]

ADD_ROW = "add_row"
"""The name of the button that asks for one more row."""

KEY_FIELD = "meta_key"
VALUE_FIELD = "meta_value"


@dataclass(frozen=True, slots=True)
class MetadataRow:
    """One key/value row of the form."""

    key: str
    value: str


def blank_rows(count: int = 1) -> list[MetadataRow]:
    """Return ``count`` empty rows."""
    return [MetadataRow("", "") for _ in range(count)]


def rows_from(form: FormData) -> list[MetadataRow]:
    """Return the rows the form sent (keys trimmed, values as typed); one blank row if none."""
    keys, values = texts(form, KEY_FIELD), texts(form, VALUE_FIELD)
    values += [""] * (len(keys) - len(values))
    rows = [MetadataRow(k.strip(), v) for k, v in zip(keys, values, strict=False)]
    return rows or blank_rows()


def metadata_of(rows: list[MetadataRow]) -> dict[str, str]:
    """Return the metadata the rows hold; blank rows are skipped.

    Raises:
        ValueError: a value without a key, or a key given twice (the message says which).
    """
    metadata: dict[str, str] = {}
    for row in rows:
        if not row.key:
            if row.value:
                raise ValueError(f"The metadata value “{row.value}” has no key.")
            continue
        if row.key in metadata:
            raise ValueError(f"The metadata key “{row.key}” is given twice.")
        metadata[row.key] = row.value
    return metadata
