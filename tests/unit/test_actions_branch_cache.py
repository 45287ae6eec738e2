"""Listing action files once: a branch uses its head commit's, a commit its unchanged parent's."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from mirror.actions import ActionsService
from mirror.core import open_memory
from mirror.core.catalog import Catalog
from mirror.core.committed import ChunkingParams
from mirror.core.hooks import HookEvent

ACTION = (
    "name: {}\non:\n  pre-commit:\nhooks:\n"
    "  - {{id: hook1, type: webhook, properties: {{url: http://127.0.0.1:9/}}}}\n"
)


class Counting:
    """Counts the catalog's listings of ``_lakefs_actions/`` and the refs they were made at."""

    def __init__(self, catalog: Catalog) -> None:
        self.refs: list[str] = []
        real = catalog.list_objects

        def list_objects(repository: str, ref: str, *args: Any, **kwargs: Any) -> Any:
            self.refs.append(ref)
            return real(repository, ref, *args, **kwargs)

        catalog.list_objects = list_objects  # type: ignore[method-assign]


@pytest.fixture
def catalog() -> Catalog:
    found = open_memory()
    found.create_repository("repo", "mem://repo")
    found.upload_object("repo", "main", "a", b"1")
    found.commit("repo", "main", "a")
    return found


@pytest.fixture
def service(catalog: Catalog) -> Iterator[ActionsService]:
    found = ActionsService(catalog)
    yield found
    found.close()


def test_a_branch_without_action_files_is_listed_once_per_head(
    catalog: Catalog, service: ActionsService
) -> None:
    calls = Counting(catalog)
    head = catalog.get_branch("repo", "main").commit_id
    assert service.load("repo", "main") == []
    assert service.load("repo", "main") == []
    assert calls.refs == [head]  # listed at the head commit, then kept
    catalog.upload_object("repo", "main", "b", b"2")
    assert service.load("repo", "main") == []  # staged changes elsewhere: still the head's
    assert calls.refs == [head]
    made = catalog.commit("repo", "main", "b").commit
    assert service.load("repo", "main") == []
    assert service.load("repo", made.id) == []
    assert calls.refs == [head]  # the new head changed nothing under the prefix: its parent's


def test_staged_action_files_are_read_through_the_branch(
    catalog: Catalog, service: ActionsService
) -> None:
    calls = Counting(catalog)
    catalog.upload_object("repo", "main", "_lakefs_actions/a.yaml", ACTION.format("One").encode())
    assert [a.name for a in service.load("repo", "main")] == ["One"]
    assert calls.refs == ["main"]
    made = catalog.commit("repo", "main", "actions").commit
    assert [a.name for a in service.load("repo", "main")] == ["One"]
    assert calls.refs == ["main", made.id]
    kept = service.load("repo", "main")
    assert service.load("repo", made.id) is kept
    # a staged deletion hides the committed file at once
    catalog.delete_object("repo", "main", "_lakefs_actions/a.yaml")
    assert service.load("repo", "main") == []
    assert calls.refs == ["main", made.id, "main"]
    assert [a.name for a in service.load("repo", made.id)] == ["One"]


def test_refs_that_are_not_branches_are_listed_as_given(
    catalog: Catalog, service: ActionsService
) -> None:
    catalog.upload_object("repo", "main", "_lakefs_actions/a.yaml", ACTION.format("One").encode())
    catalog.commit("repo", "main", "actions")
    catalog.create_tag("repo", "v1", "main")
    catalog.upload_object("repo", "main", "_lakefs_actions/a.yaml", ACTION.format("Two").encode())
    catalog.commit("repo", "main", "two")
    calls = Counting(catalog)
    assert [a.name for a in service.load("repo", "v1")] == ["One"]
    assert [a.name for a in service.load("repo", "main~1")] == ["One"]
    assert [a.name for a in service.load("repo", "main")] == ["Two"]
    assert calls.refs[:2] == ["v1", "main~1"]


def test_a_commit_that_leaves_the_action_files_alone_keeps_its_parents() -> None:
    # every key ends a range: the action files' ranges are apart from the data's
    catalog = open_memory(chunking=ChunkingParams(raggedness=1))
    catalog.create_repository("repo", "mem://repo")
    service = ActionsService(catalog)
    catalog.upload_object("repo", "main", "_lakefs_actions/a.yaml", ACTION.format("One").encode())
    first = catalog.commit("repo", "main", "actions").commit
    kept = service.load("repo", first.id)
    calls = Counting(catalog)
    catalog.upload_object("repo", "main", "z/data", b"2")
    second = catalog.commit("repo", "main", "data").commit
    assert service.load("repo", second.id) is kept  # derived from the parent, not listed
    assert calls.refs == []
    catalog.upload_object("repo", "main", "_lakefs_actions/b.yaml", ACTION.format("Two").encode())
    third = catalog.commit("repo", "main", "more actions").commit
    assert [a.name for a in service.load("repo", third.id)] == ["One", "Two"]
    assert calls.refs == [third.id]
    catalog.delete_object("repo", "main", "_lakefs_actions/a.yaml")
    fourth = catalog.commit("repo", "main", "fewer actions").commit
    assert [a.name for a in service.load("repo", fourth.id)] == ["Two"]
    assert calls.refs == [third.id, fourth.id]
    service.close()


def test_a_commit_sharing_a_range_with_unchanged_action_files_is_not_listed(
    catalog: Catalog, service: ActionsService
) -> None:
    catalog.upload_object("repo", "main", "_lakefs_actions/a.yaml", ACTION.format("One").encode())
    first = catalog.commit("repo", "main", "actions").commit
    kept = service.load("repo", first.id)
    calls = Counting(catalog)
    catalog.upload_object("repo", "main", "_lakefs_actions_data", b"2")  # beside, not under
    made = catalog.commit("repo", "main", "data").commit
    repo = catalog.get_repository("repo")
    ranges = catalog.committed(repo).read_metarange
    assert ranges(made.metarange_id) != ranges(first.metarange_id)  # the range changed
    assert service.load("repo", made.id) == kept
    assert calls.refs == []


def test_a_commit_changing_an_action_file_in_a_shared_range_is_listed(
    catalog: Catalog, service: ActionsService
) -> None:
    catalog.upload_object("repo", "main", "_lakefs_actions/a.yaml", ACTION.format("One").encode())
    first = catalog.commit("repo", "main", "actions").commit
    service.load("repo", first.id)
    calls = Counting(catalog)
    catalog.upload_object("repo", "main", "_lakefs_actions/a.yaml", ACTION.format("Two").encode())
    made = catalog.commit("repo", "main", "renamed").commit
    assert [a.name for a in service.load("repo", made.id)] == ["Two"]
    assert calls.refs == [made.id]


def test_a_parent_whose_actions_are_not_kept_is_not_trusted(
    catalog: Catalog, service: ActionsService
) -> None:
    catalog.upload_object("repo", "main", "_lakefs_actions/a.yaml", ACTION.format("One").encode())
    catalog.commit("repo", "main", "actions")
    catalog.upload_object("repo", "main", "z/data", b"2")
    made = catalog.commit("repo", "main", "data").commit
    calls = Counting(catalog)
    assert [a.name for a in service.load("repo", made.id)] == ["One"]
    assert calls.refs == [made.id]


def test_a_post_commit_reads_the_repository_once(
    catalog: Catalog, service: ActionsService, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert service.load("repo", "main") == []  # the head's actions are kept from here on
    catalog.upload_object("repo", "main", "c", b"3")
    made = catalog.commit("repo", "main", "c").commit
    reads: list[str] = []
    refs = catalog.refs
    real = refs.get_repository

    def counted(repo_id: str) -> Any:
        reads.append(repo_id)
        return real(repo_id)

    monkeypatch.setattr(refs, "get_repository", counted)
    event = HookEvent("post-commit", "repo", branch_id="main", source_ref=made.id)
    service.post(event)
    # the record read first serves the derivation of the commit's actions from its parent's
    assert reads == ["repo"]
    assert service.load("repo", made.id) == []
