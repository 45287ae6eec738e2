"""Stateful test: the Catalog against a plain-dict model of branches, staging and commits.

The model keeps, per commit, a snapshot ``path -> Obj`` and its parents; per branch, its head and
a staging overlay (``None`` marks a staged deletion). Objects carry the physical address the
catalog gave them, so the model also predicts which version of an unchanged object a tree keeps,
and two trees are the same when they hold the same records.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

import pytest
from hypothesis import HealthCheck, event, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)

from mirror.core import (
    MERGE_STRATEGY_KEY,
    Catalog,
    ChunkingParams,
    CommitResult,
    DiffType,
    DirtyBranchError,
    InvalidRefError,
    MergeConflictError,
    NoChangesError,
    ObjectNotFoundError,
    ObjectStat,
    RefNotFoundError,
    open_memory,
)
from mirror.core.errors import RevertParentRequiredError
from mirror.core.model import DEFAULT_CONTENT_TYPE

REPO = "repo"
PATHS = [
    "a",
    "b",
    "c",
    "ab",
    "a-b",
    "a.b",
    "a0",
    "a/",
    "a/b",
    "a/c",
    "a/b/c",
    "a/b-c",
    "a-b/c",
    "b/a",
]
PREFIXES = ["", "a", "a/", "a/b", "a-", "b", "c/"]
CONTENTS = [b"", b"x", b"y", b"xy"]
METADATA: list[dict[str, str] | None] = [None, {"k": "1"}]
CONTENT_TYPES = [None, "text/plain"]
STRATEGIES = [None, "source-wins", "dest-wins"]
MAX_BRANCHES = 4


@dataclass(frozen=True)
class Obj:
    """One uploaded object version; ``address`` tells uploads of equal content apart."""

    data: bytes
    metadata: tuple[tuple[str, str], ...]
    content_type: str
    address: str

    @property
    def identity(self) -> tuple[bytes, tuple[tuple[str, str], ...], str]:
        return self.data, self.metadata, self.content_type


Tree = Mapping[str, Obj]
Staging = dict[str, Obj | None]


@dataclass(frozen=True)
class ModelCommit:
    tree: Tree
    parents: tuple[str, ...]
    generation: int


@dataclass
class ModelBranch:
    head: str
    staging: Staging = field(default_factory=dict)


def same(a: Obj | None, b: Obj | None) -> bool:
    if a is None or b is None:
        return a is None and b is None
    return a.identity == b.identity


def overlay(tree: Tree, staging: Staging) -> dict[str, Obj]:
    out = dict(tree)
    for path, value in staging.items():
        if value is None:
            out.pop(path, None)
        else:
            out[path] = value
    return out


def apply_staging(tree: Tree, staging: Staging) -> dict[str, Obj]:
    """Commit ``staging`` onto ``tree``: a re-upload of equal content keeps the old version."""
    out = dict(tree)
    for path, value in staging.items():
        if value is None:
            out.pop(path, None)
        elif not same(out.get(path), value):
            out[path] = value
    return out


def staged_changes(tree: Tree, staging: Staging) -> list[tuple[str, DiffType]]:
    out = []
    for path in sorted(staging):
        old, new = tree.get(path), staging[path]
        if new is None:
            if old is not None:
                out.append((path, DiffType.REMOVED))
        elif old is None:
            out.append((path, DiffType.ADDED))
        elif not same(old, new):
            out.append((path, DiffType.CHANGED))
    return out


def three_way(
    base: Tree, source: Tree, dest: Tree, strategy: str | None
) -> tuple[dict[str, Obj], list[str]]:
    """Merge ``source`` into ``dest`` by the ten-row table; return the tree and the conflicts."""
    if dest == base:
        return dict(source), []
    result = dict(dest)
    conflicts = []
    for path in sorted(set(base) | set(source) | set(dest)):
        b, s, d = base.get(path), source.get(path), dest.get(path)
        if same(s, b) or same(s, d):
            continue
        if not same(d, b) and strategy != "source-wins":
            if strategy is None:
                conflicts.append(path)
            continue
        if s is None:
            del result[path]
        else:
            result[path] = s
    return result, conflicts


def listing(tree: Mapping[str, Obj], prefix: str, delimiter: str) -> list[tuple[str, bool]]:
    """Return the expected listing as ``(name, is_common_prefix)`` in order."""
    out: list[tuple[str, bool]] = []
    for path in sorted(p for p in tree if p.startswith(prefix)):
        cut = path.find(delimiter, len(prefix)) if delimiter else -1
        if cut < 0:
            out.append((path, False))
        elif not out or out[-1] != (path[: cut + len(delimiter)], True):
            out.append((path[: cut + len(delimiter)], True))
    return out


def describe(stat: ObjectStat) -> tuple[str, str, int, str, tuple[tuple[str, str], ...]]:
    e = stat.entry
    return stat.path, e.address, e.size, e.content_type, tuple(sorted(e.metadata.items()))


def expected_stats(tree: Mapping[str, Obj]) -> list[tuple[str, str, int, str, tuple]]:
    return [
        (p, o.address, len(o.data), o.content_type, o.metadata) for p, o in sorted(tree.items())
    ]


class CatalogMachine(RuleBasedStateMachine):
    """Random writes, deletes, commits, branches, merges, resets, reverts and cherry-picks."""

    def __init__(self) -> None:
        super().__init__()
        self.now = 1_700_000_000
        self.catalog: Catalog = open_memory(chunking=ChunkingParams(raggedness=4), clock=self.tick)
        self.catalog.create_repository(REPO, "mem://state-machine", "main")
        initial = self.catalog.get_branch(REPO, "main").commit_id
        self.commits: dict[str, ModelCommit] = {initial: ModelCommit({}, (), 1)}
        self.branches: dict[str, ModelBranch] = {"main": ModelBranch(initial)}
        self.names = itertools.count(1)
        self.messages = itertools.count(1)

    def tick(self) -> float:
        self.now += 1
        return float(self.now)

    # helpers

    def pick_branch(self, data: st.DataObject, label: str = "branch") -> str:
        return data.draw(st.sampled_from(sorted(self.branches)), label=label)

    def pick_commit(self, data: st.DataObject) -> str:
        # insertion order, never ID order: IDs hash random physical addresses
        return data.draw(st.sampled_from(list(self.commits)), label="commit")

    def tree(self, branch: str) -> Tree:
        return self.commits[self.branches[branch].head].tree

    def view(self, branch: str) -> dict[str, Obj]:
        return overlay(self.tree(branch), self.branches[branch].staging)

    def dirty(self, branch: str) -> bool:
        return bool(staged_changes(self.tree(branch), self.branches[branch].staging))

    def first_parents(self, cid: str) -> list[str]:
        out = [cid]
        while self.commits[out[-1]].parents:
            out.append(self.commits[out[-1]].parents[0])
        return out

    def ancestors(self, cid: str) -> set[str]:
        out = {cid}
        stack = [cid]
        while stack:
            for p in self.commits[stack.pop()].parents:
                if p not in out:
                    out.add(p)
                    stack.append(p)
        return out

    def best_bases(self, left: str, right: str) -> set[str]:
        common = self.ancestors(left) & self.ancestors(right)
        return {c for c in common if not any(d != c and c in self.ancestors(d) for d in common)}

    def add_commit(self, cid: str, tree: Tree, parents: tuple[str, ...]) -> None:
        assert cid not in self.commits
        generation = max(self.commits[p].generation for p in parents) + 1
        self.commits[cid] = ModelCommit(tree, parents, generation)

    def message(self) -> str:
        return f"change {next(self.messages)}"

    # rules

    @rule(
        data=st.data(),
        path=st.sampled_from(PATHS),
        content=st.sampled_from(CONTENTS),
        metadata=st.sampled_from(METADATA),
        content_type=st.sampled_from(CONTENT_TYPES),
    )
    def write(
        self,
        data: st.DataObject,
        path: str,
        content: bytes,
        metadata: dict[str, str] | None,
        content_type: str | None,
    ) -> None:
        branch = self.pick_branch(data)
        stat = self.catalog.upload_object(
            REPO, branch, path, content, content_type=content_type, metadata=metadata
        )
        assert stat.entry.size == len(content)
        self.branches[branch].staging[path] = Obj(
            content,
            tuple(sorted((metadata or {}).items())),
            content_type or DEFAULT_CONTENT_TYPE,
            stat.entry.address,
        )

    @rule(data=st.data(), path=st.sampled_from(PATHS))
    def delete(self, data: st.DataObject, path: str) -> None:
        branch = self.pick_branch(data)
        if path in self.view(branch):
            self.catalog.delete_object(REPO, branch, path)
            self.branches[branch].staging[path] = None
        else:
            with pytest.raises(ObjectNotFoundError):
                self.catalog.delete_object(REPO, branch, path)

    @rule(
        data=st.data(),
        paths=st.lists(st.sampled_from(PATHS), min_size=2, max_size=4, unique=True),
    )
    def delete_many(self, data: st.DataObject, paths: list[str]) -> None:
        branch = self.pick_branch(data)
        view = self.view(branch)
        missing = self.catalog.delete_objects(REPO, branch, paths)
        assert missing == [p for p in paths if p not in view]
        for p in paths:
            if p in view:
                self.branches[branch].staging[p] = None

    def commit_branch(self, branch: str) -> None:
        model = self.branches[branch]
        parent = self.commits[model.head]
        tree = apply_staging(parent.tree, model.staging)
        message = self.message()
        if tree == parent.tree:
            with pytest.raises(NoChangesError):
                self.catalog.commit(REPO, branch, message)
        else:
            commit = self.catalog.commit(REPO, branch, message, metadata={"n": message}).commit
            assert commit.parents == (model.head,)
            assert commit.message == message
            self.add_commit(commit.id, tree, commit.parents)
            model.head = commit.id
        model.staging = {}

    def settle(self, branch: str, how: str) -> None:
        """Commit or reset ``branch`` before an operation that wants it clean (or not)."""
        if how == "commit":
            self.commit_branch(branch)
        elif how == "reset":
            self.catalog.reset_branch(REPO, branch)
            self.branches[branch].staging = {}

    def write_all(self, branch: str, writes: list[tuple[str, bytes | None]]) -> None:
        """Upload plain objects (``None``: delete it if present) to ``branch``."""
        model = self.branches[branch]
        for path, content in writes:
            if content is not None:
                stat = self.catalog.upload_object(REPO, branch, path, content)
                model.staging[path] = Obj(content, (), DEFAULT_CONTENT_TYPE, stat.entry.address)
            elif path in self.view(branch):
                self.catalog.delete_object(REPO, branch, path)
                model.staging[path] = None

    @rule(data=st.data())
    def commit(self, data: st.DataObject) -> None:
        self.commit_branch(self.pick_branch(data))

    @rule(
        data=st.data(),
        writes=st.lists(
            st.tuples(st.sampled_from(PATHS), st.sampled_from([*CONTENTS, None])),
            min_size=1,
            max_size=4,
        ),
    )
    def write_and_commit(self, data: st.DataObject, writes: list[tuple[str, bytes | None]]) -> None:
        branch = self.pick_branch(data)
        self.write_all(branch, writes)
        self.commit_branch(branch)

    @precondition(lambda self: len(self.branches) < MAX_BRANCHES)
    @rule(data=st.data(), kind=st.sampled_from(["branch", "commit", "ancestor"]))
    def create_branch(self, data: st.DataObject, kind: str) -> None:
        name = f"b{next(self.names)}"
        if kind == "branch":
            ref = self.pick_branch(data, "source")
            cid = self.branches[ref].head
        elif kind == "commit":
            ref = cid = self.pick_commit(data)
        else:
            source = self.pick_branch(data, "source")
            steps = data.draw(st.integers(1, 3), label="steps")
            ref = f"{source}~{steps}"
            history = self.first_parents(self.branches[source].head)
            if steps >= len(history):
                with pytest.raises(RefNotFoundError):
                    self.catalog.create_branch(REPO, name, ref)
                return
            cid = history[steps]
        created = self.catalog.create_branch(REPO, name, ref)
        assert created.commit_id == cid
        self.branches[name] = ModelBranch(cid)

    @precondition(lambda self: len(self.branches) > 1)
    @rule(
        data=st.data(),
        strategy=st.sampled_from(STRATEGIES),
        from_commit=st.sampled_from([False, False, False, True]),
        source_writes=st.lists(
            st.tuples(st.sampled_from(PATHS), st.sampled_from([*CONTENTS, None])),
            min_size=1,
            max_size=3,
        ),
        prepare_dest=st.sampled_from(["", "commit", "reset"]),
    )
    def merge(
        self,
        data: st.DataObject,
        strategy: str | None,
        from_commit: bool,
        source_writes: list[tuple[str, bytes | None]],
        prepare_dest: str,
    ) -> None:
        """Merge a branch, or a commit, into a branch; optionally commit on the source first."""
        dest = self.pick_branch(data, "destination")
        if from_commit:
            source = src_head = self.pick_commit(data)
        else:
            others = sorted(set(self.branches) - {dest})
            source = data.draw(st.sampled_from(others), label="source")
            self.write_all(source, source_writes)
            self.settle(source, "commit" if source_writes else "")
            src_head = self.branches[source].head
        self.settle(dest, prepare_dest)
        self.check_merge(source, src_head, dest, strategy)

    @precondition(lambda self: len(self.branches) > 1)
    @rule(
        data=st.data(),
        strategy=st.sampled_from(STRATEGIES),
        writes=st.lists(
            st.tuples(st.sampled_from(PATHS), st.sampled_from([*CONTENTS, None])),
            min_size=2,
            max_size=4,
        ),
    )
    def criss_cross(
        self, data: st.DataObject, strategy: str | None, writes: list[tuple[str, bytes | None]]
    ) -> None:
        """Commit on two branches, then merge each one's head into the other (old heads)."""
        left, right = data.draw(
            st.lists(st.sampled_from(sorted(self.branches)), min_size=2, max_size=2, unique=True),
            label="branches",
        )
        half = len(writes) // 2
        for branch, part in ((left, writes[:half]), (right, writes[half:])):
            self.settle(branch, "reset")
            self.write_all(branch, part)
            self.commit_branch(branch)
        left_head, right_head = self.branches[left].head, self.branches[right].head
        self.check_merge(right_head, right_head, left, strategy)
        self.check_merge(left_head, left_head, right, strategy)

    def same_tree(self, a: str, b: str) -> bool:
        """Return whether two commits have the same tree ID, as merges compare them.

        Equal records mean equal IDs, except for the empty tree: the initial commit's is ``""``
        while an empty tree written later has a real ID (as in lakeFS), so ask the catalog.
        """
        if self.commits[a].tree != self.commits[b].tree:
            return False
        if self.commits[a].tree:
            return True
        ids = {self.catalog.get_commit(REPO, c).metarange_id for c in (a, b)}
        return len(ids) == 1

    def check_merge(self, source: str, src_head: str, dest: str, strategy: str | None) -> None:
        """Merge ref ``source`` (at commit ``src_head``) into ``dest`` and check the outcome."""
        dst_head = self.branches[dest].head
        if self.dirty(dest):
            with pytest.raises(DirtyBranchError):
                self.catalog.merge(REPO, source, dest, strategy=strategy)
            event("merge: dirty destination")
            return
        base = self.catalog.merge_base(REPO, dest, source).id
        bases = self.best_bases(dst_head, src_head)
        assert base in bases
        if len(bases) > 1:
            event("merge with several best bases")
        base_tree = self.commits[base].tree
        src_tree, dst_tree = self.commits[src_head].tree, self.commits[dst_head].tree
        if self.same_tree(src_head, base):
            with pytest.raises(NoChangesError):
                self.catalog.merge(REPO, source, dest, strategy=strategy)
            event("merge: no changes")
            return
        tree, conflicts = three_way(base_tree, src_tree, dst_tree, strategy)
        if conflicts:
            with pytest.raises(MergeConflictError) as exc:
                self.catalog.merge(REPO, source, dest, strategy=strategy)
            assert exc.value.paths == conflicts
            event("merge conflict")
            return
        if strategy is not None and three_way(base_tree, src_tree, dst_tree, None)[1]:
            event(f"merge conflicts resolved by {strategy}")
        commit = self.catalog.merge(REPO, source, dest, strategy=strategy).commit
        assert commit.parents == (dst_head, src_head)
        assert commit.metadata[MERGE_STRATEGY_KEY] == (strategy or "default")
        event("merge committed")
        self.add_commit(commit.id, tree, commit.parents)
        self.branches[dest].head = commit.id

    @rule(
        data=st.data(),
        kind=st.sampled_from(["path", "prefix", "branch"]),
        path=st.sampled_from(PATHS),
        prefix=st.sampled_from(PREFIXES),
    )
    def reset(self, data: st.DataObject, kind: str, path: str, prefix: str) -> None:
        branch = self.pick_branch(data)
        model = self.branches[branch]
        if kind == "branch":
            self.catalog.reset_branch(REPO, branch)
            model.staging = {}
            return
        if kind == "path":
            dropped = [p for p in model.staging if p == path]
            count = self.catalog.reset_objects(REPO, branch, path, exact=True)
        else:
            dropped = [p for p in model.staging if p.startswith(prefix)]
            count = self.catalog.reset_objects(REPO, branch, prefix, exact=False)
        assert count == len(dropped)
        for p in dropped:
            del model.staging[p]

    def three_way_commit(
        self,
        what: str,
        branch: str,
        target: str,
        parent_number: int,
        run: Callable[[], CommitResult],
    ) -> None:
        """Check a revert or cherry-pick of ``target`` onto ``branch``."""
        model = self.branches[branch]
        if self.dirty(branch):
            with pytest.raises(DirtyBranchError):
                run()
            return
        parents = self.commits[target].parents
        index = max(parent_number, 1) - 1
        if parents and len(parents) > 1 and parent_number < 1 and what == "revert":
            # lakeFS answers this one 409 (a conflict), the other parent errors 400
            with pytest.raises(RevertParentRequiredError):
                run()
            return
        if not parents or (len(parents) > 1 and parent_number < 1) or index >= len(parents):
            with pytest.raises(InvalidRefError):
                run()
            return
        target_tree = self.commits[target].tree
        parent_tree = self.commits[parents[index]].tree
        if what == "revert":
            base, source = target_tree, parent_tree
            same = self.same_tree(target, parents[index])
        else:
            base, source = parent_tree, target_tree
            same = self.same_tree(parents[index], target)
        if same:
            with pytest.raises(NoChangesError):
                run()
            return
        tree, conflicts = three_way(base, source, self.tree(branch), None)
        if conflicts:
            with pytest.raises(MergeConflictError) as exc:
                run()
            assert exc.value.paths == conflicts
            event(f"{what} conflict")
            return
        commit = run().commit
        event(f"{what} committed")
        assert commit.parents == (model.head,)
        self.add_commit(commit.id, tree, commit.parents)
        model.head = commit.id

    @rule(
        data=st.data(),
        parent_number=st.integers(0, 2),
        prepare=st.sampled_from(["", "commit", "reset"]),
    )
    def revert(self, data: st.DataObject, parent_number: int, prepare: str) -> None:
        branch = self.pick_branch(data)
        self.settle(branch, prepare)
        history = self.first_parents(self.branches[branch].head)
        steps = data.draw(st.integers(0, min(len(history), 4) - 1), label="steps")
        ref = f"{branch}~{steps}" if steps else branch
        self.three_way_commit(
            "revert",
            branch,
            history[steps],
            parent_number,
            lambda: self.catalog.revert(REPO, branch, ref, parent_number=parent_number),
        )

    @rule(
        data=st.data(),
        parent_number=st.integers(0, 2),
        prepare=st.sampled_from(["", "commit", "reset"]),
    )
    def cherry_pick(self, data: st.DataObject, parent_number: int, prepare: str) -> None:
        branch = self.pick_branch(data)
        self.settle(branch, prepare)
        target = self.pick_commit(data)
        self.three_way_commit(
            "cherry-pick",
            branch,
            target,
            parent_number,
            lambda: self.catalog.cherry_pick(REPO, branch, target, parent_number=parent_number),
        )

    @rule(
        data=st.data(),
        committed=st.booleans(),
        prefix=st.sampled_from(PREFIXES),
        delimiter=st.sampled_from(["", "/", "-"]),
        amount=st.integers(1, 3),
    )
    def list_pages(
        self, data: st.DataObject, committed: bool, prefix: str, delimiter: str, amount: int
    ) -> None:
        branch = self.pick_branch(data)
        ref, tree = (f"{branch}@", self.tree(branch)) if committed else (branch, self.view(branch))
        got: list[tuple[str, bool]] = []
        after = ""
        for _ in range(len(PATHS) + 2):
            page = self.catalog.list_objects(
                REPO, ref, prefix, after=after, amount=amount, delimiter=delimiter
            )
            names = [(s.path, False) for s in page.objects]
            names += [(p, True) for p in page.common_prefixes]
            names.sort()
            assert len(names) <= amount
            got += names
            if not page.has_more:
                break
            assert page.next_offset == names[-1][0]
            after = page.next_offset
        assert got == listing(tree, prefix, delimiter)

    @rule(data=st.data(), three_dot=st.booleans())
    def diff(self, data: st.DataObject, three_dot: bool) -> None:
        left = self.pick_branch(data, "left")
        right = self.pick_commit(data) if data.draw(st.booleans()) else self.pick_branch(data)
        right_head = self.branches[right].head if right in self.branches else right
        old = self.tree(left)
        if three_dot:
            base = self.catalog.merge_base(REPO, left, right).id
            assert base in self.best_bases(self.branches[left].head, right_head)
            old = self.commits[base].tree
        new = self.commits[right_head].tree
        got = [(d.path, d.type) for d in self.catalog.diff(REPO, left, right, three_dot=three_dot)]
        expected = []
        for path in sorted(set(old) | set(new)):
            if path not in new:
                expected.append((path, DiffType.REMOVED))
            elif path not in old:
                expected.append((path, DiffType.ADDED))
            elif not same(old[path], new[path]):
                expected.append((path, DiffType.CHANGED))
        assert got == expected

    # invariants

    @invariant()
    def heads_match(self) -> None:
        for name, model in self.branches.items():
            assert self.catalog.get_branch(REPO, name).commit_id == model.head
        assert sorted(b.id for b in self.catalog.list_branches(REPO)) == sorted(self.branches)

    @invariant()
    def objects_match(self) -> None:
        for name in self.branches:
            view, tree = self.view(name), self.tree(name)
            for ref, expected in ((name, view), (f"{name}@", tree)):
                got = [describe(s) for s in self.catalog.iter_objects(REPO, ref)]
                assert got == expected_stats(expected), ref
                page = self.catalog.list_objects(REPO, ref, amount=len(PATHS))
                assert [describe(s) for s in page.objects] == expected_stats(expected), ref
                assert not page.has_more and not page.common_prefixes
            for path in PATHS:
                if path in view:
                    assert self.catalog.read_object(REPO, name, path) == view[path].data
                else:
                    with pytest.raises(ObjectNotFoundError):
                        self.catalog.read_object(REPO, name, path)
                if path in tree:
                    assert self.catalog.read_object(REPO, f"{name}@", path) == tree[path].data

    @invariant()
    def uncommitted_match(self) -> None:
        for name, model in self.branches.items():
            got = [(d.path, d.type) for d in self.catalog.diff_uncommitted(REPO, name)]
            assert got == staged_changes(self.tree(name), model.staging), name

    @invariant()
    def history_matches(self) -> None:
        for name, model in self.branches.items():
            log = [c.id for c in self.catalog.log(REPO, name, first_parent=True)]
            assert log == self.first_parents(model.head)
            full = [c.id for c in self.catalog.log(REPO, name)]
            assert len(full) == len(set(full))
            assert set(full) == self.ancestors(model.head)
            position = {c: i for i, c in enumerate(full)}
            for c in full:
                assert all(position[p] > position[c] for p in self.commits[c].parents)
        for cid, model_commit in self.commits.items():
            commit = self.catalog.get_commit(REPO, cid)
            assert commit.compute_id() == cid
            assert commit.parents == model_commit.parents
            assert commit.generation == model_commit.generation


def new_catalog() -> Catalog:
    catalog = open_memory(chunking=ChunkingParams(raggedness=4), clock=itertools.count(1).__next__)
    catalog.create_repository(REPO, "mem://regression", "main")
    return catalog


def test_changes_cancelling_out_on_the_empty_tree_commit_nothing() -> None:
    catalog = new_catalog()
    catalog.upload_object(REPO, "main", "a", b"x")
    catalog.delete_object(REPO, "main", "a")
    with pytest.raises(NoChangesError):
        catalog.commit(REPO, "main", "nothing")
    assert len(list(catalog.log(REPO, "main"))) == 1


def test_merging_an_emptied_branch_into_the_initial_commit_is_a_change() -> None:
    # lakeFS compares tree IDs: only the initial commit has the empty ID "", and clients rely on
    # merging a later commit whose tree is empty into a branch still at the initial commit
    catalog = new_catalog()
    catalog.create_branch(REPO, "side", "main")
    catalog.upload_object(REPO, "side", "a", b"x")
    catalog.commit(REPO, "side", "add")
    catalog.delete_object(REPO, "side", "a")
    emptied = catalog.commit(REPO, "side", "remove").commit
    assert emptied.metarange_id != ""
    assert not list(catalog.iter_objects(REPO, emptied.id))
    merged = catalog.merge(REPO, "side", "main").commit
    assert merged.parents[1] == emptied.id
    assert merged.metarange_id == emptied.metarange_id
    with pytest.raises(NoChangesError):
        catalog.merge(REPO, "side", "main")


def test_listing_resumes_after_an_object_named_like_the_prefix() -> None:
    catalog = new_catalog()
    for path in ("a/", "a/b-c", "a/b/c"):
        catalog.upload_object(REPO, "main", path, b"x")
    first = catalog.list_objects(REPO, "main", "a/", amount=1, delimiter="/")
    assert [s.path for s in first.objects] == ["a/"]
    assert first.has_more and first.next_offset == "a/"
    rest = catalog.list_objects(REPO, "main", "a/", after="a/", delimiter="/")
    assert [s.path for s in rest.objects] == ["a/b-c"]
    assert rest.common_prefixes == ["a/b/"]


FAST = settings(
    max_examples=100,
    stateful_step_count=40,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
SLOW = settings(
    max_examples=200,
    stateful_step_count=80,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


class TestCatalogModel:
    def test_matches_model(self) -> None:
        run_state_machine_as_test(CatalogMachine, settings=FAST)


@pytest.mark.slow
@pytest.mark.timeout(1200)
class TestCatalogModelLong:
    def test_matches_model_long_runs(self) -> None:
        run_state_machine_as_test(CatalogMachine, settings=SLOW)
