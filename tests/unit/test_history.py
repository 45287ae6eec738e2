"""History through the public API: log order, merge bases, content-derived commit IDs."""

from __future__ import annotations

import dataclasses
import os
import shutil
import subprocess
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from mirror.core import (
    FIRST_COMMIT_MESSAGE,
    Commit,
    CommitID,
    InvalidRefError,
    MetaRangeID,
    NoMergeBaseError,
    RefNotFoundError,
    commit_id,
    open_memory,
)

if TYPE_CHECKING:
    from tests.conftest import Clock, Lake


def _log(lake: Lake, ref: str, *, first_parent: bool = False) -> list[CommitID]:
    return [c.id for c in lake.catalog.log(lake.repo, ref, first_parent=first_parent)]


def _merge(lake: Lake, source: str, destination: str) -> CommitID:
    lake.clock.tick()
    return lake.catalog.merge(lake.repo, source, destination).commit.id


def _ancestors(lake: Lake, ref: str) -> set[CommitID]:
    return set(_log(lake, ref))


def _best_common_ancestors(lake: Lake, left: str, right: str) -> set[CommitID]:
    """Return the common ancestors that are not ancestors of another common ancestor."""
    common = _ancestors(lake, left) & _ancestors(lake, right)
    return {c for c in common if not any(o != c and c in _ancestors(lake, o) for o in common)}


def _check_merge_base(lake: Lake, left: str, right: str) -> CommitID:
    """Assert the merge base is a best common ancestor, stable and symmetric; return it."""
    base = lake.catalog.merge_base(lake.repo, left, right).id
    assert base in _best_common_ancestors(lake, left, right)
    for _ in range(3):
        assert lake.catalog.merge_base(lake.repo, left, right).id == base
    assert lake.catalog.merge_base(lake.repo, right, left).id == base
    return base


# log


def test_log_of_new_repository_is_the_initial_commit(lake: Lake, clock: Clock) -> None:
    (initial,) = lake.catalog.log(lake.repo, "main")
    assert initial.message == FIRST_COMMIT_MESSAGE == "Repository created"
    assert initial.metarange_id == ""
    assert initial.parents == ()
    assert initial.creation_date == clock.now
    assert initial.id == lake.head("main")
    assert list(lake.catalog.log(lake.repo, "main", first_parent=True)) == [initial]


def test_log_orders_all_ancestors_newest_first(lake: Lake) -> None:
    c0 = lake.head("main")
    c1 = lake.write("main", {"a": b"1"}, "c1").id
    lake.branch("feature")
    f1 = lake.write("feature", {"f": b"1"}, "f1").id
    c2 = lake.write("main", {"a": b"2"}, "c2").id
    f2 = lake.write("feature", {"f": b"2"}, "f2").id
    m = _merge(lake, "feature", "main")
    c3 = lake.write("main", {"a": b"3"}, "c3").id

    assert _log(lake, "main") == [c3, m, f2, c2, f1, c1, c0]
    assert _log(lake, "main", first_parent=True) == [c3, m, c2, c1, c0]
    assert _log(lake, "feature") == [f2, f1, c1, c0]
    assert _log(lake, "main~1^2") == [f2, f1, c1, c0]
    assert _log(lake, "main~1", first_parent=True) == [m, c2, c1, c0]
    assert _log(lake, m[:10]) == [m, f2, c2, f1, c1, c0]

    last = list(lake.catalog.log(lake.repo, "main"))[-1]
    assert (last.message, last.metarange_id, last.parents) == (FIRST_COMMIT_MESSAGE, "", ())


def test_log_interleaves_by_time_not_by_branch(lake: Lake) -> None:
    c0 = lake.head("main")
    lake.branch("feature")
    f1 = lake.write("feature", {"f": b"1"}, "f1").id
    f2 = lake.write("feature", {"f": b"2"}, "f2").id
    c1 = lake.write("main", {"a": b"1"}, "c1").id
    f3 = lake.write("feature", {"f": b"3"}, "f3").id
    m = _merge(lake, "feature", "main")
    assert _log(lake, "main") == [m, f3, c1, f2, f1, c0]
    assert _log(lake, "main", first_parent=True) == [m, c1, c0]


def test_log_with_equal_times_lists_children_before_parents(clock: Clock) -> None:
    catalog = open_memory(clock=clock)
    catalog.create_repository("repo", "mem://repo")
    catalog.create_branch("repo", "side", "main")
    for i in range(4):
        catalog.upload_object("repo", "main", f"m{i}", b"m")
        catalog.commit("repo", "main", f"main {i}")
        catalog.upload_object("repo", "side", f"s{i}", b"s")
        catalog.commit("repo", "side", f"side {i}")
        catalog.merge("repo", "side", "main", message=f"merge {i}")
    log = list(catalog.log("repo", "main"))
    ids = [c.id for c in log]
    assert len(ids) == len(set(ids)) == 1 + 4 * 3
    position = {c: i for i, c in enumerate(ids)}
    for commit in log:
        for parent in commit.parents:
            assert position[parent] > position[commit.id]
    assert log[-1].message == FIRST_COMMIT_MESSAGE
    assert ids == [c.id for c in catalog.log("repo", "main")]


def test_log_of_unknown_ref_is_not_found(lake: Lake) -> None:
    with pytest.raises(RefNotFoundError) as info:
        list(lake.catalog.log(lake.repo, "nosuch"))
    assert "'nosuch'" in str(info.value)


# merge base


def test_merge_base_on_a_line(lake: Lake) -> None:
    c0 = lake.head("main")
    c1 = lake.write("main", {"a": b"1"}).id
    lake.write("main", {"a": b"2"})
    c3 = lake.write("main", {"a": b"3"}).id
    assert _check_merge_base(lake, "main", "main~2") == c1
    assert _check_merge_base(lake, "main", "main") == c3
    assert _check_merge_base(lake, "main", c0) == c0
    assert _check_merge_base(lake, "main~1", "main~2") == c1


def test_merge_base_across_branch_and_merges(lake: Lake) -> None:
    c1 = lake.write("main", {"a": b"1"}).id
    lake.branch("feature")
    f1 = lake.write("feature", {"f": b"1"}).id
    lake.write("main", {"a": b"2"})
    assert _check_merge_base(lake, "main", "feature") == c1

    _merge(lake, "feature", "main")
    assert _check_merge_base(lake, "main", "feature") == f1

    lake.write("feature", {"f": b"2"})
    c3 = lake.write("main", {"a": b"3"}).id
    assert _check_merge_base(lake, "main", "feature") == f1

    _merge(lake, "main", "feature")
    assert _check_merge_base(lake, "main", "feature") == c3
    assert _check_merge_base(lake, "main~1", "feature~1") == f1


@pytest.mark.parametrize("extra_on_y", [0, 2])
def test_merge_base_of_criss_cross_is_one_of_the_best(lake: Lake, extra_on_y: int) -> None:
    b0 = lake.write("main", {"base": b"0"}).id
    lake.branch("x")
    lake.branch("y")
    x1 = lake.write("x", {"x": b"1"}).id
    for i in range(extra_on_y):
        lake.write("y", {f"y-extra-{i}": b"e"})
    y1 = lake.write("y", {"y": b"1"}).id
    mx = _merge(lake, y1, "x")
    my = _merge(lake, x1, "y")
    assert lake.catalog.get_commit(lake.repo, mx).parents == (x1, y1)
    assert lake.catalog.get_commit(lake.repo, my).parents == (y1, x1)

    assert _best_common_ancestors(lake, "x", "y") == {x1, y1}
    assert b0 in _ancestors(lake, "x") & _ancestors(lake, "y")
    assert _check_merge_base(lake, "x", "y") in {x1, y1}

    lake.write("x", {"x": b"2"})
    lake.write("y", {"y": b"2"})
    assert _check_merge_base(lake, "x", "y") in {x1, y1}


class GitMirror:
    """The commit graph of some branches, copied into a git repository with the same dates."""

    def __init__(self, lake: Lake, workdir: Path, branches: list[str]) -> None:
        self.workdir = workdir
        self.env = {
            "PATH": os.environ.get("PATH", ""),
            "HOME": str(workdir),
            "GIT_CONFIG_NOSYSTEM": "1",
            "GIT_AUTHOR_NAME": "t",
            "GIT_AUTHOR_EMAIL": "t@example.com",
            "GIT_COMMITTER_NAME": "t",
            "GIT_COMMITTER_EMAIL": "t@example.com",
        }
        self.git("init", "-q", ".")
        tree = self.git("hash-object", "-t", "tree", "-w", "--stdin")
        commits = {c.id: c for b in branches for c in lake.catalog.log(lake.repo, b)}
        self.to_git: dict[CommitID, str] = {}
        for c in sorted(commits.values(), key=lambda c: c.generation):
            parents = [arg for p in c.parents for arg in ("-p", self.to_git[p])]
            date = f"{c.creation_date} +0000"
            self.to_git[c.id] = self.git(
                "commit-tree",
                tree,
                *parents,
                "-m",
                c.id,
                GIT_AUTHOR_DATE=date,
                GIT_COMMITTER_DATE=date,
            )
        self.from_git = {v: k for k, v in self.to_git.items()}

    def git(self, *args: str, **extra: str) -> str:
        done = subprocess.run(
            ["git", *args],
            cwd=self.workdir,
            env={**self.env, **extra},
            check=True,
            capture_output=True,
        )
        return done.stdout.decode().strip()

    def merge_bases(self, left: CommitID, right: CommitID) -> list[CommitID]:
        """Return ``git merge-base --all`` of two commits, in git's order."""
        out = self.git("merge-base", "--all", self.to_git[left], self.to_git[right])
        return [self.from_git[line] for line in out.splitlines()]


@pytest.mark.skipif(shutil.which("git") is None, reason="needs the git executable")
@pytest.mark.parametrize("extra_on_y", [0, 2])
def test_merge_base_agrees_with_git(lake: Lake, tmp_path: Path, extra_on_y: int) -> None:
    lake.write("main", {"base": b"0"})
    lake.branch("x")
    lake.branch("y")
    x1 = lake.write("x", {"x": b"1"}).id
    for i in range(extra_on_y):
        lake.write("y", {f"y-extra-{i}": b"e"})
    y1 = lake.write("y", {"y": b"1"}).id
    _merge(lake, y1, "x")
    _merge(lake, x1, "y")
    lake.write("x", {"x": b"2"})
    lake.branch("z", "main")
    lake.write("z", {"z": b"1"})
    _merge(lake, "z", "y")

    git = GitMirror(lake, tmp_path, ["main", "x", "y", "z"])
    pairs = [("x", "y"), ("x", "z"), ("y", "z"), ("x~1", "y~1"), ("main", "y"), ("x", "y^2")]
    for left, right in pairs:
        bases = git.merge_bases(lake.resolve(left), lake.resolve(right))
        assert set(bases) == _best_common_ancestors(lake, left, right)
        assert _check_merge_base(lake, left, right) in bases
    assert len(git.merge_bases(lake.resolve("x"), lake.resolve("y"))) == 2


def test_merge_base_prefers_the_nearer_of_nested_common_ancestors(lake: Lake) -> None:
    c1 = lake.write("main", {"a": b"1"}).id
    lake.branch("long")
    lake.branch("short")
    lake.write("long", {"l": b"1"})
    l2 = lake.write("long", {"l": b"2"}).id
    for i in range(3, 7):
        lake.write("long", {"l": str(i).encode()})
    lake.write("short", {"s": b"1"})
    _merge(lake, l2, "short")
    assert c1 in _ancestors(lake, "short") & _ancestors(lake, "long")
    assert _check_merge_base(lake, "long", "short") == l2


def test_no_merge_base_between_unrelated_roots(lake: Lake, clock: Clock) -> None:
    fields = {
        "committer": "someone",
        "message": "another root",
        "metarange_id": MetaRangeID(""),
        "creation_date": clock.now,
        "metadata": {},
        "parents": (),
    }
    root = Commit(id=commit_id(**fields), **fields)  # type: ignore[arg-type]
    lake.catalog.import_commit(lake.repo, root)
    lake.catalog.set_branch_head(lake.repo, "orphan", root.id, None)
    lake.write("main", {"a": b"1"})
    with pytest.raises(NoMergeBaseError) as info:
        lake.catalog.merge_base(lake.repo, "main", "orphan")
    assert root.id in str(info.value)
    with pytest.raises(NoMergeBaseError, match=root.id):
        lake.catalog.merge(lake.repo, "orphan", "main", allow_empty=True)


# commit IDs


def test_every_commit_id_is_its_content_hash(lake: Lake) -> None:
    lake.write("main", {"a": b"1", "b": b"1"})
    lake.branch("feature")
    lake.put("feature", "c", b"1", metadata={"k": "v"}, content_type="text/plain")
    lake.commit("feature", "with metadata", committer="alice", metadata={"run": "7"})
    lake.write("main", {"b": b"2"})
    _merge(lake, "feature", "main")
    lake.clock.tick()
    lake.catalog.revert(lake.repo, "main", "main~1")
    lake.write("feature", {"d": b"1"})
    lake.clock.tick()
    lake.catalog.cherry_pick(lake.repo, "main", "feature")
    lake.commit("main", "empty", allow_empty=True, date=12345)

    commits = list(lake.catalog.log(lake.repo, "main")) + list(
        lake.catalog.log(lake.repo, "feature")
    )
    assert len({c.id for c in commits}) == 9
    for c in commits:
        assert c.compute_id() == c.id
        assert lake.catalog.verify_commit(lake.repo, c.id)
        assert lake.catalog.get_commit(lake.repo, c.id) == c
    assert lake.catalog.get_commit(lake.repo, lake.head("main")).creation_date == 12345


def test_same_content_in_the_same_second_gives_the_same_id(clock: Clock) -> None:
    catalog = open_memory(clock=clock)
    catalog.create_repository("one", "mem://one")
    catalog.create_repository("two", "mem://two")
    first = catalog.get_branch("one", "main").commit_id
    assert catalog.get_branch("two", "main").commit_id == first

    catalog.create_branch("one", "a", "main")
    catalog.create_branch("one", "b", "main")
    stat = catalog.upload_object("one", "a", "path", b"data", metadata={"k": "v"})
    catalog.stage_object("one", "b", "path", stat.entry)
    ca = catalog.commit("one", "a", "msg", committer="c", metadata={"m": "1"}).commit
    cb = catalog.commit("one", "b", "msg", committer="c", metadata={"m": "1"}).commit
    assert ca.id == cb.id
    assert catalog.get_branch("one", "b").commit_id == ca.id

    def again(**changes: object) -> CommitID:
        fields = {
            "committer": ca.committer,
            "message": ca.message,
            "metarange_id": ca.metarange_id,
            "creation_date": ca.creation_date,
            "metadata": ca.metadata,
            "parents": ca.parents,
            **changes,
        }
        return commit_id(**fields)  # type: ignore[arg-type]

    assert again() == ca.id
    assert again(creation_date=ca.creation_date + 1) != ca.id
    assert again(message="other") != ca.id
    assert again(committer="d") != ca.id
    assert again(metadata={"m": "2"}) != ca.id
    assert again(parents=(ca.id,)) != ca.id

    clock.tick()
    catalog.create_branch("one", "c", "main")
    catalog.stage_object("one", "c", "path", stat.entry)
    cc = catalog.commit("one", "c", "msg", committer="c", metadata={"m": "1"}).commit
    assert cc.metarange_id == ca.metarange_id
    assert cc.id != ca.id


def test_import_rejects_a_commit_whose_id_does_not_match(lake: Lake) -> None:
    real = lake.write("main", {"a": b"1"}, "real")
    forged = dataclasses.replace(real, message="forged")
    with pytest.raises(InvalidRefError) as info:
        lake.catalog.import_commit(lake.repo, forged)
    assert real.id in str(info.value)
