"""The API's hot paths: rows serialised without models, listing pages, sign-in on the event loop.

Stat, upload and listing answer plain rows (``mirror.api.convert.object_rows``) instead of one
pydantic model per object; these tests pin that the bytes are the models' bytes. Listing pages
skip the staged merge when nothing is staged; they must list what the merge lists. A sign-in
whose secret this process verified runs on the event loop when the KV is SQLite; a deleted or
rotated key must stop working at once, as on the worker-thread path.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import httpx
import pydantic_core
import pytest
from fastapi import FastAPI
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import TypeAdapter

from mirror.api.app import create_app
from mirror.api.convert import (
    common_prefix_model,
    common_prefix_row,
    encode_rows,
    json_response,
    model_response,
    object_model,
    object_row,
    object_rows,
)
from mirror.api.deps import inline_repository
from mirror.api.models import Commit, ObjectStats, ObjectStatsList, Pagination
from mirror.auth import AuthenticationError, AuthStore
from mirror.block import BlockResolver
from mirror.core.catalog import Catalog
from mirror.core.committed import ChunkingParams
from mirror.core.model import AddressType, Entry, ObjectStat
from mirror.kv.memory import MemoryKV
from mirror.kv.sqlite import SqliteKV

KEY = ("AKIAHOTPATH000000001", "hot-path-secret")
API = "/api/v1"

_text = st.text(st.characters(exclude_categories=("Cs",)), max_size=12)
_stats = st.builds(
    lambda path, address, size, checksum, mtime, content_type, metadata, full: ObjectStat(
        path,
        Entry(
            address,
            size,
            checksum,
            mtime,
            content_type,
            metadata,
            AddressType.FULL if full else AddressType.RELATIVE,
        ),
        address if full else f"local://repo/{address}",
    ),
    _text.filter(bool),
    _text,
    st.integers(0, 2**53),
    _text,
    st.integers(0, 2**40),
    _text,
    st.dictionaries(_text, _text, max_size=3),
    st.booleans(),
)


def _model_json(model: object, kind: object) -> bytes:
    """Serialise like FastAPI does a ``response_model`` of a LakeFSRoute (nulls left out)."""
    return TypeAdapter(kind).dump_json(model, exclude_none=True)


@settings(max_examples=200, deadline=None)
@given(stats=st.lists(_stats, max_size=6), prefixes=st.lists(_text, max_size=3), um=st.booleans())
def test_listing_rows_are_the_model_bytes(
    stats: list[ObjectStat], prefixes: list[str], um: bool
) -> None:
    rows = object_rows([(s.path, s.entry, s.physical_address) for s in stats], um)
    rows += [common_prefix_row(p) for p in prefixes]
    models = [object_model(s, user_metadata=um) for s in stats]
    models += [common_prefix_model(p) for p in prefixes]
    page = {"has_more": True, "next_offset": "x", "results": len(rows), "max_per_page": 1000}
    fast = json_response({"pagination": page, "results": rows}).body
    slow = _model_json(
        ObjectStatsList(pagination=Pagination(**page), results=models), ObjectStatsList
    )
    assert fast == slow
    # and field by field, in the models' order
    for row, model in zip(json.loads(fast)["results"], models, strict=True):
        expected = model.model_dump(exclude_none=True)
        assert list(row) == list(expected)
        assert row == expected


@settings(max_examples=100, deadline=None)
@given(stat=_stats, um=st.booleans())
def test_object_row_is_the_model_bytes(stat: ObjectStat, um: bool) -> None:
    fast = json_response(object_row(stat, user_metadata=um), 201)
    assert fast.status_code == 201
    assert fast.media_type == "application/json"
    assert fast.body == _model_json(object_model(stat, user_metadata=um), ObjectStats)


@settings(max_examples=100, deadline=None)
@given(
    message=_text,
    metadata=st.dictionaries(_text, _text, max_size=3),
    parents=st.lists(_text, max_size=2),
    version=st.integers(0, 3),
)
def test_a_commit_answers_the_response_model_bytes(
    message: str, metadata: dict[str, str], parents: list[str], version: int
) -> None:
    model = Commit(
        id="c" * 64,
        parents=parents,
        committer="admin",
        message=message,
        creation_date=1_700_000_000,
        meta_range_id="m" * 64,
        metadata=metadata,
        generation=len(parents),
        version=version,
    )
    fast = model_response(model, 201)
    assert fast.status_code == 201
    assert fast.media_type == "application/json"
    assert fast.body == _model_json(model, Commit)


@pytest.fixture
def catalog(tmp_path: Path) -> Iterator[Catalog]:
    kv = SqliteKV(tmp_path / "kv.db")
    yield Catalog(kv, BlockResolver(tmp_path / "data"))
    kv.close()


PATHS = [f"{d}/{n}" for d in ("a", "a/b", "b", "c") for n in ("x", "y", "z/1", "z/2")]


def _expected(paths: list[str], prefix: str, after: str, amount: int) -> tuple[list[str], bool]:
    wanted = sorted(p for p in paths if p.startswith(prefix) and p > after)
    return wanted[:amount], len(wanted) > amount


@pytest.mark.parametrize("raggedness", [512, 2])
def test_pages_without_and_with_staged_objects_list_the_same(
    catalog: Catalog, raggedness: int
) -> None:
    # raggedness 2 splits the tree into many small ranges: pages cross range boundaries
    catalog.chunking = ChunkingParams(raggedness=raggedness)
    catalog.create_repository("repo", "local://repo")
    for p in PATHS:
        catalog.upload_object("repo", "main", p, p.encode())
    catalog.commit("repo", "main", "all")
    head = catalog.get_branch("repo", "main").commit_id
    tree = catalog.get_commit("repo", head).metarange_id
    ranges = catalog.committed(catalog.get_repository("repo")).read_metarange(tree)
    assert (len(ranges) > 3) is (raggedness == 2)
    cases = [
        (prefix, after, amount)
        for prefix in ("", "a/", "a/b", "b/", "d/")
        for after in ("", "a/b/x", "a/z/1", "b/x", "zz")
        for amount in (1, 3, 100)
    ]
    live = list(PATHS)
    for staged in (False, True):
        if staged:
            # a staged object, a staged deletion: the listing takes the merge
            catalog.upload_object("repo", "main", "a/b/w", b"w")
            catalog.delete_object("repo", "main", "b/y")
            live = sorted({*PATHS, "a/b/w"} - {"b/y"})
        for prefix, after, amount in cases:
            page = catalog.list_objects("repo", "main", prefix, after=after, amount=amount)
            paths, more = _expected(live, prefix, after, amount)
            assert [r[0] for r in page.rows] == paths, (staged, prefix, after, amount)
            assert page.has_more is more
            assert page.next_offset == (paths[-1] if more else "")
            stats = [catalog.stat_object("repo", "main", p) for p in paths]
            assert page.objects == stats


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def _app(catalog: Catalog) -> FastAPI:
    auth = AuthStore(catalog.kv)
    auth.bootstrap_admin("admin", *KEY)
    return create_app(catalog, auth)


def test_reads_run_inline_on_sqlite_and_local_directories_only(
    catalog: Catalog, tmp_path: Path
) -> None:
    catalog.create_repository("repo", "local://repo")
    local = _app(catalog).state.api
    assert local.inline_reads is True
    record = inline_repository(local, "repo")
    assert record is not None and record.id == "repo"
    # a missing or malformed repository is the read's error to answer, after its permission check
    assert inline_repository(local, "missing") is None
    assert inline_repository(local, "Not A Name") is None
    memory = Catalog(MemoryKV(), BlockResolver(tmp_path))
    memory.create_repository("repo", "local://repo")
    remote = create_app(memory, AuthStore(memory.kv)).state.api
    assert remote.inline_reads is False
    assert inline_repository(remote, "repo") is None


@pytest.mark.anyio
async def test_a_deleted_key_stops_signing_in_on_the_next_request(
    catalog: Catalog, tmp_path: Path
) -> None:
    app = _app(catalog)
    catalog.create_repository("repo", "local://repo")
    url = f"{API}/repositories/repo/refs/main/objects/ls"
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://api") as client:
        # the first request verifies the secret (worker thread), the next ones are remembered
        for _ in range(3):
            assert (await client.get(url, auth=KEY)).status_code == 200
        assert (await client.get(url, auth=(KEY[0], "wrong"))).status_code == 401
        # another process sharing the KV file deletes the key
        other = SqliteKV(tmp_path / "kv.db")
        AuthStore(other).delete_credentials("admin", KEY[0])
        other.close()
        response = await client.get(url, auth=KEY)
    assert response.status_code == 401
    assert response.json()["message"].startswith("error authenticating request")


def test_sign_in_remembered_only_what_was_verified(catalog: Catalog) -> None:
    auth = AuthStore(catalog.kv)
    auth.bootstrap_admin("admin", *KEY)
    fresh = AuthStore(catalog.kv)
    # a store that never verified the secret declines, and signs in once it has
    assert fresh.sign_in_remembered(*KEY) is None
    signed_in = fresh.sign_in(*KEY)
    assert fresh.sign_in_remembered(*KEY) == signed_in
    # a wrong secret is never remembered
    assert fresh.sign_in_remembered(KEY[0], "wrong") is None
    with pytest.raises(AuthenticationError):
        fresh.sign_in(KEY[0], "wrong")
    # a rotated secret: the remembered verification was of the old hash
    auth.bootstrap_admin("admin", KEY[0], "rotated-secret")
    assert fresh.sign_in_remembered(*KEY) is None
    with pytest.raises(AuthenticationError):
        fresh.sign_in(*KEY)
    assert fresh.sign_in(KEY[0], "rotated-secret").user.id == "admin"
    # a deleted key refuses at once, without a verification to fall back on
    auth.delete_credentials("admin", KEY[0])
    with pytest.raises(AuthenticationError):
        fresh.sign_in_remembered(KEY[0], "rotated-secret")


@pytest.mark.anyio
async def test_uploads_check_the_policies_read_at_sign_in(catalog: Catalog) -> None:
    app = _app(catalog)
    catalog.create_repository("repo", "local://repo")
    auth: AuthStore = app.state.api.auth
    auth.create_user("reader")
    auth.attach_user_policy("reader", "FSReadAll")
    reader = ("AKIAHOTPATHREADER001", "reader-secret")
    auth.create_credentials("reader", *reader)
    url = f"{API}/repositories/repo/branches/main/objects"
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://api") as client:
        refused = await client.post(url, params={"path": "a"}, content=b"a", auth=reader)
        stored = await client.post(url, params={"path": "a"}, content=b"a", auth=KEY)
    assert refused.status_code == 403
    assert "fs:WriteObject" in refused.json()["message"]
    assert stored.status_code == 201
    assert stored.json()["path"] == "a"
    assert catalog.list_objects("repo", "main").rows[0][0] == "a"


@pytest.mark.parametrize(
    "content",
    [
        {"path": "big", "size_bytes": 2**70},  # past 64 bits: orjson refuses it
        {"path": "\x00\x1f\u2028é😀", "metadata": {"k\n": 'v\t"'}},
    ],
)
def test_rows_orjson_does_not_encode_are_encoded_by_pydantic(content: dict[str, object]) -> None:
    assert encode_rows(content) == pydantic_core.to_json(content)


def test_rows_neither_encodes_fail_as_before() -> None:
    # a lone surrogate: pydantic's error, as when pydantic encoded every row
    with pytest.raises(pydantic_core.PydanticSerializationError):
        encode_rows({"path": "a\ud800b"})
