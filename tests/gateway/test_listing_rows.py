"""A gateway listing page cut from kept ``<Contents>`` of whole ranges is the page written
object by object, byte for byte.

Two gateways over the same KV and object store answer the same ListObjects requests: one as it
serves (a page of committed objects comes as slices of ranges, whose ``<Contents>`` it keeps
encoded per range), one over a catalog whose pages never carry slices, so that every object is
written one by one. Keys hold the characters XML escapes and URL encoding changes; pages cross
the boundaries of many small ranges; v1 and v2, ``encoding-type=url``, owners (two callers) and
``max-keys`` vary, and one cache serves every page, caller and query.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any
from urllib.parse import unquote_plus

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mirror.auth.store import AuthStore
from mirror.block import BlockResolver
from mirror.config import GatewaySettings
from mirror.core import Catalog
from mirror.core.committed import ChunkingParams
from mirror.core.listing import ListResult
from mirror.core.model import AddressType, Entry
from mirror.gateway.context import GatewayState
from mirror.httputil.range_rows import RangeRows
from mirror.kv import MemoryKV
from tests.gateway.test_listing_handler import listing


class _RowByRow(Catalog):
    """A catalog whose listing pages never come as slices of ranges."""

    def list_objects(self, *args: Any, **kwargs: Any) -> ListResult:
        listed = super().list_objects(*args, **kwargs)
        return ListResult(listed.rows, listed.common_prefixes, listed.has_more, listed.next_offset)


class _Pair:
    """The two gateways, the users "admin" and "reader", and a way to call both alike."""

    def __init__(self, root: Path) -> None:
        kv, blocks = MemoryKV(), BlockResolver(root)
        chunking = ChunkingParams(raggedness=3)  # many small ranges: pages cross boundaries
        self.catalog = Catalog(kv, blocks)
        self.catalog.chunking = chunking
        plain = _RowByRow(kv, blocks)
        plain.chunking = chunking
        self.auth = AuthStore(kv)
        self.auth.bootstrap_admin("admin", "AKIAADMIN00000000001", "admin-secret")
        self.auth.create_user("reader")
        self.auth.add_member("Admins", "reader")
        self.kept = GatewayState(self.catalog, self.auth, GatewaySettings())
        self.plain = GatewayState(plain, self.auth, GatewaySettings())
        self.repositories = 0

    def call(self, state: GatewayState, user: str, bucket: str, params: dict[str, str]) -> bytes:
        return listing(state, user, bucket, params)


_objects = st.dictionaries(
    st.text("ab/&<>\"' +%\u00e9\u4e2d", min_size=1, max_size=6),
    st.tuples(st.text("0123456789abcdef&<", max_size=6), st.integers(0, 2**40), st.booleans()),
    min_size=1,
    max_size=40,
)


@settings(
    max_examples=30,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(
    objects=_objects,
    prefix=st.sampled_from(["", "a", "b/", "&", "\u00e9"]),
    ref=st.sampled_from(["main", "main~0", "feature-x", "commit"]),
    data=st.data(),
)
def test_pages_from_kept_contents_are_the_pages_written_object_by_object(
    tmp_path: Path,
    objects: dict[str, tuple[str, int, bool]],
    prefix: str,
    ref: str,
    data: st.DataObject,
) -> None:
    pair = _Pair(tmp_path)
    name = "repo"
    pair.catalog.create_repository(name, f"local://{name}")
    for path, (checksum, size, full) in objects.items():
        entry = Entry(
            f"s3://elsewhere/{path}" if full else f"data/{path}",
            size,
            checksum,
            1_700_000_000 + size % 5000 + (size % 7) / 7,
            address_type=AddressType.FULL if full else AddressType.RELATIVE,
        )
        pair.catalog.stage_object(name, "main", path, entry)
    made = pair.catalog.commit(name, "main", "all").commit
    pair.catalog.create_branch(name, "feature-x", "main")
    ref = made.id if ref == "commit" else ref
    amount = data.draw(st.integers(1, 12))
    paths = sorted(p for p in objects if p.startswith(prefix))
    kept_before = pair.kept.listing_rows.held
    for v2, encode, owner, user in (
        (True, True, False, "admin"),
        (True, False, True, "reader"),
        (False, True, False, "reader"),
        (False, False, False, "admin"),
    ):
        params = {"prefix": f"{ref}/{prefix}", "max-keys": str(amount)}
        if v2:
            params["list-type"] = "2"
        if encode:
            params["encoding-type"] = "url"
        if owner:
            params["fetch-owner"] = "true"
        pages = 0
        for _ in range(len(objects) + 2):
            kept = pair.call(pair.kept, user, name, params)
            assert kept == pair.call(pair.plain, user, name, params)
            pages += 1
            resume = _resume(kept, v2, encode)
            if resume is None:
                break
            params["continuation-token" if v2 else "marker"] = resume
        else:
            raise AssertionError(f"the listing did not end after {pages} pages")
        assert pages == max(1, -(-len(paths) // amount))
    # the pages of committed objects were cut from kept ranges
    assert (pair.kept.listing_rows.held > kept_before) == bool(paths)
    assert pair.plain.listing_rows.held == 0


def _resume(page: bytes, v2: bool, encoded: bool = False) -> str | None:
    """Return where the next page starts, ``None`` after the last page.

    A v1 marker is a key: one written URL-encoded (``encoded``) is decoded first.
    """
    ns = "{http://s3.amazonaws.com/doc/2006-03-01/}"
    root = ET.fromstring(page)
    if root.findtext(ns + "IsTruncated") != "true":
        return None
    if v2:
        return root.findtext(ns + "NextContinuationToken")
    found = root.findtext(ns + "NextMarker")
    if found is None:
        found = [c.findtext(ns + "Key") or "" for c in root.findall(ns + "Contents")][-1]
    return unquote_plus(found) if encoded else found


def test_a_small_cache_keeps_to_its_budget_and_answers_the_same(tmp_path: Path) -> None:
    pair = _Pair(tmp_path)
    pair.catalog.create_repository("repo", "local://repo")
    for i in range(200):
        pair.catalog.upload_object("repo", "main", f"k/{i:03d}&", b"x")
    pair.catalog.commit("repo", "main", "all")
    small = GatewayState(pair.catalog, pair.auth, GatewaySettings(), listing_rows=RangeRows(3_000))
    params = {"prefix": "main/k/", "max-keys": "9", "list-type": "2"}
    while True:
        page = pair.call(small, "admin", "repo", params)
        assert page == pair.call(pair.plain, "admin", "repo", params)
        assert small.listing_rows.held <= 3_000
        token = _resume(page, True)
        if token is None:
            break
        params["continuation-token"] = token
    assert pair.kept.listing_rows.held == 0  # the pair's own gateway was not called
