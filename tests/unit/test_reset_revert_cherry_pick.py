"""Reset, revert and cherry-pick through the public API."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from mirror.core import (
    CHERRY_PICK_ORIGIN,
    BranchNotFoundError,
    DirtyBranchError,
    InvalidPathError,
    InvalidRefError,
    MergeConflictError,
    NoChangesError,
    RefNotFoundError,
)
from mirror.core.errors import (
    CherryPickParentRequiredError,
    ParentOutOfRangeError,
    RevertParentRequiredError,
)

if TYPE_CHECKING:
    from tests.conftest import Lake


def _paths(lake: Lake, branch: str = "main") -> list[str]:
    return [d.path for d in lake.catalog.diff_uncommitted(lake.repo, branch)]


# reset

COMMITTED = {"a": b"1", "b": b"1", "dir/x": b"1", "dir/y": b"1"}


def _stage_everywhere(lake: Lake) -> None:
    lake.write("main", COMMITTED)
    lake.put("main", "a", b"2")
    lake.rm("main", "b")
    lake.put("main", "dir/x", b"2")
    lake.put("main", "dir/z", b"new")
    lake.put("main", "dirt", b"new")
    assert _paths(lake) == ["a", "b", "dir/x", "dir/z", "dirt"]


def test_reset_exact_path_restores_only_that_path(lake: Lake) -> None:
    _stage_everywhere(lake)
    assert lake.catalog.reset_objects(lake.repo, "main", "a", exact=True) == 1
    assert lake.catalog.read_object(lake.repo, "main", "a") == b"1"
    assert _paths(lake) == ["b", "dir/x", "dir/z", "dirt"]

    assert lake.catalog.reset_objects(lake.repo, "main", "b", exact=True) == 1
    assert lake.catalog.read_object(lake.repo, "main", "b") == b"1"
    assert _paths(lake) == ["dir/x", "dir/z", "dirt"]


def test_reset_exact_path_is_not_a_prefix(lake: Lake) -> None:
    _stage_everywhere(lake)
    assert lake.catalog.reset_objects(lake.repo, "main", "dir", exact=True) == 0
    assert lake.catalog.reset_objects(lake.repo, "main", "dir/", exact=True) == 0
    assert _paths(lake) == ["a", "b", "dir/x", "dir/z", "dirt"]


def test_reset_prefix_restores_everything_under_it(lake: Lake) -> None:
    _stage_everywhere(lake)
    assert lake.catalog.reset_objects(lake.repo, "main", "dir/", exact=False) == 2
    assert _paths(lake) == ["a", "b", "dirt"]
    tree = lake.tree("main")
    assert (tree["dir/x"], tree["dir/y"]) == (b"1", b"1")
    assert "dir/z" not in tree

    assert lake.catalog.reset_objects(lake.repo, "main", "di", exact=False) == 1
    assert _paths(lake) == ["a", "b"]


def test_reset_branch_drops_every_staged_change(lake: Lake) -> None:
    _stage_everywhere(lake)
    head = lake.head("main")
    lake.catalog.reset_branch(lake.repo, "main")
    assert _paths(lake) == []
    assert lake.tree("main") == lake.tree("main@") == COMMITTED
    assert lake.head("main") == head
    with pytest.raises(NoChangesError, match="'main'"):
        lake.catalog.commit(lake.repo, "main", "nothing")


def test_reset_leaves_other_branches_alone(lake: Lake) -> None:
    lake.write("main", COMMITTED)
    lake.branch("side")
    lake.put("side", "a", b"side")
    lake.put("main", "a", b"main")
    lake.catalog.reset_branch(lake.repo, "main")
    assert lake.catalog.reset_objects(lake.repo, "main", "", exact=False) == 0
    assert lake.catalog.read_object(lake.repo, "side", "a") == b"side"
    assert lake.catalog.read_object(lake.repo, "main", "a") == b"1"


def test_reset_errors_name_the_bad_value(lake: Lake) -> None:
    with pytest.raises(InvalidPathError) as bad:
        lake.catalog.reset_objects(lake.repo, "main", "", exact=True)
    assert "''" in str(bad.value)
    with pytest.raises(BranchNotFoundError) as missing:
        lake.catalog.reset_branch(lake.repo, "ghost")
    assert "'ghost'" in str(missing.value)
    with pytest.raises(BranchNotFoundError) as missing:
        lake.catalog.reset_objects(lake.repo, "ghost", "a", exact=True)
    assert "'ghost'" in str(missing.value)


# revert


def test_revert_restores_the_parent_content_of_changed_paths(lake: Lake) -> None:
    lake.write("main", {"a": b"1", "b": b"1", "c": b"1"})
    target = lake.write("main", {"a": b"2", "b": None, "d": b"1"})
    head = lake.write("main", {"c": b"3"})
    lake.clock.tick()
    reverted = lake.catalog.revert(lake.repo, "main", "main~1", committer="rev").commit
    assert lake.tree("main") == {"a": b"1", "b": b"1", "c": b"3"}
    assert reverted.parents == (head.id,)
    assert reverted.committer == "rev"
    assert target.id in reverted.message
    assert reverted.compute_id() == reverted.id
    assert lake.head("main") == reverted.id


def test_revert_of_the_head_gives_back_the_parent_tree(lake: Lake) -> None:
    first = lake.write("main", {"a": b"1"})
    lake.write("main", {"a": b"2", "b": b"2"})
    reverted = lake.catalog.revert(lake.repo, "main", "main", message="undo").commit
    assert reverted.message == "undo"
    assert reverted.metarange_id == first.metarange_id
    assert lake.tree("main") == {"a": b"1"}


def test_revert_conflicts_when_the_branch_changed_those_paths_since(lake: Lake) -> None:
    lake.write("main", {"a": b"1", "b": b"1", "c": b"1"})
    target = lake.write("main", {"a": b"2", "b": b"2", "c": b"2"})
    head = lake.write("main", {"a": b"3", "b": None})
    with pytest.raises(MergeConflictError) as info:
        lake.catalog.revert(lake.repo, "main", target.id)
    assert info.value.paths == ["a", "b"]
    assert "'a'" in str(info.value)
    assert "'b'" in str(info.value)
    assert lake.head("main") == head.id


def _merged_history(lake: Lake) -> None:
    """Main holds {base, m}; feature adds f; main then merges feature."""
    lake.write("main", {"base": b"0"})
    lake.branch("feature")
    lake.write("feature", {"f": b"1"})
    lake.write("main", {"m": b"1"})
    lake.clock.tick()
    lake.catalog.merge(lake.repo, "feature", "main")


def test_revert_of_a_merge_commit_needs_a_parent_number(lake: Lake) -> None:
    _merged_history(lake)
    merge = lake.head("main")
    errors: list[type[Exception]] = [RevertParentRequiredError, ParentOutOfRangeError]
    for parent_number, error in zip((0, 3), errors, strict=True):
        with pytest.raises(error) as info:
            lake.catalog.revert(lake.repo, "main", "main", parent_number=parent_number)
        assert merge in str(info.value)
    assert lake.head("main") == merge

    lake.catalog.revert(lake.repo, "main", merge, parent_number=1)
    assert lake.tree("main") == {"base": b"0", "m": b"1"}


def test_revert_of_a_merge_against_its_second_parent(lake: Lake) -> None:
    _merged_history(lake)
    lake.catalog.revert(lake.repo, "main", "main", parent_number=2)
    assert lake.tree("main") == {"base": b"0", "f": b"1"}


def test_revert_of_an_ordinary_commit_accepts_parent_number_one_only(lake: Lake) -> None:
    lake.write("main", {"a": b"1"})
    target = lake.write("main", {"a": b"2"})
    with pytest.raises(InvalidRefError) as info:
        lake.catalog.revert(lake.repo, "main", "main", parent_number=2)
    assert target.id in str(info.value)
    lake.catalog.revert(lake.repo, "main", "main", parent_number=1)
    assert lake.tree("main") == {"a": b"1"}


def test_revert_refuses_a_dirty_branch(lake: Lake) -> None:
    lake.write("main", {"a": b"1"})
    lake.write("main", {"a": b"2"})
    head = lake.head("main")
    lake.put("main", "wip", b"w")
    with pytest.raises(DirtyBranchError) as info:
        lake.catalog.revert(lake.repo, "main", "main")
    assert "'main'" in str(info.value)
    assert lake.head("main") == head
    assert _paths(lake) == ["wip"]


def test_revert_of_the_initial_commit_is_invalid(lake: Lake) -> None:
    initial = lake.head("main")
    lake.write("main", {"a": b"1"})
    with pytest.raises(InvalidRefError) as info:
        lake.catalog.revert(lake.repo, "main", initial)
    assert initial in str(info.value)


def test_revert_of_an_empty_commit_needs_allow_empty(lake: Lake) -> None:
    lake.write("main", {"a": b"1"})
    empty = lake.commit("main", "empty", allow_empty=True)
    with pytest.raises(NoChangesError) as info:
        lake.catalog.revert(lake.repo, "main", "main")
    assert "'main'" in str(info.value)
    assert lake.head("main") == empty.id
    reverted = lake.catalog.revert(lake.repo, "main", "main", allow_empty=True).commit
    assert reverted.metarange_id == empty.metarange_id


def test_revert_of_unknown_ref(lake: Lake) -> None:
    with pytest.raises(RefNotFoundError) as info:
        lake.catalog.revert(lake.repo, "main", "nosuch")
    assert "'nosuch'" in str(info.value)


# cherry-pick


def test_cherry_pick_applies_exactly_the_picked_changes(lake: Lake) -> None:
    lake.write("main", {"a": b"1", "gone": b"1"})
    lake.branch("feature")
    lake.put("feature", "a", b"2")
    lake.put("feature", "f", b"1")
    lake.rm("feature", "gone")
    picked = lake.commit("feature", "the fix", committer="alice", metadata={"jira": "X-1"})
    lake.write("feature", {"g": b"1"})
    head = lake.write("main", {"m": b"1"})
    lake.clock.tick()

    new = lake.catalog.cherry_pick(lake.repo, "main", "feature~1", committer="bob").commit
    assert lake.tree("main") == {"a": b"2", "f": b"1", "m": b"1"}
    assert new.parents == (head.id,)
    assert new.message == "the fix"
    assert new.committer == "bob"
    assert new.metadata[CHERRY_PICK_ORIGIN] == picked.id
    assert new.metadata["jira"] == "X-1"
    assert new.id != picked.id
    assert new.compute_id() == new.id
    assert lake.head("main") == new.id


def test_cherry_pick_conflict_leaves_the_branch_alone(lake: Lake) -> None:
    lake.write("main", {"a": b"1"})
    lake.branch("feature")
    picked = lake.write("feature", {"a": b"2"})
    head = lake.write("main", {"a": b"3"})
    with pytest.raises(MergeConflictError) as info:
        lake.catalog.cherry_pick(lake.repo, "main", picked.id)
    assert info.value.paths == ["a"]
    assert lake.head("main") == head.id


def test_cherry_pick_of_a_merge_commit_needs_a_parent_number(lake: Lake) -> None:
    _merged_history(lake)
    merge = lake.head("main")
    lake.branch("other", "main~2")
    with pytest.raises(CherryPickParentRequiredError) as info:
        lake.catalog.cherry_pick(lake.repo, "other", merge)
    assert merge in str(info.value)
    lake.catalog.cherry_pick(lake.repo, "other", merge, parent_number=1)
    assert lake.tree("other") == {"base": b"0", "f": b"1"}


def test_cherry_pick_refuses_a_dirty_branch(lake: Lake) -> None:
    lake.write("main", {"a": b"1"})
    lake.branch("feature")
    lake.write("feature", {"f": b"1"})
    lake.put("main", "wip", b"w")
    with pytest.raises(DirtyBranchError) as info:
        lake.catalog.cherry_pick(lake.repo, "main", "feature")
    assert "'main'" in str(info.value)


def test_cherry_pick_of_an_empty_commit_is_refused(lake: Lake) -> None:
    lake.write("main", {"a": b"1"})
    lake.branch("feature")
    lake.commit("feature", "nothing", allow_empty=True)
    with pytest.raises(NoChangesError) as info:
        lake.catalog.cherry_pick(lake.repo, "main", "feature")
    assert "'feature'" in str(info.value)
