"""Multipart uploads through the gateway onto an S3 storage namespace (a moto server process).

The same 40 MiB ``upload_file`` as on local disk, with the server's objects in S3: the parts go
under ``_lakefs/multipart/`` of the namespace, the assembled object under ``data/``, and once the
upload completes no part is left in the bucket. An aborted upload leaves nothing either.
"""

from __future__ import annotations

import secrets
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from botocore.exceptions import ClientError

from tests.gateway.live import Live
from tests.gateway.test_multipart_boto3 import upload_40_mib
from tests.integration.harness import running_server
from tests.integration.moto_fixtures import (  # noqa: F401  (fixtures)
    MotoServer,
    aws_backend_env,
    create_bucket,
    moto_log_dir,
    moto_region,
    s3_client,
)

pytestmark = pytest.mark.s3


@pytest.fixture(scope="module")
def bucket(moto_region: MotoServer, s3_client: Any) -> str:  # noqa: F811
    return create_bucket(moto_region, s3_client)


@pytest.fixture(scope="module")
def live(
    tmp_path_factory: pytest.TempPathFactory,
    moto_region: MotoServer,  # noqa: F811
    bucket: str,
) -> Iterator[Live]:
    tmp = tmp_path_factory.mktemp("multipart-s3")
    # objects in S3, the KV on local SQLite: only the block store's settings are taken
    env = {
        k: v
        for k, v in aws_backend_env(moto_region, "unused").items()
        if k.startswith("LAKEMIRROR_BLOCKSTORE__")
    }
    with (
        running_server(
            tmp / "data",
            tmp / "server.log",
            access_key_id="AKIAGWS3" + secrets.token_hex(6).upper(),
            secret_access_key=secrets.token_urlsafe(30),
            env=env,
            namespace_root=f"s3://{bucket}/",
        ) as server,
        httpx.Client(
            base_url=f"{server.url}/api/v1",
            auth=(server.access_key_id, server.secret_access_key),
            timeout=60.0,
        ) as http,
    ):
        yield Live(server, http)


def _keys(s3_client: Any, bucket: str, prefix: str) -> list[str]:  # noqa: F811
    pages = s3_client.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix)
    return [o["Key"] for page in pages for o in page.get("Contents", [])]


def test_40_mib_upload_file_on_an_s3_namespace(
    live: Live,
    bucket: str,
    s3_client: Any,  # noqa: F811
    tmp_path: Path,
) -> None:
    repo = live.create_repository("mpus3")
    s3 = live.s3()
    upload_40_mib(s3, repo, tmp_path, live)
    assert _keys(s3_client, bucket, f"{repo}/_lakefs/multipart/") == []
    stat = live.http.get(
        f"/repositories/{repo}/refs/main/objects/stat", params={"path": "tables/big.bin"}
    )
    assert stat.status_code == 200, stat.text
    physical = stat.json()["physical_address"]
    assert physical.startswith(f"s3://{bucket}/{repo}/data/")
    stored = s3_client.head_object(Bucket=bucket, Key=physical.removeprefix(f"s3://{bucket}/"))
    assert stored["ContentLength"] == 40 << 20
    # joined inside S3 from the same 8 MiB parts, so S3's own ETag is the gateway's
    assert stored["ETag"] == s3.head_object(Bucket=repo, Key="main/tables/big.bin")["ETag"]


def test_a_part_gone_from_the_bucket_fails_completion_and_changes_nothing(
    live: Live,
    bucket: str,
    s3_client: Any,  # noqa: F811
) -> None:
    repo = live.create_repository("mpus3")
    s3 = live.s3()
    key = "main/broken.bin"
    upload_id = s3.create_multipart_upload(Bucket=repo, Key=key)["UploadId"]
    parts = [
        {
            "PartNumber": n,
            "ETag": s3.upload_part(
                Bucket=repo, Key=key, UploadId=upload_id, PartNumber=n, Body=bytes([n]) * (5 << 20)
            )["ETag"],
        }
        for n in (1, 2)
    ]
    stored = _keys(s3_client, bucket, f"{repo}/_lakefs/multipart/{upload_id}/")
    s3_client.delete_object(Bucket=bucket, Key=stored[1])
    with pytest.raises(ClientError) as info:
        s3.complete_multipart_upload(
            Bucket=repo, Key=key, UploadId=upload_id, MultipartUpload={"Parts": parts}
        )
    assert info.value.response["Error"]["Code"] == "InvalidPart"
    assert "data is missing" in info.value.response["Error"]["Message"]
    assert live.paths(repo, "main") == []
    assert _keys(s3_client, bucket, f"{repo}/data/") == []
    assert s3_client.list_multipart_uploads(Bucket=bucket).get("Uploads", []) == []


def test_abort_leaves_no_part_in_the_bucket(
    live: Live,
    bucket: str,
    s3_client: Any,  # noqa: F811
) -> None:
    repo = live.create_repository("mpus3")
    s3 = live.s3()
    upload_id = s3.create_multipart_upload(Bucket=repo, Key="main/x.bin")["UploadId"]
    for n in (1, 2):
        s3.upload_part(Bucket=repo, Key="main/x.bin", UploadId=upload_id, PartNumber=n, Body=b"p")
    assert len(_keys(s3_client, bucket, f"{repo}/_lakefs/multipart/{upload_id}/")) == 2
    s3.abort_multipart_upload(Bucket=repo, Key="main/x.bin", UploadId=upload_id)
    assert _keys(s3_client, bucket, f"{repo}/_lakefs/multipart/") == []
    assert live.paths(repo, "main") == []
