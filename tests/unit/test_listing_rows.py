"""Listing pages cut from ranges' encoded rows answer the bytes of rows encoded one by one."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mirror.api.convert import json_response, object_rows
from mirror.api.listing_rows import ListingRows, listing_body
from mirror.api.paging import page_fields
from mirror.block import BlockResolver
from mirror.core.catalog import Catalog
from mirror.core.committed import ChunkingParams
from mirror.core.listing import ListResult
from mirror.core.model import AddressType, Entry
from mirror.kv.memory import MemoryKV


@pytest.fixture
def catalog(tmp_path: Path) -> Iterator[Catalog]:
    catalog = Catalog(MemoryKV(), BlockResolver(tmp_path / "data"))
    # raggedness 3 splits the tree into many small ranges: pages cross range boundaries
    catalog.chunking = ChunkingParams(raggedness=3)
    yield catalog


def _rows_one_by_one(listed: ListResult, user_metadata: bool) -> bytes:
    """The page as the route encodes rows built one by one (the bytes of its response model)."""
    rows = object_rows(listed.rows, user_metadata)
    pagination = page_fields(listed.has_more, listed.next_offset, len(rows))
    return bytes(json_response({"pagination": pagination, "results": rows}).body)


def _body(listed: ListResult, cache: ListingRows, user_metadata: bool) -> bytes:
    count = sum(s.hi - s.lo for s in listed.spans)
    pagination = page_fields(listed.has_more, listed.next_offset, count)
    return listing_body(listed, cache, user_metadata, pagination)


_text = st.text(st.characters(exclude_categories=("Cs",)), max_size=8)
_objects = st.dictionaries(
    st.text('ab/\u00e9"\\\n', min_size=1, max_size=6),
    st.tuples(
        _text,
        st.integers(0, 2**40),
        st.dictionaries(_text, _text, max_size=2),
        st.booleans(),
    ),
    min_size=1,
    max_size=40,
)


@settings(
    max_examples=40,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(objects=_objects, prefix=st.sampled_from(["", "a", "b/", "\u00e9"]), data=st.data())
def test_pages_from_encoded_ranges_are_the_rows_bytes(
    catalog: Catalog,
    objects: dict[str, tuple[str, int, dict[str, str], bool]],
    prefix: str,
    data: st.DataObject,
) -> None:
    name = f"repo-{sum(1 for _ in catalog.list_repositories())}"
    catalog.create_repository(name, f"local://{name}")
    for path, (checksum, size, metadata, full) in objects.items():
        entry = Entry(
            f"s3://elsewhere/{path}" if full else f"data/{path}",
            size,
            checksum,
            1_700_000_000,
            metadata=metadata,
            address_type=AddressType.FULL if full else AddressType.RELATIVE,
        )
        catalog.stage_object(name, "main", path, entry)
    catalog.commit(name, "main", "all")
    # one cache for every page: pages after the first reuse ranges encoded for earlier ones
    cache = ListingRows()
    paths = sorted(p for p in objects if p.startswith(prefix))
    amount = data.draw(st.integers(1, 12))
    for user_metadata in (True, False):
        after = ""
        seen: list[str] = []
        while True:
            listed = catalog.list_objects(name, "main", prefix, after=after, amount=amount)
            assert listed.spans or not paths
            assert _body(listed, cache, user_metadata) == _rows_one_by_one(listed, user_metadata)
            seen += [r[0] for r in listed.rows]
            if not listed.has_more:
                break
            after = listed.next_offset
        assert seen == paths


def test_a_page_with_staged_objects_has_no_spans(catalog: Catalog) -> None:
    catalog.create_repository("repo", "local://repo")
    for p in ("a", "b", "c"):
        catalog.upload_object("repo", "main", p, p.encode())
    catalog.commit("repo", "main", "all")
    assert [s.hi - s.lo for s in catalog.list_objects("repo", "main", "").spans] != []
    catalog.upload_object("repo", "main", "bb", b"bb")
    listed = catalog.list_objects("repo", "main", "")
    assert listed.spans == ()
    assert [r[0] for r in listed.rows] == ["a", "b", "bb", "c"]
    # with a delimiter the page is built row by row too
    assert catalog.list_objects("repo", "main~0", "", delimiter="/").spans == ()


def test_the_cache_keeps_to_its_budget_and_still_answers(catalog: Catalog) -> None:
    catalog.create_repository("repo", "local://repo")
    for i in range(200):
        catalog.upload_object("repo", "main", f"k/{i:03d}", b"x")
    catalog.commit("repo", "main", "all")
    small = ListingRows(budget=4_000)
    whole = ListingRows()
    after = ""
    while True:
        listed = catalog.list_objects("repo", "main", "k/", after=after, amount=7)
        expected = _rows_one_by_one(listed, True)
        assert _body(listed, small, True) == expected
        assert _body(listed, whole, True) == expected
        assert small.held <= 4_000
        if not listed.has_more:
            break
        after = listed.next_offset
    assert whole.held > 4_000  # the small cache did drop ranges
