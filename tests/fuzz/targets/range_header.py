"""The ``Range`` header of GetObject, read alike by the REST API and the gateway.

The input's first line is the object's size (ASCII digits; 1,000 otherwise), the rest the
header's value. :func:`parse_range` answers ``None`` (the whole object), a range inside the
object, or refuses. Documented refusal: :class:`InvalidRangeError` (416).
"""

from __future__ import annotations

from mirror.block.errors import InvalidRangeError
from mirror.httputil.streams import parse_range

__all__ = ["check", "frame"]


def frame(size: int, header: str) -> bytes:
    """Return the input for ``header`` over an object of ``size`` bytes."""
    return f"{size}\n{header}".encode("utf-8", "surrogatepass")


def check(data: bytes) -> str | None:
    """Read the ``Range`` header of ``data``; a range given must lie inside the object."""
    first, _, rest = data.partition(b"\n")
    size = int(first) if first.isdigit() and len(first) <= 15 else 1000
    header = rest.decode("utf-8", "surrogateescape")
    try:
        found = parse_range(header, size)
    except InvalidRangeError:
        return "InvalidRangeError"
    if found is not None:
        start, end = found
        assert 0 <= start < end <= size, (header, size, found)
    return None
