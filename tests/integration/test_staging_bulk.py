"""``POST /repositories/{repo}/branches/{branch}/staging/bulk``: link written files by address."""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from typing import Any

import httpx
import lakefs
import lakefs_sdk
import pytest

from tests.integration.harness import Server, unique


def _put(server: Server, repo: str, key: str, data: bytes) -> str:
    """Write ``data`` at ``key`` of the repository's local namespace; return its address."""
    path = server.data_dir / repo / key
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    return f"{server.namespace(repo)}/{key}"


def _bulk(http: httpx.Client, repo: str, objects: list[dict[str, Any]], branch: str = "main"):
    return http.post(
        f"/repositories/{repo}/branches/{branch}/staging/bulk", json={"objects": objects}
    )


def _uncommitted(http: httpx.Client, repo: str) -> list[str]:
    diff = http.get(f"/repositories/{repo}/branches/main/diff", params={"amount": 1000})
    assert diff.status_code == 200, diff.text
    return [d["path"] for d in diff.json()["results"]]


@pytest.fixture
def reader_http(server: Server, client: lakefs.Client) -> Iterator[httpx.Client]:
    auth = client.sdk_client.auth_api
    user_id = unique("reader")
    auth.create_user(lakefs_sdk.UserCreation(id=user_id))
    auth.add_group_membership("Readers", user_id)
    creds = auth.create_credentials(user_id)
    with httpx.Client(
        base_url=f"{server.url}/api/v1",
        auth=(creds.access_key_id, creds.secret_access_key),
        timeout=30.0,
    ) as http:
        yield http
    auth.delete_user(user_id)


def test_bulk_stage_fills_size_and_checksum_from_the_store(
    server: Server, http: httpx.Client, repo: lakefs.Repository
) -> None:
    files = {f"table/k={i % 2}/part-{i:05d}.parquet": bytes([i]) * (100 + i) for i in range(7)}
    prefix = "data/spark-batch-1/"
    objects = [
        {"path": path, "physical_address": _put(server, repo.id, prefix + path[6:], data)}
        for path, data in files.items()
    ]
    # explicit size, checksum, type and metadata are taken as given
    explicit = b"explicit"
    objects.append(
        {
            "path": "table/_meta.json",
            "physical_address": _put(server, repo.id, prefix + "_meta.json", explicit),
            "size_bytes": len(explicit),
            "checksum": "c0ffee",
            "content_type": "application/json",
            "user_metadata": {"writer": "spark"},
        }
    )
    response = _bulk(http, repo.id, objects)
    assert response.status_code == 201, response.text
    results = response.json()["results"]
    assert [r["path"] for r in results] == [o["path"] for o in objects]
    for result, obj in zip(results, objects, strict=True):
        assert result["physical_address"] == obj["physical_address"]
        assert result["path_type"] == "object"
    for result in results[:-1]:
        data = files[result["path"]]
        assert result["size_bytes"] == len(data)
        assert result["checksum"] == hashlib.md5(data).hexdigest()
        assert result["content_type"] == "application/octet-stream"
    last = results[-1]
    assert (last["size_bytes"], last["checksum"], last["content_type"]) == (
        len(explicit),
        "c0ffee",
        "application/json",
    )
    assert last["metadata"] == {"writer": "spark"}
    assert sorted(_uncommitted(http, repo.id)) == sorted(o["path"] for o in objects)
    commit = repo.branch("main").commit("stage a table")
    for path, data in files.items():
        got = http.get(f"/repositories/{repo.id}/refs/{commit.id}/objects", params={"path": path})
        assert (got.status_code, got.content) == (200, data)
    listed = http.get(
        f"/repositories/{repo.id}/refs/{commit.id}/objects/ls", params={"prefix": "table/k=1/"}
    ).json()["results"]
    assert [o["path"] for o in listed] == sorted(p for p in files if "/k=1/" in p)


def test_bulk_stage_refuses_bad_batches_and_stages_nothing(
    server: Server, http: httpx.Client, repo: lakefs.Repository
) -> None:
    good = {"path": "ok/a", "physical_address": _put(server, repo.id, "data/b1/a", b"a")}
    other = unique("other")
    cases: dict[str, tuple[dict[str, Any], str]] = {
        "outside the namespace": (
            {"path": "x", "physical_address": f"{server.namespace(other)}/data/x"},
            "outside the storage namespace",
        ),
        "a sibling namespace sharing the name's prefix": (
            {"path": "x", "physical_address": f"{server.namespace(repo.id)}-2/data/x"},
            "outside the storage namespace",
        ),
        "committed metadata": (
            {"path": "x", "physical_address": f"{server.namespace(repo.id)}/_lakefs/abc"},
            "_lakefs/",
        ),
        "a dot-dot key": (
            {"path": "x", "physical_address": f"{server.namespace(repo.id)}/data/../../etc"},
            "invalid object key",
        ),
        "a missing file": (
            {"path": "x", "physical_address": f"{server.namespace(repo.id)}/data/b1/nothing"},
            "does not exist",
        ),
        "a size the store contradicts": (
            {**good, "path": "x", "size_bytes": 5},
            "differs from the stored object's 1",
        ),
        "a duplicate path": ({**good}, "more than once"),
        "an empty path": ({**good, "path": ""}, ""),
    }
    for what, (bad, message) in cases.items():
        response = _bulk(http, repo.id, [good, bad])
        assert response.status_code == 400, (what, response.text)
        assert message in response.json()["message"], what
    assert _bulk(http, repo.id, []).status_code == 400
    too_many = [
        {"path": f"p/{i}", "physical_address": good["physical_address"]} for i in range(10_001)
    ]
    response = _bulk(http, repo.id, too_many)
    assert response.status_code == 400
    assert "10000" in response.json()["message"]
    assert _bulk(http, repo.id, [{"path": "x"}]).status_code == 400
    # every refused batch left the branch untouched
    assert _uncommitted(http, repo.id) == []
    assert _bulk(http, repo.id, [good], branch="no-such-branch").status_code == 404
    assert _bulk(http, unique("no-such-repo"), [good]).status_code == 404
    assert _bulk(http, repo.id, [good]).status_code == 201
    assert _uncommitted(http, repo.id) == ["ok/a"]


def test_bulk_stage_needs_write_permission_and_a_writable_repository(
    server: Server, http: httpx.Client, repo: lakefs.Repository, reader_http: httpx.Client
) -> None:
    good = {"path": "a", "physical_address": _put(server, repo.id, "data/b/a", b"a")}
    denied = _bulk(reader_http, repo.id, [good])
    assert denied.status_code == 403
    assert "fs:WriteObject" in denied.json()["message"]
    name = unique("readonly")
    created = http.post(
        "/repositories",
        json={"name": name, "storage_namespace": server.namespace(name), "read_only": True},
    )
    assert created.status_code == 201, created.text
    try:
        ro = {"path": "a", "physical_address": _put(server, name, "data/b/a", b"a")}
        refused = _bulk(http, name, [ro])
        assert refused.status_code == 403
        assert name in refused.json()["message"]
    finally:
        http.delete(f"/repositories/{name}", params={"force": "true"})
    assert _uncommitted(http, repo.id) == []


def test_data_dir_layout_matches_the_namespace(server: Server, repo: lakefs.Repository) -> None:
    # _put writes where the server reads: an object uploaded through the API lands there too
    stat = repo.branch("main").object("probe").upload(b"probe").stat()
    rest = stat.physical_address.removeprefix(server.namespace(repo.id) + "/")
    assert (server.data_dir / repo.id / rest).read_bytes() == b"probe"
