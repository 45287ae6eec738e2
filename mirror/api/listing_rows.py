"""A listing page's JSON rows cut from whole committed ranges, each encoded once.

A committed range never changes and is named by its content, so the JSON rows of all its
records (``object_row`` of each, for one storage namespace) are the same bytes every time it is
listed. :class:`ListingRows` keeps them per range, joined with commas, with where each row
starts: a page of 1,000 committed objects is then a few slices of those bytes instead of 1,000
dicts built and encoded again.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Any

import numpy as np

from mirror.api.convert import encode_rows, object_rows
from mirror.core.listing import ListResult, RangeSpan, span_rows

__all__ = ["ListingRows", "listing_body"]

# ranges a page spans are encoded whole; a range holds a few thousand records at most
_DEFAULT_BUDGET = 64 << 20


class _Encoded:
    """A range's rows as JSON: ``blob`` holds each row followed by a comma."""

    __slots__ = ("blob", "starts")

    def __init__(self, blob: bytes, starts: Any) -> None:
        self.blob = blob
        self.starts = starts

    def rows(self, lo: int, hi: int) -> memoryview:
        """Return rows ``lo`` to ``hi`` (excluded) joined by commas."""
        return memoryview(self.blob)[int(self.starts[lo]) : int(self.starts[hi]) - 1]


class ListingRows:
    """The encoded listing rows of recently listed ranges, bounded by their total bytes.

    Args:
        budget: Bytes of encoded rows kept; the least recently listed ranges go first.
    """

    def __init__(self, budget: int = _DEFAULT_BUDGET) -> None:
        self._budget = budget
        self._held = 0
        self._ranges: OrderedDict[tuple[str, str, bool], _Encoded] = OrderedDict()
        self._lock = threading.Lock()

    def rows(self, span: RangeSpan, namespace: str, user_metadata: bool) -> memoryview:
        """Return the JSON rows of ``span``'s records joined by commas (no brackets)."""
        key = (span.range_id, namespace, user_metadata)
        with self._lock:
            found = self._ranges.get(key)
            if found is not None:
                self._ranges.move_to_end(key)
                return found.rows(span.lo, span.hi)
        encoded = _encode(span, namespace, user_metadata)
        with self._lock:
            if key not in self._ranges and len(encoded.blob) <= self._budget:
                self._ranges[key] = encoded
                self._held += len(encoded.blob)
                while self._held > self._budget:
                    _, dropped = self._ranges.popitem(last=False)
                    self._held -= len(dropped.blob)
        return encoded.rows(span.lo, span.hi)


def _encode(span: RangeSpan, namespace: str, user_metadata: bool) -> _Encoded:
    whole = RangeSpan(span.range_id, span.keys, span.entries, 0, len(span.keys))
    # the same rows, in the same bytes, as a page encodes them one by one
    rows = object_rows(span_rows((whole,), namespace), user_metadata)
    parts = [encode_rows(row) for row in rows]
    lengths = np.fromiter((len(p) + 1 for p in parts), np.int64, len(parts))
    starts = np.zeros(len(parts) + 1, np.int64)
    np.cumsum(lengths, out=starts[1:])
    parts.append(b"")
    return _Encoded(b",".join(parts), starts)


def listing_body(
    listed: ListResult, cache: ListingRows, user_metadata: bool, pagination: dict[str, Any]
) -> bytes:
    """Return the JSON of a page of committed objects (``listed.spans``) and its pagination."""
    parts = [cache.rows(span, listed.namespace, user_metadata) for span in listed.spans]
    return b"".join(
        (b'{"pagination":', encode_rows(pagination), b',"results":[', b",".join(parts), b"]}")
    )
