"""The mirror endpoints, read-only mirrors, "not yet replicated" reads and /metrics, over HTTP.

A replicator (a user with the built-in ``Replicator`` policy) copies the commit records of a
normal repository into a mirror repository of the same server, whose storage namespace is a copy
of the source's directory, as S3 Replication would have made it.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import lakefs
import lakefs_sdk
import pytest
from lakefs.exceptions import ServerException
from prometheus_client.parser import text_string_to_metric_families

from tests.integration.harness import MakeUser, Principal, Server, unique


@pytest.fixture
def replicator(make_user: MakeUser) -> Principal:
    return make_user(policies=("Replicator",))


@pytest.fixture
def source(server: Server, client: lakefs.Client) -> Iterator[lakefs.Repository]:
    """A normal repository: three commits on main (a.csv, then b.csv, then a.csv changed)."""
    name = unique("origin")
    repo = lakefs.Repository(name, client=client).create(server.namespace(name))
    main = repo.branch("main")
    for path, data in (("a.csv", b"a1\n"), ("dir/b.csv", b"b1\n"), ("a.csv", b"a2\n")):
        main.object(path).upload(data)
        main.commit(f"write {path}")
    yield repo
    repo.delete()


def _history(http: httpx.Client, repo: str, ref: str = "main") -> list[dict[str, Any]]:
    """Return the commits of ``ref``, oldest first (parents before children)."""
    log = http.get(f"/repositories/{repo}/refs/{ref}/commits", params={"amount": 1000})
    assert log.status_code == 200, log.text
    return list(reversed(log.json()["results"]))


def _namespace_dir(server: Server, repo: str) -> Path:
    return server.data_dir / repo


@dataclass
class Mirror:
    name: str
    root: Path
    commits: list[dict[str, Any]]


@pytest.fixture
def new_mirror(
    server: Server, http: httpx.Client, replicator: Principal, source: lakefs.Repository
) -> Iterator[Callable[[], Mirror]]:
    """Make mirror repositories of ``source`` whose namespace is a copy of the source's files."""
    made: list[str] = []

    def make() -> Mirror:
        name = unique("origin-mirror")
        root = _namespace_dir(server, name)
        shutil.copytree(_namespace_dir(server, source.id), root)
        created = replicator.http.post(
            "/mirror/repositories",
            json={
                "name": name,
                "storage_namespace": server.namespace(name),
                "mirror_of": f"us-east-1/{source.id}",
            },
        )
        assert created.status_code == 201, created.text
        made.append(name)
        return Mirror(name, root, _history(http, source.id))

    yield make
    for name in made:
        http.delete(f"/repositories/{name}", params={"force": "true"})


def _import_all(http: httpx.Client, mirror: Mirror) -> str:
    """Import every commit of the source's main, create the mirror's main at the head."""
    for commit in mirror.commits:
        imported = http.post(f"/repositories/{mirror.name}/mirror/commits", json=commit)
        assert imported.status_code == 201, imported.text
    head: str = mirror.commits[-1]["id"]
    moved = http.put(
        f"/repositories/{mirror.name}/mirror/branches/main",
        json={"commit_id": head, "expected": None},
    )
    assert moved.status_code == 200, moved.text
    return head


def test_create_mirror_repository(
    server: Server, http: httpx.Client, replicator: Principal, make_user: MakeUser
) -> None:
    name = unique("origin-mirror")
    body = {"name": name, "storage_namespace": server.namespace(name), "mirror_of": "us-east-1/o"}
    created = replicator.http.post("/mirror/repositories", json=body)
    assert created.status_code == 201, created.text
    assert created.json()["id"] == name
    assert created.json()["read_only"] is True
    assert created.json()["default_branch"] == "main"
    try:
        assert http.get(f"/repositories/{name}").json()["read_only"] is True
        again = replicator.http.post("/mirror/repositories", json=body)
        assert again.status_code == 409, again.text
        assert "message" in again.json()
        bad_name = replicator.http.post("/mirror/repositories", json={**body, "name": "Bad Name!"})
        assert bad_name.status_code == 400, bad_name.text
        for namespace in ("local://../escape", "file:///tmp/x", "nonsense"):
            bad_ns = replicator.http.post(
                "/mirror/repositories",
                json={**body, "name": unique("m"), "storage_namespace": namespace},
            )
            assert bad_ns.status_code == 400, (namespace, bad_ns.text)
        missing = replicator.http.post(
            "/mirror/repositories", json={"name": unique("m"), "storage_namespace": "local://m"}
        )
        assert missing.status_code == 400, missing.text
        reader = make_user("Readers")
        other = unique("origin-mirror")
        denied = reader.http.post(
            "/mirror/repositories",
            json={**body, "name": other, "storage_namespace": server.namespace(other)},
        )
        assert denied.status_code == 403, denied.text
        assert "fs:MirrorRepository" in denied.json()["message"]
        anonymous = httpx.post(f"{server.url}/api/v1/mirror/repositories", json=body)
        assert anonymous.status_code == 401
        assert http.get(f"/repositories/{other}").status_code == 404
    finally:
        http.delete(f"/repositories/{name}", params={"force": "true"})


def test_mirror_endpoints_refuse_normal_repositories_and_readers(
    source: lakefs.Repository, replicator: Principal, make_user: MakeUser, new_mirror: Any
) -> None:
    head = source.branch("main").get_commit().id
    base = f"/repositories/{source.id}/mirror"
    calls: list[tuple[str, str, dict[str, Any]]] = [
        ("POST", f"{base}/commits", {"json": {}}),
        ("PUT", f"{base}/branches/x", {"json": {"commit_id": head, "expected": None}}),
        ("DELETE", f"{base}/branches/x", {}),
        ("PUT", f"{base}/tags/t", {"json": {"commit_id": head}}),
        ("DELETE", f"{base}/tags/t", {}),
    ]
    commit = replicator.http.get(f"/repositories/{source.id}/commits/{head}").json()
    calls[0] = ("POST", f"{base}/commits", {"json": commit})
    for method, path, kwargs in calls:
        response = replicator.http.request(method, path, **kwargs)
        assert response.status_code == 400, (method, path, response.text)
        assert response.json() == {"message": f"repository {source.id} is not a mirror"}
    mirror: Mirror = new_mirror()
    reader = make_user("Readers")
    for method, path, kwargs in calls:
        path = path.replace(f"/repositories/{source.id}/", f"/repositories/{mirror.name}/")
        response = reader.http.request(method, path, **kwargs)
        assert response.status_code == 403, (method, path, response.text)
        assert "fs:MirrorRepository" in response.json()["message"]
    unknown = replicator.http.put(
        f"/repositories/{unique('nothing')}/mirror/tags/t", json={"commit_id": head}
    )
    assert unknown.status_code == 404, unknown.text


def test_import_commits_and_move_heads(
    http: httpx.Client, replicator: Principal, new_mirror: Callable[[], Mirror]
) -> None:
    mirror = new_mirror()
    api = replicator.http
    base = f"/repositories/{mirror.name}/mirror"
    _, second, third, fourth = mirror.commits
    # a mirror starts bare: no branch, no commit
    assert http.get(f"/repositories/{mirror.name}/branches").json()["results"] == []
    assert http.get(f"/repositories/{mirror.name}/branches/main").status_code == 404
    # parents first: the child of a missing commit is refused
    out_of_order = api.post(f"{base}/commits", json=third)
    assert out_of_order.status_code == 404, out_of_order.text
    assert second["id"] in out_of_order.json()["message"]
    # a record whose ID does not match its content is refused
    for field, value in (("message", "tampered"), ("meta_range_id", "0" * 64)):
        tampered = api.post(f"{base}/commits", json={**second, field: value})
        assert tampered.status_code == 400, tampered.text
    assert http.get(f"/repositories/{mirror.name}/commits/{second['id']}").status_code == 404
    for commit in mirror.commits:
        imported = api.post(f"{base}/commits", json=commit)
        assert imported.status_code == 201, imported.text
        assert imported.json() == commit
        again = api.post(f"{base}/commits", json=commit)
        assert again.status_code == 201, again.text
        assert again.json() == commit
        stored = http.get(f"/repositories/{mirror.name}/commits/{commit['id']}")
        assert stored.json() == commit
    # compare-and-swap of the head: the default branch is created from "absent" first
    absent = api.put(
        f"{base}/branches/main", json={"commit_id": third["id"], "expected": second["id"]}
    )
    assert absent.status_code == 404, absent.text
    created_main = api.put(
        f"{base}/branches/main", json={"commit_id": second["id"], "expected": None}
    )
    assert created_main.status_code == 200, created_main.text
    assert created_main.json() == {"id": "main", "commit_id": second["id"]}
    stale = api.put(
        f"{base}/branches/main", json={"commit_id": fourth["id"], "expected": third["id"]}
    )
    assert stale.status_code == 412, stale.text
    assert second["id"] in stale.json()["message"] and third["id"] in stale.json()["message"]
    moved = api.put(
        f"{base}/branches/main", json={"commit_id": third["id"], "expected": second["id"]}
    )
    assert moved.status_code == 200, moved.text
    assert moved.json() == {"id": "main", "commit_id": third["id"]}
    moved = api.put(
        f"{base}/branches/main", json={"commit_id": fourth["id"], "expected": third["id"]}
    )
    assert moved.status_code == 200, moved.text
    assert (
        http.get(f"/repositories/{mirror.name}/branches/main").json()["commit_id"] == (fourth["id"])
    )
    created = api.put(
        f"{base}/branches/feature", json={"commit_id": second["id"], "expected": None}
    )
    assert created.status_code == 200, created.text
    assert created.json() == {"id": "feature", "commit_id": second["id"]}
    exists = api.put(f"{base}/branches/feature", json={"commit_id": third["id"], "expected": None})
    assert exists.status_code == 412, exists.text
    unknown_commit = api.put(
        f"{base}/branches/feature", json={"commit_id": "f" * 64, "expected": second["id"]}
    )
    assert unknown_commit.status_code == 404, unknown_commit.text
    unknown_branch = api.put(
        f"{base}/branches/nobranch", json={"commit_id": third["id"], "expected": second["id"]}
    )
    assert unknown_branch.status_code == 404, unknown_branch.text
    # tags: created, idempotent at the same commit, refused elsewhere
    tagged = api.put(f"{base}/tags/v1", json={"commit_id": second["id"]})
    assert tagged.status_code == 201, tagged.text
    assert tagged.json() == {"id": "v1", "commit_id": second["id"]}
    assert api.put(f"{base}/tags/v1", json={"commit_id": second["id"]}).status_code == 201
    moved_tag = api.put(f"{base}/tags/v1", json={"commit_id": third["id"]})
    assert moved_tag.status_code == 409, moved_tag.text
    assert api.put(f"{base}/tags/v2", json={"commit_id": "e" * 64}).status_code == 404
    assert http.get(f"/repositories/{mirror.name}/tags/v1").json()["commit_id"] == second["id"]
    assert api.delete(f"{base}/tags/v1").status_code == 204
    assert api.delete(f"{base}/tags/v1").status_code == 404
    assert http.get(f"/repositories/{mirror.name}/tags/v1").status_code == 404
    # branch deletion, never of the default branch
    assert api.delete(f"{base}/branches/feature").status_code == 204
    assert api.delete(f"{base}/branches/feature").status_code == 404
    default = api.delete(f"{base}/branches/main")
    assert default.status_code == 403, default.text
    branches = http.get(f"/repositories/{mirror.name}/branches").json()["results"]
    assert [b["id"] for b in branches] == ["main"]


def _refusal(write: Callable[[], object]) -> tuple[int | None, str]:
    """Return the status and message with which the server refused ``write``, made by the SDK."""
    try:
        write()
    except ServerException as exc:
        return exc.status_code, exc.body.get("message", "")
    except lakefs_sdk.exceptions.ApiException as exc:
        return exc.status, json.loads(exc.body or "{}").get("message", "")
    pytest.fail("the write was accepted")


def test_mirror_reads_like_its_source_and_refuses_writes(
    server: Server,
    client: lakefs.Client,
    http: httpx.Client,
    source: lakefs.Repository,
    make_user: MakeUser,
    new_mirror: Callable[[], Mirror],
) -> None:
    mirror = new_mirror()
    head = _import_all(http, mirror)
    repo = lakefs.Repository(mirror.name, client=client)
    main = repo.branch("main")
    assert main.get_commit().id == head == source.branch("main").get_commit().id
    assert main.object("a.csv").reader().read() == b"a2\n"
    assert main.object("dir/b.csv").reader().read() == b"b1\n"
    assert repo.ref(f"{head}~1").object("a.csv").reader().read() == b"a1\n"
    assert [o.path for o in main.objects()] == ["a.csv", "dir/b.csv"]
    assert [c.id for c in main.log()] == [c.id for c in source.branch("main").log()]
    # ordinary writes are refused for everyone, administrators included
    refusal = (
        "read-only repository: "
        f'repository "{mirror.name}" is a read-only mirror of "us-east-1/{source.id}"'
    )
    writer = lakefs.Repository(mirror.name, client=client)
    writes: list[Callable[[], object]] = [
        lambda: writer.branch("main").object("new.csv").upload(b"x"),
        lambda: writer.branch("main").commit("nope", allow_empty=True),
        lambda: writer.branch("dev").create("main"),
        lambda: writer.branch("main").reset_changes(),
        lambda: writer.tag("t1").create("main"),
        lambda: writer.branch("main").merge_into(writer.branch("main")),
        lambda: writer.delete(),
    ]
    for write in writes:
        assert _refusal(write) == (403, refusal)
    # the SDK keeps only the status of a refused object deletion; the wire has the message
    assert _refusal(lambda: writer.branch("main").object("a.csv").delete())[0] == 403
    deleted = http.delete(
        f"/repositories/{mirror.name}/branches/main/objects", params={"path": "a.csv"}
    )
    assert deleted.status_code == 403 and deleted.json() == {"message": refusal}
    writers = make_user("Writers")
    upload = writers.http.post(
        f"/repositories/{mirror.name}/branches/main/objects",
        params={"path": "w.csv"},
        content=b"w",
    )
    assert upload.status_code == 403 and upload.json()["message"] == refusal
    assert main.get_commit().id == head
    assert [o.path for o in main.objects()] == ["a.csv", "dir/b.csv"]
    # a repository made read-only without a source says just that
    plain = unique("readonly")
    made = http.post(
        "/repositories",
        json={"name": plain, "storage_namespace": server.namespace(plain), "read_only": True},
    )
    assert made.status_code == 201, made.text
    refused_plain = http.delete(
        f"/repositories/{plain}/branches/main/objects", params={"path": "x"}
    )
    assert refused_plain.status_code == 403
    assert refused_plain.json() == {
        "message": f'read-only repository: repository "{plain}" is read-only'
    }
    assert http.delete(f"/repositories/{plain}", params={"force": "true"}).status_code == 204


def test_files_not_yet_replicated_answer_503(
    server: Server,
    http: httpx.Client,
    source: lakefs.Repository,
    new_mirror: Callable[[], Mirror],
) -> None:
    # the data of one object has not arrived
    mirror = new_mirror()
    _import_all(http, mirror)
    stat = http.get(f"/repositories/{source.id}/refs/main/objects/stat", params={"path": "a.csv"})
    address = stat.json()["physical_address"].removeprefix(server.namespace(source.id) + "/")
    (mirror.root / address).unlink()
    objects = f"/repositories/{mirror.name}/refs/main/objects"
    missing = http.get(objects, params={"path": "a.csv"})
    assert missing.status_code == 503, missing.text
    assert missing.headers["retry-after"] == "1"
    assert missing.json() == {
        "message": "data of object 'a.csv' not yet replicated to this region; retry later"
    }
    head = http.head(objects, params={"path": "a.csv"})
    assert head.status_code == 200  # the entry is known, only its bytes are missing
    assert http.get(objects, params={"path": "dir/b.csv"}).content == b"b1\n"
    assert http.get(f"{objects}/stat", params={"path": "a.csv"}).status_code == 200

    # the committed metadata (ranges, metarange) of another mirror has not arrived
    other = new_mirror()
    head_id = _import_all(http, other)
    shutil.rmtree(other.root / "_lakefs")
    other_objects = f"/repositories/{other.name}/refs/main/objects"
    reads = [
        http.get(other_objects, params={"path": "a.csv"}),
        http.get(f"{other_objects}/stat", params={"path": "a.csv"}),
        http.get(f"{other_objects}/ls"),
        http.get(f"/repositories/{other.name}/refs/main~2/diff/main"),
    ]
    for response in reads:
        assert response.status_code == 503, (response.request.url, response.text)
        assert response.headers["retry-after"] == "1"
        message = response.json()["message"]
        assert message.startswith("metadata file '_lakefs/"), message
        assert message.endswith(" not yet replicated to this region; retry later"), message
    head_only = http.head(other_objects, params={"path": "a.csv"})
    assert head_only.status_code == 503 and head_only.headers["retry-after"] == "1"
    # history needs no files
    log = http.get(f"/repositories/{other.name}/refs/main/commits")
    assert log.status_code == 200 and log.json()["results"][0]["id"] == head_id

    # a normal repository answers lakeFS's 410 "No data" for an object whose data is gone
    (_namespace_dir(server, source.id) / address).unlink()
    normal = http.get(f"/repositories/{source.id}/refs/main/objects", params={"path": "a.csv"})
    assert normal.status_code == 410, normal.text
    assert normal.json()["message"].startswith("No data"), normal.text
    assert "retry-after" not in normal.headers


def _counter(server: Server, **labels: str) -> float:
    scraped = httpx.get(f"{server.url}/metrics")
    assert scraped.status_code == 200
    assert scraped.headers["content-type"].startswith("text/plain")
    total = 0.0
    for family in text_string_to_metric_families(scraped.text):
        for sample in family.samples:
            if sample.name == "lakemirror_http_requests_total" and all(
                sample.labels.get(k) == v for k, v in labels.items()
            ):
                total += sample.value
    return total


def test_metrics_count_requests_by_route_template(
    server: Server, http: httpx.Client, source: lakefs.Repository
) -> None:
    route = "/api/v1/repositories/{repository}"
    before = _counter(server, method="GET", route=route, status="200")
    for _ in range(3):
        assert http.get(f"/repositories/{source.id}").status_code == 200
    assert http.get(f"/repositories/{unique('none')}").status_code == 404
    assert _counter(server, method="GET", route=route, status="200") == before + 3
    assert _counter(server, method="GET", route=route, status="404") >= 1
    assert _counter(server, route="/metrics") >= 2
    scraped = httpx.get(f"{server.url}/metrics").text
    assert "lakemirror_http_request_duration_seconds_bucket" in scraped
    assert source.id not in scraped  # route templates only, never raw paths
