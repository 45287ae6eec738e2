"""Buckets and objects through the gateway of a live server, with boto3.

Every operation of :mod:`mirror.gateway.objects`, :mod:`~mirror.gateway.copy`,
:mod:`~mirror.gateway.bulk` and :mod:`~mirror.gateway.buckets`: what boto3 sends, what comes back,
and what the REST API then sees (the two views of one catalog agree).
"""

from __future__ import annotations

import datetime
import hashlib
import os
from email.header import decode_header, make_header
from typing import Any

import httpx
import pytest
from botocore.exceptions import ClientError

from tests.gateway.conftest import S3ClientFactory, User, make_user
from tests.gateway.live import Live

KEYS = ["a b/c d.txt", "plus+sign/x+y", "ünïcødé/кот/猫.bin", "pct%2Fnot-a-slash", "dir/"]


def code_of(info: pytest.ExceptionInfo[ClientError]) -> str:
    return str(info.value.response["Error"]["Code"])


def status_of(info: pytest.ExceptionInfo[ClientError]) -> int:
    return int(info.value.response["ResponseMetadata"]["HTTPStatusCode"])


def md5(data: bytes) -> str:
    return f'"{hashlib.md5(data).hexdigest()}"'


def test_put_get_head_round_trip(live: Live, s3: Any, repo: str) -> None:
    data = b"hello, gateway"
    put = s3.put_object(
        Bucket=repo,
        Key="main/docs/hello.txt",
        Body=data,
        ContentType="text/plain; charset=utf-8",
        # non-ASCII values travel as RFC 2047 words, as S3 clients send them
        Metadata={"Owner": "ops", "note": "=?UTF-8?B?w7xuw68=?="},
    )
    assert put["ETag"] == md5(data)
    assert put["ResponseMetadata"]["HTTPHeaders"]["x-amz-request-id"]
    got = s3.get_object(Bucket=repo, Key="main/docs/hello.txt")
    assert got["Body"].read() == data
    assert got["ETag"] == md5(data)
    assert got["ContentType"] == "text/plain; charset=utf-8"
    assert got["ContentLength"] == len(data)
    assert got["Metadata"]["owner"] == "ops"
    assert isinstance(got["LastModified"], datetime.datetime)
    head = s3.head_object(Bucket=repo, Key="main/docs/hello.txt")
    assert head["ETag"] == md5(data) and head["ContentLength"] == len(data)
    assert head["Metadata"]["owner"] == "ops"
    # the REST API sees the same object, its metadata stored as lakeFS's gateway stores it
    assert live.read(repo, "main", "docs/hello.txt") == data
    stat = live.http.get(
        f"/repositories/{repo}/refs/main/objects/stat", params={"path": "docs/hello.txt"}
    ).json()
    assert stat["metadata"]["X-Amz-Meta-owner"] == "ops"
    assert stat["metadata"]["X-Amz-Meta-note"] == "ünï"
    word = got["Metadata"]["note"]
    assert str(make_header(decode_header(word))) == "ünï"
    assert stat["content_type"] == "text/plain; charset=utf-8"


def test_keys_are_exact(live: Live, s3: Any, repo: str) -> None:
    for i, path in enumerate(KEYS):
        s3.put_object(Bucket=repo, Key=f"main/{path}", Body=str(i).encode())
    for i, path in enumerate(KEYS):
        got = s3.get_object(Bucket=repo, Key=f"main/{path}")
        assert got["Body"].read() == str(i).encode(), path
    assert sorted(live.paths(repo, "main")) == sorted(KEYS)


def test_reads_at_any_ref(live: Live, s3: Any, repo: str) -> None:
    s3.put_object(Bucket=repo, Key="main/f", Body=b"one")
    first = live.commit(repo)
    live.create_tag(repo, "v1", first)
    s3.put_object(Bucket=repo, Key="main/f", Body=b"two")
    live.commit(repo)
    for ref, want in [("main", b"two"), (first, b"one"), ("v1", b"one"), ("main~1", b"one")]:
        assert s3.get_object(Bucket=repo, Key=f"{ref}/f")["Body"].read() == want, ref
    with pytest.raises(ClientError) as info:
        s3.get_object(Bucket=repo, Key="nobranch/f")
    assert code_of(info) == "NoSuchKey"
    with pytest.raises(ClientError) as info:
        s3.get_object(Bucket=repo, Key="main/absent")
    assert code_of(info) == "NoSuchKey"
    with pytest.raises(ClientError) as info:
        s3.head_object(Bucket=repo, Key="main/absent")
    assert status_of(info) == 404


def test_ranges(s3: Any, repo: str) -> None:
    data = bytes(range(256)) * 4
    s3.put_object(Bucket=repo, Key="main/r", Body=data)
    cases = {"bytes=2-5": (2, 6), "bytes=1000-": (1000, 1024), "bytes=-3": (1021, 1024)}
    for header, (start, end) in cases.items():
        got = s3.get_object(Bucket=repo, Key="main/r", Range=header)
        assert got["ResponseMetadata"]["HTTPStatusCode"] == 206
        assert got["ContentRange"] == f"bytes {start}-{end - 1}/1024"
        assert got["Body"].read() == data[start:end]
    head = s3.head_object(Bucket=repo, Key="main/r", Range="bytes=0-9")
    assert head["ResponseMetadata"]["HTTPStatusCode"] == 206 and head["ContentLength"] == 10
    with pytest.raises(ClientError) as info:
        s3.get_object(Bucket=repo, Key="main/r", Range="bytes=1024-")
    assert code_of(info) == "InvalidRange" and status_of(info) == 416
    s3.put_object(Bucket=repo, Key="main/empty", Body=b"")
    assert s3.get_object(Bucket=repo, Key="main/empty")["Body"].read() == b""
    with pytest.raises(ClientError) as info:
        s3.get_object(Bucket=repo, Key="main/empty", Range="bytes=0-")
    assert code_of(info) == "InvalidRange"


def test_conditional_reads(s3: Any, repo: str) -> None:
    s3.put_object(Bucket=repo, Key="main/c", Body=b"cond")
    etag = md5(b"cond")
    past = datetime.datetime(2000, 1, 1, tzinfo=datetime.UTC)
    future = datetime.datetime.now(datetime.UTC) + datetime.timedelta(days=1)
    assert s3.get_object(Bucket=repo, Key="main/c", IfMatch=etag)["Body"].read() == b"cond"
    assert s3.get_object(Bucket=repo, Key="main/c", IfModifiedSince=past)["ETag"] == etag
    for kwargs, status in [
        ({"IfMatch": '"0000"'}, 412),
        ({"IfUnmodifiedSince": past}, 412),
        ({"IfNoneMatch": etag}, 304),
        ({"IfModifiedSince": future}, 304),
        # If-Match holding wins over If-Unmodified-Since failing, as S3 answers
        ({"IfMatch": etag, "IfUnmodifiedSince": past}, 200),
    ]:
        if status == 200:
            assert s3.get_object(Bucket=repo, Key="main/c", **kwargs)["Body"].read() == b"cond"
            continue
        with pytest.raises(ClientError) as info:
            s3.get_object(Bucket=repo, Key="main/c", **kwargs)
        assert status_of(info) == status, kwargs
        if status == 412:
            assert code_of(info) == "PreconditionFailed"


def test_response_header_overrides(s3: Any, repo: str) -> None:
    s3.put_object(Bucket=repo, Key="main/o", Body=b"o", ContentType="text/plain")
    got = s3.get_object(
        Bucket=repo,
        Key="main/o",
        ResponseContentType="application/x-download",
        ResponseContentDisposition='attachment; filename="o.bin"',
        ResponseCacheControl="no-cache",
    )
    assert got["ContentType"] == "application/x-download"
    assert got["ContentDisposition"] == 'attachment; filename="o.bin"'
    assert got["CacheControl"] == "no-cache"
    assert s3.get_object(Bucket=repo, Key="main/o")["ContentType"] == "text/plain"


def test_large_object_streams_both_ways(live: Live, s3: Any, repo: str) -> None:
    data = os.urandom(5 * (1 << 20) + 123)
    put = s3.put_object(Bucket=repo, Key="main/big.bin", Body=data)
    assert put["ETag"] == md5(data)
    assert s3.get_object(Bucket=repo, Key="main/big.bin")["Body"].read() == data
    tail = s3.get_object(Bucket=repo, Key="main/big.bin", Range="bytes=1048570-")
    assert tail["Body"].read() == data[1048570:]


def test_put_if_none_match(live: Live, s3: Any, repo: str) -> None:
    url = s3.generate_presigned_url(
        "put_object", Params={"Bucket": repo, "Key": "main/once"}, ExpiresIn=300
    )
    assert httpx.put(url, content=b"first", headers={"If-None-Match": "*"}).status_code == 200
    again = httpx.put(url, content=b"second", headers={"If-None-Match": "*"})
    assert again.status_code == 412 and b"PreconditionFailed" in again.content
    assert live.read(repo, "main", "once") == b"first"


def test_presigned_urls(live: Live, s3: Any, repo: str) -> None:
    put_url = s3.generate_presigned_url(
        "put_object", Params={"Bucket": repo, "Key": "main/pre signed+é"}, ExpiresIn=300
    )
    assert httpx.put(put_url, content=b"via url").status_code == 200
    get_url = s3.generate_presigned_url(
        "get_object", Params={"Bucket": repo, "Key": "main/pre signed+é"}, ExpiresIn=300
    )
    got = httpx.get(get_url)
    assert got.status_code == 200 and got.content == b"via url"
    assert live.read(repo, "main", "pre signed+é") == b"via url"
    tampered = httpx.get(get_url.replace("pre%20signed", "pre%20signer"))
    assert tampered.status_code == 403


def test_copy_object(live: Live, s3: Any, repo: str) -> None:
    s3.put_object(
        Bucket=repo, Key="main/src/a", Body=b"A1", ContentType="text/x-a", Metadata={"k": "v"}
    )
    commit = live.commit(repo)
    s3.put_object(Bucket=repo, Key="main/src/a", Body=b"A2")
    live.create_branch(repo, "dev")
    # within a branch (COPY keeps the source's type and metadata, and its ETag)
    done = s3.copy_object(
        Bucket=repo, Key="main/dst/a", CopySource={"Bucket": repo, "Key": "main/src/a"}
    )
    assert done["CopyObjectResult"]["ETag"] == md5(b"A2")
    # from a commit, across branches
    s3.copy_object(Bucket=repo, Key="dev/from-commit", CopySource=f"/{repo}/{commit}/src/a")
    got = s3.get_object(Bucket=repo, Key="dev/from-commit")
    assert got["Body"].read() == b"A1"
    assert got["ContentType"] == "text/x-a" and got["Metadata"] == {"k": "v"}
    # REPLACE takes the request's metadata and type
    s3.copy_object(
        Bucket=repo,
        Key="dev/replaced",
        CopySource={"Bucket": repo, "Key": f"{commit}/src/a"},
        MetadataDirective="REPLACE",
        ContentType="application/x-new",
        Metadata={"fresh": "yes"},
    )
    head = s3.head_object(Bucket=repo, Key="dev/replaced")
    assert head["ContentType"] == "application/x-new" and head["Metadata"] == {"fresh": "yes"}
    # keys with spaces and + survive the copy source's URL encoding
    s3.put_object(Bucket=repo, Key="main/a b+c", Body=b"odd")
    s3.copy_object(Bucket=repo, Key="dev/a b+c", CopySource={"Bucket": repo, "Key": "main/a b+c"})
    assert live.read(repo, "dev", "a b+c") == b"odd"
    # source conditions
    with pytest.raises(ClientError) as info:
        s3.copy_object(
            Bucket=repo,
            Key="dev/cond",
            CopySource={"Bucket": repo, "Key": "main/src/a"},
            CopySourceIfMatch='"nope"',
        )
    assert code_of(info) == "PreconditionFailed"
    with pytest.raises(ClientError) as info:
        s3.copy_object(
            Bucket=repo, Key="dev/x", CopySource={"Bucket": repo, "Key": "main/src/absent"}
        )
    assert code_of(info) == "NoSuchKey"
    assert "cond" not in live.paths(repo, "dev") and "x" not in live.paths(repo, "dev")
    # onto itself: only to change its metadata, as S3
    with pytest.raises(ClientError) as info:
        s3.copy_object(Bucket=repo, Key="main/src/a", CopySource=f"{repo}/main/src/a")
    assert code_of(info) == "InvalidRequest"
    s3.copy_object(
        Bucket=repo,
        Key="main/src/a",
        CopySource=f"{repo}/main/src/a",
        MetadataDirective="REPLACE",
        Metadata={"updated": "1"},
    )
    assert s3.head_object(Bucket=repo, Key="main/src/a")["Metadata"] == {"updated": "1"}
    assert live.read(repo, "main", "src/a") == b"A2"


def test_copy_across_repositories(live: Live, s3: Any, repo: str) -> None:
    other = live.create_repository("gw-other")
    s3.put_object(Bucket=other, Key="main/shared", Body=b"from elsewhere")
    s3.copy_object(Bucket=repo, Key="main/copied", CopySource=f"{other}/main/shared")
    assert live.read(repo, "main", "copied") == b"from elsewhere"


def test_delete_object(live: Live, s3: Any, repo: str) -> None:
    s3.put_object(Bucket=repo, Key="main/gone", Body=b"x")
    assert (
        s3.delete_object(Bucket=repo, Key="main/gone")["ResponseMetadata"]["HTTPStatusCode"] == 204
    )
    assert "gone" not in live.paths(repo, "main")
    # absent keys, and refs that are no branch, delete nothing and succeed, as S3
    for key in ("main/never-there", "v9/x"):
        answer = s3.delete_object(Bucket=repo, Key=key)
        assert answer["ResponseMetadata"]["HTTPStatusCode"] == 204


def test_delete_objects(live: Live, s3: Any, repo: str) -> None:
    for name in ("a", "b", "c/d"):
        s3.put_object(Bucket=repo, Key=f"main/{name}", Body=name.encode())
    answer = s3.delete_objects(
        Bucket=repo,
        Delete={
            "Objects": [
                {"Key": "main/a"},
                {"Key": "main/c/d"},
                {"Key": "main/missing"},
                {"Key": "main/"},
                {"Key": "main/../escape"},
            ]
        },
    )
    deleted = sorted(d["Key"] for d in answer["Deleted"])
    assert deleted == ["main/", "main/a", "main/c/d", "main/missing"]
    assert [(e["Key"], e["Code"]) for e in answer["Errors"]] == [
        ("main/../escape", "InvalidArgument")
    ]
    assert live.paths(repo, "main") == ["b"]
    quiet = s3.delete_objects(Bucket=repo, Delete={"Objects": [{"Key": "main/b"}], "Quiet": True})
    assert "Deleted" not in quiet and "Errors" not in quiet
    assert live.paths(repo, "main") == []


def test_delete_objects_denied_per_key(
    live: Live, s3: Any, s3_client: S3ClientFactory, reader: User, repo: str
) -> None:
    s3.put_object(Bucket=repo, Key="main/keep", Body=b"k")
    answer = s3_client(reader.key).delete_objects(
        Bucket=repo, Delete={"Objects": [{"Key": "main/keep"}]}
    )
    assert [(e["Key"], e["Code"]) for e in answer["Errors"]] == [("main/keep", "AccessDenied")]
    assert live.paths(repo, "main") == ["keep"]


def test_buckets(live: Live, s3: Any, s3_client: S3ClientFactory, reader: User, repo: str) -> None:
    names = [b["Name"] for b in s3.list_buckets()["Buckets"]]
    assert repo in names and names == sorted(names)
    assert repo in [b["Name"] for b in s3_client(reader.key).list_buckets()["Buckets"]]
    nobody = make_user(live)
    assert s3_client(nobody.key).list_buckets()["Buckets"] == []
    assert s3.head_bucket(Bucket=repo)["ResponseMetadata"]["HTTPStatusCode"] == 200
    with pytest.raises(ClientError) as info:
        s3.head_bucket(Bucket="no-such-repo")
    assert status_of(info) == 404
    with pytest.raises(ClientError) as info:
        s3_client(nobody.key).head_bucket(Bucket=repo)
    assert status_of(info) == 403
    assert s3.get_bucket_location(Bucket=repo).get("LocationConstraint") in (None, "")
    assert "Status" not in s3.get_bucket_versioning(Bucket=repo)
    with pytest.raises(ClientError) as info:
        s3.get_bucket_location(Bucket="no-such-repo")
    assert code_of(info) == "NoSuchBucket"


def test_reader_may_read_but_not_write(
    live: Live, s3: Any, s3_client: S3ClientFactory, reader: User, repo: str
) -> None:
    s3.put_object(Bucket=repo, Key="main/r", Body=b"readable")
    client = s3_client(reader.key)
    assert client.get_object(Bucket=repo, Key="main/r")["Body"].read() == b"readable"
    for call in (
        lambda: client.put_object(Bucket=repo, Key="main/w", Body=b"no"),
        lambda: client.delete_object(Bucket=repo, Key="main/r"),
        lambda: client.copy_object(Bucket=repo, Key="main/w", CopySource=f"{repo}/main/r"),
    ):
        with pytest.raises(ClientError) as info:
            call()
        assert code_of(info) == "AccessDenied"
        assert "fs:" in info.value.response["Error"]["Message"]
    assert live.paths(repo, "main") == ["r"]


def test_unsupported_operations(s3: Any, repo: str) -> None:
    s3.put_object(Bucket=repo, Key="main/t", Body=b"t")
    assert s3.get_object_tagging(Bucket=repo, Key="main/t")["TagSet"] == []
    for call, code in [
        (lambda: s3.get_object_acl(Bucket=repo, Key="main/t"), "NotImplemented"),
        (lambda: s3.get_bucket_policy(Bucket=repo), "NotImplemented"),
        (lambda: s3.get_bucket_lifecycle_configuration(Bucket=repo), "NotImplemented"),
        (lambda: s3.get_bucket_cors(Bucket=repo), "NotImplemented"),
        (lambda: s3.create_bucket(Bucket="brand-new-bucket"), "NotImplemented"),
        (lambda: s3.delete_bucket(Bucket=repo), "ERRLakeFSNotSupported"),
        (
            lambda: s3.put_object_tagging(
                Bucket=repo, Key="main/t", Tagging={"TagSet": [{"Key": "a", "Value": "b"}]}
            ),
            "ERRLakeFSNotSupported",
        ),
    ]:
        with pytest.raises(ClientError) as info:
            call()
        assert code_of(info) == code
