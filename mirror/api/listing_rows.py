"""A listing page's JSON rows cut from whole committed ranges, each encoded once.

The JSON rows of all a range's records (``object_row`` of each, for one storage namespace) are
kept per range by :class:`~mirror.httputil.range_rows.RangeRows`, joined with commas: a page
of 1,000 committed objects is then a few slices of those bytes instead of 1,000 dicts built
and encoded again.
"""

from __future__ import annotations

from functools import partial
from typing import Any

from mirror.api.convert import encode_rows, object_rows
from mirror.core.listing import ListResult, RangeSpan, span_rows
from mirror.httputil.range_rows import EncodedRows, RangeRows

__all__ = ["ListingRows", "listing_body"]


class ListingRows(RangeRows):
    """The encoded JSON listing rows of recently listed ranges, bounded by their total bytes."""

    def json_rows(self, span: RangeSpan, namespace: str, user_metadata: bool) -> memoryview:
        """Return the JSON rows of ``span``'s records joined by commas (no brackets)."""
        encode = partial(_encode, namespace=namespace, user_metadata=user_metadata)
        return self.rows(span, ("json", namespace, user_metadata), encode)


def _encode(whole: RangeSpan, namespace: str, user_metadata: bool) -> EncodedRows:
    # the same rows, in the same bytes, as a page encodes them one by one
    rows = object_rows(span_rows((whole,), namespace), user_metadata)
    return EncodedRows([encode_rows(row) for row in rows], b",")


def listing_body(
    listed: ListResult, cache: ListingRows, user_metadata: bool, pagination: dict[str, Any]
) -> bytes:
    """Return the JSON of a page of committed objects (``listed.spans``) and its pagination."""
    parts = [cache.json_rows(span, listed.namespace, user_metadata) for span in listed.spans]
    return b"".join(
        (b'{"pagination":', encode_rows(pagination), b',"results":[', b",".join(parts), b"]}")
    )
