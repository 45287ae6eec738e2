"""Hypothesis strategies of committed entries, for the tests that compare ways of writing trees."""

from __future__ import annotations

from hypothesis import strategies as st
from hypothesis.strategies import DrawFn, SearchStrategy

from mirror.core import AddressType, Entry

__all__ = ["change_sets", "entries"]

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


@st.composite
def change_sets(
    draw: DrawFn,
    tree: dict[str, Entry],
    keys: SearchStrategy[str],
    *,
    touched: int = 12,
    added: int = 12,
    absent: int = 3,
) -> dict[str, Entry | None]:
    """Return changes to ``tree`` by key (``None`` deletes).

    Up to ``touched`` keys of the tree are deleted, overwritten or rewritten with an entry of
    the same identity (another address and mtime: the tree's record is kept); up to ``added``
    keys drawn from ``keys`` get new entries when not touched already, and up to ``absent`` more
    deletions name keys the tree does not hold (which change nothing).
    """
    changes: dict[str, Entry | None] = {}
    existing = sorted(tree)
    if existing:
        for key in draw(st.lists(st.sampled_from(existing), max_size=touched, unique=True)):
            kind = draw(st.sampled_from(["delete", "overwrite", "same"]))
            if kind == "delete":
                changes[key] = None
            elif kind == "overwrite":
                changes[key] = draw(entries)
            else:
                old = tree[key]
                changes[key] = Entry(
                    address=old.address + "-moved",
                    size=old.size,
                    checksum=old.checksum,
                    mtime=old.mtime + 1,
                    content_type=old.content_type,
                    metadata=dict(old.metadata),
                    address_type=old.address_type,
                )
    for key, entry in draw(st.dictionaries(keys, entries, max_size=added)).items():
        changes.setdefault(key, entry)
    for key in draw(st.lists(keys, max_size=absent)):
        if key not in tree:
            changes.setdefault(key, None)
    return changes
