"""The encoded rows of whole committed ranges, kept for listings that cut pages from them.

A committed range never changes and is named by its content, so what a front door writes for
each of its records (a JSON row for the REST API, a ``<Contents>`` element for the S3 gateway)
is the same bytes every time the range is listed the same way. :class:`RangeRows` keeps each
listed range's rows encoded once, one after another, with where each row starts: a page of
1,000 committed objects is then a few slices of those bytes instead of 1,000 rows built and
encoded again.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Any

import numpy as np

from mirror.core.listing import RangeSpan

__all__ = ["EncodedRows", "RangeRows", "whole_range"]

# ranges a page spans are encoded whole; a range holds a few thousand records at most
_DEFAULT_BUDGET = 64 << 20


class EncodedRows:
    """A range's rows, encoded: ``blob`` holds each row followed by ``separator``."""

    __slots__ = ("blob", "separator", "starts")

    def __init__(self, parts: list[bytes], separator: bytes = b"") -> None:
        lengths = np.fromiter((len(p) + len(separator) for p in parts), np.int64, len(parts))
        starts = np.zeros(len(parts) + 1, np.int64)
        np.cumsum(lengths, out=starts[1:])
        self.blob = separator.join([*parts, b""])
        self.separator = separator
        self.starts: Any = starts

    def rows(self, lo: int, hi: int) -> memoryview:
        """Return rows ``lo`` to ``hi`` (excluded), with the separator between them only."""
        end = int(self.starts[hi]) - (len(self.separator) if hi > lo else 0)
        return memoryview(self.blob)[int(self.starts[lo]) : end]


def whole_range(span: RangeSpan) -> RangeSpan:
    """Return the span of every record of ``span``'s range."""
    return RangeSpan(span.range_id, span.keys, span.entries, 0, len(span.keys))


class RangeRows:
    """The encoded rows of recently listed ranges, bounded by their total bytes.

    Args:
        budget: Bytes of encoded rows kept; the least recently listed ranges go first.
    """

    def __init__(self, budget: int = _DEFAULT_BUDGET) -> None:
        self._budget = budget
        self._held = 0
        self._ranges: OrderedDict[Hashable, EncodedRows] = OrderedDict()
        self._lock = threading.Lock()

    @property
    def held(self) -> int:
        """Bytes of encoded rows kept now."""
        return self._held

    def rows(
        self, span: RangeSpan, how: Hashable, encode: Callable[[RangeSpan], EncodedRows]
    ) -> memoryview:
        """Return the encoded rows of ``span``'s records, encoded by ``encode`` if not kept.

        ``how`` names the encoding (with the range ID, the key rows are kept under);
        ``encode`` is given the whole range, whose rows are all kept.
        """
        key = (span.range_id, how)
        with self._lock:
            found = self._ranges.get(key)
            if found is not None:
                self._ranges.move_to_end(key)
                return found.rows(span.lo, span.hi)
        encoded = encode(whole_range(span))
        with self._lock:
            if key not in self._ranges and len(encoded.blob) <= self._budget:
                self._ranges[key] = encoded
                self._held += len(encoded.blob)
                while self._held > self._budget:
                    _, dropped = self._ranges.popitem(last=False)
                    self._held -= len(dropped.blob)
        return encoded.rows(span.lo, span.hi)
