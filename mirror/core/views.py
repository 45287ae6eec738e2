"""What a read of a ref sees, kept consistent with commits that move a branch meanwhile.

A branch is a head commit plus staging tokens (the current one and the sealed ones a commit is
taking). Reads see both; writes go to the current token, which a commit may seal at any moment.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

from mirror.core.context import CatalogContext
from mirror.core.errors import TooManyTriesError
from mirror.core.ids import BranchID, CommitID, StagingToken
from mirror.core.model import Branch, Entry, Repository
from mirror.core.resolve import ResolvedRef
from mirror.core.staging import Tombstone

__all__ = ["View", "read_at", "read_on_branch", "value_at", "write_staged"]

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class View:
    """What one read sees of a ref: a head commit and, on a branch, its staging tokens."""

    commit_id: CommitID
    tokens: tuple[StagingToken, ...] = ()


def read_on_branch(
    ctx: CatalogContext,
    repo: Repository,
    branch_id: BranchID,
    read: Callable[[View], T],
    record: tuple[Branch, bytes] | None = None,
) -> T:
    """Return what ``read`` finds in a view of a branch that was still current when it ended.

    A commit drops the staging tokens it committed right after it moves the branch. A read
    that took the branch before the move and a token after the drop would miss a staged
    object, or answer the value of the old head's tree instead. So the branch is read again
    once ``read`` is done, and the read starts over if the branch changed meanwhile.
    ``read`` must not leave anything to be read lazily later. ``record``: the branch record
    (and its stored bytes) just read by the caller, to start from instead of reading it again.

    Raises:
        BranchNotFoundError: the branch is gone.
        TooManyTriesError: the branch changed during every attempt.
    """
    branch, raw = record if record is not None else ctx.refs.get_branch_raw(repo, branch_id)
    for _ in range(ctx.max_tries):
        result = read(View(branch.commit_id, branch.tokens))
        again, raw_again = ctx.refs.get_branch_raw(repo, branch_id)
        if raw_again == raw:
            return result
        branch, raw = again, raw_again
    raise TooManyTriesError(
        f"read of branch {branch_id!r}: the branch changed during every attempt"
    )


def read_at(
    ctx: CatalogContext, repo: Repository, resolved: ResolvedRef, read: Callable[[View], T]
) -> T:
    """Return what ``read`` finds at ``resolved`` (see :func:`read_on_branch` for branches)."""
    if resolved.include_staging and resolved.branch is not None:
        return read_on_branch(ctx, repo, resolved.branch, read, resolved.branch_record)
    return read(View(resolved.commit_id))


def value_at(ctx: CatalogContext, repo: Repository, view: View, path: str) -> Entry | None:
    """Return the entry ``view`` sees at ``path``: staged first, then committed."""
    for token in view.tokens:
        staged = ctx.staging.get(token, path)
        if staged is not None:
            return None if isinstance(staged, Tombstone) else staged
    head = ctx.refs.get_commit(repo, view.commit_id)
    return ctx.committed(repo).lookup(head.metarange_id, path)


def write_staged(
    ctx: CatalogContext,
    repo: Repository,
    branch_id: BranchID,
    write: Callable[[StagingToken], None],
    *,
    require_writable: bool = True,
) -> None:
    """Run ``write`` on the branch's staging token until the token outlives the write.

    With ``require_writable`` the repository record is read once the write is done, so a
    write is never acknowledged after a demotion of the repository answered.

    Raises:
        BranchNotFoundError: the branch is gone.
        RepositoryReadOnlyError: ``require_writable`` and the repository is read-only now.
        TooManyTriesError: the staging token changed during every attempt.
    """
    # a commit may seal the token between our read and our write; if the token changed,
    # write again to the new one (writes are idempotent)
    for _ in range(ctx.max_tries):
        token = ctx.refs.get_branch(repo, branch_id).staging_token
        if require_writable:
            # read after the token: a demotion replaces and drops the tokens of every branch
            # after marking the repository read-only, so a write that passes here lands in a
            # token the demotion drops (or orphans), never in a mirror branch's staging
            ctx.refs.require_writable(repo)
        write(token)
        if ctx.refs.get_branch(repo, branch_id).staging_token == token:
            if require_writable:
                ctx.refs.require_writable(repo)
            return
    raise TooManyTriesError(f"write to branch {branch_id!r}: staging token kept changing")
