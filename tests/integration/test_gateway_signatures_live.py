"""Signatures through a live `lakemirror server`: boto3 with SigV4 and SigV2, presigned URLs of
both versions fetched with plain HTTP, and a key stored before secrets were encrypted, which the
gateway refuses until it signs in once over the REST API."""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import boto3
import httpx
import pytest
from botocore.config import Config
from botocore.exceptions import ClientError

from mirror.auth.store import AuthStore
from mirror.kv.sqlite import SqliteKV
from tests.integration.harness import Server, running_server, unique

ADMIN = ("AKIALIVESIGADMIN0001", "live-signatures-admin-secret-0000000000")
LEGACY = ("AKIALIVESIGLEGACY001", "legacy/secret+from-an-older-release-000")


@dataclass
class World:
    server: Server
    repo: str

    def s3(self, key: tuple[str, str] = ADMIN, **config: Any) -> Any:
        return boto3.client(
            "s3",
            endpoint_url=self.server.url,
            region_name="us-east-1",
            aws_access_key_id=key[0],
            aws_secret_access_key=key[1],
            config=Config(
                s3={"addressing_style": "path"}, retries={"total_max_attempts": 1}, **config
            ),
        )


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    tmp = tmp_path_factory.mktemp("signatures")
    with running_server(
        tmp / "data", tmp / "server.log", access_key_id=ADMIN[0], secret_access_key=ADMIN[1]
    ) as server:
        repo = unique("sig")
        with httpx.Client(base_url=f"{server.url}/api/v1", auth=ADMIN, timeout=10) as api:
            made = api.post(
                "/repositories",
                json={"name": repo, "storage_namespace": server.namespace(repo)},
            )
            assert made.status_code == 201, made.text
        yield World(server, repo)


def code_of(error: pytest.ExceptionInfo[ClientError]) -> str:
    return str(error.value.response["Error"]["Code"])


def test_sigv4_and_sigv2_clients(world: World) -> None:
    v4 = world.s3()
    v4.put_object(Bucket=world.repo, Key="main/dir/a b+c.txt", Body=b"signed v4")
    v2 = world.s3(signature_version="s3")
    assert v2.get_object(Bucket=world.repo, Key="main/dir/a b+c.txt")["Body"].read() == (
        b"signed v4"
    )
    v2.put_object(Bucket=world.repo, Key="main/dir/v2.txt", Body=b"signed v2")
    listed = v2.list_objects(Bucket=world.repo, Prefix="main/dir/")
    assert sorted(o["Key"] for o in listed["Contents"]) == [
        "main/dir/a b+c.txt",
        "main/dir/v2.txt",
    ]


def test_wrong_secret_and_unknown_key(world: World) -> None:
    with pytest.raises(ClientError) as caught:
        world.s3((ADMIN[0], "not-the-secret")).head_bucket(Bucket=world.repo)
    assert caught.value.response["ResponseMetadata"]["HTTPStatusCode"] == 403
    with pytest.raises(ClientError) as caught:
        world.s3((ADMIN[0], "not-the-secret")).list_objects_v2(Bucket=world.repo)
    assert code_of(caught) == "SignatureDoesNotMatch"
    with pytest.raises(ClientError) as caught:
        world.s3(("AKIANOSUCHKEY0000001", "x")).list_objects_v2(Bucket=world.repo)
    assert code_of(caught) == "InvalidAccessKeyId"
    with pytest.raises(ClientError) as caught:
        world.s3(("AKIANOSUCHKEY0000001", "x"), signature_version="s3").list_objects(
            Bucket=world.repo
        )
    assert code_of(caught) == "InvalidAccessKeyId"


@pytest.mark.parametrize("version", ["s3v4", "s3"])
def test_presigned_urls_work_until_they_expire(world: World, version: str) -> None:
    s3 = world.s3(signature_version=version)
    s3.put_object(Bucket=world.repo, Key="main/presigned.txt", Body=b"shared by URL")
    params = {"Bucket": world.repo, "Key": "main/presigned.txt"}
    url = s3.generate_presigned_url("get_object", Params=params, ExpiresIn=600)
    got = httpx.get(url, timeout=10)
    assert got.status_code == 200 and got.content == b"shared by URL"
    tampered = httpx.get(url.replace("presigned.txt", "other.txt"), timeout=10)
    assert tampered.status_code == 403
    assert b"<Code>SignatureDoesNotMatch</Code>" in tampered.content
    short = s3.generate_presigned_url("get_object", Params=params, ExpiresIn=1)
    deadline = time.monotonic() + 10
    while True:
        answer = httpx.get(short, timeout=10)
        if answer.status_code == 403 or time.monotonic() > deadline:
            break
        assert answer.status_code == 200
    assert answer.status_code == 403
    assert b"<Code>AccessDenied</Code>" in answer.content
    assert b"Request has expired" in answer.content


def test_a_key_from_before_encrypted_secrets(world: World) -> None:
    data_dir: Path = world.server.data_dir
    kv = SqliteKV(data_dir / "kv.sqlite")
    try:
        # what an earlier release stored: the user and a key with only its secret's hash
        old = AuthStore(kv)
        old.create_user("legacy")
        old.add_member("Writers", "legacy")
        old.create_credentials("legacy", *LEGACY)
    finally:
        kv.close()
    s3 = world.s3(LEGACY)
    with pytest.raises(ClientError) as caught:
        s3.put_object(Bucket=world.repo, Key="main/legacy.txt", Body=b"refused")
    assert code_of(caught) == "AccessDenied"
    message = caught.value.response["Error"]["Message"]
    assert "predates encrypted secrets" in message and "rotate" in message

    with httpx.Client(base_url=f"{world.server.url}/api/v1", timeout=10) as api:
        assert api.get("/user", auth=LEGACY).status_code == 200

    s3.put_object(Bucket=world.repo, Key="main/legacy.txt", Body=b"accepted")
    assert s3.get_object(Bucket=world.repo, Key="main/legacy.txt")["Body"].read() == b"accepted"
    log = world.server.log_path.read_text()
    assert LEGACY[1] not in log and ADMIN[1] not in log
