"""Bad input through the gateway of a live server: each answers its S3 error and changes nothing.

Wrong secret, unknown key, expired presigned URL, a skewed clock (botocore signing with a
shifted clock), writes to a tag, a commit or a ref expression, a bucket that is not a
repository, traversal and over-long keys, malformed DeleteObjects documents (signed by hand so
that the body is exactly the bad one), read-only repositories and protected branches, and the
inputs the parsers' fuzzing found (tests/fuzz).
"""

from __future__ import annotations

import datetime
import hashlib
import socket
from collections.abc import Callable, Iterator
from typing import Any
from unittest import mock

import httpx
import pytest
from botocore.auth import S3SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials
from botocore.exceptions import ClientError

from tests.gateway.conftest import S3ClientFactory
from tests.gateway.live import REGION, Live


def code_of(info: pytest.ExceptionInfo[ClientError]) -> str:
    return str(info.value.response["Error"]["Code"])


def refused(call: Callable[[], object]) -> dict[str, Any]:
    """Run a boto3 call that must fail; return its error (code, message, ...)."""
    with pytest.raises(ClientError) as info:
        call()
    error: dict[str, Any] = info.value.response["Error"]
    error["Status"] = info.value.response["ResponseMetadata"]["HTTPStatusCode"]
    return error


@pytest.fixture
def seeded(live: Live, s3: Any, repo: str) -> Iterator[str]:
    """A repository with one object on ``main``; the test checks that it stays the only one."""
    s3.put_object(Bucket=repo, Key="main/seed", Body=b"seed")
    yield repo
    assert live.paths(repo, "main") == ["seed"]
    assert live.read(repo, "main", "seed") == b"seed"


@pytest.fixture
def shifted_clock() -> Iterator[Callable[[float], None]]:
    """Make botocore sign as if its clock were off by some seconds."""
    real = datetime.datetime.now
    offset = [0.0]

    def now() -> datetime.datetime:
        return real(datetime.UTC).replace(tzinfo=None) + datetime.timedelta(seconds=offset[0])

    with mock.patch("botocore.auth.get_current_datetime", now):
        yield lambda seconds: offset.__setitem__(0, seconds)


def test_wrong_secret_and_unknown_key(live: Live, s3_client: S3ClientFactory, seeded: str) -> None:
    key_id, _ = live.key
    wrong = s3_client((key_id, "not-the-secret"))
    error = refused(lambda: wrong.put_object(Bucket=seeded, Key="main/x", Body=b"x"))
    assert (error["Code"], error["Status"]) == ("SignatureDoesNotMatch", 403)
    assert refused(lambda: wrong.get_object(Bucket=seeded, Key="main/seed"))["Code"] == (
        "SignatureDoesNotMatch"
    )
    unknown = s3_client(("AKIANOSUCHKEY0000000", "whatever"))
    error = refused(lambda: unknown.put_object(Bucket=seeded, Key="main/x", Body=b"x"))
    assert (error["Code"], error["Status"]) == ("InvalidAccessKeyId", 403)
    assert "whatever" not in str(error)


def test_unsigned_requests_are_refused(live: Live, seeded: str) -> None:
    # a bare request to the gateway (signed: the dispatch decides; unsigned: host name) is
    # refused; an unsigned one on the API's host reaches the API
    answer = httpx.put(
        f"{live.url}/{seeded}/main/x",
        content=b"x",
        headers={"Host": "s3.local.lakefs.io"},
    )
    assert answer.status_code == 403 and b"<Code>AccessDenied</Code>" in answer.content


def test_skewed_clock(
    s3_client: S3ClientFactory, seeded: str, shifted_clock: Callable[[float], None]
) -> None:
    client = s3_client()
    shifted_clock(-30 * 60)
    error = refused(lambda: client.put_object(Bucket=seeded, Key="main/x", Body=b"x"))
    assert (error["Code"], error["Status"]) == ("RequestTimeTooSkewed", 403)
    shifted_clock(+30 * 60)
    error = refused(lambda: client.put_object(Bucket=seeded, Key="main/x", Body=b"x"))
    assert error["Code"] in ("RequestTimeTooSkewed", "AccessDenied") and error["Status"] == 403
    shifted_clock(0)
    assert client.get_object(Bucket=seeded, Key="main/seed")["Body"].read() == b"seed"


def test_expired_presigned_url(
    s3_client: S3ClientFactory, seeded: str, shifted_clock: Callable[[float], None]
) -> None:
    client = s3_client(signature_version="s3v4")
    shifted_clock(-600)
    expired_get = client.generate_presigned_url(
        "get_object", Params={"Bucket": seeded, "Key": "main/seed"}, ExpiresIn=60
    )
    expired_put = client.generate_presigned_url(
        "put_object", Params={"Bucket": seeded, "Key": "main/x"}, ExpiresIn=60
    )
    shifted_clock(0)
    for answer in (httpx.get(expired_get), httpx.put(expired_put, content=b"x")):
        assert answer.status_code == 403
        assert b"<Code>AccessDenied</Code>" in answer.content
        assert b"expired" in answer.content


def test_writes_only_to_branches(live: Live, s3: Any, seeded: str) -> None:
    commit = live.commit(seeded)
    live.create_tag(seeded, "v1", commit)
    for ref, code in [
        ("v1", "NoSuchBucket"),
        (commit, "NoSuchBucket"),
        ("nobranch", "NoSuchBucket"),
        ("main~1", "InvalidArgument"),
    ]:
        key = f"{ref}/x"
        error = refused(lambda: s3.put_object(Bucket=seeded, Key=key, Body=b"x"))  # noqa: B023
        assert error["Code"] == code, ref
        assert "not a branch" in error["Message"] and "writes go to branches" in error["Message"]
        copy = refused(
            lambda: s3.copy_object(Bucket=seeded, Key=key, CopySource=f"{seeded}/main/seed")  # noqa: B023
        )
        assert copy["Code"] == code
        mpu = refused(lambda: s3.create_multipart_upload(Bucket=seeded, Key=key))  # noqa: B023
        assert mpu["Code"] == code
    # reads at those refs work
    assert s3.get_object(Bucket=seeded, Key="v1/seed")["Body"].read() == b"seed"
    assert [t["id"] for t in live.http.get(f"/repositories/{seeded}/tags").json()["results"]] == [
        "v1"
    ]


def test_bucket_that_is_not_a_repository(s3: Any) -> None:
    for call in (
        lambda: s3.put_object(Bucket="no-such-repo", Key="main/x", Body=b"x"),
        lambda: s3.get_object(Bucket="no-such-repo", Key="main/x"),
        lambda: s3.list_objects_v2(Bucket="no-such-repo", Prefix="main/"),
        lambda: s3.delete_object(Bucket="no-such-repo", Key="main/x"),
        lambda: s3.delete_objects(Bucket="no-such-repo", Delete={"Objects": [{"Key": "main/x"}]}),
    ):
        error = refused(call)
        assert (error["Code"], error["Status"]) == ("NoSuchBucket", 404)


@pytest.mark.parametrize(
    ("key", "code"),
    [
        ("main/../seed", "InvalidArgument"),
        ("main/a/../../x", "InvalidArgument"),
        ("main/./x", "InvalidArgument"),
        ("main//abs", "InvalidArgument"),
        ("main/", "InvalidArgument"),
        ("main/" + "k" * 1100, "KeyTooLongError"),
    ],
)
def test_bad_keys(s3: Any, seeded: str, key: str, code: str) -> None:
    error = refused(lambda: s3.put_object(Bucket=seeded, Key=key, Body=b"evil"))
    assert (error["Code"], error["Status"]) == (code, 400)
    copy = refused(lambda: s3.copy_object(Bucket=seeded, Key=key, CopySource=f"{seeded}/main/seed"))
    assert copy["Code"] == code


def _signed_post(live: Live, path: str, body: bytes) -> httpx.Response:
    """POST ``body`` exactly as given, SigV4-signed with the administrator's key."""
    url = f"{live.url}{path}"
    request = AWSRequest(
        "POST", url, data=body, headers={"x-amz-content-sha256": hashlib.sha256(body).hexdigest()}
    )
    S3SigV4Auth(Credentials(*live.key), "s3", REGION).add_auth(request)
    return httpx.post(url, content=body, headers=dict(request.headers.items()))


@pytest.mark.parametrize(
    "body",
    [
        b"",
        b"not xml at all",
        b"<Delete><Object><Key>main/seed</Key></Object>",
        b"<Remove><Object><Key>main/seed</Key></Object></Remove>",
        b"<Delete></Delete>",
        b"<Delete><Object><VersionId>1</VersionId></Object></Delete>",
        b"<Delete>" + b"<Object><Key>main/seed</Key></Object>" * 1001 + b"</Delete>",
        b'<?xml version="1.0"?><!DOCTYPE d [<!ENTITY e "main/seed">]>'
        b"<Delete><Object><Key>&e;</Key></Object></Delete>",
    ],
)
def test_malformed_delete_objects(live: Live, seeded: str, body: bytes) -> None:
    answer = _signed_post(live, f"/{seeded}?delete", body)
    assert answer.status_code == 400, answer.text
    assert b"<Code>MalformedXML</Code>" in answer.content


def test_well_formed_delete_signed_by_hand(live: Live, s3: Any, repo: str) -> None:
    # the same signing path as the malformed cases, with a good document: it deletes
    s3.put_object(Bucket=repo, Key="main/d", Body=b"d")
    body = b"<Delete><Object><Key>main/d</Key></Object></Delete>"
    answer = _signed_post(live, f"/{repo}?delete", body)
    assert answer.status_code == 200 and b"<Deleted><Key>main/d</Key></Deleted>" in answer.content
    assert live.paths(repo, "main") == []


def test_read_only_repository(live: Live, s3: Any) -> None:
    name = "gw-ro-" + hashlib.sha1(live.url.encode()).hexdigest()[:8]
    made = live.http.post(
        "/repositories",
        json={"name": name, "storage_namespace": live.server.namespace(name), "read_only": True},
    )
    assert made.status_code == 201, made.text
    for call in (
        lambda: s3.put_object(Bucket=name, Key="main/x", Body=b"x"),
        lambda: s3.delete_object(Bucket=name, Key="main/x"),
        lambda: s3.delete_objects(Bucket=name, Delete={"Objects": [{"Key": "main/x"}]}),
        lambda: s3.create_multipart_upload(Bucket=name, Key="main/x"),
    ):
        error = refused(call)
        assert (error["Code"], error["Status"]) == ("ErrReadOnlyRepository", 403)
        assert name in error["Message"]
    assert s3.list_objects_v2(Bucket=name, Prefix="main/")["KeyCount"] == 0


def test_protected_branch(live: Live, s3: Any, seeded: str) -> None:
    rules = live.http.put(
        f"/repositories/{seeded}/settings/branch_protection", json=[{"pattern": "main"}]
    )
    assert rules.status_code == 204, rules.text
    for call in (
        lambda: s3.put_object(Bucket=seeded, Key="main/x", Body=b"x"),
        lambda: s3.copy_object(Bucket=seeded, Key="main/x", CopySource=f"{seeded}/main/seed"),
        lambda: s3.delete_object(Bucket=seeded, Key="main/seed"),
    ):
        error = refused(call)
        assert (error["Code"], error["Status"]) == ("ErrWriteToProtectedBranch", 403)
    answer = s3.delete_objects(Bucket=seeded, Delete={"Objects": [{"Key": "main/seed"}]})
    assert [e["Code"] for e in answer["Errors"]] == ["ErrWriteToProtectedBranch"]


def _signed(live: Live, method: str, url: str, body: bytes, sha256: str, host: str = "") -> Any:
    headers = {"x-amz-content-sha256": sha256}
    request = AWSRequest(method, url, data=body, headers=headers)
    S3SigV4Auth(Credentials(*live.key), "s3", REGION).add_auth(request)
    sent = dict(request.headers.items())
    if host:
        sent["Host"] = host
    return sent


def test_body_failing_its_hash_stores_nothing(live: Live, seeded: str) -> None:
    url = f"{live.url}/{seeded}/main/tampered"
    claimed = hashlib.sha256(b"the body that was signed").hexdigest()
    headers = _signed(live, "PUT", url, b"the body that was signed", claimed)
    answer = httpx.put(url, content=b"another body, same length!", headers=headers)
    assert answer.status_code == 400, answer.text
    assert b"<Code>XAmzContentSHA256Mismatch</Code>" in answer.content


def test_virtual_host_addressing(live: Live, seeded: str) -> None:
    # the client resolves <bucket>.s3.local.lakefs.io to the server; the Host names the bucket
    port = live.url.rsplit(":", 1)[1]
    host = f"{seeded}.s3.local.lakefs.io:{port}"
    virtual = f"http://{host}/main/seed"
    headers = _signed(live, "GET", virtual, b"", hashlib.sha256(b"").hexdigest(), host)
    answer = httpx.get(f"{live.url}/main/seed", headers=headers)
    assert answer.status_code == 200, answer.text
    assert answer.content == b"seed"


def test_an_object_over_5_gib_is_refused_before_its_body(live: Live, seeded: str) -> None:
    url = f"{live.url}/{seeded}/main/huge"
    headers = _signed(live, "PUT", url, b"", "UNSIGNED-PAYLOAD")
    headers["Content-Length"] = str(6 << 30)
    headers["Expect"] = "100-continue"
    host, port = live.url.removeprefix("http://").split(":")
    headers["Host"] = f"{host}:{port}"
    lines = [f"PUT /{seeded}/main/huge HTTP/1.1", *(f"{k}: {v}" for k, v in headers.items())]
    with socket.create_connection((host, int(port)), timeout=30) as conn:
        conn.sendall(("\r\n".join(lines) + "\r\n\r\n").encode())
        answer = b""
        while b"</Error>" not in answer:
            piece = conn.recv(65536)
            assert piece, answer
            answer += piece
    assert answer.startswith(b"HTTP/1.1 400"), answer
    assert b"<Code>EntityTooLarge</Code>" in answer


def test_inputs_the_fuzzers_found_answer_their_s3_errors(live: Live, s3: Any, seeded: str) -> None:
    # each answered 500 before (an exception escaping its parser): tests/fuzz/test_regressions.py
    url = f"{live.url}/{seeded}/main/seed"
    signed = _signed(live, "GET", url, b"", hashlib.sha256(b"").hexdigest())
    authorization = signed["Authorization"].rpartition("Signature=")[0] + "Signature=" + "é" * 64
    forged = {k: v.encode() for k, v in {**signed, "Authorization": authorization}.items()}
    answer = httpx.get(url, headers=forged)
    assert answer.status_code == 403 and b"<Code>SignatureDoesNotMatch</Code>" in answer.content
    v2 = {"Authorization": f"AWS {live.key[0]}:c2lnbmF0dXJl", "Date": "Wed, 01 May 22024 1:0:0 GMT"}
    answer = httpx.get(url, headers=v2)
    assert answer.status_code == 403 and b"invalid date" in answer.content, answer.text
    part = b"<Part><PartNumber>\xc2\xb2</PartNumber><ETag>e</ETag></Part>"
    body = b"<CompleteMultipartUpload>" + part + b"</CompleteMultipartUpload>"
    upload_id = s3.create_multipart_upload(Bucket=seeded, Key="main/big")["UploadId"]
    answer = _signed_post(live, f"/{seeded}/main/big?uploadId={upload_id}", body)
    assert answer.status_code == 400 and b"<Code>MalformedXML</Code>" in answer.content, answer.text
    s3.abort_multipart_upload(Bucket=seeded, Key="main/big", UploadId=upload_id)
    ranged = {**signed, "Range": "bytes=" + "1" * 5000 + "-"}
    answer = httpx.get(url, headers=ranged)
    assert answer.status_code == 416 and b"<Code>InvalidRange</Code>" in answer.content
    upload = f"{url}?partNumber=%C2%B2&uploadId=nosuch"
    answer = httpx.put(upload, headers=_signed(live, "PUT", upload, b"", "UNSIGNED-PAYLOAD"))
    assert answer.status_code == 400 and b"<Code>InvalidArgument</Code>" in answer.content


def test_protection_patterns_the_fuzzers_found(live: Live, s3: Any, seeded: str) -> None:
    rules = f"/repositories/{seeded}/settings/branch_protection"
    nested = live.http.put(rules, json=[{"pattern": "{" * 1000}])  # RecursionError: 500
    assert nested.status_code == 400, nested.text
    assert nested.json()["message"].startswith("invalid branch pattern syntax")
    # backtracking over eight stars against a 300-character name it misses: the write never ended
    free, kept = "a" * 300, "a" * 299 + "b"
    for name in (free, kept):
        made = live.http.post(
            f"/repositories/{seeded}/branches", json={"name": name, "source": "main"}
        )
        assert made.status_code == 201, made.text
    assert live.http.put(rules, json=[{"pattern": "*a*a*a*a*a*a*a*a*b"}]).status_code == 204
    s3.put_object(Bucket=seeded, Key=f"{free}/x", Body=b"x")
    error = refused(lambda: s3.put_object(Bucket=seeded, Key=f"{kept}/x", Body=b"x"))
    assert (error["Code"], error["Status"]) == ("ErrWriteToProtectedBranch", 403)
