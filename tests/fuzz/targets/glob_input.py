"""The input form of the glob targets: a pattern on the first line, names on the next ones."""

from __future__ import annotations

__all__ = ["MAX_NAMES", "escaped", "read_glob_input", "render_glob_input"]

MAX_NAMES = 8
"""The most names an input matches its pattern against."""


def read_glob_input(data: bytes) -> tuple[str, list[str]]:
    """Return the pattern and the names ``data`` spells (``surrogateescape`` for non-UTF-8)."""
    lines = data.decode("utf-8", "surrogateescape").split("\n")
    return lines[0], lines[1 : 1 + MAX_NAMES]


def render_glob_input(pattern: str, names: list[str]) -> bytes:
    """Return the input spelling ``pattern`` and ``names`` (lone surrogates kept as such)."""
    return "\n".join([pattern, *names]).encode("utf-8", "surrogatepass")


def escaped(name: str, special: str) -> str:
    """Return a pattern matching exactly ``name``: each character of ``special`` escaped."""
    return "".join("\\" + c if c in special or c == "\\" else c for c in name)
