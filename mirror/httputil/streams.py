"""Reading stored objects piecewise: byte ranges, chunked iteration, a file-like reader."""

from __future__ import annotations

import io
import re
from collections.abc import Iterator

from mirror.block.errors import InvalidRangeError
from mirror.block.protocol import BlockStore

__all__ = ["CHUNK", "BlockReader", "iter_block", "parse_range"]

CHUNK = 1 << 20
# ASCII digits, as RFC 9110 spells them (\d also takes "٣", which int() reads)
_RANGE = re.compile(r"bytes=([0-9]*)-([0-9]*)")
_PAST_ANY_OBJECT = 10**18


def _number(digits: str) -> int:
    # int() refuses more than 4,300 digits; a number past any object's size reads as one
    digits = digits.lstrip("0") or "0"
    return int(digits) if len(digits) <= 18 else _PAST_ANY_OBJECT


def parse_range(header: str | None, size: int) -> tuple[int, int] | None:
    """Return ``[start, end)`` for an HTTP ``Range`` header over ``size`` bytes.

    Returns ``None`` (serve everything) for no header, a malformed one or several ranges, as
    RFC 9110 allows. An end past the object is clamped.

    Raises:
        InvalidRangeError: the range is unsatisfiable (it starts at or after ``size``).
    """
    if not header:
        return None
    m = _RANGE.fullmatch(header.strip())
    if m is None or (not m.group(1) and not m.group(2)):
        return None
    first, last = m.group(1), m.group(2)
    if not first:
        suffix = _number(last)
        if suffix == 0 or size == 0:
            raise InvalidRangeError(f"range {header!r} not satisfiable for {size} bytes")
        return max(0, size - suffix), size
    start = _number(first)
    if last and _number(last) < start:
        return None
    if start >= size:
        raise InvalidRangeError(f"range {header!r} not satisfiable for {size} bytes")
    end = size if not last else min(_number(last) + 1, size)
    return start, end


def iter_block(store: BlockStore, key: str, start: int, end: int) -> Iterator[bytes]:
    """Yield bytes ``[start, end)`` of an object in chunks of at most :data:`CHUNK`."""
    pos = start
    while pos < end:
        n = min(CHUNK, end - pos)
        data = store.get(key, pos, pos + n)
        if not data:
            return
        yield data
        pos += len(data)


class BlockReader(io.RawIOBase):
    """A read-only file over bytes ``[0, size)`` of a stored object, fetched by ranges."""

    def __init__(self, store: BlockStore, key: str, size: int) -> None:
        super().__init__()
        self._store = store
        self._key = key
        self._size = size
        self._pos = 0

    def readable(self) -> bool:
        """Return ``True``: this file reads."""
        return True

    def readinto(self, buffer: memoryview | bytearray) -> int:  # type: ignore[override]
        """Fill ``buffer`` from the current position; return how many bytes were read."""
        n = min(len(buffer), self._size - self._pos)
        if n <= 0:
            return 0
        data = self._store.get(self._key, self._pos, self._pos + n)
        buffer[: len(data)] = data
        self._pos += len(data)
        return len(data)
