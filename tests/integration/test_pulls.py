"""Pull requests against a live server through the official ``lakefs_sdk``.

Every endpoint, its documented errors (lakeFS's texts and statuses), a conflicting merge,
listing order and filters, permissions, and the refusals on a read-only mirror.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime
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

from tests.integration.harness import MakeUser, Server, unique
from tests.webhooks import Receiver, webhook_receiver


def _pulls(client: lakefs.Client) -> Any:
    return client.sdk_client.pulls_api


def _branch_with(repo: lakefs.Repository, name: str, path: str, data: bytes) -> lakefs.Branch:
    branch = repo.branch(name).create(source_reference="main")
    branch.object(path).upload(data=data)
    branch.commit(message=f"{path} on {name}")
    return branch


def _open(client: lakefs.Client, repo: str, source: str, dest: str = "main", **kw: Any) -> str:
    creation = lakefs_sdk.PullRequestCreation(
        title=kw.pop("title", f"{source} into {dest}"),
        source_branch=source,
        destination_branch=dest,
        **kw,
    )
    created = _pulls(client).create_pull_request(repo, creation)
    pull_id: str = created.id
    return pull_id


def _message(exc: ApiException) -> str:
    return str(exc.body)


@pytest.fixture
def mirror(server: Server, http: httpx.Client, make_user: MakeUser) -> Iterator[str]:
    """A read-only mirror repository with a ``dev`` branch, made as the replicant makes it."""
    replicator = make_user(policies=("Replicator",))
    name = unique("prmirror")
    created = replicator.http.post(
        "/mirror/repositories",
        json={
            "name": name,
            "storage_namespace": server.namespace(name),
            "mirror_of": "us-east-1/prsource",
        },
    )
    assert created.status_code == 201, created.text
    yield name
    http.delete(f"/repositories/{name}", params={"force": "true"})


def test_open_get_and_merge(client: lakefs.Client, repo: lakefs.Repository) -> None:
    _branch_with(repo, "feature", "a.txt", b"alpha")
    api = _pulls(client)
    pull_id = _open(client, repo.id, "feature", title="add a", description="adds a.txt")
    assert len(pull_id) == 20

    pull = api.get_pull_request(repo.id, pull_id)
    assert (pull.id, pull.status, pull.title, pull.description) == (
        pull_id,
        "open",
        "add a",
        "adds a.txt",
    )
    assert (pull.source_branch, pull.destination_branch) == ("feature", "main")
    assert pull.author == client.sdk_client.auth_api.get_current_user().user.id
    assert isinstance(pull.creation_date, datetime)
    assert pull.merged_commit_id is None and pull.closed_date is None

    merged = api.merge_pull_request(repo.id, pull_id)
    head = repo.branch("main").get_commit()
    assert merged.reference == head.id
    assert head.message == "Merge 'feature' into 'main'"
    assert repo.branch("main").object("a.txt").reader().read() == b"alpha"

    after = api.get_pull_request(repo.id, pull_id)
    assert after.status == "merged"
    assert after.merged_commit_id == head.id
    assert after.closed_date is not None

    with pytest.raises(BadRequestException) as again:
        api.merge_pull_request(repo.id, pull_id)
    assert "bad pull request status" in _message(again.value)


def test_create_errors(client: lakefs.Client, repo: lakefs.Repository) -> None:
    repo.branch("dev").create(source_reference="main")
    with pytest.raises(NotFoundException) as no_source:
        _open(client, repo.id, "nosuch")
    assert "branch not found" in _message(no_source.value)
    with pytest.raises(NotFoundException):
        _open(client, repo.id, "dev", dest="nosuch")
    with pytest.raises(NotFoundException) as no_repo:
        _open(client, unique("norepo"), "dev")
    assert "repository not found" in _message(no_repo.value)
    with pytest.raises(BadRequestException) as same:
        _open(client, repo.id, "dev", dest="dev")
    assert "source and destination branches are the same" in _message(same.value)
    # duplicates are allowed
    first, second = _open(client, repo.id, "dev"), _open(client, repo.id, "dev")
    assert first != second


def test_get_errors(client: lakefs.Client, repo: lakefs.Repository) -> None:
    api = _pulls(client)
    with pytest.raises(BadRequestException) as malformed:
        api.get_pull_request(repo.id, "not-an-id")
    assert "pull request id: invalid value: validation error" in _message(malformed.value)
    with pytest.raises(NotFoundException) as unknown:
        api.get_pull_request(repo.id, "cv0000000000000000aa")
    assert "pull request not found" in _message(unknown.value)


def test_update_status_title_and_dates(client: lakefs.Client, repo: lakefs.Repository) -> None:
    repo.branch("dev").create(source_reference="main")
    api = _pulls(client)
    pull_id = _open(client, repo.id, "dev")
    api.update_pull_request(
        repo.id, pull_id, lakefs_sdk.PullRequestBasic(title="renamed", description="why")
    )
    pull = api.get_pull_request(repo.id, pull_id)
    assert (pull.title, pull.description, pull.status) == ("renamed", "why", "open")

    # the SDK's enum accepts lower case only; lakeFS accepts any case on the wire
    api.update_pull_request(repo.id, pull_id, lakefs_sdk.PullRequestBasic(status="closed"))
    closed = api.get_pull_request(repo.id, pull_id)
    assert closed.status == "closed" and closed.closed_date is not None

    with pytest.raises(BadRequestException) as bad:
        api.merge_pull_request(repo.id, pull_id)
    assert "bad pull request status" in _message(bad.value)

    api.update_pull_request(repo.id, pull_id, lakefs_sdk.PullRequestBasic(status="open"))
    reopened = api.get_pull_request(repo.id, pull_id)
    assert reopened.status == "open"
    assert reopened.closed_date == closed.closed_date  # reopening keeps it


def test_update_on_the_wire(
    http: httpx.Client, client: lakefs.Client, repo: lakefs.Repository
) -> None:
    repo.branch("dev").create(source_reference="main")
    pull_id = _open(client, repo.id, "dev")
    path = f"/repositories/{repo.id}/pulls/{pull_id}"
    upper = http.patch(path, json={"status": "CLOSED"})
    assert upper.status_code == 204, upper.text
    assert http.get(path).json()["status"] == "closed"
    bad = http.patch(path, json={"status": "pending"})
    assert bad.status_code == 400
    assert bad.json()["message"].startswith("invalid pull request status: validation error")
    missing = http.patch(f"/repositories/{repo.id}/pulls/cv0000000000000000aa", json={})
    assert missing.status_code == 404
    assert missing.json()["message"].startswith("pull request not found")


def test_conflicting_merge_is_409_with_an_error_body(
    http: httpx.Client, client: lakefs.Client, repo: lakefs.Repository
) -> None:
    _branch_with(repo, "left", "same.txt", b"left")
    main = repo.branch("main")
    main.object("same.txt").upload(data=b"main")
    main.commit(message="same.txt on main")
    pull_id = _open(client, repo.id, "left")
    answer = http.put(f"/repositories/{repo.id}/pulls/{pull_id}/merge")
    assert answer.status_code == 409
    body = answer.json()
    assert body["message"].startswith("update branch main: conflict found")
    assert "reference" not in body
    assert _pulls(client).get_pull_request(repo.id, pull_id).status == "open"


def test_listing_order_filters_and_pages(
    http: httpx.Client, client: lakefs.Client, repo: lakefs.Repository
) -> None:
    repo.branch("dev").create(source_reference="main")
    api = _pulls(client)
    ids = [_open(client, repo.id, "dev", title=f"pr{i}", description="d") for i in range(5)]
    api.update_pull_request(repo.id, ids[1], lakefs_sdk.PullRequestBasic(status="closed"))
    api.update_pull_request(repo.id, ids[3], lakefs_sdk.PullRequestBasic(status="merged"))

    everything = api.list_pull_requests(repo.id, status="all")
    assert [p.id for p in everything.results] == ids[::-1]  # newest first
    assert all(p.description == "" for p in everything.results)
    assert [p.id for p in api.list_pull_requests(repo.id).results] == [ids[4], ids[2], ids[0]]
    closed = api.list_pull_requests(repo.id, status="closed").results
    assert [p.id for p in closed] == [ids[3], ids[1]]

    first = api.list_pull_requests(repo.id, status="all", amount=2)
    assert [p.id for p in first.results] == [ids[4], ids[3]]
    assert first.pagination.has_more and first.pagination.next_offset == ids[3]
    rest = api.list_pull_requests(
        repo.id, status="all", after=first.pagination.next_offset, amount=10
    )
    assert [p.id for p in rest.results] == [ids[2], ids[1], ids[0]]
    assert not rest.pagination.has_more

    by_prefix = api.list_pull_requests(repo.id, status="all", prefix=ids[2])
    assert [p.id for p in by_prefix.results] == [ids[2]]
    wire = http.get(f"/repositories/{repo.id}/pulls", params={"status": "all", "amount": 1})
    assert wire.json()["results"][0]["description"] == ""
    assert http.get(f"/repositories/{repo.id}/pulls", params={"status": "x"}).status_code == 400


def test_permissions(make_user: MakeUser, client: lakefs.Client, repo: lakefs.Repository) -> None:
    repo.branch("dev").create(source_reference="main")
    pull_id = _open(client, repo.id, "dev")
    writer = make_user("Writers")
    with pytest.raises(ForbiddenException):
        _pulls(writer.client).list_pull_requests(repo.id)
    with pytest.raises(ForbiddenException):
        _pulls(writer.client).get_pull_request(repo.id, pull_id)
    with pytest.raises(ForbiddenException):
        _open(writer.client, repo.id, "dev")
    with pytest.raises(ForbiddenException):
        _pulls(writer.client).merge_pull_request(repo.id, pull_id)


def test_mirror_refuses_writes_but_lists(
    http: httpx.Client, client: lakefs.Client, mirror: str
) -> None:
    api = _pulls(client)
    with pytest.raises(ForbiddenException) as refused:
        _open(client, mirror, "main", dest="other")
    assert "read-only repository" in _message(refused.value)
    assert api.list_pull_requests(mirror, status="all").results == []
    patch = http.patch(f"/repositories/{mirror}/pulls/cv0000000000000000aa", json={})
    assert patch.status_code == 403
    merge = http.put(f"/repositories/{mirror}/pulls/cv0000000000000000aa/merge")
    assert merge.status_code == 403
    assert merge.json()["message"].startswith("read-only repository")


def test_merge_runs_the_merge_hooks(client: lakefs.Client, repo: lakefs.Repository) -> None:
    with webhook_receiver() as receiver:
        _merge_refused_by_hook(client, repo, receiver)


def _merge_refused_by_hook(
    client: lakefs.Client, repo: lakefs.Repository, receiver: Receiver
) -> None:
    url = f"{receiver.url}/fail"
    main = repo.branch("main")
    main.object("_lakefs_actions/deny.yaml").upload(
        data=(
            "name: Deny merges\non:\n  pre-merge:\n    branches: [main]\nhooks:\n"
            f"  - id: deny\n    type: webhook\n    properties:\n      url: {url}\n"
        ).encode()
    )
    main.commit(message="add the action")
    _branch_with(repo, "feature", "a.txt", b"alpha")
    pull_id = _open(client, repo.id, "feature")
    before = main.get_commit().id
    with pytest.raises(ApiException) as aborted:
        _pulls(client).merge_pull_request(repo.id, pull_id)
    assert aborted.value.status == 412
    assert _message(aborted.value).find("update branch main: pre-merge hook aborted") >= 0
    assert [c.body["event_type"] for c in receiver.of(repo.id)] == ["pre-merge"]
    assert main.get_commit().id == before
    assert _pulls(client).get_pull_request(repo.id, pull_id).status == "open"
