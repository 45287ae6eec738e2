"""Multipart uploads answered by the gateway's operations over a catalog on local disk.

The operations are called directly with an :class:`S3Request` (no listener, no signature): the
catalog, its SQLite KV and the local block store are real. These tests pin S3's rules — part
ETags, the ``-N`` ETag kept on the object, part order and size checks, unknown uploads, copies
of parts from any ref, listings and their markers — and that a refused call changes nothing.
"""

from __future__ import annotations

import asyncio
import hashlib
import xml.etree.ElementTree as ET
from collections.abc import AsyncIterator, Iterable
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import pytest
from starlette.requests import Request
from starlette.responses import Response

from mirror.auth.caller import Caller
from mirror.auth.model import Effect, Policy, Statement
from mirror.auth.store import AuthStore
from mirror.config import GatewaySettings
from mirror.core import Catalog
from mirror.core.embedded import open_embedded
from mirror.core.model import Entry
from mirror.core.protection import add_rule, delete_rule
from mirror.gateway import multipart
from mirror.gateway.context import GatewayState, S3Request
from mirror.gateway.errors import S3Code, S3Error
from mirror.gateway.streaming import multipart_etag
from mirror.gateway.uploads import PARTS_PREFIX, UploadStore

NS = "{http://s3.amazonaws.com/doc/2006-03-01/}"
MiB = 1 << 20


async def _chunks(data: bytes, size: int = 256 * 1024) -> AsyncIterator[bytes]:
    for i in range(0, len(data), size):
        yield data[i : i + size]


class Gateway:
    """A catalog on disk with repository "repo" (and a mirror), and a way to call operations."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.catalog: Catalog = open_embedded(root)
        self.auth = AuthStore(self.catalog.kv)
        self.auth.bootstrap_admin("admin", "AKIAADMIN00000000001", "admin-secret")
        self.catalog.create_repository("repo", "local://repo")
        self.catalog.create_repository(
            "mir", "local://mir", read_only=True, mirror_of="origin/repo", bare=True
        )
        self.state = GatewayState(self.catalog, self.auth, GatewaySettings())

    def grant(self, user: str, *actions: str) -> None:
        self.auth.create_user(user)
        self.auth.create_policy(
            Policy(f"{user}-policy", 0, (Statement(Effect.ALLOW, tuple(actions), "*"),))
        )
        self.auth.attach_user_policy(user, f"{user}-policy")

    def request(
        self,
        method: str,
        key: str | None,
        *,
        bucket: str = "repo",
        query: dict[str, str] | None = None,
        headers: dict[str, str] | None = None,
        body: bytes = b"",
        user: str = "admin",
    ) -> S3Request:
        scope: dict[str, Any] = {
            "type": "http",
            "method": method,
            "scheme": "http",
            "server": ("127.0.0.1", 8000),
            "path": f"/{bucket}/{key or ''}",
            "query_string": urlencode(query or {}).encode(),
            "headers": [(k.lower().encode(), v.encode()) for k, v in (headers or {}).items()],
        }
        return S3Request(
            http=Request(scope),
            state=self.state,
            request_id="req-1",
            bucket=bucket,
            key=key,
            caller=Caller(self.auth, self.auth.get_user(user)),
            body=_chunks(body),
            content_length=len(body),
        )

    def run(self, handler: Any, req: S3Request) -> Response:
        response: Response = asyncio.run(handler(req))
        return response

    def create(self, key: str = "main/big.bin", **headers: str) -> str:
        root = xml_of(
            self.run(
                multipart.create_multipart_upload,
                self.request("POST", key, headers=headers, query={"uploads": ""}),
            )
        )
        upload_id = root.findtext(NS + "UploadId")
        assert upload_id
        assert root.findtext(NS + "Key") == key
        return upload_id

    def part(self, upload_id: str, number: int, data: bytes, key: str = "main/big.bin") -> str:
        req = self.request(
            "PUT", key, query={"partNumber": str(number), "uploadId": upload_id}, body=data
        )
        response = self.run(multipart.upload_part, req)
        assert response.status_code == 200
        return response.headers["etag"]

    def complete(
        self, upload_id: str, parts: Iterable[tuple[int, str]], key: str = "main/big.bin"
    ) -> ET.Element:
        doc = "".join(
            f"<Part><PartNumber>{n}</PartNumber><ETag>{e}</ETag></Part>" for n, e in parts
        )
        body = f"<CompleteMultipartUpload>{doc}</CompleteMultipartUpload>".encode()
        req = self.request("POST", key, query={"uploadId": upload_id}, body=body)
        return xml_of(self.run(multipart.complete_multipart_upload, req))

    def staged(self) -> list[str]:
        return [s.path for s in self.catalog.iter_objects("repo", "main")]

    def part_files(self) -> list[str]:
        base = self.root / "repo" / PARTS_PREFIX
        return sorted(str(p.relative_to(base)) for p in base.rglob("*") if p.is_file())


def xml_of(response: Response) -> ET.Element:
    assert response.media_type == "application/xml", response.body
    return ET.fromstring(bytes(response.body))


def quoted_md5(data: bytes) -> str:
    return f'"{hashlib.md5(data).hexdigest()}"'


@pytest.fixture
def gw(tmp_path: Path) -> Gateway:
    return Gateway(tmp_path)


def refused(gw: Gateway, handler: Any, req: S3Request) -> S3Error:
    with pytest.raises(S3Error) as info:
        gw.run(handler, req)
    return info.value


def test_parts_complete_into_one_object_with_the_multipart_etag(gw: Gateway) -> None:
    first, second, last = b"a" * (5 * MiB), bytes(range(256)) * (24 * 1024), b"tail"
    upload_id = gw.create(**{"Content-Type": "text/csv", "x-amz-meta-Owner": "team-a"})
    assert len(upload_id) >= 40
    etags = [gw.part(upload_id, n, d) for n, d in ((1, first), (2, second), (3, last))]
    assert etags == [quoted_md5(first), quoted_md5(second), quoted_md5(last)]
    assert gw.staged() == []  # nothing on the branch before completion
    root = gw.complete(upload_id, [(1, etags[0]), (2, etags[1]), (3, etags[2].strip('"'))])
    whole = hashlib.md5(
        b"".join(hashlib.md5(d).digest() for d in (first, second, last))
    ).hexdigest()
    assert root.findtext(NS + "ETag") == f'"{whole}-3"'
    assert root.findtext(NS + "Key") == "main/big.bin"
    assert root.findtext(NS + "Bucket") == "repo"
    stat = gw.catalog.stat_object("repo", "main", "big.bin")
    assert stat.entry.checksum == f"{whole}-3"
    assert stat.entry.size == len(first) + len(second) + len(last)
    assert stat.entry.content_type == "text/csv"
    assert stat.entry.metadata == {"X-Amz-Meta-owner": "team-a"}
    assert stat.entry.address.startswith("data/")
    data = gw.catalog.read_object("repo", "main", "big.bin", 0, None)
    assert data == first + second + last
    assert gw.part_files() == []  # parts are removed once completed
    err = refused(
        gw, multipart.list_parts, gw.request("GET", "main/big.bin", query={"uploadId": upload_id})
    )
    assert err.code is S3Code.NO_SUCH_UPLOAD


def test_multipart_etag_is_s3s() -> None:
    # a known value: two parts of 5 MiB of zeros, as S3 (and `aws s3api`) report it
    zero = hashlib.md5(bytes(5 * MiB)).hexdigest()
    expected = hashlib.md5(bytes.fromhex(zero) * 2).hexdigest() + "-2"
    assert multipart_etag([zero, zero]) == expected


def test_a_part_uploaded_again_replaces_the_earlier_one(gw: Gateway) -> None:
    upload_id = gw.create()
    old = gw.part(upload_id, 1, b"old" * MiB)
    new = gw.part(upload_id, 1, b"new" * (2 * MiB))
    tail = gw.part(upload_id, 2, b"!")
    err = refused(
        gw,
        multipart.complete_multipart_upload,
        gw.request(
            "POST",
            "main/big.bin",
            query={"uploadId": upload_id},
            body=f"<CompleteMultipartUpload><Part><PartNumber>1</PartNumber><ETag>{old}</ETag></Part>"
            f"<Part><PartNumber>2</PartNumber><ETag>{tail}</ETag></Part></CompleteMultipartUpload>".encode(),
        ),
    )
    assert err.code is S3Code.INVALID_PART
    gw.complete(upload_id, [(1, new), (2, tail)])
    assert gw.catalog.read_object("repo", "main", "big.bin", 0, None) == b"new" * (2 * MiB) + b"!"
    assert gw.part_files() == []  # the replaced part's bytes too


@pytest.mark.parametrize(
    ("parts", "code"),
    [
        (
            "<Part><PartNumber>2</PartNumber><ETag>{2}</ETag></Part>"
            "<Part><PartNumber>1</PartNumber><ETag>{1}</ETag></Part>",
            S3Code.INVALID_PART_ORDER,
        ),
        (
            "<Part><PartNumber>1</PartNumber><ETag>{1}</ETag></Part>"
            "<Part><PartNumber>1</PartNumber><ETag>{1}</ETag></Part>",
            S3Code.INVALID_PART_ORDER,
        ),
        (
            "<Part><PartNumber>1</PartNumber><ETag>{1}</ETag></Part>"
            "<Part><PartNumber>3</PartNumber><ETag>{2}</ETag></Part>",
            S3Code.INVALID_PART,
        ),
        ("<Part><PartNumber>1</PartNumber><ETag>{2}</ETag></Part>", S3Code.INVALID_PART),
        (
            "<Part><PartNumber>1</PartNumber><ETag>{1}</ETag></Part>"
            "<Part><PartNumber>2</PartNumber><ETag>{2}</ETag></Part>"
            "<Part><PartNumber>4</PartNumber><ETag>{4}</ETag></Part>",
            S3Code.ENTITY_TOO_SMALL,
        ),
        ("", S3Code.MALFORMED_XML),
        ("<Part><PartNumber>x</PartNumber><ETag>{1}</ETag></Part>", S3Code.MALFORMED_XML),
        ("<Part><ETag>{1}</ETag></Part>", S3Code.MALFORMED_XML),
    ],
)
def test_complete_refusals_change_nothing(gw: Gateway, parts: str, code: S3Code) -> None:
    upload_id = gw.create()
    etags = {
        1: gw.part(upload_id, 1, b"1" * (5 * MiB)),
        2: gw.part(upload_id, 2, b"2" * MiB),  # below 5 MiB: only valid as the last part
        4: gw.part(upload_id, 4, b"4"),
    }
    doc = parts.format(None, *(etags.get(i, '"x"') for i in range(1, 5)))
    body = f"<CompleteMultipartUpload>{doc}</CompleteMultipartUpload>".encode()
    req = gw.request("POST", "main/big.bin", query={"uploadId": upload_id}, body=body)
    err = refused(gw, multipart.complete_multipart_upload, req)
    assert err.code is code
    assert err.message.startswith(code.description)
    assert gw.staged() == []
    assert len(gw.part_files()) == 3  # the upload is still there, and can complete
    gw.complete(upload_id, [(1, etags[1]), (2, etags[2])])
    assert gw.staged() == ["big.bin"]


def test_malformed_documents_are_refused(gw: Gateway) -> None:
    upload_id = gw.create()
    for body in (
        b"",
        b"<Complete",
        b"<Other/>",
        b'<!DOCTYPE x [<!ENTITY a "b">]><CompleteMultipartUpload/>',
    ):
        req = gw.request("POST", "main/big.bin", query={"uploadId": upload_id}, body=body)
        assert refused(gw, multipart.complete_multipart_upload, req).code is S3Code.MALFORMED_XML
    assert gw.staged() == []


def test_unknown_uploads(gw: Gateway) -> None:
    upload_id = gw.create()
    for bad in ("0" * 46, "nope", upload_id[:-1] + ("0" if upload_id[-1] != "0" else "1")):
        for handler, method, extra in (
            (multipart.upload_part, "PUT", {"partNumber": "1"}),
            (multipart.complete_multipart_upload, "POST", {}),
            (multipart.abort_multipart_upload, "DELETE", {}),
            (multipart.list_parts, "GET", {}),
        ):
            req = gw.request(method, "main/big.bin", query={"uploadId": bad, **extra}, body=b"x")
            assert refused(gw, handler, req).code is S3Code.NO_SUCH_UPLOAD
    # an upload belongs to its key: another key (or branch) does not find it
    gw.catalog.create_branch("repo", "dev", "main")
    for key in ("main/other.bin", "dev/big.bin"):
        req = gw.request("PUT", key, query={"uploadId": upload_id, "partNumber": "1"}, body=b"x")
        assert refused(gw, multipart.upload_part, req).code is S3Code.NO_SUCH_UPLOAD
    assert gw.part_files() == []


@pytest.mark.parametrize("number", ["0", "10001", "-1", "one", ""])
def test_part_numbers_are_1_to_10000(gw: Gateway, number: str) -> None:
    upload_id = gw.create()
    req = gw.request(
        "PUT", "main/big.bin", query={"uploadId": upload_id, "partNumber": number}, body=b"x"
    )
    assert refused(gw, multipart.upload_part, req).code is S3Code.INVALID_ARGUMENT
    gw.part(upload_id, 10000, b"last")


def test_abort_removes_the_parts(gw: Gateway) -> None:
    upload_id = gw.create()
    gw.part(upload_id, 1, b"x" * 1000)
    gw.part(upload_id, 2, b"y" * 1000)
    assert len(gw.part_files()) == 2
    response = gw.run(
        multipart.abort_multipart_upload,
        gw.request("DELETE", "main/big.bin", query={"uploadId": upload_id}),
    )
    assert response.status_code == 204
    assert gw.part_files() == []
    assert gw.staged() == []
    req = gw.request("DELETE", "main/big.bin", query={"uploadId": upload_id})
    assert refused(gw, multipart.abort_multipart_upload, req).code is S3Code.NO_SUCH_UPLOAD


def test_upload_part_copy_from_any_ref_and_repository(gw: Gateway) -> None:
    source = bytes(range(256)) * (40 * 1024)  # 10 MiB
    gw.catalog.upload_object("repo", "main", "src.bin", source)
    gw.catalog.commit("repo", "main", "source", committer="admin")
    gw.catalog.create_tag("repo", "v1", "main")
    gw.catalog.delete_object("repo", "main", "src.bin")  # only the tag has it now
    gw.catalog.create_repository("other", "local://other")
    gw.catalog.upload_object("other", "main", "o.txt", b"from another repository")
    upload_id = gw.create()

    def copy(number: int, src: str, rng: str | None = None) -> ET.Element:
        headers = {"x-amz-copy-source": src}
        if rng:
            headers["x-amz-copy-source-range"] = rng
        req = gw.request(
            "PUT",
            "main/big.bin",
            query={"uploadId": upload_id, "partNumber": str(number)},
            headers=headers,
        )
        return xml_of(gw.run(multipart.upload_part, req))

    first = copy(1, "/repo/v1/src.bin", f"bytes=0-{5 * MiB - 1}")
    assert first.tag == NS + "CopyPartResult"
    assert first.findtext(NS + "ETag") == quoted_md5(source[: 5 * MiB])
    assert (first.findtext(NS + "LastModified") or "").endswith("Z")
    second = copy(2, "repo/v1/src.bin")  # no range: the whole object
    third = copy(3, "other/main/o%2Etxt")  # URL-encoded, as clients send it
    gw.complete(
        upload_id,
        [
            (1, first.findtext(NS + "ETag") or ""),
            (2, second.findtext(NS + "ETag") or ""),
            (3, third.findtext(NS + "ETag") or ""),
        ],
    )
    data = gw.catalog.read_object("repo", "main", "big.bin", 0, None)
    assert data == source[: 5 * MiB] + source + b"from another repository"


@pytest.mark.parametrize(
    ("source", "rng", "code"),
    [
        ("repo/main/missing", None, S3Code.NO_SUCH_KEY),
        ("nosuchrepo/main/src.bin", None, S3Code.NO_SUCH_BUCKET),
        ("repo/main", None, S3Code.INVALID_ARGUMENT),
        ("repo/main/src.bin", "bytes=5-2", S3Code.INVALID_ARGUMENT),
        ("repo/main/src.bin", "bytes=0-100", S3Code.INVALID_RANGE),
        ("repo/main/src.bin", "lines=1-2", S3Code.INVALID_ARGUMENT),
    ],
)
def test_upload_part_copy_refusals(gw: Gateway, source: str, rng: str | None, code: S3Code) -> None:
    gw.catalog.upload_object("repo", "main", "src.bin", b"0123456789")
    upload_id = gw.create()
    headers = {"x-amz-copy-source": source}
    if rng:
        headers["x-amz-copy-source-range"] = rng
    req = gw.request(
        "PUT", "main/big.bin", query={"uploadId": upload_id, "partNumber": "1"}, headers=headers
    )
    assert refused(gw, multipart.upload_part, req).code is code
    assert gw.part_files() == []


def test_copy_needs_read_permission_on_the_source(gw: Gateway) -> None:
    gw.grant("writer", "fs:WriteObject")
    gw.catalog.upload_object("repo", "main", "src.bin", b"0123456789")
    req = gw.request("POST", "main/big.bin", query={"uploads": ""}, user="writer")
    upload_id = xml_of(gw.run(multipart.create_multipart_upload, req)).findtext(NS + "UploadId")
    assert upload_id
    req = gw.request(
        "PUT",
        "main/big.bin",
        query={"uploadId": upload_id, "partNumber": "1"},
        headers={"x-amz-copy-source": "repo/main/src.bin"},
        user="writer",
    )
    err = refused(gw, multipart.upload_part, req)
    assert err.code is S3Code.ACCESS_DENIED and "fs:ReadObject" in err.message
    # writing parts needs only fs:WriteObject
    req = gw.request(
        "PUT",
        "main/big.bin",
        query={"uploadId": upload_id, "partNumber": "1"},
        body=b"x",
        user="writer",
    )
    assert gw.run(multipart.upload_part, req).status_code == 200


def test_permissions_are_lakefs_actions(gw: Gateway) -> None:
    gw.grant("reader", "fs:ReadObject", "fs:ListObjects")
    req = gw.request("POST", "main/big.bin", query={"uploads": ""}, user="reader")
    err = refused(gw, multipart.create_multipart_upload, req)
    assert err.code is S3Code.ACCESS_DENIED and "fs:WriteObject" in err.message
    upload_id = gw.create()
    gw.part(upload_id, 1, b"x")
    req = gw.request("DELETE", "main/big.bin", query={"uploadId": upload_id}, user="reader")
    err = refused(gw, multipart.abort_multipart_upload, req)
    assert "fs:DeleteObject" in err.message
    req = gw.request("GET", "main/big.bin", query={"uploadId": upload_id}, user="reader")
    assert gw.run(multipart.list_parts, req).status_code == 200
    req = gw.request("GET", None, query={"uploads": ""}, user="reader")
    assert gw.run(multipart.list_multipart_uploads, req).status_code == 200


def test_write_targets_are_checked_at_create_and_at_complete(gw: Gateway) -> None:
    gw.catalog.create_tag("repo", "v1", "main")
    for key, code in (
        ("v1/a", S3Code.NO_SUCH_BUCKET),
        ("nobranch/a", S3Code.NO_SUCH_BUCKET),
        ("main~1/a", S3Code.INVALID_ARGUMENT),
        ("main/", S3Code.INVALID_ARGUMENT),
    ):
        req = gw.request("POST", key, query={"uploads": ""})
        assert refused(gw, multipart.create_multipart_upload, req).code is code, key
    req = gw.request("POST", "main/a", bucket="nosuch", query={"uploads": ""})
    assert refused(gw, multipart.create_multipart_upload, req).code is S3Code.NO_SUCH_BUCKET
    req = gw.request("POST", "main/a", bucket="mir", query={"uploads": ""})
    err = refused(gw, multipart.create_multipart_upload, req)
    assert err.code is S3Code.ACCESS_DENIED and "mirror" in err.message

    gw.catalog.create_branch("repo", "dev", "main")
    upload_id = gw.create("dev/x.bin")
    etag = gw.part(upload_id, 1, b"data", key="dev/x.bin")
    repo = gw.catalog.get_repository("repo")
    add_rule(gw.catalog.kv, repo, "dev")  # protected after the upload started
    part = f"<Part><PartNumber>1</PartNumber><ETag>{etag}</ETag></Part>"
    body = f"<CompleteMultipartUpload>{part}</CompleteMultipartUpload>"
    req = gw.request("POST", "dev/x.bin", query={"uploadId": upload_id}, body=body.encode())
    assert refused(gw, multipart.complete_multipart_upload, req).code is S3Code.PROTECTED_BRANCH
    assert [s.path for s in gw.catalog.iter_objects("repo", "dev")] == []
    req = gw.request("POST", "dev/y.bin", query={"uploads": ""})
    assert refused(gw, multipart.create_multipart_upload, req).code is S3Code.PROTECTED_BRANCH
    delete_rule(gw.catalog.kv, repo, "dev")
    gw.catalog.delete_branch("repo", "dev")  # gone after the upload started
    req = gw.request("POST", "dev/x.bin", query={"uploadId": upload_id}, body=body.encode())
    assert refused(gw, multipart.complete_multipart_upload, req).code is S3Code.NO_SUCH_BUCKET
    gw.catalog.create_branch("repo", "dev", "main")
    gw.complete(upload_id, [(1, etag)], key="dev/x.bin")
    assert gw.catalog.read_object("repo", "dev", "x.bin", 0, None) == b"data"


def test_mirrors_refuse_every_write(gw: Gateway) -> None:
    for handler, method, query in (
        (multipart.create_multipart_upload, "POST", {"uploads": ""}),
        (multipart.upload_part, "PUT", {"uploadId": "0" * 46, "partNumber": "1"}),
        (multipart.complete_multipart_upload, "POST", {"uploadId": "0" * 46}),
        (multipart.abort_multipart_upload, "DELETE", {"uploadId": "0" * 46}),
    ):
        req = gw.request(method, "main/a", bucket="mir", query=query, body=b"x")
        err = refused(gw, handler, req)
        assert err.code is S3Code.ACCESS_DENIED and "origin/repo" in err.message


def test_list_parts_pages_with_markers(gw: Gateway) -> None:
    upload_id = gw.create()
    etags = {n: gw.part(upload_id, n, str(n).encode() * n) for n in (1, 2, 3, 5, 8)}
    query = {"uploadId": upload_id, "max-parts": "2"}
    root = xml_of(gw.run(multipart.list_parts, gw.request("GET", "main/big.bin", query=query)))
    assert root.tag == NS + "ListPartsResult"
    assert root.findtext(NS + "UploadId") == upload_id
    assert root.findtext(NS + "Key") == "main/big.bin"
    assert root.findtext(NS + "IsTruncated") == "true"
    assert root.findtext(NS + "MaxParts") == "2"
    assert root.findtext(f"{NS}Initiator/{NS}ID") == "admin"
    seen = [int(p.findtext(NS + "PartNumber") or 0) for p in root.findall(NS + "Part")]
    assert seen == [1, 2]
    first = root.findall(NS + "Part")[0]
    assert first.findtext(NS + "ETag") == etags[1] and first.findtext(NS + "Size") == "1"
    while root.findtext(NS + "IsTruncated") == "true":
        query["part-number-marker"] = root.findtext(NS + "NextPartNumberMarker") or ""
        root = xml_of(gw.run(multipart.list_parts, gw.request("GET", "main/big.bin", query=query)))
        seen += [int(p.findtext(NS + "PartNumber") or 0) for p in root.findall(NS + "Part")]
    assert seen == [1, 2, 3, 5, 8]


def test_list_multipart_uploads_in_key_then_start_order(gw: Gateway) -> None:
    gw.catalog.create_branch("repo", "dev", "main")
    ids = [
        (key, gw.create(key))
        for key in ("main/b", "main/a", "dev/z", "main/a", "main/a/x", "main/c d+é")
    ]
    expected = sorted(ids, key=lambda t: (t[0], t[1]))
    # uploads of one key come in the order they were started
    assert [i for k, i in expected if k == "main/a"] == [i for k, i in ids if k == "main/a"]

    def page(**params: str) -> ET.Element:
        req = gw.request("GET", None, query={"uploads": "", **params})
        return xml_of(gw.run(multipart.list_multipart_uploads, req))

    def listed(root: ET.Element) -> list[tuple[str, str]]:
        return [
            (u.findtext(NS + "Key") or "", u.findtext(NS + "UploadId") or "")
            for u in root.findall(NS + "Upload")
        ]

    root = page()
    assert listed(root) == expected
    assert root.findtext(NS + "IsTruncated") == "false"
    assert listed(page(prefix="main/a")) == [t for t in expected if t[0].startswith("main/a")]
    seen: list[tuple[str, str]] = []
    params = {"max-uploads": "2"}
    while True:
        root = page(**params)
        seen += listed(root)
        if root.findtext(NS + "IsTruncated") != "true":
            break
        params["key-marker"] = root.findtext(NS + "NextKeyMarker") or ""
        params["upload-id-marker"] = root.findtext(NS + "NextUploadIdMarker") or ""
    assert seen == expected
    # a key marker alone skips every upload of that key
    assert listed(page(**{"key-marker": "main/a"})) == [t for t in expected if t[0] > "main/a"]
    encoded = page(**{"encoding-type": "url", "prefix": "main/c"})
    assert encoded.findtext(NS + "EncodingType") == "url"
    assert listed(encoded)[0][0] == "main/c%20d%2B%C3%A9"
    # ended uploads are no longer listed
    gw.run(
        multipart.abort_multipart_upload,
        gw.request("DELETE", "main/b", query={"uploadId": ids[0][1]}),
    )
    assert ("main/b", ids[0][1]) not in listed(page())


def test_uploads_live_in_the_shared_kv(gw: Gateway) -> None:
    upload_id = gw.create()
    gw.part(upload_id, 1, b"x" * 100)
    # a second server process over the same KV and namespace sees the same upload
    other = Gateway.__new__(Gateway)
    other.root = gw.root
    other.catalog = open_embedded(gw.root)
    other.auth = AuthStore(other.catalog.kv)
    other.state = GatewayState(other.catalog, other.auth, GatewaySettings())
    store = UploadStore(other.catalog.kv)
    upload = store.get(other.catalog.get_repository("repo"), upload_id)
    assert upload is not None and [p.number for p in store.parts(upload)] == [1]
    other.complete(upload_id, [(1, quoted_md5(b"x" * 100))])
    assert gw.catalog.read_object("repo", "main", "big.bin", 0, None) == b"x" * 100


def test_a_body_shorter_than_its_length_stores_nothing(gw: Gateway) -> None:
    upload_id = gw.create()
    req = gw.request(
        "PUT", "main/big.bin", query={"uploadId": upload_id, "partNumber": "1"}, body=b"abc"
    )
    req.content_length = 10
    assert refused(gw, multipart.upload_part, req).code is S3Code.INCOMPLETE_BODY
    assert gw.part_files() == []


def test_a_body_failing_verification_stores_nothing(gw: Gateway) -> None:
    upload_id = gw.create()

    async def failing() -> AsyncIterator[bytes]:
        yield b"x" * MiB
        raise S3Error(S3Code.XAMZ_CONTENT_SHA256_MISMATCH)

    req = gw.request("PUT", "main/big.bin", query={"uploadId": upload_id, "partNumber": "1"})
    req.body, req.content_length = failing(), None
    assert refused(gw, multipart.upload_part, req).code is S3Code.XAMZ_CONTENT_SHA256_MISMATCH
    assert gw.part_files() == []
    root = xml_of(
        gw.run(
            multipart.list_parts, gw.request("GET", "main/big.bin", query={"uploadId": upload_id})
        )
    )
    assert root.findall(NS + "Part") == []


def test_a_part_finishing_after_its_upload_ended_is_not_kept(gw: Gateway) -> None:
    upload_id = gw.create()
    store = UploadStore(gw.catalog.kv)
    upload = store.get(gw.catalog.get_repository("repo"), upload_id)
    assert upload is not None

    async def body_then_abort() -> AsyncIterator[bytes]:
        yield b"x" * 1000
        # another process aborts the upload while this part is still arriving
        assert store.remove(upload, gw.catalog.block_store(gw.catalog.get_repository("repo")))

    req = gw.request("PUT", "main/big.bin", query={"uploadId": upload_id, "partNumber": "1"})
    req.body, req.content_length = body_then_abort(), None
    assert refused(gw, multipart.upload_part, req).code is S3Code.NO_SUCH_UPLOAD
    assert gw.part_files() == []
    assert list(store.parts(upload)) == []


def test_a_part_copied_from_a_mirror_before_its_data_arrived_is_slow_down(gw: Gateway) -> None:
    gw.catalog.create_repository("mir2", "local://mir2", read_only=True, mirror_of="origin/x")
    missing = Entry(address="data/not-yet/here", size=10, checksum="0" * 32, mtime=0)
    gw.catalog.stage_object("mir2", "main", "late.bin", missing, force=True)
    upload_id = gw.create()
    query = {"uploadId": upload_id, "partNumber": "1"}
    req = gw.request(
        "PUT", "main/big.bin", query=query, headers={"x-amz-copy-source": "mir2/main/late.bin"}
    )
    err = refused(gw, multipart.upload_part, req)
    assert err.code is S3Code.SLOW_DOWN and err.headers["Retry-After"]
    assert gw.part_files() == []


def test_a_part_gone_from_storage_is_an_invalid_part(gw: Gateway) -> None:
    upload_id = gw.create()
    first = gw.part(upload_id, 1, b"1" * (5 * MiB))
    second = gw.part(upload_id, 2, b"2")
    part_file = gw.root / "repo" / PARTS_PREFIX / gw.part_files()[1]
    part_file.unlink()
    doc = "".join(
        f"<Part><PartNumber>{n}</PartNumber><ETag>{e}</ETag></Part>"
        for n, e in ((1, first), (2, second))
    )
    body = f"<CompleteMultipartUpload>{doc}</CompleteMultipartUpload>".encode()
    req = gw.request("POST", "main/big.bin", query={"uploadId": upload_id}, body=body)
    err = refused(gw, multipart.complete_multipart_upload, req)
    assert err.code is S3Code.INVALID_PART and "data is missing" in err.message
    assert gw.staged() == []
    data = gw.root / "repo" / "data"
    assert not data.exists() or not [p for p in data.rglob("*") if p.is_file()]
    # the part can be uploaded again, and the upload completes
    gw.complete(upload_id, [(1, first), (2, gw.part(upload_id, 2, b"2"))])
    assert gw.catalog.read_object("repo", "main", "big.bin", 0, None) == b"1" * (5 * MiB) + b"2"


def test_a_repository_created_again_has_none_of_the_uploads_before(gw: Gateway) -> None:
    upload_id = gw.create()
    etag = gw.part(upload_id, 1, b"x" * 100)
    gw.catalog.delete_repository("repo")
    gw.catalog.create_repository("repo", "local://repo-again")
    listed = xml_of(
        gw.run(multipart.list_multipart_uploads, gw.request("GET", None, query={"uploads": ""}))
    )
    assert listed.findall(NS + "Upload") == []
    doc = "<CompleteMultipartUpload><Part><PartNumber>1</PartNumber><ETag>{}</ETag></Part>"
    complete = (doc.format(etag) + "</CompleteMultipartUpload>").encode()
    for handler, method, extra, body in (
        (multipart.upload_part, "PUT", {"partNumber": "2"}, b"y"),
        (multipart.complete_multipart_upload, "POST", {}, complete),
        (multipart.abort_multipart_upload, "DELETE", {}, b""),
        (multipart.list_parts, "GET", {}, b""),
    ):
        query = {"uploadId": upload_id, **extra}
        req = gw.request(method, "main/big.bin", query=query, body=body)
        assert refused(gw, handler, req).code is S3Code.NO_SUCH_UPLOAD
    assert gw.staged() == []


def test_an_upload_created_as_its_repository_is_deleted_leaves_no_record(
    gw: Gateway, monkeypatch: pytest.MonkeyPatch
) -> None:
    catalog = gw.catalog
    first = catalog.get_repository("repo")
    resolve = catalog.get_repository

    def deleted_after_resolution(name: str) -> Any:
        # the write target resolves the repository, which another process deletes and creates
        # again (its cleanups done) before the upload's records are written
        found = resolve(name)
        if found.instance_uid == first.instance_uid:
            monkeypatch.setattr(catalog, "get_repository", resolve)
            catalog.delete_repository(name)
            catalog.create_repository(name, "local://repo-again")
        return found

    monkeypatch.setattr(catalog, "get_repository", deleted_after_resolution)
    req = gw.request("POST", "main/big.bin", query={"uploads": ""})
    assert refused(gw, multipart.create_multipart_upload, req).code is S3Code.NO_SUCH_BUCKET
    assert [k for k, _ in catalog.kv.scan(b"gateway/multipart/")] == []


def _complete_request(gw: Gateway, upload_id: str, parts: Iterable[tuple[int, str]]) -> S3Request:
    doc = "".join(f"<Part><PartNumber>{n}</PartNumber><ETag>{e}</ETag></Part>" for n, e in parts)
    body = f"<CompleteMultipartUpload>{doc}</CompleteMultipartUpload>".encode()
    return gw.request("POST", "main/big.bin", query={"uploadId": upload_id}, body=body)


def test_a_completion_repeated_with_its_parts_answers_as_the_first(gw: Gateway) -> None:
    upload_id = gw.create()
    parts = [(1, gw.part(upload_id, 1, b"a" * (5 * MiB))), (2, gw.part(upload_id, 2, b"b"))]
    first = gw.complete(upload_id, parts)
    staged = gw.catalog.stat_object("repo", "main", "big.bin").entry
    again = gw.complete(upload_id, [(n, e.strip('"')) for n, e in parts])  # quotes or not
    assert ET.tostring(again) == ET.tostring(first)
    # nothing was assembled or staged again
    assert gw.catalog.stat_object("repo", "main", "big.bin").entry == staged
    for req in (
        _complete_request(gw, upload_id, parts[:1]),
        _complete_request(gw, upload_id, [(1, parts[0][1]), (2, parts[0][1])]),
        gw.request("POST", "main/other.bin", query={"uploadId": upload_id}, body=b"<x/>"),
        # an unknown upload is refused before its document is read
        gw.request("POST", "main/big.bin", query={"uploadId": "0" * 46}, body=b"not xml"),
    ):
        err = refused(gw, multipart.complete_multipart_upload, req)
        assert err.code is S3Code.NO_SUCH_UPLOAD
        assert err.message.startswith("The specified upload does not exist.")


def test_two_completions_of_one_upload_at_once_answer_alike(gw: Gateway) -> None:
    upload_id = gw.create()
    parts = [(1, gw.part(upload_id, 1, b"a" * (6 * MiB))), (2, gw.part(upload_id, 2, b"b"))]

    async def both() -> list[Response]:
        return list(
            await asyncio.gather(
                multipart.complete_multipart_upload(_complete_request(gw, upload_id, parts)),
                multipart.complete_multipart_upload(_complete_request(gw, upload_id, parts)),
            )
        )

    answers = asyncio.run(both())
    assert [a.status_code for a in answers] == [200, 200]
    assert len({xml_of(a).findtext(NS + "ETag") for a in answers}) == 1
    assert gw.catalog.read_object("repo", "main", "big.bin", 0, None) == b"a" * (6 * MiB) + b"b"
    assert gw.part_files() == []
