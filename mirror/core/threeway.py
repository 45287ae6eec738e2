"""Commits made by a three-way merge onto a branch: merge, revert and cherry-pick."""

from __future__ import annotations

from collections.abc import Callable, Mapping

from mirror.core.changes import is_dirty
from mirror.core.commits import CommitResult, new_commit
from mirror.core.committed import WriteStats
from mirror.core.context import CatalogContext
from mirror.core.errors import (
    CherryPickParentRequiredError,
    DirtyBranchError,
    NoChangesError,
    ParentOutOfRangeError,
    RevertParentRequiredError,
)
from mirror.core.history import merge_bases
from mirror.core.ids import MetaRangeID
from mirror.core.merge import MergeStrategy, merge_changes
from mirror.core.model import Branch, Commit, Repository
from mirror.core.resolve import commit_of
from mirror.core.tree_writer import apply_changes
from mirror.core.validate import validate_branch_id, validate_metadata

__all__ = [
    "CHERRY_PICK_COMMITTER",
    "CHERRY_PICK_ORIGIN",
    "MERGE_STRATEGY_KEY",
    "cherry_pick",
    "merge",
    "revert",
]

MERGE_STRATEGY_KEY = ".lakefs.merge.strategy"
CHERRY_PICK_ORIGIN = "cherry-pick-origin"
CHERRY_PICK_COMMITTER = "cherry-pick-committer"

# (base tree, source tree, destination tree, strategy, the commit the changes come from)
_Plan = tuple[str, str, str, MergeStrategy, Commit | None]


def _apply_three_way(
    ctx: CatalogContext,
    repository: str,
    branch: str,
    what: str,
    make: Callable[[Repository, Commit], _Plan],
    build: Callable[[Commit, MetaRangeID, Commit | None], Commit],
    *,
    allow_empty: bool,
    force: bool = False,
    before_move: Callable[[Commit, Commit | None], None] | None = None,
) -> CommitResult:
    repo = ctx.writable(repository, force)
    branch_id = validate_branch_id(branch)
    stats = WriteStats()

    def attempt() -> Commit:
        current, raw = ctx.refs.get_branch_raw(repo, branch_id)
        if is_dirty(ctx, repo, current):
            raise DirtyBranchError(f"{what}: branch {branch!r} has uncommitted changes")
        head = ctx.refs.get_commit(repo, current.commit_id)
        base, source, dest, strategy, other = make(repo, head)
        store = ctx.committed(repo)
        # tree IDs decide, as in lakeFS: the initial commit's empty tree is "", an empty tree
        # written later has a real ID, and merging that one is a change
        if source == base and not allow_empty:
            raise NoChangesError(f"{what} into branch {branch!r}")
        if dest == base:
            mid = MetaRangeID(source)
        else:
            changes = merge_changes(store, base, source, dest, strategy, stats)
            mid, _ = apply_changes(store, ctx.chunking, dest, changes, stats)
        commit = build(head, mid, other)
        if before_move is not None:
            # pre-merge hooks see the new commit's ID; one that aborts leaves no record behind
            before_move(commit, other)
        ctx.refs.add_commit(repo, commit)
        moved = Branch(branch_id, commit.id, current.staging_token, current.sealed_tokens)
        ctx.refs.set_branch_if(repo, moved, raw, require_writable=not force)
        return commit

    return CommitResult(ctx.retry(f"{what} into branch {branch!r}", attempt), stats)


def merge(
    ctx: CatalogContext,
    repository: str,
    source: str,
    destination: str,
    *,
    committer: str,
    message: str | None,
    metadata: Mapping[str, str] | None,
    strategy: str | MergeStrategy | None,
    allow_empty: bool,
    squash: bool,
    force: bool,
    before_move: Callable[[Commit, Commit | None], None] | None = None,
) -> CommitResult:
    """Merge ``source`` (any ref) into branch ``destination`` with a two-parent commit.

    With ``squash`` the commit has the destination's head as its only parent. ``before_move``
    is called with the merge commit and the source commit before either is stored; what it
    raises aborts the merge.
    """
    how = MergeStrategy.parse(strategy)
    meta = validate_metadata(metadata)
    text = message or f"Merge '{source}' into '{destination}'"

    def make(repo: Repository, head: Commit) -> _Plan:
        src = commit_of(ctx, repo, source)
        base = merge_bases(lambda c: ctx.refs.get_commit(repo, c), head.id, src.id)[0]
        return base.metarange_id, src.metarange_id, head.metarange_id, how, src

    def build(head: Commit, mid: MetaRangeID, src: Commit | None) -> Commit:
        assert src is not None
        parents = (head.id,) if squash else (head.id, src.id)
        return new_commit(
            committer,
            text,
            mid,
            ctx.now(),
            {**meta, MERGE_STRATEGY_KEY: how.value},
            parents,
            max(head.generation, src.generation) + 1,
        )

    return _apply_three_way(
        ctx,
        repository,
        destination,
        f"merge of {source!r}",
        make,
        build,
        allow_empty=allow_empty,
        force=force,
        before_move=before_move,
    )


def _pick_parent(
    ctx: CatalogContext,
    repo: Repository,
    commit: Commit,
    parent_number: int,
    required: type[RevertParentRequiredError | CherryPickParentRequiredError],
) -> Commit:
    if not commit.parents:
        raise ParentOutOfRangeError(f"commit {commit.id} has no parent")
    if len(commit.parents) > 1 and parent_number < 1:
        raise required(
            f"commit {commit.id} is a merge commit: give a parent number 1..{len(commit.parents)}"
        )
    index = max(parent_number, 1) - 1
    if index >= len(commit.parents):
        raise ParentOutOfRangeError(
            f"commit {commit.id} has {len(commit.parents)} parent(s), not {parent_number}"
        )
    return ctx.refs.get_commit(repo, commit.parents[index])


def revert(
    ctx: CatalogContext,
    repository: str,
    branch: str,
    ref: str,
    *,
    parent_number: int,
    committer: str,
    allow_empty: bool,
    message: str | None,
) -> CommitResult:
    """Commit onto ``branch`` the inverse of the changes ``ref`` made to its parent."""

    def make(repo: Repository, head: Commit) -> _Plan:
        target = commit_of(ctx, repo, ref)
        parent = _pick_parent(ctx, repo, target, parent_number, RevertParentRequiredError)
        return (
            target.metarange_id,
            parent.metarange_id,
            head.metarange_id,
            MergeStrategy.NONE,
            target,
        )

    def build(head: Commit, mid: MetaRangeID, target: Commit | None) -> Commit:
        assert target is not None
        return new_commit(
            committer,
            message or f"Revert {target.id}",
            mid,
            ctx.now(),
            {},
            (head.id,),
            head.generation + 1,
        )

    return _apply_three_way(
        ctx, repository, branch, f"revert of {ref!r}", make, build, allow_empty=allow_empty
    )


def cherry_pick(
    ctx: CatalogContext,
    repository: str,
    branch: str,
    ref: str,
    *,
    parent_number: int,
    committer: str,
) -> CommitResult:
    """Apply the changes ``ref`` made to its parent onto ``branch`` as a new commit."""

    def make(repo: Repository, head: Commit) -> _Plan:
        target = commit_of(ctx, repo, ref)
        parent = _pick_parent(ctx, repo, target, parent_number, CherryPickParentRequiredError)
        return (
            parent.metarange_id,
            target.metarange_id,
            head.metarange_id,
            MergeStrategy.NONE,
            target,
        )

    def build(head: Commit, mid: MetaRangeID, target: Commit | None) -> Commit:
        assert target is not None
        meta = {
            **target.metadata,
            CHERRY_PICK_ORIGIN: target.id,
            CHERRY_PICK_COMMITTER: target.committer,
        }
        return new_commit(
            committer, target.message, mid, ctx.now(), meta, (head.id,), head.generation + 1
        )

    return _apply_three_way(
        ctx, repository, branch, f"cherry-pick of {ref!r}", make, build, allow_empty=False
    )
