"""The catalog's hook calls: which events each write announces, and aborts leave nothing."""

from __future__ import annotations

import socket
from dataclasses import replace
from typing import Any

import pytest

from mirror.actions import ActionsService
from mirror.core import announce, open_memory
from mirror.core.catalog import Catalog
from mirror.core.errors import (
    BranchNotFoundError,
    ProtectedBranchCommitError,
    RepositoryReadOnlyError,
)
from mirror.core.hooks import HookAbortError, HookEvent, HookRun
from mirror.core.protection import add_rule


class Recorder:
    """Hooks that record every event and fail the pre-events named in ``fail``."""

    def __init__(self, fail: tuple[str, ...] = ()) -> None:
        self.events: list[HookEvent] = []
        self.fail = fail

    def pre(self, event: HookEvent) -> HookRun:
        self.events.append(event)
        if event.event_type in self.fail:
            raise HookAbortError(event.event_type, "run", (("0000_0000", "A", "h", "no"),))
        return HookRun("run")

    def post(self, event: HookEvent, pre: HookRun | None = None) -> None:
        self.events.append(event)


@pytest.fixture
def catalog() -> Catalog:
    found = open_memory()
    found.create_repository("repo", "mem://repo")
    found.upload_object("repo", "main", "a", b"1")
    found.commit("repo", "main", "a")
    return found


def _types(recorder: Recorder) -> list[str]:
    return [e.event_type for e in recorder.events]


def test_every_write_announces_its_events(catalog: Catalog) -> None:
    hooks = Recorder()
    catalog.hooks = hooks
    catalog.create_branch("repo", "dev", "main")
    catalog.upload_object("repo", "dev", "b", b"2")
    picked = catalog.commit("repo", "dev", "b", committer="c", metadata={"k": "v"}).commit
    merged = catalog.merge("repo", "dev", "main").commit
    catalog.revert("repo", "main", merged.id, parent_number=1)
    catalog.cherry_pick("repo", "main", picked.id)
    catalog.create_tag("repo", "v1", "main")
    catalog.delete_tag("repo", "v1")
    catalog.delete_branch("repo", "dev")
    assert _types(hooks) == [
        "pre-create-branch", "post-create-branch", "prepare-commit", "pre-commit", "post-commit",
        "pre-merge", "post-merge", "pre-revert", "post-revert",
        "pre-cherry-pick", "post-cherry-pick", "pre-create-tag", "post-create-tag",
        "pre-delete-tag", "post-delete-tag", "pre-delete-branch", "post-delete-branch",
    ]  # fmt: skip
    by_type = {e.event_type: e for e in hooks.events}
    pre_commit, post_commit = by_type["pre-commit"], by_type["post-commit"]
    assert (pre_commit.branch_id, pre_commit.source_ref, pre_commit.commit_id) == ("dev", "dev", "")
    assert by_type["prepare-commit"] == HookEvent(
        "prepare-commit",
        "repo",
        branch_id="dev",
        source_ref="dev",
        commit_message="b",
        committer="c",
        commit_metadata={"k": "v"},
    )
    assert (pre_commit.committer, dict(pre_commit.commit_metadata)) == ("c", {"k": "v"})
    assert (post_commit.source_ref, post_commit.commit_id) == (picked.id, picked.id)
    pre_merge = by_type["pre-merge"]
    assert (pre_merge.branch_id, pre_merge.merge_source) == ("main", "dev")
    assert (pre_merge.source_ref, pre_merge.commit_id) == (picked.id, merged.id)
    assert by_type["post-merge"].commit_id == merged.id


def test_a_failing_pre_hook_leaves_nothing(catalog: Catalog) -> None:
    catalog.create_branch("repo", "dev", "main")
    catalog.upload_object("repo", "dev", "b", b"2")
    catalog.commit("repo", "dev", "b")
    head = catalog.get_branch("repo", "main").commit_id
    hooks = Recorder(fail=("pre-merge", "pre-create-tag", "pre-create-branch", "pre-commit"))
    catalog.hooks = hooks
    with pytest.raises(HookAbortError) as caught:
        catalog.merge("repo", "dev", "main")
    assert str(caught.value).startswith("update branch main: pre-merge hook aborted")
    assert catalog.get_branch("repo", "main").commit_id == head
    assert list(catalog.list_tags("repo")) == []
    with pytest.raises(HookAbortError):
        catalog.create_tag("repo", "v1", "main")
    assert list(catalog.list_tags("repo")) == []
    with pytest.raises(HookAbortError):
        catalog.create_branch("repo", "other", "main")
    assert not catalog.branch_exists("repo", "other")
    catalog.upload_object("repo", "main", "c", b"3")
    with pytest.raises(HookAbortError):
        catalog.commit("repo", "main", "c")
    assert catalog.get_branch("repo", "main").commit_id == head
    assert all(e.event_type.startswith(("pre-", "prepare-")) for e in hooks.events)


def test_a_failing_prepare_commit_hook_blocks_the_commit_before_pre_commit(
    catalog: Catalog,
) -> None:
    head = catalog.get_branch("repo", "main").commit_id
    hooks = Recorder(fail=("prepare-commit",))
    catalog.hooks = hooks
    catalog.upload_object("repo", "main", "c", b"3")
    with pytest.raises(HookAbortError) as caught:
        catalog.commit("repo", "main", "c")
    assert str(caught.value).startswith("prepare-commit hook aborted")
    assert catalog.get_branch("repo", "main").commit_id == head
    assert _types(hooks) == ["prepare-commit"]
    assert [d.path for d in catalog.diff_uncommitted("repo", "main")] == ["c"]


class _NoneRan(Recorder):
    """Hooks that match no action: every pre-event records no run."""

    def pre(self, event: HookEvent) -> HookRun:
        self.events.append(event)
        return HookRun()


def test_a_prepare_commit_that_ran_no_hook_leaves_the_pre_commit_described(
    catalog: Catalog, monkeypatch: pytest.MonkeyPatch
) -> None:
    described: list[str] = []
    check = announce.check_commit

    def counted(*args: Any) -> None:
        described.append(args[2])
        check(*args)

    monkeypatch.setattr(announce, "check_commit", counted)
    hooks = _NoneRan()
    catalog.hooks = hooks
    catalog.upload_object("repo", "main", "c", b"3")
    made = catalog.commit("repo", "main", "c", committer="me", metadata={"k": "v"}).commit
    assert _types(hooks) == ["prepare-commit", "pre-commit", "post-commit"]
    prepare, pre, _ = hooks.events
    assert pre == replace(prepare, event_type="pre-commit")
    assert (pre.branch_id, pre.committer, pre.commit_metadata) == ("main", "me", {"k": "v"})
    # the branch's protection read once for both events
    assert described == ["main"]
    assert catalog.get_branch("repo", "main").commit_id == made.id


def test_a_prepare_commit_that_ran_hooks_has_the_pre_commit_described_again(
    catalog: Catalog,
) -> None:
    head = catalog.get_branch("repo", "main").commit_id

    class Protecting(Recorder):
        """A prepare-commit hook that protects the branch (hooks may change the repository)."""

        def pre(self, event: HookEvent) -> HookRun:
            if event.event_type == "prepare-commit":
                add_rule(catalog.kv, catalog.get_repository("repo"), "main")
            return super().pre(event)

    hooks = Protecting()
    catalog.hooks = hooks
    catalog.upload_object("repo", "main", "c", b"3")
    with pytest.raises(ProtectedBranchCommitError):
        catalog.commit("repo", "main", "c")
    # described again after the hook: refused in the commit's own words, pre-commit not fired
    assert _types(hooks) == ["prepare-commit"]
    assert catalog.get_branch("repo", "main").commit_id == head


def test_read_only_repositories_run_no_hooks(catalog: Catalog) -> None:
    catalog.create_repository("copy", "mem://copy", read_only=True, mirror_of="repo", bare=True)
    hooks = Recorder(fail=("pre-create-branch",))
    catalog.hooks = hooks
    with pytest.raises(RepositoryReadOnlyError):
        catalog.create_branch("copy", "x", "main")
    assert hooks.events == []


def test_actions_of_a_commit_are_kept_and_a_branch_is_read_each_time(catalog: Catalog) -> None:
    service = ActionsService(catalog)
    action = (
        "name: {}\non:\n  pre-commit:\nhooks:\n"
        "  - {{id: hook1, type: webhook, properties: {{url: http://127.0.0.1:9/}}}}\n"
    )
    catalog.upload_object("repo", "main", "_lakefs_actions/a.yaml", action.format("One").encode())
    commit = catalog.commit("repo", "main", "actions").commit
    first = service.load("repo", commit.id)
    assert [a.name for a in first] == ["One"]
    assert service.load("repo", commit.id) is first
    catalog.upload_object("repo", "main", "_lakefs_actions/a.yaml", action.format("Two").encode())
    assert [a.name for a in service.load("repo", "main")] == ["Two"]
    assert [a.name for a in service.load("repo", commit.id)] == ["One"]
    service.close()


def test_a_missing_branch_is_reported_by_the_write_itself(catalog: Catalog) -> None:
    hooks = Recorder()
    catalog.hooks = hooks
    with pytest.raises(BranchNotFoundError):
        catalog.commit("repo", "nope", "m")
    with pytest.raises(BranchNotFoundError):
        catalog.delete_branch("repo", "nope")
    assert hooks.events == []


def test_a_protected_branch_refuses_the_commit_before_its_hooks(catalog: Catalog) -> None:
    add_rule(catalog.kv, catalog.get_repository("repo"), "main")
    hooks = Recorder()
    catalog.hooks = hooks
    with pytest.raises(ProtectedBranchCommitError):
        catalog.commit("repo", "main", "m", allow_empty=True)
    assert hooks.events == []


def test_a_repository_created_again_starts_with_no_runs(catalog: Catalog) -> None:
    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]
    action = (
        "name: Refused\non:\n  post-create-branch:\nhooks:\n"
        f"  - {{id: hook1, type: webhook, properties: {{url: 'http://127.0.0.1:{port}/'}}}}\n"
    )
    catalog.upload_object("repo", "main", "_lakefs_actions/a.yaml", action.encode())
    catalog.commit("repo", "main", "actions")
    service = ActionsService(catalog)
    catalog.hooks = service
    catalog.create_branch("repo", "dev", "main")
    service.close(wait=True)
    (run,) = service.runs.list(catalog.get_repository("repo"))
    assert (run.event_type, run.status) == ("post-create-branch", "failed")
    assert "action failed: Post" in run.hooks[0].error
    catalog.delete_repository("repo")
    catalog.create_repository("repo", "mem://repo")
    assert list(service.runs.list(catalog.get_repository("repo"))) == []
