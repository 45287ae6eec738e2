"""Merge bases, metadata locations and bytes, repository metadata, and the internal operations.

All through the official ``lakefs_sdk`` against a live server (raw HTTP only to see headers and
bodies the SDK hides), with lakeFS's documented errors, and the refusals on a read-only mirror.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import lakefs
import lakefs_sdk
import pytest
from lakefs_sdk.exceptions import (
    ApiException,
    BadRequestException,
    ForbiddenException,
    NotFoundException,
)

from mirror.core.committed import decode_metarange
from mirror.core.ids import commit_id
from tests.integration.harness import MakeUser, Server, unique


def _sdk(client: lakefs.Client) -> Any:
    return client.sdk_client


def _local(server: Server, namespace_path: str) -> Path:
    """Return the file of a ``local://<name>/...`` location of the embedded server."""
    assert namespace_path.startswith("local://"), namespace_path
    return server.data_dir / namespace_path.removeprefix("local://")


def _commit_on(repo: lakefs.Repository, branch: str, path: str, data: bytes) -> str:
    b = repo.branch(branch)
    b.object(path).upload(data=data)
    ref: str = b.commit(message=f"{path} on {branch}").get_commit().id
    return ref


@pytest.fixture
def mirror(server: Server, http: httpx.Client, make_user: MakeUser) -> Iterator[str]:
    """A read-only mirror repository, made as the replicant makes it."""
    replicator = make_user(policies=("Replicator",))
    name = unique("mdmirror")
    created = replicator.http.post(
        "/mirror/repositories",
        json={
            "name": name,
            "storage_namespace": server.namespace(name),
            "mirror_of": "us-east-1/mdsource",
        },
    )
    assert created.status_code == 201, created.text
    yield name
    http.delete(f"/repositories/{name}", params={"force": "true"})


def _record(repo: lakefs.Repository, parents: list[str], message: str) -> dict[str, Any]:
    metarange = repo.branch("main").get_commit().meta_range_id
    fields: dict[str, Any] = {
        "committer": "restorer",
        "message": message,
        "metarange_id": metarange,
        "creation_date": int(time.time()),
        "metadata": {"origin": "restore"},
        "parents": parents,
    }
    return {"commit_id": commit_id(**fields), "version": 1, "generation": 1, **fields}


def test_merge_base_follows_the_names(client: lakefs.Client, repo: lakefs.Repository) -> None:
    base = repo.branch("main").get_commit().id
    repo.branch("dev").create(source_reference="main")
    dev = _commit_on(repo, "dev", "d.txt", b"d")
    main = _commit_on(repo, "main", "m.txt", b"m")
    found = _sdk(client).refs_api.find_merge_base(repo.id, "dev", "main")
    assert (found.source_commit_id, found.destination_commit_id, found.base_commit_id) == (
        dev,
        main,
        base,
    )
    with pytest.raises(NotFoundException):
        _sdk(client).refs_api.find_merge_base(repo.id, "nosuch", "main")


def test_commit_records_and_no_merge_base(
    http: httpx.Client, client: lakefs.Client, repo: lakefs.Repository
) -> None:
    internal = _sdk(client).internal_api
    record = _record(repo, [], "an unrelated root")
    internal.create_commit_record(repo.id, lakefs_sdk.CommitRecordCreation(**record))
    stored = _sdk(client).commits_api.get_commit(repo.id, record["commit_id"])
    assert (stored.message, stored.committer, stored.parents) == (
        "an unrelated root",
        "restorer",
        [],
    )
    assert stored.metadata == {"origin": "restore"}

    with pytest.raises(ApiException) as again:
        internal.create_commit_record(repo.id, lakefs_sdk.CommitRecordCreation(**record))
    assert again.value.status == 409
    assert "commit already exists: not unique" in str(again.value.body)

    forged = {**record, "commit_id": "0" * 64}
    with pytest.raises(BadRequestException):
        internal.create_commit_record(repo.id, lakefs_sdk.CommitRecordCreation(**forged))

    # a branch on the unrelated root shares no ancestor with main: lakeFS's 500
    repo.branch("orphan").create(source_reference=record["commit_id"])
    answer = http.get(f"/repositories/{repo.id}/refs/orphan/merge/main")
    assert answer.status_code == 500
    assert answer.json()["message"].startswith("no merge base")


def test_metarange_and_range_locations_and_bytes(
    server: Server, http: httpx.Client, client: lakefs.Client, repo: lakefs.Repository
) -> None:
    _commit_on(repo, "main", "x/one.txt", b"1")
    metarange = repo.branch("main").get_commit().meta_range_id
    api = _sdk(client).metadata_api
    location = api.get_meta_range(repo.id, metarange).location
    assert location == f"_lakefs/{metarange}"
    raw = http.get(f"/repositories/{repo.id}/metadata/meta_range/{metarange}")
    assert raw.headers["Location"] == location
    on_disk = _local(server, f"{server.namespace(repo.id)}/{location}").read_bytes()

    internal = _sdk(client).internal_api
    served = internal.get_metadata_object(repo.id, metarange, "meta_range")
    assert bytes(served) == on_disk
    ranges = decode_metarange(on_disk)
    assert ranges
    range_location = api.get_range(repo.id, ranges[0].id).location
    assert range_location == f"_lakefs/{ranges[0].id}"
    range_bytes = internal.get_metadata_object(repo.id, ranges[0].id, "range", presign=False)
    assert (
        bytes(range_bytes)
        == _local(server, f"{server.namespace(repo.id)}/{range_location}").read_bytes()
    )

    with pytest.raises(NotFoundException):
        internal.get_metadata_object(repo.id, "f" * 64, "range")
    bad_type = http.get(f"/repositories/{repo.id}/metadata/object/commit/{metarange}")
    assert bad_type.status_code == 400
    with pytest.raises(NotFoundException):
        api.get_meta_range(unique("norepo"), metarange)


def test_repository_metadata_set_and_delete(client: lakefs.Client, repo: lakefs.Repository) -> None:
    api = _sdk(client).repositories_api
    internal = _sdk(client).internal_api
    assert api.get_repository_metadata(repo.id) == {}
    internal.set_repository_metadata(
        repo.id, lakefs_sdk.RepositoryMetadataSet(metadata={"a": "1", "b": "2"})
    )
    internal.set_repository_metadata(repo.id, lakefs_sdk.RepositoryMetadataSet(metadata={"b": "3"}))
    assert api.get_repository_metadata(repo.id) == {"a": "1", "b": "3"}
    internal.delete_repository_metadata(
        repo.id, lakefs_sdk.RepositoryMetadataKeys(keys=["a", "missing"])
    )
    assert api.get_repository_metadata(repo.id) == {"b": "3"}
    with pytest.raises(NotFoundException):
        internal.set_repository_metadata(
            unique("norepo"), lakefs_sdk.RepositoryMetadataSet(metadata={"a": "1"})
        )


def test_mirror_refuses_internal_writes(
    http: httpx.Client, client: lakefs.Client, mirror: str
) -> None:
    internal = _sdk(client).internal_api
    with pytest.raises(ForbiddenException) as refused:
        internal.set_repository_metadata(
            mirror, lakefs_sdk.RepositoryMetadataSet(metadata={"a": "1"})
        )
    assert "read-only repository" in str(refused.value.body)
    with pytest.raises(ForbiddenException):
        internal.delete_repository_metadata(mirror, lakefs_sdk.RepositoryMetadataKeys(keys=["a"]))
    for answer in (
        http.get(
            f"/repositories/{mirror}/branches/main/objects/stage_allowed", params={"path": "a"}
        ),
        http.post(f"/repositories/{mirror}/refs/main/symlink"),
        http.put(
            f"/repositories/{mirror}/branches/main/objects",
            params={"path": "a"},
            json={"physical_address": "local://x/y", "checksum": "c", "size_bytes": 1},
        ),
    ):
        assert answer.status_code == 403, answer.text
        assert answer.json()["message"].startswith("read-only repository")


def test_upload_preflight(client: lakefs.Client, repo: lakefs.Repository) -> None:
    internal = _sdk(client).internal_api
    assert internal.upload_object_preflight(repo.id, "main", "some/path") is None
    with pytest.raises(NotFoundException):
        internal.upload_object_preflight(repo.id, "nosuch", "some/path")
    _sdk(client).repositories_api.set_branch_protection_rules(
        repo.id, [lakefs_sdk.BranchProtectionRule(pattern="main")]
    )
    with pytest.raises(ForbiddenException) as protected:
        internal.upload_object_preflight(repo.id, "main", "some/path")
    assert "cannot write to protected branch" in str(protected.value.body)


def test_setup_comm_prefs(http: httpx.Client, client: lakefs.Client) -> None:
    prefs = lakefs_sdk.CommPrefsInput(
        email="ops@example.com", feature_updates=False, security_updates=False
    )
    assert _sdk(client).internal_api.setup_comm_prefs(prefs) is None
    assert http.post("/setup_comm_prefs", json={"email": "x"}).status_code == 400
    # like lakeFS's setup calls it takes no credentials: the SDK sends none
    anonymous = httpx.post(
        str(http.base_url).rstrip("/") + "/setup_comm_prefs",
        json={"featureUpdates": True, "securityUpdates": False},
    )
    assert anonymous.status_code == 200


def test_symlink_manifests(server: Server, client: lakefs.Client, repo: lakefs.Repository) -> None:
    main = repo.branch("main")
    for path in ("t/p=1/a.parquet", "t/p=1/b.parquet", "t/p=2/c.parquet", "other/d.txt"):
        main.object(path).upload(data=path.encode())
    answer = _sdk(client).internal_api.create_symlink_file(repo.id, "main", location="t/")
    namespace = server.namespace(repo.id)
    assert answer.location == f"{namespace}/symlinks"
    root = _local(server, f"{namespace}/symlinks/{repo.id}/main")
    objects = _sdk(client).objects_api

    def addresses(*paths: str) -> list[str]:
        return [objects.stat_object(repo.id, "main", p).physical_address for p in paths]

    part1 = (root / "t/p=1/symlink.txt").read_text().split("\n")
    assert part1 == addresses("t/p=1/a.parquet", "t/p=1/b.parquet")
    assert (root / "t/p=2/symlink.txt").read_text().split("\n") == addresses("t/p=2/c.parquet")
    assert not (root / "other").exists()
    with pytest.raises(NotFoundException):
        _sdk(client).internal_api.create_symlink_file(repo.id, "nosuch")


def _stage(internal: Any, repository: str, branch: str, path: str, body: Any) -> Any:
    """Call the deprecated stage_object (the SDK warns about it)."""
    with pytest.warns(DeprecationWarning):
        return internal.stage_object(repository, branch, path, body)


def test_stage_object_links_an_address(
    server: Server, client: lakefs.Client, repo: lakefs.Repository
) -> None:
    main = repo.branch("main")
    main.object("source.bin").upload(data=b"payload")
    objects = _sdk(client).objects_api
    source = objects.stat_object(repo.id, "main", "source.bin")
    internal = _sdk(client).internal_api
    linked = _stage(
        internal,
        repo.id,
        "main",
        "linked.bin",
        lakefs_sdk.ObjectStageCreation(
            physical_address=source.physical_address,
            checksum=f'"{source.checksum}"',
            size_bytes=source.size_bytes,
            metadata={"k": "v"},
        ),
    )
    assert linked.path == "linked.bin"
    assert linked.physical_address == source.physical_address
    assert linked.checksum == source.checksum
    assert main.object("linked.bin").reader().read() == b"payload"
    assert objects.stat_object(repo.id, "main", "linked.bin").metadata == {"k": "v"}

    # outside the namespace (same scheme): stored in full
    outside = unique("outside")
    (server.data_dir / outside).mkdir()
    (server.data_dir / outside / "f.bin").write_bytes(b"outside bytes")
    full = _stage(
        internal,
        repo.id,
        "main",
        "full.bin",
        lakefs_sdk.ObjectStageCreation(
            physical_address=f"local://{outside}/f.bin", checksum="abc", size_bytes=13
        ),
    )
    assert full.physical_address == f"local://{outside}/f.bin"
    assert main.object("full.bin").reader().read() == b"outside bytes"

    with pytest.raises(BadRequestException):
        _stage(
            internal,
            repo.id,
            "main",
            "bad.bin",
            lakefs_sdk.ObjectStageCreation(
                physical_address="s3://bucket/key", checksum="abc", size_bytes=1
            ),
        )
    with pytest.raises(NotFoundException):
        _stage(
            internal,
            repo.id,
            "nosuch",
            "x.bin",
            lakefs_sdk.ObjectStageCreation(
                physical_address=source.physical_address, checksum="abc", size_bytes=7
            ),
        )


def test_presigned_multipart_upload_is_lakefs_501(
    http: httpx.Client, make_user: MakeUser, repo: lakefs.Repository
) -> None:
    # starting, completing and aborting; the part calls check their address first and are
    # tested in tests/integration/test_pmpu.py
    base = f"/repositories/{repo.id}/branches/main/staging/pmpu"
    calls = [("POST", base), ("PUT", f"{base}/u1"), ("DELETE", f"{base}/u1")]
    for method, url in calls:
        answer = http.request(method, url, params={"path": "big.bin"}, json={})
        assert answer.status_code == 501, (method, url, answer.text)
        assert answer.json() == {"message": "presign multipart upload API is not supported"}
    for url in (f"{base}/u1/parts/1", f"{base}/u1/parts/1/copy"):
        answer = http.put(url, params={"path": "big.bin"}, json={})
        assert answer.status_code == 400, (url, answer.text)
    reader = make_user("Readers")
    refused = reader.http.post(base, params={"path": "big.bin"})
    assert refused.status_code == 403
