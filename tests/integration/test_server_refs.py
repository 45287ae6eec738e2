"""Repositories, branches, tags and commits through the official `lakefs` SDK."""

from __future__ import annotations

import httpx
import lakefs
import pytest
from lakefs.exceptions import (
    BadRequestException,
    ConflictException,
    ForbiddenException,
    NotAuthorizedException,
    NotFoundException,
)

from tests.integration.harness import Server, unique


def test_health_and_openapi_need_no_credentials(server: Server) -> None:
    assert httpx.get(f"{server.url}/healthz").json() == {"status": "ok"}
    assert httpx.get(f"{server.url}/readyz").status_code == 200
    assert httpx.get(f"{server.url}/api/v1/healthcheck").status_code == 204
    spec = httpx.get(f"{server.url}/openapi.json").json()
    assert "/api/v1/repositories/{repository}/refs/{ref}/objects" in spec["paths"]


def test_config_reports_numeric_version_and_storage(client: lakefs.Client, http: httpx.Client):
    assert tuple(int(p) for p in client.version.split(".")) >= (1, 3, 1)
    storage = client.storage_config
    assert storage.blockstore_type == "local"
    assert storage.pre_sign_support is False
    body = http.get("/config").json()
    sc = body["storage_config"]
    for key in (
        "blockstore_namespace_example",
        "blockstore_namespace_ValidityRegex",
        "pre_sign_support_ui",
        "import_support",
        "import_validity_regex",
    ):
        assert key in sc
    assert body["storage_config_list"][0]["blockstore_id"] == ""


def test_config_requires_credentials(server: Server) -> None:
    response = httpx.get(f"{server.url}/api/v1/config")
    assert response.status_code == 401
    assert response.reason_phrase == "Unauthorized"
    assert isinstance(response.json()["message"], str)
    anonymous = lakefs.Client(host=server.url, username="AKIAJNOBODY", password="nothing")
    with pytest.raises(NotAuthorizedException):
        _ = anonymous.version


@pytest.mark.both_backends
def test_repository_lifecycle(server: Server, client: lakefs.Client, http: httpx.Client) -> None:
    name = unique("life")
    namespace = server.namespace(name)
    repo = lakefs.Repository(name, client=client).create(namespace, default_branch="trunk")
    props = repo.properties
    assert (props.id, props.default_branch, props.storage_id) == (name, "trunk", "")
    assert props.storage_namespace == namespace
    assert isinstance(props.creation_date, int)
    with pytest.raises(ConflictException):
        lakefs.Repository(name, client=client).create(f"{namespace}-2")
    again = lakefs.Repository(name, client=client).create(namespace, exist_ok=True)
    assert again.properties.default_branch == "trunk"
    assert repo.metadata == {}
    assert name in [r.id for r in lakefs.repositories(client=client, prefix="life-")]
    raw = http.get(f"/repositories/{name}").json()
    assert raw["read_only"] is False and isinstance(raw["creation_date"], int)
    repo.delete()
    with pytest.raises(NotFoundException):
        lakefs.Repository(name, client=client).delete()
    with pytest.raises(NotFoundException):
        _ = lakefs.Repository(name, client=client).properties


def test_repository_creation_rejects_bad_input(client: lakefs.Client, http: httpx.Client) -> None:
    bad = http.post("/repositories", json={"name": "Bad_Name", "storage_namespace": "local://x"})
    assert bad.status_code == 400 and "Bad_Name" in bad.json()["message"]
    for namespace in (
        "local:///etc",
        "local://../escape",
        "mem://x",
        "nowhere",
        "local://kv.sqlite",
    ):
        response = http.post(
            "/repositories", json={"name": unique("ns"), "storage_namespace": namespace}
        )
        assert response.status_code == 400, namespace
        assert response.reason_phrase == "Bad Request"
        assert response.json()["message"]


@pytest.mark.both_backends
def test_repository_list_paginates(
    server: Server, client: lakefs.Client, http: httpx.Client
) -> None:
    prefix = unique("page")
    names = [f"{prefix}-{i}" for i in range(5)]
    for n in names:
        lakefs.Repository(n, client=client).create(server.namespace(n))
    try:
        page = http.get("/repositories", params={"prefix": prefix, "amount": 2}).json()
        assert page["pagination"] == {
            "has_more": True,
            "next_offset": names[1],
            "results": 2,
            "max_per_page": 1000,
        }
        rest = http.get(
            "/repositories", params={"prefix": prefix, "after": names[1], "amount": 10}
        ).json()
        assert [r["id"] for r in rest["results"]] == names[2:]
        assert rest["pagination"]["has_more"] is False
        assert rest["pagination"]["next_offset"] == ""
        listed = [r.id for r in lakefs.repositories(client=client, prefix=prefix, amount=2)]
        assert listed == names
    finally:
        for n in names:
            lakefs.Repository(n, client=client).delete()


@pytest.mark.both_backends
def test_branch_lifecycle(repo: lakefs.Repository, http: httpx.Client) -> None:
    main = repo.branch("main")
    head = main.head.id
    dev = repo.branch("dev").create("main")
    assert dev.head.id == head
    with pytest.raises(ConflictException):
        repo.branch("dev").create("main")
    repo.branch("dev").create("main", exist_ok=True)
    with pytest.raises(NotFoundException):
        repo.branch("other").create("no-such-ref")
    with pytest.raises(NotFoundException):
        _ = repo.branch("missing").head
    raw = http.post(f"/repositories/{repo.id}/branches", json={"name": "plain", "source": "main"})
    assert raw.status_code == 201 and raw.text == head
    assert raw.headers["content-type"].startswith("text/plain")
    # `main` exists: creating it from itself is a conflict too (lakefs-spec relies on it)
    assert (
        http.post(
            f"/repositories/{repo.id}/branches", json={"name": "main", "source": "main"}
        ).status_code
        == 409
    )
    assert [b.id for b in repo.branches()] == ["dev", "main", "plain"]
    assert [b.id for b in repo.branches(prefix="d")] == ["dev"]
    dev.delete()
    with pytest.raises(NotFoundException):
        repo.branch("dev").delete()
    # lakeFS: 403 "cannot delete repository default branch"
    with pytest.raises(ForbiddenException, match="cannot delete repository default branch"):
        main.delete()
    assert [b.id for b in repo.branches()] == ["main", "plain"]


@pytest.mark.both_backends
def test_hidden_branches_are_not_listed(repo: lakefs.Repository, http: httpx.Client) -> None:
    repo.branch("secret").create("main", hidden=True)
    assert [b.id for b in repo.branches()] == ["main"]
    shown = http.get(f"/repositories/{repo.id}/branches", params={"show_hidden": "True"})
    assert [b["id"] for b in shown.json()["results"]] == ["main", "secret"]


@pytest.mark.both_backends
def test_tag_lifecycle(repo: lakefs.Repository, http: httpx.Client) -> None:
    main = repo.branch("main")
    main.object("a").upload(b"a")
    commit = main.commit("one")
    tag = repo.tag("v1").create(commit.id)
    assert tag.get_commit().id == commit.id
    with pytest.raises(ConflictException):
        repo.tag("v1").create("main")
    repo.tag("v1").create("main", exist_ok=True)
    with pytest.raises(NotFoundException):
        repo.tag("v2").create("no-such-ref")
    repo.tag("v0").create("main~1")
    assert [(t.id, t.get_commit().id) for t in repo.tags()] == [
        ("v0", commit.get_commit().parents[0]),
        ("v1", commit.id),
    ]
    assert http.get(f"/repositories/{repo.id}/tags/v1").json() == {
        "id": "v1",
        "commit_id": commit.id,
    }
    tag.delete()
    with pytest.raises(NotFoundException):
        repo.tag("v1").delete()
    assert [t.id for t in repo.tags()] == ["v0"]


@pytest.mark.both_backends
def test_commit_lifecycle(repo: lakefs.Repository, http: httpx.Client) -> None:
    main = repo.branch("main")
    with pytest.raises(BadRequestException) as err:
        main.commit("nothing")
    assert "no changes" in str(err.value)
    main.object("x.csv").upload(b"1,2\n")
    ref = main.commit("add x", metadata={"origin": "test"})
    commit = ref.get_commit()
    assert commit.message == "add x"
    assert commit.metadata == {"origin": "test"}
    assert commit.committer == "admin"
    assert len(commit.parents) == 1
    assert main.get_commit().id == commit.id
    empty = main.commit("empty", allow_empty=True).get_commit()
    assert empty.parents == [commit.id]
    raw = http.get(f"/repositories/{repo.id}/commits/{commit.id[:12]}").json()
    assert raw["id"] == commit.id
    assert isinstance(raw["creation_date"], int) and raw["metadata"] == {"origin": "test"}
    assert http.get(f"/repositories/{repo.id}/commits/main~1").json()["id"] == commit.id
    with pytest.raises(NotFoundException):
        repo.commit("0" * 64).get_commit()
    with pytest.raises(NotFoundException):
        repo.branch("nope").commit("x")


def test_errors_have_lakefs_shape(http: httpx.Client) -> None:
    for response in (
        http.get("/repositories/no-such-repo"),
        http.get("/repositories/no-such-repo/branches"),
        http.get("/no/such/route"),
        http.get("/repositories", params={"amount": "many"}),
    ):
        body = response.json()
        assert set(body) == {"message"}, body
        assert isinstance(body["message"], str)
    missing = http.get("/repositories/no-such-repo")
    assert (missing.status_code, missing.reason_phrase) == (404, "Not Found")
