"""The pull request and repository metadata records in a MemoryKV: IDs, filters, CAS, refusals."""

from __future__ import annotations

from dataclasses import replace

import pytest

from mirror.core.errors import RepositoryReadOnlyError
from mirror.core.ids import BranchID, RepositoryID
from mirror.core.model import Repository
from mirror.core.pulls import (
    InvalidPullRequestIDError,
    InvalidPullRequestStatusError,
    PullRequest,
    PullRequestNotFoundError,
    PullRequestStore,
    SameBranchError,
    is_pull_request_id,
    new_pull_request_id,
)
from mirror.core.repository_metadata import RepositoryMetadataStore
from mirror.kv import MemoryKV

REPO = Repository(RepositoryID("r"), "local://r", BranchID("main"), 0, "uid-1")
MIRROR = replace(REPO, id=RepositoryID("m"), read_only=True, mirror_of="a/r")


class Clock:
    def __init__(self) -> None:
        self.now = 1_800_000_000.0

    def __call__(self) -> float:
        return self.now


def _open(store: PullRequestStore, title: str = "t", repo: Repository = REPO) -> PullRequest:
    return store.create(
        repo,
        title=title,
        description="d",
        author="alice",
        source_branch="dev",
        destination_branch="main",
    )


def test_ids_sort_newest_first_across_and_within_seconds() -> None:
    ids = [new_pull_request_id(1_800_000_000) for _ in range(50)]
    ids += [new_pull_request_id(1_800_000_001 + i) for i in range(5)]
    assert all(is_pull_request_id(i) for i in ids)
    assert sorted(ids) == ids[::-1]
    assert len(set(ids)) == len(ids)
    assert not is_pull_request_id("not-an-id")
    assert not is_pull_request_id("W" * 20)


def test_create_get_and_filters() -> None:
    clock = Clock()
    store = PullRequestStore(MemoryKV(), clock)
    made = []
    for i in range(4):
        clock.now += 1
        made.append(_open(store, f"t{i}"))
    assert store.get(REPO, made[0].id) == made[0]
    assert made[0].creation_date == 1_800_000_001.0
    store.edit(REPO, made[1].id, status="Closed")
    store.edit(REPO, made[2].id, status="MERGED")

    def ids(**kw: str) -> list[str]:
        return [p.id for p in store.list(REPO, **kw)]  # type: ignore[arg-type]

    newest_first = [p.id for p in made[::-1]]
    assert ids(status="all") == newest_first
    assert ids(status="open") == [made[3].id, made[0].id]
    assert ids(status="closed") == [made[2].id, made[1].id]
    assert ids(status="all", after=made[2].id) == [made[1].id, made[0].id]
    assert ids(status="all", prefix=made[1].id) == [made[1].id]
    # another instance of the same repository name sees none of them
    assert list(store.list(replace(REPO, instance_uid="uid-2"), "all")) == []


def test_errors() -> None:
    store = PullRequestStore(MemoryKV())
    with pytest.raises(InvalidPullRequestIDError, match=r"^pull request id: invalid value"):
        store.get(REPO, "../../etc")
    with pytest.raises(PullRequestNotFoundError, match=r"^pull request not found"):
        store.get(REPO, new_pull_request_id())
    with pytest.raises(SameBranchError, match=r"^source and destination branches are the same"):
        store.create(
            REPO,
            title="t",
            description="",
            author="a",
            source_branch="x",
            destination_branch="x",
        )
    pull = _open(store)
    with pytest.raises(InvalidPullRequestStatusError, match="validation error"):
        store.edit(REPO, pull.id, status="pending")
    with pytest.raises(RepositoryReadOnlyError):
        _open(store, repo=MIRROR)
    with pytest.raises(RepositoryReadOnlyError):
        store.edit(MIRROR, pull.id, title="x")


def test_closed_date_is_set_once_and_kept_on_reopening() -> None:
    clock = Clock()
    store = PullRequestStore(MemoryKV(), clock)
    pull = _open(store)
    clock.now += 10
    closed = store.edit(REPO, pull.id, status="closed")
    assert closed.closed_date == clock.now
    clock.now += 10
    reopened = store.edit(REPO, pull.id, status="open", description="again")
    assert (reopened.status, reopened.closed_date, reopened.description) == (
        "open",
        closed.closed_date,
        "again",
    )
    assert store.edit(REPO, pull.id, status="merged").closed_date == closed.closed_date


def test_update_retries_when_another_writer_wins() -> None:
    kv = MemoryKV()
    store = PullRequestStore(kv)
    other = PullRequestStore(kv)
    pull = _open(store)
    calls = 0

    def change(current: PullRequest) -> PullRequest:
        nonlocal calls
        calls += 1
        if calls == 1:
            # a concurrent writer changes the record between the read and the swap
            other.edit(REPO, pull.id, description="theirs")
        return replace(current, title="mine")

    updated = store.update(REPO, pull.id, change)
    assert calls == 2
    assert (updated.title, updated.description) == ("mine", "theirs")
    assert store.get(REPO, pull.id) == updated


def test_repository_metadata_merges_and_deletes_keys() -> None:
    store = RepositoryMetadataStore(MemoryKV())
    assert store.get(REPO) == {}
    store.set(REPO, {"a": "1", "b": "2"})
    assert store.set(REPO, {"b": "3"}) == {"a": "1", "b": "3"}
    assert store.delete(REPO, ["a", "missing"]) == {"b": "3"}
    assert store.get(REPO) == {"b": "3"}
    assert store.get(replace(REPO, instance_uid="uid-2")) == {}
    with pytest.raises(RepositoryReadOnlyError):
        store.set(MIRROR, {"a": "1"})
    with pytest.raises(RepositoryReadOnlyError):
        store.delete(MIRROR, ["a"])
