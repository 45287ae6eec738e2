"""Multipart uploads through the gateway of a live server, with boto3.

A 40 MiB object goes up with ``upload_file`` in 8 MiB parts and comes back byte for byte with
S3's ``-N`` ETag on HEAD, GET and listings; explicit create / upload_part / upload_part_copy /
complete, list_parts, list_multipart_uploads and abort; every refusal S3 defines for
CompleteMultipartUpload, each leaving the branch unchanged; a completion whose answer was lost,
retried by botocore, answered again (other parts: NoSuchUpload); and uploads belonging to their
repository instance: a repository deleted and created again under its name has none of them, and
deleting it leaves no record of them (completed ones included) in the server's KV.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from boto3.s3.transfer import TransferConfig
from botocore.exceptions import ClientError

from mirror.core.model import Repository
from mirror.gateway.uploads import PARTS_PREFIX
from mirror.kv.sqlite import SqliteKV
from tests.gateway.live import Live, start

MiB = 1 << 20
CHUNK = 8 * MiB


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Live]:
    yield from start(tmp_path_factory.mktemp("multipart"))


@pytest.fixture(scope="module")
def s3(live: Live) -> Any:
    return live.s3()


@pytest.fixture
def repo(live: Live) -> str:
    return live.create_repository("mpu")


def s3_etag(parts: list[bytes]) -> str:
    digests = b"".join(hashlib.md5(p).digest() for p in parts)
    return f'"{hashlib.md5(digests).hexdigest()}-{len(parts)}"'


def code_of(info: pytest.ExceptionInfo[ClientError]) -> str:
    return str(info.value.response["Error"]["Code"])


def delete_repository(live: Live, name: str) -> None:
    deleted = live.http.delete(f"/repositories/{name}")
    assert deleted.status_code == 204, deleted.text


def create_again(live: Live, name: str) -> None:
    body = {"name": name, "storage_namespace": live.server.namespace(name)}
    made = live.http.post("/repositories", json=body)
    assert made.status_code == 201, made.text


def upload_keys(live: Live, name: str) -> tuple[str, list[bytes]]:
    """Return the instance UID of repository ``name`` and its upload records, from the KV."""
    kv = SqliteKV(live.server.data_dir / "kv.sqlite")
    try:
        repo = Repository.decode(kv.get(f"repos/{name}".encode()))
        return repo.instance_uid, instance_upload_keys(kv, name, repo.instance_uid)
    finally:
        kv.close()


def instance_upload_keys(kv: SqliteKV, name: str, uid: str) -> list[bytes]:
    return [k for k, _ in kv.scan(f"gateway/multipart/{name}:{uid}/".encode())]


def upload_40_mib(s3: Any, repo: str, tmp_path: Path, live: Live) -> None:
    """The client suite's 40 MiB case, shared with the S3-namespace test."""
    data = os.urandom(40 * MiB)
    source = tmp_path / "big.bin"
    source.write_bytes(data)
    config = TransferConfig(multipart_threshold=CHUNK, multipart_chunksize=CHUNK, max_concurrency=4)
    s3.upload_file(
        str(source),
        repo,
        "main/tables/big.bin",
        Config=config,
        ExtraArgs={"ContentType": "application/x-parquet", "Metadata": {"owner": "team-a"}},
    )
    etag = s3_etag([data[i : i + CHUNK] for i in range(0, len(data), CHUNK)])
    head = s3.head_object(Bucket=repo, Key="main/tables/big.bin")
    assert head["ETag"] == etag
    assert head["ContentLength"] == len(data)
    assert head["ContentType"] == "application/x-parquet"
    assert head["Metadata"] == {"owner": "team-a"}
    target = tmp_path / "back.bin"
    s3.download_file(repo, "main/tables/big.bin", str(target))
    assert hashlib.sha256(target.read_bytes()).digest() == hashlib.sha256(data).digest()
    got = s3.get_object(Bucket=repo, Key="main/tables/big.bin", Range="bytes=8388600-8388615")
    assert got["Body"].read() == data[8388600:8388616]
    listed = s3.list_objects_v2(Bucket=repo, Prefix="main/tables/")["Contents"]
    assert [(o["Key"], o["ETag"], o["Size"]) for o in listed] == [
        ("main/tables/big.bin", etag, len(data))
    ]
    # the REST API reads the same object, and commits it with its ETag
    assert live.read(repo, "main", "tables/big.bin") == data
    live.commit(repo, message="a multipart object")
    assert s3.head_object(Bucket=repo, Key="main/tables/big.bin")["ETag"] == etag
    assert s3.list_multipart_uploads(Bucket=repo).get("Uploads", []) == []


def test_upload_file_of_40_mib_in_8_mib_parts(
    s3: Any, repo: str, tmp_path: Path, live: Live
) -> None:
    upload_40_mib(s3, repo, tmp_path, live)


def test_explicit_parts_copies_listings_and_completion(s3: Any, repo: str, live: Live) -> None:
    source = os.urandom(6 * MiB)
    s3.put_object(Bucket=repo, Key="main/src.bin", Body=source)
    live.commit(repo, message="source")
    live.create_tag(repo, "v1", "main")
    s3.delete_object(Bucket=repo, Key="main/src.bin")  # only v1 has it now
    other = live.create_repository("other")
    s3.put_object(Bucket=other, Key="main/with space+plus.txt", Body=b"tail from elsewhere")

    created = s3.create_multipart_upload(
        Bucket=repo, Key="main/out/joined.bin", ContentType="text/plain"
    )
    upload_id = created["UploadId"]
    assert created["Key"] == "main/out/joined.bin"
    first = os.urandom(5 * MiB)
    p1 = s3.upload_part(
        Bucket=repo, Key="main/out/joined.bin", UploadId=upload_id, PartNumber=1, Body=first
    )
    assert p1["ETag"] == f'"{hashlib.md5(first).hexdigest()}"'
    p2 = s3.upload_part_copy(
        Bucket=repo,
        Key="main/out/joined.bin",
        UploadId=upload_id,
        PartNumber=2,
        CopySource={"Bucket": repo, "Key": "v1/src.bin"},
        CopySourceRange=f"bytes=0-{5 * MiB}",
    )["CopyPartResult"]
    assert p2["ETag"] == f'"{hashlib.md5(source[: 5 * MiB + 1]).hexdigest()}"'
    p3 = s3.upload_part_copy(
        Bucket=repo,
        Key="main/out/joined.bin",
        UploadId=upload_id,
        PartNumber=3,
        CopySource={"Bucket": other, "Key": "main/with space+plus.txt"},
    )["CopyPartResult"]

    parts = s3.list_parts(Bucket=repo, Key="main/out/joined.bin", UploadId=upload_id, MaxParts=2)
    assert [p["PartNumber"] for p in parts["Parts"]] == [1, 2]
    assert parts["IsTruncated"] is True
    rest = s3.list_parts(
        Bucket=repo,
        Key="main/out/joined.bin",
        UploadId=upload_id,
        PartNumberMarker=parts["NextPartNumberMarker"],
    )
    assert [(p["PartNumber"], p["Size"]) for p in rest["Parts"]] == [(3, 19)]
    uploads = s3.list_multipart_uploads(Bucket=repo)["Uploads"]
    assert [(u["Key"], u["UploadId"]) for u in uploads] == [("main/out/joined.bin", upload_id)]
    assert live.paths(repo, "main", "out/") == []  # nothing staged before completion

    done = s3.complete_multipart_upload(
        Bucket=repo,
        Key="main/out/joined.bin",
        UploadId=upload_id,
        MultipartUpload={
            "Parts": [
                {"PartNumber": 1, "ETag": p1["ETag"]},
                {"PartNumber": 2, "ETag": p2["ETag"]},
                {"PartNumber": 3, "ETag": p3["ETag"]},
            ]
        },
    )
    expected = first + source[: 5 * MiB + 1] + b"tail from elsewhere"
    etag = s3_etag([first, source[: 5 * MiB + 1], b"tail from elsewhere"])
    assert done["ETag"] == etag
    got = s3.get_object(Bucket=repo, Key="main/out/joined.bin")
    assert got["ETag"] == etag and got["ContentType"] == "text/plain"
    assert got["Body"].read() == expected
    with pytest.raises(ClientError) as info:
        s3.list_parts(Bucket=repo, Key="main/out/joined.bin", UploadId=upload_id)
    assert code_of(info) == "NoSuchUpload"


def test_abort_removes_the_upload(s3: Any, repo: str, live: Live) -> None:
    upload_id = s3.create_multipart_upload(Bucket=repo, Key="main/gone.bin")["UploadId"]
    s3.upload_part(Bucket=repo, Key="main/gone.bin", UploadId=upload_id, PartNumber=1, Body=b"x")
    s3.abort_multipart_upload(Bucket=repo, Key="main/gone.bin", UploadId=upload_id)
    assert s3.list_multipart_uploads(Bucket=repo).get("Uploads", []) == []
    for call in (
        lambda: s3.list_parts(Bucket=repo, Key="main/gone.bin", UploadId=upload_id),
        lambda: s3.abort_multipart_upload(Bucket=repo, Key="main/gone.bin", UploadId=upload_id),
        lambda: s3.upload_part(
            Bucket=repo, Key="main/gone.bin", UploadId=upload_id, PartNumber=2, Body=b"y"
        ),
    ):
        with pytest.raises(ClientError) as info:
            call()
        assert code_of(info) == "NoSuchUpload"
        assert info.value.response["ResponseMetadata"]["HTTPStatusCode"] == 404
    assert live.paths(repo, "main") == []


@pytest.mark.parametrize(
    ("listed", "code"),
    [
        ([(2, 2), (1, 1)], "InvalidPartOrder"),
        ([(1, 1), (3, 2)], "InvalidPart"),
        ([(1, 2), (2, 2)], "InvalidPart"),
        ([(2, 2), (3, 3)], "EntityTooSmall"),
    ],
)
def test_completion_refusals_change_nothing(
    s3: Any, repo: str, live: Live, listed: list[tuple[int, int]], code: str
) -> None:
    key = "main/refused.bin"
    upload_id = s3.create_multipart_upload(Bucket=repo, Key=key)["UploadId"]
    bodies = {1: os.urandom(5 * MiB), 2: b"small", 3: b"last"}
    etags = {
        n: s3.upload_part(Bucket=repo, Key=key, UploadId=upload_id, PartNumber=n, Body=b)["ETag"]
        for n, b in bodies.items()
    }
    parts = [{"PartNumber": n, "ETag": etags[e]} for n, e in listed]
    with pytest.raises(ClientError) as info:
        s3.complete_multipart_upload(
            Bucket=repo, Key=key, UploadId=upload_id, MultipartUpload={"Parts": parts}
        )
    assert code_of(info) == code
    assert info.value.response["ResponseMetadata"]["HTTPStatusCode"] == 400
    assert live.paths(repo, "main") == []
    s3.abort_multipart_upload(Bucket=repo, Key=key, UploadId=upload_id)


def test_malformed_and_unknown_uploads(s3: Any, live: Live, repo: str) -> None:
    key = "main/x.bin"
    upload_id = s3.create_multipart_upload(Bucket=repo, Key=key)["UploadId"]
    with pytest.raises(ClientError) as info:
        s3.complete_multipart_upload(
            Bucket=repo, Key=key, UploadId=upload_id, MultipartUpload={"Parts": []}
        )
    assert code_of(info) == "MalformedXML"
    with pytest.raises(ClientError) as info:
        s3.complete_multipart_upload(
            Bucket=repo,
            Key=key,
            UploadId="0" * 46,
            MultipartUpload={"Parts": [{"PartNumber": 1, "ETag": '"x"'}]},
        )
    assert code_of(info) == "NoSuchUpload"
    with pytest.raises(ClientError) as info:
        s3.upload_part(Bucket=repo, Key=key, UploadId=upload_id, PartNumber=10001, Body=b"x")
    assert code_of(info) == "InvalidArgument"
    live.create_tag(repo, "v1", "main")
    with pytest.raises(ClientError) as info:
        s3.create_multipart_upload(Bucket=repo, Key="v1/x.bin")
    assert code_of(info) == "NoSuchBucket"
    assert live.paths(repo, "main") == []


def test_a_repository_created_again_has_none_of_the_uploads_before(s3: Any, live: Live) -> None:
    repo = live.create_repository("again")
    key = "main/big.bin"
    upload_id = s3.create_multipart_upload(Bucket=repo, Key=key)["UploadId"]
    part = s3.upload_part(Bucket=repo, Key=key, UploadId=upload_id, PartNumber=1, Body=b"x" * 9)
    etag = part["ETag"]
    assert len(s3.list_multipart_uploads(Bucket=repo)["Uploads"]) == 1

    delete_repository(live, repo)
    create_again(live, repo)

    assert s3.list_multipart_uploads(Bucket=repo).get("Uploads", []) == []
    for call in (
        lambda: s3.complete_multipart_upload(
            Bucket=repo,
            Key=key,
            UploadId=upload_id,
            MultipartUpload={"Parts": [{"PartNumber": 1, "ETag": etag}]},
        ),
        lambda: s3.upload_part(Bucket=repo, Key=key, UploadId=upload_id, PartNumber=2, Body=b"y"),
        lambda: s3.list_parts(Bucket=repo, Key=key, UploadId=upload_id),
        lambda: s3.abort_multipart_upload(Bucket=repo, Key=key, UploadId=upload_id),
    ):
        with pytest.raises(ClientError) as info:
            call()
        assert code_of(info) == "NoSuchUpload"
        assert info.value.response["ResponseMetadata"]["HTTPStatusCode"] == 404
    assert live.paths(repo, "main") == []
    # the new repository's own uploads work as ever
    fresh = s3.create_multipart_upload(Bucket=repo, Key=key)["UploadId"]
    assert [u["UploadId"] for u in s3.list_multipart_uploads(Bucket=repo)["Uploads"]] == [fresh]
    s3.abort_multipart_upload(Bucket=repo, Key=key, UploadId=fresh)


def test_deleting_a_repository_removes_its_upload_records(s3: Any, live: Live) -> None:
    repo = live.create_repository("gone")
    key = "main/big.bin"
    upload_id = s3.create_multipart_upload(Bucket=repo, Key=key)["UploadId"]
    for number in (1, 2):
        s3.upload_part(Bucket=repo, Key=key, UploadId=upload_id, PartNumber=number, Body=b"x" * 100)
    uid, before = upload_keys(live, repo)
    assert len(before) == 4  # the upload, its index entry, two parts

    delete_repository(live, repo)

    kv = SqliteKV(live.server.data_dir / "kv.sqlite")
    try:
        assert instance_upload_keys(kv, repo, uid) == []
        assert [k for k, _ in kv.scan(b"gateway/multipart/") if uid.encode() in k] == []
    finally:
        kv.close()
    # the parts' bytes stay in the storage namespace, as the rest of it does (as in lakeFS)
    parts = [p for p in live.server.data_dir.rglob(f"{upload_id}/*") if p.is_file()]
    assert len(parts) == 2
    assert all(PARTS_PREFIX.rstrip("/") in p.as_posix() for p in parts)


def test_a_completion_whose_answer_was_lost_is_answered_again(
    s3: Any, repo: str, live: Live
) -> None:
    key = "main/retried.bin"
    data = [os.urandom(5 * MiB), b"end"]
    upload_id = s3.create_multipart_upload(Bucket=repo, Key=key)["UploadId"]
    parts = [
        {
            "PartNumber": n,
            "ETag": s3.upload_part(
                Bucket=repo, Key=key, UploadId=upload_id, PartNumber=n, Body=body
            )["ETag"],
        }
        for n, body in enumerate(data, start=1)
    ]
    # the first answer is dropped as if the connection had failed: botocore retries
    client = live.s3(retries=3)
    answers: list[int] = []

    def lose_the_first_answer(response: tuple[Any, Any] | None, **_: Any) -> int | None:
        assert response is not None
        answers.append(response[0].status_code)
        return 0 if len(answers) == 1 else None  # 0: retry at once

    client.meta.events.register_first(
        "needs-retry.s3.CompleteMultipartUpload", lose_the_first_answer
    )
    done = client.complete_multipart_upload(
        Bucket=repo, Key=key, UploadId=upload_id, MultipartUpload={"Parts": parts}
    )
    assert answers == [200, 200]
    assert done["ETag"] == s3_etag(data)
    assert done["Key"] == key and done["Bucket"] == repo
    address = live.http.get(
        f"/repositories/{repo}/refs/main/objects/stat", params={"path": "retried.bin"}
    ).json()["physical_address"]
    # asked again by hand: the same answer, and nothing assembled again
    again = s3.complete_multipart_upload(
        Bucket=repo, Key=key, UploadId=upload_id, MultipartUpload={"Parts": parts}
    )
    assert (again["ETag"], again["Location"]) == (done["ETag"], done["Location"])
    assert (
        live.http.get(
            f"/repositories/{repo}/refs/main/objects/stat", params={"path": "retried.bin"}
        ).json()["physical_address"]
        == address
    )
    # with other parts it is an upload that no longer exists
    for listed in (parts[:1], [parts[0], {**parts[1], "ETag": parts[0]["ETag"]}]):
        with pytest.raises(ClientError) as info:
            s3.complete_multipart_upload(
                Bucket=repo, Key=key, UploadId=upload_id, MultipartUpload={"Parts": listed}
            )
        assert code_of(info) == "NoSuchUpload"
        assert info.value.response["ResponseMetadata"]["HTTPStatusCode"] == 404
        assert info.value.response["Error"]["Message"].startswith(
            "The specified upload does not exist. The upload ID may be invalid, or the upload "
            "may have been aborted or completed."
        )
    assert s3.get_object(Bucket=repo, Key=key)["Body"].read() == b"".join(data)


def test_deleting_a_repository_removes_its_completed_uploads(s3: Any, live: Live) -> None:
    repo = live.create_repository("done")
    key = "main/small.bin"
    upload_id = s3.create_multipart_upload(Bucket=repo, Key=key)["UploadId"]
    etag = s3.upload_part(Bucket=repo, Key=key, UploadId=upload_id, PartNumber=1, Body=b"x")
    s3.complete_multipart_upload(
        Bucket=repo,
        Key=key,
        UploadId=upload_id,
        MultipartUpload={"Parts": [{"PartNumber": 1, "ETag": etag["ETag"]}]},
    )
    uid, records = upload_keys(live, repo)
    scope = f"gateway/multipart/{repo}:{uid}/".encode()
    assert sorted(k[len(scope) :].split(b"/")[0] for k in records) == [b"done", b"expiry"]

    delete_repository(live, repo)

    kv = SqliteKV(live.server.data_dir / "kv.sqlite")
    try:
        assert instance_upload_keys(kv, repo, uid) == []
    finally:
        kv.close()
    create_again(live, repo)
    with pytest.raises(ClientError) as info:
        s3.complete_multipart_upload(
            Bucket=repo,
            Key=key,
            UploadId=upload_id,
            MultipartUpload={"Parts": [{"PartNumber": 1, "ETag": etag["ETag"]}]},
        )
    assert code_of(info) == "NoSuchUpload"
