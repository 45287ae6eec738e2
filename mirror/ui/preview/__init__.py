"""An object's preview on its page: text, a table, Parquet's schema and rows, or an image.

:func:`build_preview` decides the kind (:mod:`.kinds`) and reads only what that kind needs,
through the range reader it is given (the API's ranged ``GET``): at most :data:`TEXT_BYTES` of
text, :data:`TABLE_BYTES` of a table, a Parquet file's footer and first row group. An image is
not read here at all: the page shows an ``<img>`` whose source is the UI's raw route. Every
value ends up in a template, which escapes it.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from mirror.ui.preview.kinds import ACTIVE_TYPES, Kind, image_type, kind_of
from mirror.ui.preview.parquet import ParquetPreview, RangeRead, parquet_preview
from mirror.ui.preview.tables import (
    TABLE_BYTES,
    Table,
    delimited_table,
    json_lines_table,
    json_table,
)
from mirror.ui.preview.text import TEXT_BYTES, Text, decode_text

__all__ = [
    "IMAGE_LIMIT",
    "TABLE_BYTES",
    "TEXT_BYTES",
    "Kind",
    "Preview",
    "RangeRead",
    "build_preview",
    "image_type",
    "kind_of",
]

IMAGE_LIMIT = 20 << 20
"""Images larger than this are not previewed (lakeFS's UI's bound too)."""

_ACTIVE_EXTENSIONS = (".html", ".htm", ".xhtml", ".svg", ".js", ".mjs", ".xml", ".xsl")


@dataclass(frozen=True, slots=True)
class Preview:
    """What an object's page shows of its content.

    Attributes:
        kind: How the object is previewed.
        text: Text shown as is (escaped), when that is the preview.
        table: A table of the first rows.
        parquet: A Parquet file's schema and first rows.
        image: Show the object as an image (through the raw route).
        active: The text is markup or script a browser would run: it is shown as text only.
        note: Why there is no preview, or what it leaves out.
    """

    kind: Kind
    text: Text | None = None
    table: Table | None = None
    parquet: ParquetPreview | None = None
    image: bool = False
    active: bool = False
    note: str = ""


def _is_active(path: str, content_type: str) -> bool:
    media = content_type.split(";", 1)[0].strip().lower()
    return media in ACTIVE_TYPES or path.lower().endswith(_ACTIVE_EXTENSIONS)


def _pretty_json(text: Text) -> Text:
    if text.truncated:
        return text
    try:
        value = json.loads(text.text)
    except ValueError:
        return text
    pretty = json.dumps(value, indent=2, ensure_ascii=False)
    if len(pretty) > TEXT_BYTES:
        return Text(pretty[:TEXT_BYTES], truncated=True, binary=False)
    return Text(pretty, truncated=False, binary=False)


def _table(kind: Kind, text: Text) -> Table | None:
    if kind is Kind.CSV:
        return delimited_table(text.text, ",", text.truncated)
    if kind is Kind.TSV:
        return delimited_table(text.text, "\t", text.truncated)
    if kind is Kind.JSON:
        return json_table(text.text, text.truncated)
    return json_lines_table(text.text, text.truncated)


def _head(text: Text) -> Text:
    if len(text.text) <= TEXT_BYTES:
        return text
    return Text(text.text[:TEXT_BYTES], truncated=True, binary=False)


async def build_preview(read: RangeRead, path: str, content_type: str, size: int) -> Preview:
    """Return the preview of the object at ``path`` (``content_type``, ``size`` bytes).

    Args:
        read: Reads the object's bytes ``[start, end)``.
        path: The object's path (its extension decides when its type says nothing).
        content_type: The object's stored content type.
        size: The object's size in bytes.
    """
    kind = kind_of(path, content_type)
    if kind is Kind.NONE:
        return Preview(kind, note=f"No preview for the content type {content_type or 'unknown'}.")
    if size == 0:
        return Preview(kind, note="The object is empty.")
    if kind is Kind.IMAGE:
        if size > IMAGE_LIMIT:
            return Preview(kind, note=f"Too large to preview (more than {IMAGE_LIMIT >> 20} MiB).")
        return Preview(kind, image=True)
    if kind is Kind.PARQUET:
        return Preview(kind, parquet=await parquet_preview(read, size))
    if kind is Kind.TEXT:
        text = decode_text(await read(0, min(size, TEXT_BYTES)), size)
        if text.binary:
            return Preview(kind, note="The object holds binary data: no text preview.")
        return Preview(kind, text=text, active=_is_active(path, content_type))
    text = decode_text(await read(0, min(size, TABLE_BYTES)), size)
    if text.binary:
        return Preview(kind, note="The object holds binary data: no preview.")
    table = _table(kind, text)
    if table is not None:
        return Preview(kind, table=table)
    shown = _pretty_json(text) if kind is Kind.JSON else text
    return Preview(Kind.TEXT, text=_head(shown))
