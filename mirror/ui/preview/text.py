"""The first bytes of an object as text: decoded as UTF-8, bounded, never guessed at further."""

from __future__ import annotations

import codecs
from dataclasses import dataclass

__all__ = ["TEXT_BYTES", "Text", "decode_text"]

TEXT_BYTES = 64 << 10
"""How much of an object a text preview reads and shows (64 KiB)."""


@dataclass(frozen=True, slots=True)
class Text:
    """Text read from the start of an object.

    Attributes:
        text: The decoded text (undecodable bytes replaced).
        truncated: The object goes on past the bytes read.
        binary: The bytes hold a NUL: not text, so not shown.
    """

    text: str
    truncated: bool
    binary: bool


def decode_text(data: bytes, size: int) -> Text:
    """Return the first bytes ``data`` of an object of ``size`` bytes as text.

    A UTF-8 byte order mark is dropped; a character cut by the end of the bytes read is left
    out rather than shown as a replacement character.
    """
    truncated = size > len(data)
    decoder = codecs.getincrementaldecoder("utf-8-sig")(errors="replace")
    text = decoder.decode(data, final=not truncated)
    if "\x00" in text:
        return Text("", truncated, binary=True)
    return Text(text, truncated, binary=False)
