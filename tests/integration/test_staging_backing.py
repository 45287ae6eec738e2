"""Direct-to-storage writes (``…/staging/backing``) and ``underlyingProperties``, on a live server.

- The SDK's sequence: get a signed address, write the bytes into the namespace directly, link
  them with their checksum and size, read them back through the API. On ``aws`` lakefs-spec's
  large-file path does it: ``put_file(..., pre_sign=True)`` PUTs the bytes to the presigned URL
  of the moto server, then links them.
- Every documented refusal: a tampered, foreign or reused address (``link address invalid``), no
  checksum, ``If-None-Match: *`` on an existing path (412), ``If-Match`` (501), a read-only
  mirror (403), a protected branch (403).
- A second server process over the same data directory links addresses the first handed out,
  and reads the status of an import the first runs.
- ``underlyingProperties`` always carries ``storage_class``: ``null`` for local files,
  S3's class on ``aws``.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import lakefs
import lakefs_sdk
import pytest
from lakefs_sdk.exceptions import ApiException
from lakefs_spec import LakeFSFileSystem

from tests.integration.harness import Server, running_server, unique


def _error(call: Any, *args: Any, **kwargs: Any) -> tuple[int, str]:
    with pytest.raises(ApiException) as err:
        call(*args, **kwargs)
    assert err.value.status is not None
    return err.value.status, json.loads(err.value.body or "{}").get("message", "")


def _write_local(server: Server, repo: str, address: str, data: bytes) -> None:
    """Write ``data`` where a ``local://`` address of ``repo``'s namespace points."""
    key = address[len(server.namespace(repo)) + 1 :]
    target = server.data_dir / repo / key
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_bytes(data)


def _link(
    api: lakefs_sdk.StagingApi, repo: str, path: str, location: Any, data: bytes, **kw: Any
) -> lakefs_sdk.ObjectStats:
    meta = lakefs_sdk.StagingMetadata(
        staging=location,
        checksum=hashlib.md5(data).hexdigest(),
        size_bytes=len(data),
        user_metadata={"k": "v"},
        content_type="application/x-test",
    )
    return api.link_physical_address(repo, "main", path, meta, **kw)


def test_write_directly_then_link(
    server: Server, client: lakefs.Client, repo: lakefs.Repository
) -> None:
    staging = client.sdk_client.staging_api
    data = b"written straight to the namespace" * 1000
    location = staging.get_physical_address(repo.id, "main", "big/file.bin")
    assert location.physical_address.startswith(server.namespace(repo.id) + "/data/")
    assert "," in location.physical_address.rsplit("/", 1)[-1]
    assert location.presigned_url is None
    _write_local(server, repo.id, location.physical_address, data)

    stats = _link(staging, repo.id, "big/file.bin", location, data)
    assert stats.physical_address == location.physical_address
    assert stats.checksum == hashlib.md5(data).hexdigest()
    assert stats.size_bytes == len(data)
    assert stats.metadata == {"k": "v"}
    obj = repo.branch("main").object("big/file.bin")
    assert obj.reader().read() == data
    assert obj.stat().content_type == "application/x-test"
    objects = client.sdk_client.objects_api
    props = objects.get_underlying_properties(repo.id, "main", "big/file.bin")
    assert props.storage_class is None


def test_link_refusals(
    server: Server, client: lakefs.Client, repo: lakefs.Repository, http: httpx.Client
) -> None:
    staging = client.sdk_client.staging_api
    data = b"abc"
    location = staging.get_physical_address(repo.id, "main", "a")
    _write_local(server, repo.id, location.physical_address, data)

    tampered = lakefs_sdk.StagingLocation(physical_address=location.physical_address[:-2] + "AA")
    status, message = _error(_link, staging, repo.id, "a", tampered, data)
    assert status == 400 and message.startswith("link address invalid")
    # a signature with a non-ASCII character answered 500 (hmac.compare_digest's TypeError)
    accented = lakefs_sdk.StagingLocation(physical_address=location.physical_address[:-2] + "é")
    status, message = _error(_link, staging, repo.id, "a", accented, data)
    assert status == 400 and message.startswith("link address invalid")
    status, message = _error(_link, staging, repo.id, "other-path", location, data)
    assert status == 400 and message.startswith("link address invalid")
    unsigned = lakefs_sdk.StagingLocation(
        physical_address=location.physical_address.rsplit(",", 1)[0]
    )
    assert _error(_link, staging, repo.id, "a", unsigned, data)[0] == 400

    no_checksum = lakefs_sdk.StagingMetadata(staging=location, checksum="", size_bytes=3)
    assert _error(staging.link_physical_address, repo.id, "main", "a", no_checksum) == (
        400,
        "checksum is required",
    )

    _link(staging, repo.id, "a", location, data)
    assert _error(_link, staging, repo.id, "a", location, data, if_none_match="*")[0] == 412
    assert _error(_link, staging, repo.id, "a", location, data, if_match="x") == (
        501,
        "Not Implemented",
    )
    missing = _error(client.sdk_client.objects_api.get_underlying_properties, repo.id, "main", "b")
    assert missing[0] == 404

    # a protected branch refuses links
    fresh = staging.get_physical_address(repo.id, "main", "p")
    _write_local(server, repo.id, fresh.physical_address, data)
    rules = http.put(
        f"/repositories/{repo.id}/settings/branch_protection", json=[{"pattern": "main"}]
    )
    assert rules.status_code == 204
    status, message = _error(_link, staging, repo.id, "p", fresh, data)
    assert status == 403 and "cannot write to protected branch" in message
    http.put(f"/repositories/{repo.id}/settings/branch_protection", json=[])

    mirror = unique("mirror")
    made = http.post(
        "/mirror/repositories",
        json={
            "name": mirror,
            "storage_namespace": server.namespace(mirror),
            "mirror_of": "elsewhere/source",
        },
    )
    assert made.status_code == 201, made.text
    status, message = _error(staging.get_physical_address, mirror, "main", "x")
    assert status == 403 and "read-only repository" in message
    status, message = _error(_link, staging, mirror, "x", location, data)
    assert status == 403 and "read-only repository" in message


@pytest.fixture
def s3(request: pytest.FixtureRequest, server: Server) -> Any:
    if server.namespace_root.startswith("s3://"):
        return request.getfixturevalue("s3_client")
    return None


@pytest.mark.both_backends
def test_lakefs_spec_large_file_path(
    server: Server, client: lakefs.Client, repo: lakefs.Repository, tmp_path: Path, s3: Any
) -> None:
    big = tmp_path / "big.bin"
    payload = bytes(range(256)) * 40_000  # 10 MiB
    big.write_bytes(payload)
    fs = LakeFSFileSystem(
        host=server.url, username=server.access_key_id, password=server.secret_access_key
    )
    if server.namespace_root.startswith("s3://"):
        # bytes go to S3 through the presigned URL; the server only links them
        fs.put_file(str(big), f"{repo.id}/main/large/big.bin", pre_sign=True)
        stat = repo.branch("main").object("large/big.bin").stat()
        assert stat.physical_address.startswith(server.namespace(repo.id) + "/data/")
        assert stat.size_bytes == len(payload)
        # an object written with a storage class of its own reports it
        staging = client.sdk_client.staging_api
        location = staging.get_physical_address(repo.id, "main", "cold.bin")
        bucket, key = location.physical_address[len("s3://") :].split("/", 1)
        s3.put_object(Bucket=bucket, Key=key, Body=b"cold", StorageClass="STANDARD_IA")
        _link(staging, repo.id, "cold.bin", location, b"cold")
        props = client.sdk_client.objects_api.get_underlying_properties(repo.id, "main", "cold.bin")
        assert props.storage_class == "STANDARD_IA"
    else:
        # lakefs-spec's path by hand on a local namespace: address, bytes, link
        staging = client.sdk_client.staging_api
        location = staging.get_physical_address(repo.id, "main", "large/big.bin", presign=True)
        assert location.presigned_url is None  # local files cannot be presigned
        _write_local(server, repo.id, location.physical_address, payload)
        _link(staging, repo.id, "large/big.bin", location, payload)
    with fs.open(f"{repo.id}/main/large/big.bin", "rb") as f:
        assert f.read() == payload


@pytest.fixture(scope="module")
def second(server: Server) -> Iterator[Server]:
    """Another server process over the same data directory (the same KV and key file)."""
    with running_server(
        server.data_dir,
        server.data_dir.parent / "second-backing.log",
        access_key_id=server.access_key_id,
        secret_access_key=server.secret_access_key,
    ) as found:
        yield found


def test_another_process_links_and_reports_imports(
    server: Server, second: Server, client: lakefs.Client, repo: lakefs.Repository
) -> None:
    other = lakefs.Client(
        host=second.url, username=second.access_key_id, password=second.secret_access_key
    )
    data = b"handed out by one process, linked through another"
    location = client.sdk_client.staging_api.get_physical_address(repo.id, "main", "shared")
    _write_local(server, repo.id, location.physical_address, data)
    _link(other.sdk_client.staging_api, repo.id, "shared", location, data)
    assert repo.branch("main").object("shared").reader().read() == data

    # an import started on one process reads the same from the other
    repo.branch("main").commit("linked")
    source_dir = server.data_dir / unique("shared-src")
    source_dir.mkdir()
    (source_dir / "f").write_bytes(b"f")
    body = lakefs_sdk.ImportCreation(
        paths=[
            lakefs_sdk.ImportLocation(
                type="common_prefix", path=f"local://{source_dir.name}/", destination="in/"
            )
        ],
        commit=lakefs_sdk.CommitCreation(message="m"),
    )
    started = client.sdk_client.import_api.import_start(repo.id, "main", body)
    deadline = time.monotonic() + 60
    while not (
        status := other.sdk_client.import_api.import_status(repo.id, "main", started.id)
    ).completed:
        assert status.error is None, status.error
        assert time.monotonic() < deadline, "the import never completed"
    assert status.ingested_objects == 1
    assert status.commit is not None and status.commit.id == repo.branch("main").get_commit().id
