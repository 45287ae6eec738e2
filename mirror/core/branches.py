"""Branches: creation, deletion, moving the head by compare-and-swap, dropping staged changes."""

from __future__ import annotations

from mirror.core.changes import is_dirty
from mirror.core.context import CatalogContext
from mirror.core.errors import (
    BranchExistsError,
    DefaultBranchDeletionError,
    DirtyBranchError,
    RefPreconditionFailedError,
)
from mirror.core.ids import CommitID
from mirror.core.model import Branch
from mirror.core.protection import check_hard_reset, check_staging_write
from mirror.core.resolve import commit_of, require_commit_ref, resolve_ref
from mirror.core.staging import StagingStore
from mirror.core.validate import validate_branch_id, validate_path

__all__ = [
    "create_branch",
    "delete_branch",
    "hard_reset_branch",
    "reset_branch",
    "reset_objects",
    "set_branch_head",
]


def create_branch(ctx: CatalogContext, repository: str, name: str, source: str) -> Branch:
    """Create a branch at the commit ``source`` resolves to (staging is not copied)."""
    repo = ctx.writable(repository)
    branch_id = validate_branch_id(name)
    require_commit_ref(source)
    cid = resolve_ref(ctx, repo, source).commit_id
    branch = Branch(branch_id, cid, StagingStore.new_token())
    ctx.refs.create_branch(repo, branch, require_writable=True)
    return branch


def delete_branch(ctx: CatalogContext, repository: str, name: str, *, force: bool) -> None:
    """Delete a branch and its staged changes; the default branch cannot be deleted.

    Raises:
        DefaultBranchDeletionError: the branch is the default branch.
    """
    repo = ctx.writable(repository, force)
    branch_id = validate_branch_id(name)
    if branch_id == repo.default_branch:
        raise DefaultBranchDeletionError(f"{name!r} of repository {repo.id!r}")
    try:
        branch = ctx.refs.delete_branch(repo, branch_id, require_writable=not force)
    except RefPreconditionFailedError:
        if not force:
            # a demotion fences every branch: say so rather than that the branch moved
            ctx.refs.require_writable(repo)
        raise
    for token in branch.tokens:
        ctx.staging.drop_token(token)


def set_branch_head(
    ctx: CatalogContext,
    repository: str,
    name: str,
    commit: str,
    expected: str | None,
    *,
    force: bool,
) -> Branch:
    """Point a branch at ``commit`` if it now points at ``expected`` (``None``: create it).

    Raises:
        RefPreconditionFailedError: the head is not ``expected``.
    """
    repo = ctx.writable(repository, force)
    branch_id = validate_branch_id(name)
    cid = ctx.refs.get_commit(repo, CommitID(commit)).id
    if expected is None:
        branch = Branch(branch_id, cid, StagingStore.new_token())
        try:
            ctx.refs.create_branch(repo, branch, require_writable=not force)
        except BranchExistsError as exc:
            found = ctx.refs.get_branch(repo, branch_id).commit_id
            raise RefPreconditionFailedError(branch_id, None, found) from exc
        return branch
    current, raw = ctx.refs.get_branch_raw(repo, branch_id)
    if current.commit_id != expected:
        raise RefPreconditionFailedError(branch_id, expected, current.commit_id)
    new = Branch(branch_id, cid, current.staging_token, current.sealed_tokens)
    ctx.refs.set_branch_if(repo, new, raw, require_writable=not force)
    return new


def reset_branch(ctx: CatalogContext, repository: str, branch: str) -> None:
    """Drop every staged change of a branch."""
    repo = ctx.writable(repository)
    branch_id = validate_branch_id(branch)
    check_staging_write(ctx.kv, repo, branch_id)

    def attempt() -> Branch:
        current, raw = ctx.refs.get_branch_raw(repo, branch_id)
        cleared = Branch(branch_id, current.commit_id, StagingStore.new_token(), ())
        ctx.refs.set_branch_if(repo, cleared, raw)
        return current

    old = ctx.retry(f"reset branch {branch!r}", attempt)
    for token in old.tokens:
        ctx.staging.drop_token(token)


def reset_objects(
    ctx: CatalogContext, repository: str, branch: str, prefix: str, *, exact: bool
) -> int:
    """Drop staged changes at one path (``exact``) or under a prefix; return how many paths."""
    repo = ctx.writable(repository)
    branch_id = validate_branch_id(branch)
    if exact:
        validate_path(prefix)
    current = ctx.refs.get_branch(repo, branch_id)
    check_staging_write(ctx.kv, repo, branch_id)
    dropped: set[str] = set()
    for token in current.tokens:
        for path, _ in list(ctx.staging.scan(token, prefix)):
            if exact and path != prefix:
                continue
            ctx.staging.drop(token, path)
            dropped.add(path)
    return len(dropped)


def hard_reset_branch(ctx: CatalogContext, repository: str, branch: str, ref: str) -> Branch:
    """Point a branch without uncommitted changes at the commit ``ref`` resolves to.

    Raises:
        ProtectedBranchError: a protection rule covers the branch.
        DirtyBranchError: the branch has uncommitted changes.
    """
    repo = ctx.writable(repository)
    branch_id = validate_branch_id(branch)
    check_hard_reset(ctx.kv, repo, branch_id)
    target = commit_of(ctx, repo, ref).id

    def attempt() -> Branch:
        current, raw = ctx.refs.get_branch_raw(repo, branch_id)
        if is_dirty(ctx, repo, current):
            raise DirtyBranchError(f"hard reset of branch {branch!r}")
        moved = Branch(branch_id, target, current.staging_token, current.sealed_tokens)
        ctx.refs.set_branch_if(repo, moved, raw)
        return moved

    return ctx.retry(f"hard reset of branch {branch!r}", attempt)
