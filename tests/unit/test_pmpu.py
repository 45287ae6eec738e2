"""Presigned multipart uploads: what stores that cannot presign answer, on the in-process app,
and how S3's refusals map to the error tree (botocore's own stubber answering as S3 would)."""

from __future__ import annotations

from collections.abc import Iterator

import boto3
import httpx
import pytest
from botocore.stub import Stubber
from fastapi import FastAPI

from mirror.api.app import create_app
from mirror.auth.store import AuthStore
from mirror.block.memory import MemoryBlockStore
from mirror.block.s3_multipart import (
    CopySource,
    InvalidPartError,
    S3Multipart,
    UploadNotFoundError,
    multipart_for,
    parse_copy_range,
)
from mirror.core import open_memory
from mirror.errors import InvalidValueError
from mirror.kv.memory import MemoryKV

PMPU = "/api/v1/repositories/{repo}/branches/main/staging/pmpu"


def _app(schemes: tuple[str, ...]) -> tuple[FastAPI, tuple[str, str]]:
    auth = AuthStore(MemoryKV())
    admin = auth.setup("admin")
    app = create_app(open_memory(), auth, namespace_schemes=schemes)
    return app, (admin.access_key_id, admin.secret_access_key)


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


async def _calls(
    app: FastAPI, creds: tuple[str, str] | None, created: int = 201
) -> list[httpx.Response]:
    transport = httpx.ASGITransport(app=app, raise_app_exceptions=False)
    async with httpx.AsyncClient(transport=transport, base_url="http://test", auth=creds) as c:
        if creds is not None:
            made = await c.post(
                "/api/v1/repositories", json={"name": "repo", "storage_namespace": "mem://repo"}
            )
            assert made.status_code == created, made.text
        base = PMPU.format(repo="repo")
        return [
            await c.request(method, url, params={"path": "a.bin"}, json={})
            for method, url in (
                ("POST", base),
                ("PUT", f"{base}/u1"),
                ("DELETE", f"{base}/u1"),
                ("PUT", f"{base}/u1/parts/1"),
                ("PUT", f"{base}/u1/parts/1/copy"),
            )
        ]


@pytest.mark.anyio
async def test_stores_that_cannot_presign_answer_lakefs_501_on_uploads() -> None:
    app, creds = _app(("local", "mem", "s3"))
    create, complete, abort, part, copy = await _calls(app, creds)
    for answer in (create, complete, abort):
        assert answer.status_code == 501, answer.text
        assert answer.json() == {"message": "presign multipart upload API is not supported"}
    # the part calls check their request before they ask the store (here: what is missing)
    assert (part.status_code, part.json()["message"]) == (400, "physical_address is required")
    assert (copy.status_code, copy.json()["message"]) == (400, "copy_source is required")
    for answer in await _calls(app, None):
        assert answer.status_code == 401


@pytest.mark.anyio
async def test_the_repository_is_looked_up_before_the_store() -> None:
    app, creds = _app(("local",))
    # mem:// is not served, so the repository is refused and every call finds none
    for answer in await _calls(app, creds, 400):
        assert answer.status_code == 404, answer.text
        assert answer.json()["message"].startswith("repository not found")


def test_only_s3_stores_upload_parts_to_presigned_urls() -> None:
    assert multipart_for(MemoryBlockStore("mem://repo")) is None


def test_copy_ranges_are_one_closed_byte_range() -> None:
    assert parse_copy_range(None) is None
    assert parse_copy_range("  ") is None
    assert parse_copy_range("bytes=0-99") == "bytes=0-99"
    for wrong in ("bytes=0-", "bytes=-5", "bytes=5-1", "bytes=0-1, 3-4", "0-99"):
        with pytest.raises(InvalidValueError):
            parse_copy_range(wrong)


@pytest.fixture
def stubbed() -> Iterator[tuple[S3Multipart, Stubber]]:
    client = boto3.client(
        "s3",
        region_name="us-east-1",
        aws_access_key_id="AKIAUNITTEST00000000",
        aws_secret_access_key="unit-test-secret",
    )
    with Stubber(client) as stubber:
        yield S3Multipart(client, "bucket", "prefix/"), stubber
        stubber.assert_no_pending_responses()


def test_presigned_part_urls_name_the_upload_and_part(
    stubbed: tuple[S3Multipart, Stubber],
) -> None:
    uploader, _ = stubbed
    url = uploader.presign_part("data/x,sig", "upload-1", 7, 900)
    assert "/prefix/data/x%2Csig" in url
    assert "uploadId=upload-1" in url and "partNumber=7" in url
    assert "X-Amz-Expires=900" in url or "Expires=" in url


def test_s3_refusals_map_to_not_found_and_invalid_part(
    stubbed: tuple[S3Multipart, Stubber],
) -> None:
    uploader, stubber = stubbed
    stubber.add_client_error(
        "complete_multipart_upload", service_error_code="NoSuchUpload", http_status_code=404
    )
    with pytest.raises(UploadNotFoundError):
        uploader.complete("data/x", "gone", [(1, "etag")])
    stubber.add_client_error(
        "complete_multipart_upload", service_error_code="InvalidPart", http_status_code=400
    )
    with pytest.raises(InvalidPartError, match="InvalidPart"):
        uploader.complete("data/x", "u", [(1, "etag")])
    stubber.add_client_error(
        "upload_part_copy", service_error_code="InvalidRange", http_status_code=416
    )
    with pytest.raises(InvalidPartError, match="copy range"):
        uploader.copy_part("data/x", "u", 1, CopySource("bucket", "prefix/src", "bytes=9-99"))
    stubber.add_client_error(
        "abort_multipart_upload", service_error_code="NoSuchUpload", http_status_code=404
    )
    with pytest.raises(UploadNotFoundError):
        uploader.abort("data/x", "gone")
