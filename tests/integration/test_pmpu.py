"""Presigned multipart uploads through ``lakefs_sdk``'s ExperimentalApi, on S3 (a moto server).

One server process (SQLite KV, ``s3://`` namespaces in a moto bucket) serves the module. Parts
go straight to the presigned URLs over HTTP, as lakectl sends them; the object is then read back
through the API.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import lakefs_sdk
import pytest
from lakefs_sdk.exceptions import (
    ApiException,
    BadRequestException,
    ForbiddenException,
    NotFoundException,
)

from tests.integration.harness import Server, unique
from tests.integration.moto_fixtures import MotoServer
from tests.integration.s3_namespace_server import s3_namespace_server

pytestmark = pytest.mark.s3

MIB = 1 << 20


@pytest.fixture(scope="module")
def s3_server(
    tmp_path_factory: pytest.TempPathFactory, moto_region: MotoServer, s3_client: Any
) -> Iterator[Server]:
    with s3_namespace_server(tmp_path_factory.mktemp("pmpu"), moto_region, s3_client) as server:
        yield server


@contextmanager
def _sdk(server: Server, key: str, secret: str) -> Iterator[lakefs_sdk.ApiClient]:
    """Return an SDK client of ``server`` signed in with ``key``; its connections closed after."""
    config = lakefs_sdk.Configuration(host=f"{server.url}/api/v1", username=key, password=secret)
    with lakefs_sdk.ApiClient(config) as api:
        try:
            yield api
        finally:
            api.rest_client.pool_manager.clear()


@pytest.fixture(scope="module")
def sdk(s3_server: Server) -> Iterator[lakefs_sdk.ApiClient]:
    with _sdk(s3_server, s3_server.access_key_id, s3_server.secret_access_key) as api:
        yield api


@pytest.fixture(scope="module")
def http(s3_server: Server) -> Iterator[httpx.Client]:
    with httpx.Client(
        base_url=f"{s3_server.url}/api/v1",
        auth=(s3_server.access_key_id, s3_server.secret_access_key),
        timeout=30.0,
    ) as client:
        yield client


@pytest.fixture(scope="module")
def experimental(sdk: lakefs_sdk.ApiClient) -> lakefs_sdk.ExperimentalApi:
    return lakefs_sdk.ExperimentalApi(sdk)


@pytest.fixture(scope="module")
def repo(s3_server: Server, sdk: lakefs_sdk.ApiClient) -> Iterator[str]:
    name = unique("pmpu")
    lakefs_sdk.RepositoriesApi(sdk).create_repository(
        lakefs_sdk.RepositoryCreation(name=name, storage_namespace=s3_server.namespace(name))
    )
    yield name
    lakefs_sdk.RepositoriesApi(sdk).delete_repository(name, force=True)


def _put(url: str, data: bytes) -> str:
    """PUT one part to its presigned URL; return the ETag S3 answered."""
    answer = httpx.put(url, content=data, timeout=60.0)
    assert answer.status_code == 200, answer.text
    return answer.headers["ETag"].strip('"')


def _message(exc: ApiException) -> str:
    message: str = json.loads(exc.body)["message"]
    return message


def _read(sdk: lakefs_sdk.ApiClient, repo: str, path: str) -> bytes:
    return bytes(lakefs_sdk.ObjectsApi(sdk).get_object(repo, "main", path))


def _complete(
    experimental: lakefs_sdk.ExperimentalApi,
    repo: str,
    path: str,
    upload: lakefs_sdk.PresignMultipartUpload,
    etags: list[str],
    **extra: Any,
) -> lakefs_sdk.ObjectStats:
    parts = [lakefs_sdk.UploadPart(part_number=n, etag=e) for n, e in enumerate(etags, start=1)]
    body = lakefs_sdk.CompletePresignMultipartUpload(
        physical_address=upload.physical_address, parts=parts, **extra
    )
    return experimental.complete_presign_multipart_upload(
        repo, "main", upload.upload_id, path, body
    )


def test_storage_config_advertises_presigned_multipart(sdk: lakefs_sdk.ApiClient) -> None:
    storage = lakefs_sdk.ConfigApi(sdk).get_config().storage_config
    assert storage is not None
    assert storage.pre_sign_multipart_upload is True
    assert storage.pre_sign_support is False


def test_upload_parts_to_presigned_urls_and_complete(
    experimental: lakefs_sdk.ExperimentalApi, sdk: lakefs_sdk.ApiClient, repo: str
) -> None:
    path = "big/object.bin"
    upload = experimental.create_presign_multipart_upload(repo, "main", path, parts=2)
    assert upload.presigned_urls is not None and len(upload.presigned_urls) == 2
    assert upload.physical_address.startswith("s3://")
    assert "," in upload.physical_address  # signed like staging backing's addresses
    first, second = os.urandom(5 * MIB), os.urandom(1234)
    etags = [_put(upload.presigned_urls[0], first), _put(upload.presigned_urls[1], second)]

    stats = _complete(
        experimental,
        repo,
        path,
        upload,
        etags,
        user_metadata={"origin": "pmpu"},
        content_type="application/x-test",
    )
    assert stats.path == path
    assert stats.size_bytes == len(first) + len(second)
    assert stats.checksum.endswith("-2")  # S3's ETag of a two-part object
    assert stats.physical_address == upload.physical_address
    assert stats.content_type == "application/x-test"
    assert stats.metadata == {"origin": "pmpu"}
    assert _read(sdk, repo, path) == first + second
    stat = lakefs_sdk.ObjectsApi(sdk).stat_object(repo, "main", path)
    assert (stat.checksum, stat.size_bytes) == (stats.checksum, stats.size_bytes)
    diff = lakefs_sdk.BranchesApi(sdk).diff_branch(repo, "main")
    assert path in {d.path for d in diff.results}


def test_upload_part_hands_out_one_more_url(
    experimental: lakefs_sdk.ExperimentalApi, sdk: lakefs_sdk.ApiClient, repo: str
) -> None:
    path = "more/parts.bin"
    upload = experimental.create_presign_multipart_upload(repo, "main", path)
    assert upload.presigned_urls is None
    data = [os.urandom(5 * MIB), b"tail"]
    etags = []
    for number, chunk in enumerate(data, start=1):
        to = experimental.upload_part(
            repo,
            "main",
            upload.upload_id,
            path,
            number,
            lakefs_sdk.UploadPartFrom(physical_address=upload.physical_address),
        )
        etags.append(_put(to.presigned_url, chunk))
    _complete(experimental, repo, path, upload, etags)
    assert _read(sdk, repo, path) == b"".join(data)


def test_upload_part_copy_from_other_objects(
    experimental: lakefs_sdk.ExperimentalApi,
    sdk: lakefs_sdk.ApiClient,
    repo: str,
    tmp_path: Path,
) -> None:
    objects = lakefs_sdk.ObjectsApi(sdk)
    big, small = os.urandom(6 * MIB), b"small source object"
    for name, data in (("big", big), ("small", small)):
        (tmp_path / name).write_bytes(data)
        objects.upload_object(repo, "main", f"src/{name}", content=str(tmp_path / name))
    path = "copied/object.bin"
    upload = experimental.create_presign_multipart_upload(repo, "main", path, parts=0)
    sources = [
        lakefs_sdk.CopyPartSource(
            repository=repo, ref="main", path="src/big", range=f"bytes=0-{5 * MIB - 1}"
        ),
        lakefs_sdk.CopyPartSource(repository=repo, ref="main", path="src/small"),
    ]
    etags = []
    for number, source in enumerate(sources, start=1):
        answer = experimental.upload_part_copy_with_http_info(
            repo,
            "main",
            upload.upload_id,
            path,
            number,
            lakefs_sdk.UploadPartCopyFrom(
                physical_address=upload.physical_address, copy_source=source
            ),
        )
        assert answer.status_code == 204
        assert answer.headers is not None
        etags.append(answer.headers["ETag"].strip('"'))
    stats = _complete(experimental, repo, path, upload, etags)
    assert stats.size_bytes == 5 * MIB + len(small)
    assert _read(sdk, repo, path) == big[: 5 * MIB] + small

    copy = lakefs_sdk.UploadPartCopyFrom(
        physical_address=upload.physical_address,
        copy_source=lakefs_sdk.CopyPartSource(repository=repo, ref="main", path="src/none"),
    )
    with pytest.raises(NotFoundException):
        experimental.upload_part_copy(repo, "main", upload.upload_id, path, 1, copy)


def test_abort_drops_the_upload(
    experimental: lakefs_sdk.ExperimentalApi, s3_server: Server, s3_client: Any, repo: str
) -> None:
    path = "aborted.bin"
    upload = experimental.create_presign_multipart_upload(repo, "main", path, parts=1)
    assert upload.presigned_urls is not None
    etag = _put(upload.presigned_urls[0], b"never linked")
    answer = experimental.abort_presign_multipart_upload_with_http_info(
        repo,
        "main",
        upload.upload_id,
        path,
        lakefs_sdk.AbortPresignMultipartUpload(physical_address=upload.physical_address),
    )
    assert answer.status_code == 204
    bucket = s3_server.namespace_root.removeprefix("s3://").rstrip("/")
    listed = s3_client.list_multipart_uploads(Bucket=bucket).get("Uploads", [])
    assert upload.upload_id not in {u["UploadId"] for u in listed}
    assert etag
    with pytest.raises(NotFoundException):
        lakefs_sdk.ObjectsApi(experimental.api_client).stat_object(repo, "main", path)


def test_request_errors(
    experimental: lakefs_sdk.ExperimentalApi, http: httpx.Client, repo: str
) -> None:
    path = "errors.bin"
    with pytest.raises(BadRequestException) as too_many:
        experimental.create_presign_multipart_upload(repo, "main", path, parts=10001)
    assert _message(too_many.value) == "parts can be between 0 and 10000"
    with pytest.raises(NotFoundException):
        experimental.create_presign_multipart_upload(repo, "no-such-branch", path)
    with pytest.raises(NotFoundException):
        experimental.create_presign_multipart_upload(unique("nosuchrepo"), "main", path)

    upload = experimental.create_presign_multipart_upload(repo, "main", path, parts=1)
    assert upload.presigned_urls is not None
    etag = _put(upload.presigned_urls[0], b"one small part")
    part = [lakefs_sdk.UploadPart(part_number=1, etag=etag)]

    def complete(address: str, where: str = path, parts: list[Any] = part) -> None:
        body = lakefs_sdk.CompletePresignMultipartUpload(physical_address=address, parts=parts)
        experimental.complete_presign_multipart_upload(repo, "main", upload.upload_id, where, body)

    with pytest.raises(BadRequestException) as no_parts:
        complete(upload.physical_address, parts=[])
    assert _message(no_parts.value) == "parts are required"
    with pytest.raises(BadRequestException) as outside:
        complete("s3://elsewhere/data/object")
    assert _message(outside.value) == "physical address must be relative to the storage namespace"
    with pytest.raises(BadRequestException) as other_path:
        complete(upload.physical_address, where="another/path.bin")
    assert _message(other_path.value).startswith("link address invalid")
    with pytest.raises(BadRequestException) as forged:
        complete(upload.physical_address.rpartition(",")[0] + ",forged")
    assert _message(forged.value).startswith("link address invalid")
    with pytest.raises(BadRequestException) as wrong_etag:
        complete(
            upload.physical_address, parts=[lakefs_sdk.UploadPart(part_number=1, etag="0" * 32)]
        )
    assert "InvalidPart" in _message(wrong_etag.value)

    pmpu = f"/repositories/{repo}/branches/main/staging/pmpu/{upload.upload_id}"
    bad_number = http.put(
        f"{pmpu}/parts/10001",
        params={"path": path},
        json={"physical_address": upload.physical_address},
    )
    assert bad_number.status_code == 400, bad_number.text
    no_address = http.put(f"{pmpu}/parts/1", params={"path": path}, json={})
    assert no_address.status_code == 400
    assert no_address.json()["message"] == "physical_address is required"
    no_path = http.post(f"/repositories/{repo}/branches/main/staging/pmpu")
    assert (no_path.status_code, no_path.json()["message"]) == (400, "path is required")
    source = "errors-source.bin"
    made = http.post(
        f"/repositories/{repo}/branches/main/objects", params={"path": source}, content=b"s" * 64
    )
    assert made.status_code == 201, made.text

    def copy(where: str, byte_range: str | None = None) -> httpx.Response:
        copy_source = {"repository": repo, "ref": "main", "path": where, "range": byte_range}
        body = {"physical_address": upload.physical_address, "copy_source": copy_source}
        return http.put(f"{pmpu}/parts/1/copy", params={"path": path}, json=body)

    bad_range = copy(source, "bytes=9-1")
    assert bad_range.status_code == 400, bad_range.text
    # lakeFS finds the source object before it reads the range
    assert copy("errors-missing.bin", "bytes=9-1").status_code == 404
    no_source = http.put(
        f"{pmpu}/parts/1/copy",
        params={"path": path},
        json={"physical_address": upload.physical_address},
    )
    assert (no_source.status_code, no_source.json()["message"]) == (400, "copy_source is required")

    complete(upload.physical_address)  # the upload itself was fine all along


def test_refusals(
    experimental: lakefs_sdk.ExperimentalApi,
    sdk: lakefs_sdk.ApiClient,
    s3_server: Server,
    http: httpx.Client,
    repo: str,
) -> None:
    # a mirror is read-only
    mirror = unique("pmpu-mirror")
    made = http.post(
        "/mirror/repositories",
        json={
            "name": mirror,
            "storage_namespace": s3_server.namespace(mirror),
            "mirror_of": "us-east-1/pmpusource",
        },
    )
    assert made.status_code == 201, made.text
    try:
        with pytest.raises(ForbiddenException) as read_only:
            experimental.create_presign_multipart_upload(mirror, "main", "a.bin")
        assert "read-only repository" in _message(read_only.value)
    finally:
        http.delete(f"/repositories/{mirror}", params={"force": "true"})

    # a protected branch takes no staged writes
    branches = lakefs_sdk.BranchesApi(sdk)
    branches.create_branch(repo, lakefs_sdk.BranchCreation(name="guarded", source="main"))
    protection = lakefs_sdk.RepositoriesApi(sdk)
    protection.set_branch_protection_rules(
        repo, [lakefs_sdk.BranchProtectionRule(pattern="guarded")]
    )
    try:
        with pytest.raises(ForbiddenException):
            experimental.create_presign_multipart_upload(repo, "guarded", "a.bin")
    finally:
        protection.set_branch_protection_rules(repo, [])

    # fs:WriteObject on the path, fs:ReadObject on a copy source
    auth = lakefs_sdk.AuthApi(sdk)
    reader_id = unique("pmpu-reader")
    auth.create_user(lakefs_sdk.UserCreation(id=reader_id))
    try:
        auth.add_group_membership("Readers", reader_id)
        creds = auth.create_credentials(reader_id)
        with _sdk(s3_server, creds.access_key_id, creds.secret_access_key) as api:
            with pytest.raises(ForbiddenException):
                lakefs_sdk.ExperimentalApi(api).create_presign_multipart_upload(
                    repo, "main", "a.bin", parts=1
                )
    finally:
        auth.delete_user(reader_id)

    writer_id = unique("pmpu-writer")
    policy_id = unique("pmpu-policy")
    statement = lakefs_sdk.Statement(
        effect="allow", action=["fs:WriteObject"], resource=f"arn:lakefs:fs:::repository/{repo}/*"
    )
    auth.create_policy(lakefs_sdk.Policy(id=policy_id, statement=[statement]))
    auth.create_user(lakefs_sdk.UserCreation(id=writer_id))
    try:
        auth.attach_policy_to_user(writer_id, policy_id)
        creds = auth.create_credentials(writer_id)
        with _sdk(s3_server, creds.access_key_id, creds.secret_access_key) as api:
            _write_but_not_read(lakefs_sdk.ExperimentalApi(api), repo)
    finally:
        auth.delete_user(writer_id)
        auth.delete_policy(policy_id)


@pytest.fixture
def local_repo(sdk: lakefs_sdk.ApiClient, http: httpx.Client) -> Iterator[str]:
    """A repository of the same server whose namespace is local, with one object."""
    name = unique("pmpu-local")
    repos = lakefs_sdk.RepositoriesApi(sdk)
    repos.create_repository(
        lakefs_sdk.RepositoryCreation(name=name, storage_namespace=f"local://{name}")
    )
    made = http.post(
        f"/repositories/{name}/branches/main/objects", params={"path": "src.bin"}, content=b"src"
    )
    assert made.status_code == 201, made.text
    yield name
    repos.delete_repository(name, force=True)


def test_local_namespaces_cannot_presign(
    experimental: lakefs_sdk.ExperimentalApi, http: httpx.Client, local_repo: str
) -> None:
    path, upload_id = "big.bin", "0123456789abcdef0123456789abcdef"
    # starting, completing and aborting an upload: lakeFS's 501 for a store without presign
    with pytest.raises(ApiException) as unsupported:
        experimental.create_presign_multipart_upload(local_repo, "main", path, parts=1)
    assert unsupported.value.status == 501
    assert _message(unsupported.value) == "presign multipart upload API is not supported"
    address = http.get(
        f"/repositories/{local_repo}/branches/main/staging/backing", params={"path": path}
    ).json()["physical_address"]
    assert address.startswith(f"local://{local_repo}/data/")
    done = lakefs_sdk.CompletePresignMultipartUpload(
        physical_address=address, parts=[lakefs_sdk.UploadPart(part_number=1, etag="e")]
    )
    with pytest.raises(ApiException) as completing:
        experimental.complete_presign_multipart_upload(local_repo, "main", upload_id, path, done)
    assert completing.value.status == 501
    with pytest.raises(ApiException) as aborting:
        experimental.abort_presign_multipart_upload(
            local_repo,
            "main",
            upload_id,
            path,
            lakefs_sdk.AbortPresignMultipartUpload(physical_address=address),
        )
    assert aborting.value.status == 501

    # the part calls check the signed address and the source first, as lakeFS's handlers do
    def part(where: str, physical_address: str) -> lakefs_sdk.UploadTo:
        body = lakefs_sdk.UploadPartFrom(physical_address=physical_address)
        return experimental.upload_part(local_repo, "main", upload_id, where, 1, body)

    def copy(where: str, physical_address: str, source: str) -> None:
        body = lakefs_sdk.UploadPartCopyFrom(
            physical_address=physical_address,
            copy_source=lakefs_sdk.CopyPartSource(repository=local_repo, ref="main", path=source),
        )
        experimental.upload_part_copy(local_repo, "main", upload_id, where, 1, body)

    with pytest.raises(BadRequestException) as outside:
        part(path, "local://elsewhere/data/x")
    assert _message(outside.value) == "physical address must be relative to the storage namespace"
    with pytest.raises(BadRequestException) as other_path:
        part("other.bin", address)
    assert _message(other_path.value).startswith("link address invalid")
    with pytest.raises(BadRequestException) as other_path_copy:
        copy("other.bin", address, "src.bin")
    assert _message(other_path_copy.value).startswith("link address invalid")
    with pytest.raises(NotFoundException):
        copy(path, address, "missing.bin")
    # then the store: lakeFS's local adapter cannot presign a part URL
    with pytest.raises(BadRequestException) as no_url:
        part(path, address)
    assert _message(no_url.value).startswith("operation not supported")
    with pytest.raises(BadRequestException) as no_copy:
        copy(path, address, "src.bin")
    assert _message(no_copy.value).startswith("operation not supported")


def _write_but_not_read(writer: lakefs_sdk.ExperimentalApi, repo: str) -> None:
    """Start and abort an upload, but copy no part from an object the caller may not read."""
    upload = writer.create_presign_multipart_upload(repo, "main", "w.bin")
    copy = lakefs_sdk.UploadPartCopyFrom(
        physical_address=upload.physical_address,
        copy_source=lakefs_sdk.CopyPartSource(repository=repo, ref="main", path="x"),
    )
    with pytest.raises(ForbiddenException):
        writer.upload_part_copy(repo, "main", upload.upload_id, "w.bin", 1, copy)
    writer.abort_presign_multipart_upload(
        repo,
        "main",
        upload.upload_id,
        "w.bin",
        lakefs_sdk.AbortPresignMultipartUpload(physical_address=upload.physical_address),
    )
