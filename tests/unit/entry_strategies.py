"""Hypothesis strategies of committed entries, for the tests that compare ways of writing trees."""

from __future__ import annotations

from hypothesis import strategies as st

from mirror.core import AddressType, Entry

__all__ = ["entries"]

entries = st.builds(
    Entry,
    address=st.text(alphabet="xyz/ü", max_size=12),
    size=st.integers(min_value=-(2**63), max_value=2**63 - 1) | st.just(0),
    checksum=st.text(alphabet="0123456789abcdef", max_size=32),
    mtime=st.integers(min_value=0, max_value=2**40),
    content_type=st.sampled_from(["", "application/octet-stream", "text/csv; charset=ü"]),
    metadata=st.one_of(
        st.just({}), st.dictionaries(st.text(max_size=4), st.text(max_size=4), max_size=3)
    ),
    address_type=st.sampled_from(list(AddressType)),
)
"""Entries of every field's range: negative and zero sizes, empty content types, metadata."""
