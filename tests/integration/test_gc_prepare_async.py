"""``prepare_commits`` as a task against a live server, through the official ``lakefs_sdk``.

``POST …/gc/prepare_commits/async`` answers a ``GCPC…`` task ID; its status, polled, holds the
same kind of result as the synchronous call, and the commits file it names is written. A
repository without rules fails the task with lakeFS's ``not found``; unknown or misshapen IDs
and another repository's task are 404; a mirror is 403; a user without the permission is 403.
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import lakefs
import lakefs_sdk
import pytest
from lakefs_sdk.exceptions import ForbiddenException, NotFoundException

from tests.e2e.regions import wait_for
from tests.integration.harness import MakeUser, Server, unique

TASK_DEADLINE = 60.0


def _internal(client: lakefs.Client) -> Any:
    return client.sdk_client.internal_api


def _done(read: Callable[[], Any]) -> Any:
    return wait_for(lambda: (s := read()).completed and s, TASK_DEADLINE, "the task to complete")


@pytest.fixture
def mirror(server: Server, http: httpx.Client, make_user: MakeUser) -> Iterator[str]:
    """A read-only mirror repository, made through the replicant's endpoint."""
    replicator = make_user(policies=("Replicator",))
    name = unique("gcamirror")
    created = replicator.http.post(
        "/mirror/repositories",
        json={
            "name": name,
            "storage_namespace": server.namespace(name),
            "mirror_of": "us-east-1/gcasource",
        },
    )
    assert created.status_code == 201, created.text
    yield name
    http.delete(f"/repositories/{name}", params={"force": "true"})


def test_async_prepare_writes_the_retained_commits(
    server: Server, client: lakefs.Client, repo: lakefs.Repository
) -> None:
    main = repo.branch("main")
    main.object("x").upload(b"1")
    first = main.commit("one").get_commit().id
    main.object("x").upload(b"2")
    second = main.commit("two").get_commit().id
    client.sdk_client.repositories_api.set_gc_rules(
        repo.id, lakefs_sdk.GarbageCollectionRules(default_retention_days=7, branches=[])
    )
    internal = _internal(client)
    task = internal.prepare_garbage_collection_commits_async(repo.id)
    assert task.id.startswith("GCPC") and len(task.id) == 24
    status = _done(lambda: internal.prepare_garbage_collection_commits_status(repo.id, task.id))
    assert status.task_id == task.id
    assert status.error is None
    result = status.result
    assert result.run_id
    assert result.gc_commits_location.endswith(f"run_id={result.run_id}/commits.csv")
    assert result.gc_addresses_location.endswith("_lakefs/retention/gc/addresses/")
    location = result.gc_commits_location
    assert location.startswith("local://"), location
    rows = list(
        csv.reader(io.StringIO(Path(server.data_dir, location[len("local://") :]).read_text()))
    )
    assert rows[0] == ["commit_id", "expired", "metarange_id"]
    assert {first, second} <= {r[0] for r in rows[1:]}
    assert all(r[1] == "false" for r in rows[1:])
    # the status stays readable, completed, on every later read
    again = internal.prepare_garbage_collection_commits_status(repo.id, task.id)
    assert again.completed and again.result == result


def test_async_prepare_refusals(
    client: lakefs.Client, repo: lakefs.Repository, mirror: str, make_user: MakeUser
) -> None:
    internal = _internal(client)
    # no rules: the task fails with the synchronous call's text
    task = internal.prepare_garbage_collection_commits_async(repo.id)
    failed = _done(lambda: internal.prepare_garbage_collection_commits_status(repo.id, task.id))
    assert failed.result is None
    assert failed.error is not None and "not found" in failed.error.message

    for wrong in ("GCPC" + "a" * 19, "GCPC" + "a" * 21, "DR" + task.id[4:] + "aa", "nonsense"):
        with pytest.raises(NotFoundException):
            internal.prepare_garbage_collection_commits_status(repo.id, wrong)
    with pytest.raises(NotFoundException):
        internal.prepare_garbage_collection_commits_status(mirror, task.id)
    with pytest.raises(NotFoundException):
        internal.prepare_garbage_collection_commits_async(unique("nosuchrepo"))

    with pytest.raises(ForbiddenException) as read_only:
        internal.prepare_garbage_collection_commits_async(mirror)
    assert "read-only repository" in json.loads(read_only.value.body)["message"]

    reader = make_user("Readers")
    with pytest.raises(ForbiddenException):
        _internal(reader.client).prepare_garbage_collection_commits_async(repo.id)
    with pytest.raises(ForbiddenException):
        _internal(reader.client).prepare_garbage_collection_commits_status(repo.id, task.id)
