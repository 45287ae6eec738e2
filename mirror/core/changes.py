"""What changed: between the commits of two refs, or staged on a branch against its head."""

from __future__ import annotations

from collections.abc import Iterator

from mirror.core.context import CatalogContext
from mirror.core.diff import TreeDiff, diff_trees
from mirror.core.history import merge_bases
from mirror.core.model import Branch, DiffEntry, DiffType, Repository
from mirror.core.resolve import commit_of
from mirror.core.staging import Tombstone
from mirror.core.validate import validate_branch_id

__all__ = ["diff_refs", "diff_uncommitted", "is_dirty", "uncommitted"]


def diff_refs(
    ctx: CatalogContext, repository: str, left: str, right: str, *, three_dot: bool
) -> TreeDiff:
    """Return the differences between the commits of two refs (``three_dot``: base to right)."""
    repo = ctx.repository(repository)
    lc = commit_of(ctx, repo, left)
    rc = commit_of(ctx, repo, right)
    if three_dot:
        lc = merge_bases(lambda c: ctx.refs.get_commit(repo, c), lc.id, rc.id)[0]
    return diff_trees(ctx.committed(repo), lc.metarange_id, rc.metarange_id)


def diff_uncommitted(
    ctx: CatalogContext, repository: str, branch: str, prefix: str
) -> Iterator[DiffEntry]:
    """Yield the staged changes of a branch against its head commit, in path order."""
    repo = ctx.repository(repository)
    current = ctx.refs.get_branch(repo, validate_branch_id(branch))
    return uncommitted(ctx, repo, current, prefix)


def uncommitted(
    ctx: CatalogContext, repo: Repository, branch: Branch, prefix: str = ""
) -> Iterator[DiffEntry]:
    """Yield the staged changes of ``branch`` against its head commit, in path order."""
    head = ctx.refs.get_commit(repo, branch.commit_id)
    store = ctx.committed(repo)
    for path, value in ctx.staging.iterate(branch.tokens, prefix):
        old = store.lookup(head.metarange_id, path)
        if isinstance(value, Tombstone):
            if old is not None:
                yield DiffEntry(path, DiffType.REMOVED, old, None)
        elif old is None:
            yield DiffEntry(path, DiffType.ADDED, None, value)
        elif old.identity != value.identity:
            yield DiffEntry(path, DiffType.CHANGED, old, value)


def is_dirty(ctx: CatalogContext, repo: Repository, branch: Branch) -> bool:
    """Return whether ``branch`` has staged changes that differ from its head."""
    return next(uncommitted(ctx, repo, branch), None) is not None
