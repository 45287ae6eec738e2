"""ListObjects v1 and v2 answered by the listing operation over an in-memory catalog.

The operation is called directly with an :class:`S3Request` (no listener, no signature): these
tests pin the XML a client parses — pagination, delimiters, markers, the bucket root's branches
and ``encoding-type=url`` — while the real-client suites exercise the same code over HTTP.
"""

from __future__ import annotations

import asyncio
import xml.etree.ElementTree as ET
from collections.abc import AsyncIterator
from typing import Any
from urllib.parse import unquote_plus, urlencode

import pytest
from starlette.requests import Request

from mirror.auth.caller import Caller
from mirror.auth.model import Effect, Policy, Statement
from mirror.auth.store import AuthStore
from mirror.block import BlockResolver
from mirror.config import GatewaySettings
from mirror.core import Catalog
from mirror.gateway.context import GatewayState, S3Request
from mirror.gateway.errors import S3Code, S3Error
from mirror.gateway.listing import MAX_KEYS, decode_token, encode_token, list_objects
from mirror.kv import MemoryKV

NS = "{http://s3.amazonaws.com/doc/2006-03-01/}"


async def _empty() -> AsyncIterator[bytes]:
    return
    yield b""


class Gateway:
    """A catalog with repository "repo", an auth store, and a way to call the listing."""

    def __init__(self) -> None:
        kv = MemoryKV()
        self.catalog = Catalog(kv, BlockResolver())
        self.auth = AuthStore(kv)
        self.auth.bootstrap_admin("admin", "AKIAADMIN00000000001", "admin-secret")
        self.catalog.create_repository("repo", "mem://repo")
        self.state = GatewayState(self.catalog, self.auth, GatewaySettings())

    def grant(self, user: str, *actions: str) -> None:
        self.auth.create_user(user)
        self.auth.create_policy(
            Policy(f"{user}-policy", 0, (Statement(Effect.ALLOW, tuple(actions), "*"),))
        )
        self.auth.attach_user_policy(user, f"{user}-policy")

    def call(self, user: str = "admin", bucket: str = "repo", **params: str) -> ET.Element:
        return ET.fromstring(listing(self.state, user, bucket, params))


def listing(state: GatewayState, user: str, bucket: str, params: dict[str, str]) -> bytes:
    """Return the XML the listing operation answers ``user``'s ListObjects with ``params``."""
    scope: dict[str, Any] = {
        "type": "http",
        "method": "GET",
        "path": f"/{bucket}",
        "query_string": urlencode(params).encode(),
        "headers": [],
    }
    req = S3Request(
        http=Request(scope),
        state=state,
        request_id="req-1",
        bucket=bucket,
        key=None,
        caller=Caller(state.auth, state.auth.get_user(user)),
        body=_empty(),
        content_length=None,
    )
    response = asyncio.run(list_objects(req))
    assert response.status_code == 200
    assert response.media_type == "application/xml"
    return bytes(response.body)


def text(root: ET.Element, name: str) -> str | None:
    el = root.find(NS + name)
    return None if el is None else (el.text or "")


def keys(root: ET.Element) -> list[str]:
    return [c.findtext(NS + "Key") or "" for c in root.findall(NS + "Contents")]


def prefixes(root: ET.Element) -> list[str]:
    return [c.findtext(NS + "Prefix") or "" for c in root.findall(NS + "CommonPrefixes")]


@pytest.fixture
def gw() -> Gateway:
    return Gateway()


def test_a_branch_lists_its_objects_with_s3_fields(gw: Gateway) -> None:
    gw.catalog.upload_object("repo", "main", "a.txt", b"hello")
    root = gw.call(prefix="main/", **{"list-type": "2"})
    assert keys(root) == ["main/a.txt"]
    contents = root.find(NS + "Contents")
    assert contents is not None
    stat = gw.catalog.stat_object("repo", "main", "a.txt")
    assert contents.findtext(NS + "ETag") == f'"{stat.entry.checksum}"'
    assert contents.findtext(NS + "Size") == "5"
    assert contents.findtext(NS + "StorageClass") == "STANDARD"
    assert (contents.findtext(NS + "LastModified") or "").endswith(".000Z")
    assert contents.find(NS + "Owner") is None  # v2 only with fetch-owner
    assert text(root, "KeyCount") == "1"
    assert text(root, "IsTruncated") == "false"
    assert text(root, "Name") == "repo"
    owned = gw.call(prefix="main/", **{"list-type": "2", "fetch-owner": "true"})
    assert owned.findtext(f"{NS}Contents/{NS}Owner/{NS}ID") == "admin"


def test_v1_pages_with_markers_and_next_marker_only_with_a_delimiter(gw: Gateway) -> None:
    for i in range(7):
        gw.catalog.upload_object("repo", "main", f"k{i}", b"x")
    first = gw.call(prefix="main/", **{"max-keys": "3"})
    assert keys(first) == ["main/k0", "main/k1", "main/k2"]
    assert text(first, "IsTruncated") == "true"
    assert text(first, "NextMarker") is None
    assert first.find(f"{NS}Contents/{NS}Owner") is not None
    second = gw.call(prefix="main/", marker="main/k2", **{"max-keys": "3"})
    assert keys(second) == ["main/k3", "main/k4", "main/k5"]
    last = gw.call(prefix="main/", marker="main/k5", **{"max-keys": "3"})
    assert keys(last) == ["main/k6"]
    assert text(last, "IsTruncated") == "false"
    delimited = gw.call(prefix="main/", delimiter="/", **{"max-keys": "3"})
    assert text(delimited, "NextMarker") == "main/k2"


def test_delimiters_fold_common_prefixes_and_resume_after_them(gw: Gateway) -> None:
    for path in ["a/1", "a/2", "b/1", "c", "d/x/1", "e"]:
        gw.catalog.upload_object("repo", "main", path, b"x")
    seen_keys: list[str] = []
    seen_prefixes: list[str] = []
    token: str | None = None
    while True:
        params = {"list-type": "2", "prefix": "main/", "delimiter": "/", "max-keys": "2"}
        if token:
            params["continuation-token"] = token
        page = gw.call(**params)
        assert int(text(page, "KeyCount") or 0) == len(keys(page)) + len(prefixes(page))
        seen_keys += keys(page)
        seen_prefixes += prefixes(page)
        token = text(page, "NextContinuationToken")
        if text(page, "IsTruncated") == "false":
            assert token is None
            break
    assert seen_keys == ["main/c", "main/e"]
    assert seen_prefixes == ["main/a/", "main/b/", "main/d/"]
    nested = gw.call(prefix="main/d/", delimiter="/")
    assert prefixes(nested) == ["main/d/x/"] and keys(nested) == []


def test_start_after_and_markers_of_another_ref(gw: Gateway) -> None:
    for path in ["a", "b", "c"]:
        gw.catalog.upload_object("repo", "main", path, b"x")
    after = gw.call(prefix="main/", **{"list-type": "2", "start-after": "main/a"})
    assert keys(after) == ["main/b", "main/c"]
    assert text(after, "StartAfter") == "main/a"
    # a marker sorting before the ref lists it all, one after it lists nothing (as S3)
    assert keys(gw.call(prefix="main/", marker="a")) == ["main/a", "main/b", "main/c"]
    assert keys(gw.call(prefix="main/", marker="zzz")) == []


def test_the_bucket_root_lists_branches_in_key_order(gw: Gateway) -> None:
    for name in ["main-x", "dev", "main2"]:
        gw.catalog.create_branch("repo", name, "main")
    gw.catalog.upload_object("repo", "main", "obj", b"x")
    root = gw.call(delimiter="/")
    # "main-x/" sorts before "main/" ("-" < "/") although "main" < "main-x" as names
    assert prefixes(root) == ["dev/", "main-x/", "main/", "main2/"]
    assert keys(root) == []
    assert prefixes(gw.call(delimiter="/", prefix="ma")) == ["main-x/", "main/", "main2/"]
    paged = gw.call(delimiter="/", **{"max-keys": "2"})
    assert prefixes(paged) == ["dev/", "main-x/"]
    assert text(paged, "NextMarker") == "main-x/"
    rest = gw.call(delimiter="/", marker="main-x/")
    assert prefixes(rest) == ["main/", "main2/"]
    v2 = gw.call(delimiter="/", **{"list-type": "2", "max-keys": "3"})
    token = text(v2, "NextContinuationToken")
    assert token is not None
    tail = gw.call(delimiter="/", **{"list-type": "2", "continuation-token": token})
    assert prefixes(tail) == ["main2/"]
    assert text(tail, "ContinuationToken") == token


def test_tags_commits_and_expressions_list_their_trees(gw: Gateway) -> None:
    gw.catalog.upload_object("repo", "main", "old", b"1")
    first = gw.catalog.commit("repo", "main", "one").commit
    gw.catalog.create_tag("repo", "v1", first.id)
    gw.catalog.upload_object("repo", "main", "new", b"2")
    gw.catalog.commit("repo", "main", "two")
    assert keys(gw.call(prefix="main/")) == ["main/new", "main/old"]
    assert keys(gw.call(prefix="v1/")) == ["v1/old"]
    assert keys(gw.call(prefix=f"{first.id}/")) == [f"{first.id}/old"]
    assert keys(gw.call(prefix="main~1/")) == ["main~1/old"]
    assert keys(gw.call(prefix="nosuchref/")) == []


def test_encoding_type_url_encodes_every_key_field(gw: Gateway) -> None:
    odd = ["dir one/a b.txt", "dir one/plus+%.txt", "dir one/ünïcødé", "x y/z"]
    for path in odd:
        gw.catalog.upload_object("repo", "main", path, b"x")
    root = gw.call(prefix="main/dir one/", delimiter="/", **{"encoding-type": "url"})
    assert text(root, "EncodingType") == "url"
    raw = keys(root)
    assert all(" " not in k and "+%" not in k and "ü" not in k for k in raw)
    assert [unquote_plus(k) for k in raw] == [f"main/{p}" for p in sorted(odd[:3])]
    assert text(root, "Prefix") == "main/dir+one/"
    top = gw.call(prefix="main/", delimiter="/", marker="main/a", **{"encoding-type": "url"})
    assert prefixes(top) == ["main/dir+one/", "main/x+y/"]
    assert text(top, "Marker") == "main/a"
    plain = gw.call(prefix="main/dir one/")
    assert text(plain, "EncodingType") is None
    assert keys(plain) == [f"main/{p}" for p in sorted(odd[:3])]


def test_max_keys_is_bounded_and_zero_lists_nothing(gw: Gateway) -> None:
    for i in range(MAX_KEYS + 5):
        gw.catalog.upload_object("repo", "main", f"k{i:05d}", b"")
    big = gw.call(prefix="main/", **{"max-keys": "5000", "list-type": "2"})
    assert len(keys(big)) == MAX_KEYS
    assert text(big, "IsTruncated") == "true"
    none = gw.call(prefix="main/", **{"max-keys": "0"})
    assert keys(none) == [] and text(none, "IsTruncated") == "false"


@pytest.mark.parametrize(
    "params",
    [
        {"list-type": "3"},
        {"max-keys": "many"},
        {"max-keys": "-1"},
        {"encoding-type": "base64"},
        {"list-type": "2", "continuation-token": "not-a-token"},
    ],
)
def test_bad_parameters_answer_invalid_argument(gw: Gateway, params: dict[str, str]) -> None:
    with pytest.raises(S3Error) as err:
        gw.call(prefix="main/", **params)
    assert err.value.code is S3Code.INVALID_ARGUMENT


def test_tokens_are_opaque_and_round_trip() -> None:
    key = "main/dir one/ü+%"
    token = encode_token(key)
    assert "/" not in token and " " not in token and key not in token
    assert decode_token(token) == key


def test_permissions_as_lakefs_checks_them(gw: Gateway) -> None:
    gw.grant("brancher", "fs:ListBranches")
    gw.grant("lister", "fs:ListObjects")
    assert prefixes(gw.call("brancher", delimiter="/")) == ["main/"]
    with pytest.raises(S3Error) as err:
        gw.call("brancher", prefix="main/")
    assert err.value.code is S3Code.ACCESS_DENIED
    assert "fs:ListObjects" in err.value.message
    assert gw.call("lister", prefix="main/") is not None
    with pytest.raises(S3Error):
        gw.call("lister", delimiter="/")


def test_an_unknown_bucket_answers_no_such_bucket(gw: Gateway) -> None:
    with pytest.raises(S3Error) as err:
        gw.call(bucket="nosuchrepo", prefix="main/")
    assert err.value.code is S3Code.NO_SUCH_BUCKET
    with pytest.raises(S3Error) as root:
        gw.call(bucket="nosuchrepo", delimiter="/")
    assert root.value.code is S3Code.NO_SUCH_BUCKET


def test_keys_with_xml_special_characters_stay_well_formed(gw: Gateway) -> None:
    odd = ["a&b.txt", "c<d>.txt", "e\"f'.txt"]
    for path in odd:
        gw.catalog.upload_object("repo", "main", path, b"x")
    root = gw.call(prefix="main/", delimiter="/", **{"list-type": "2", "fetch-owner": "true"})
    assert keys(root) == sorted(f"main/{p}" for p in odd)
    assert text(root, "Delimiter") == "/"
