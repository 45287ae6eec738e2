"""Which preview an object gets: decided from its content type first, then its extension.

As lakeFS's UI picks a renderer (the stored ``Content-Type``, then the path's extension), with
one rule of our own: nothing a user uploaded is rendered as active content in the UI's origin.
Only raster images (PNG, JPEG, GIF, WebP) are shown as images, served with an image type of our
choosing; HTML, SVG, JavaScript, XML and the like are shown as escaped text, never rendered.
"""

from __future__ import annotations

import enum
import posixpath

__all__ = ["ACTIVE_TYPES", "IMAGE_TYPES", "Kind", "image_type", "kind_of"]


class Kind(enum.Enum):
    """How an object is previewed."""

    IMAGE = "image"
    PARQUET = "parquet"
    CSV = "csv"
    TSV = "tsv"
    JSON = "json"
    JSON_LINES = "jsonl"
    TEXT = "text"
    NONE = "none"


IMAGE_TYPES = {
    "png": "image/png",
    "jpg": "image/jpeg",
    "jpeg": "image/jpeg",
    "gif": "image/gif",
    "webp": "image/webp",
}
"""Extension -> the only image types an ``<img>`` of the UI is ever served with."""

ACTIVE_TYPES = frozenset(
    {
        "text/html",
        "application/xhtml+xml",
        "image/svg+xml",
        "text/javascript",
        "application/javascript",
        "application/x-javascript",
        "text/xml",
        "application/xml",
        "text/xsl",
        "application/ecmascript",
        "text/ecmascript",
    }
)
"""Types a browser would run or render with script: shown only as escaped text."""

_TABLES = frozenset({Kind.CSV, Kind.TSV, Kind.JSON, Kind.JSON_LINES})

_GENERIC = frozenset({"", "application/octet-stream", "binary/octet-stream"})
"""Types that say nothing: the extension decides."""

_BY_TYPE = {
    "application/x-parquet": Kind.PARQUET,
    "application/vnd.apache.parquet": Kind.PARQUET,
    "application/parquet": Kind.PARQUET,
    "text/csv": Kind.CSV,
    "application/csv": Kind.CSV,
    "text/tab-separated-values": Kind.TSV,
    "application/json": Kind.JSON,
    "text/json": Kind.JSON,
    "application/x-ndjson": Kind.JSON_LINES,
    "application/jsonl": Kind.JSON_LINES,
    "application/x-jsonlines": Kind.JSON_LINES,
    "application/yaml": Kind.TEXT,
    "application/x-yaml": Kind.TEXT,
    "application/toml": Kind.TEXT,
    "application/sql": Kind.TEXT,
    "application/x-sh": Kind.TEXT,
    "application/x-python": Kind.TEXT,
}

_BY_EXTENSION = {
    "parquet": Kind.PARQUET,
    "csv": Kind.CSV,
    "tsv": Kind.TSV,
    "tab": Kind.TSV,
    "json": Kind.JSON,
    "jsonl": Kind.JSON_LINES,
    "ndjson": Kind.JSON_LINES,
    **dict.fromkeys(
        (
            "txt text md markdown rst log yaml yml toml ini cfg conf properties env py r scala "
            "java go rs c h cpp hpp ts tsx jsx sql sh bash zsh lua rb pl kt swift css less scss "
            "html htm xhtml svg js mjs xml xsl dockerfile makefile gitignore tf hcl ipynb"
        ).split(),
        Kind.TEXT,
    ),
}


def _media_type(content_type: str) -> str:
    return content_type.split(";", 1)[0].strip().lower()


def _extension(path: str) -> str:
    name = posixpath.basename(path).lower()
    stem, dot, extension = name.rpartition(".")
    return extension if dot and stem else name


def image_type(path: str, content_type: str) -> str | None:
    """Return the image type to serve the object with, or ``None`` if it is not shown as one.

    A stored raster image type counts as itself; a generic stored type defers to the
    extension. Anything else (SVG included) is never an image here.
    """
    media = _media_type(content_type)
    if media in IMAGE_TYPES.values():
        return media
    if media in _GENERIC:
        return IMAGE_TYPES.get(_extension(path))
    return None


def kind_of(path: str, content_type: str) -> Kind:
    """Return how to preview the object at ``path`` stored with ``content_type``."""
    if image_type(path, content_type):
        return Kind.IMAGE
    media = _media_type(content_type)
    by_name = _BY_EXTENSION.get(_extension(path), Kind.NONE)
    if media in _BY_TYPE:
        return _BY_TYPE[media]
    if media in _GENERIC:
        return by_name
    if media == "text/plain" and by_name in _TABLES:
        return by_name  # a table sent as plain text (as some clients label CSV)
    if media.endswith("+json"):
        return Kind.JSON
    if media in ACTIVE_TYPES or media.startswith("text/") or media.endswith(("+xml", "+yaml")):
        return Kind.TEXT
    return Kind.NONE
