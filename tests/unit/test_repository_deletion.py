"""Deleting a repository leaves no KV record of its instance, even after a cleanup failed
(``mirror.core.deletion``), on an in-memory catalog."""

from __future__ import annotations

import pytest

from mirror.core import open_memory
from mirror.core.catalog import Catalog
from mirror.core.deletion import MARKERS
from mirror.core.errors import RepositoryNotFoundError
from mirror.core.model import Repository
from mirror.core.protection import add_rule
from mirror.core.pulls import PullRequestStore
from mirror.core.repository_metadata import RepositoryMetadataStore
from mirror.kv.errors import KVUnavailableError


def _populated() -> tuple[Catalog, Repository, list[bytes]]:
    """Return a catalog whose repository "repo" has one record of each core kind, and the
    staging prefixes of its branches."""
    catalog = open_memory()
    catalog.create_repository("repo", "mem://repo")
    catalog.upload_object("repo", "main", "a", b"1")
    catalog.commit("repo", "main", "one")
    catalog.create_branch("repo", "dev", "main")
    catalog.upload_object("repo", "dev", "b", b"2")  # staged, never committed
    catalog.create_tag("repo", "v1", "main")
    repo = catalog.get_repository("repo")
    add_rule(catalog.kv, repo, "main")
    PullRequestStore(catalog.kv).create(
        repo,
        title="t",
        description="d",
        author="alice",
        source_branch="dev",
        destination_branch="main",
    )
    RepositoryMetadataStore(catalog.kv).set(repo, {"owner": "data"})
    staging = [
        f"staging/{token}/".encode()
        for branch in catalog.refs.list_branches(repo)
        for token in branch.tokens
    ]
    return catalog, repo, staging


def _left(catalog: Catalog, repo: Repository, staging: list[bytes]) -> list[bytes]:
    """Return every key of ``repo``'s instance (or of its branches' staging) in the KV."""
    uid = repo.instance_uid.encode()
    return [
        key
        for key, _ in catalog.kv.scan(b"")
        if uid in key or any(key.startswith(s) for s in staging)
    ]


def test_a_deleted_repository_leaves_no_record_of_its_instance() -> None:
    catalog, repo, staging = _populated()
    kept: list[Repository] = []
    catalog.add_repository_cleanup("above", kept.append)
    assert len(_left(catalog, repo, staging)) > 8
    catalog.delete_repository("repo")
    assert _left(catalog, repo, staging) == []
    assert list(catalog.kv.scan(b"repos/")) == []
    assert kept == [repo]
    assert list(catalog.kv.scan(MARKERS)) == []
    with pytest.raises(RepositoryNotFoundError):
        catalog.delete_repository("repo")


def test_a_failed_cleanup_leaves_the_repository_gone_and_is_finished_later() -> None:
    catalog, repo, staging = _populated()
    down = [True]
    extra = b"above/" + f"{repo.id}:{repo.instance_uid}".encode()
    catalog.kv.set(extra, b"x")

    def flaky(gone: Repository) -> None:
        if down[0]:
            raise KVUnavailableError("the KV is down")
        catalog.kv.delete(b"above/" + f"{gone.id}:{gone.instance_uid}".encode())

    catalog.add_repository_cleanup("above", flaky)
    catalog.delete_repository("repo")  # the failure is logged, not raised
    with pytest.raises(RepositoryNotFoundError):
        catalog.get_repository("repo")
    marker = MARKERS + b"repo:" + repo.instance_uid.encode()
    assert _left(catalog, repo, staging) == [extra, marker]  # the other cleanups ran
    assert catalog.resume_deletions() == 0  # still failing: still marked
    with pytest.raises(RepositoryNotFoundError):
        catalog.delete_repository("repo")
    # a repository created again under the name is not touched by the old one's resumption
    catalog.create_repository("repo", "mem://repo")
    again = catalog.get_repository("repo")
    RepositoryMetadataStore(catalog.kv).set(again, {"new": "yes"})
    down[0] = False
    assert catalog.resume_deletions() == 1
    assert _left(catalog, repo, staging) == []
    assert list(catalog.kv.scan(MARKERS)) == []
    assert RepositoryMetadataStore(catalog.kv).get(again) == {"new": "yes"}


def test_a_marker_of_a_live_instance_is_left_alone() -> None:
    catalog, repo, staging = _populated()
    # what a deletion that failed before removing the repository record leaves
    catalog.kv.set(MARKERS + f"repo:{repo.instance_uid}".encode(), repo.encode())
    assert catalog.resume_deletions() == 0
    assert catalog.get_repository("repo") == repo
    assert len(_left(catalog, repo, staging)) > 8
    catalog.delete_repository("repo")  # the marker was there already: it goes at the end
    assert _left(catalog, repo, staging) == []
    assert list(catalog.kv.scan(MARKERS)) == []
