"""Repository roles: demote a source to a read-only mirror, promote a mirror, preserve a branch.

A role change is one compare-and-swap on the repository record. Every ordinary write reads the
repository record *after* the branch record it is about to replace (see
:meth:`~mirror.core.refs.RefStore.set_branch_if`), and a demotion, once the record says
read-only, rewrites every branch's ``fence``. So a write racing a demotion either reads the
record before the demotion's swap, and then its branch swap lands before the fence (the
demotion answers after the fence, with the write in the head), or fails the branch swap and is
refused when it retries, or reads the record after the swap and is refused. No write is
acknowledged after a demotion answered that the heads it fenced do not hold. The fence also
replaces every staging token and drops the uncommitted changes (never replicated): a staged
write reads the record before and after writing, so one racing a demotion lands only in a
dropped token and is refused.

The promotion record (free JSON, the newest kept) lives under the repository's instance prefix,
so several server processes read the same one and a re-created repository starts without one.
"""

from __future__ import annotations

import dataclasses
import uuid
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from mirror.core import commits
from mirror.core.context import CatalogContext
from mirror.core.errors import (
    BranchExistsError,
    RepositoryNotAMirrorError,
    RepositoryPreconditionFailedError,
    RepositoryRoleConflictError,
    TooManyTriesError,
)
from mirror.core.ids import BranchID, CommitID
from mirror.core.model import Branch, Commit, Repository, decode_json, encode_json
from mirror.core.staging import StagingStore
from mirror.core.validate import validate_branch_id
from mirror.errors import InvalidValueError

__all__ = [
    "demote_repository",
    "get_promotion",
    "preserve_branch",
    "promote_repository",
]


def _swap_role(
    ctx: CatalogContext,
    name: str,
    change: Callable[[Repository], Repository | None],
    what: str,
) -> tuple[Repository, bool]:
    """Apply ``change(repo) -> Repository | None`` to the record by compare-and-swap.

    ``change`` returns the new record, or ``None`` to leave the record as it is (a retry of a
    change already made); it raises to refuse.

    Returns:
        The record now stored, and whether this call changed it.
    """
    for _ in range(ctx.max_tries):
        repo, raw = ctx.refs.get_repository_raw(ctx.repository(name).id)
        new = change(repo)
        if new is None:
            return repo, False
        try:
            ctx.refs.set_repository_if(new, raw)
        except RepositoryPreconditionFailedError:
            continue
        return new, True
    raise TooManyTriesError(f"{what} of repository {name!r}: the record kept changing")


def _fence(ctx: CatalogContext, repo: Repository, branch_id: BranchID) -> None:
    """Fence the branch (every swap prepared before now fails) and drop its uncommitted changes.

    A mirror branch shows its source's commits only; changes staged before the demotion would
    otherwise show on top of every head the mirror moves to, and go into the first commit after
    a later promotion although their commit was refused.
    """

    def attempt() -> Branch:
        current, raw = ctx.refs.get_branch_raw(repo, branch_id)
        fenced = dataclasses.replace(
            current,
            fence=uuid.uuid4().hex,
            staging_token=StagingStore.new_token(),
            sealed_tokens=(),
        )
        ctx.refs.set_branch_if(repo, fenced, raw, require_writable=False)
        return current

    old = ctx.retry(f"fence branch {branch_id!r}", attempt)
    for token in old.tokens:
        ctx.staging.drop_token(token)


def demote_repository(ctx: CatalogContext, name: str, mirror_of: str) -> Repository:
    """Make a repository a read-only mirror of ``mirror_of``; every branch is fenced.

    Demoting again with the same ``mirror_of`` fences the branches again and succeeds, so a
    demotion cut short is completed by its retry.

    Raises:
        RepositoryNotFoundError: no such repository.
        RepositoryRoleConflictError: it is read-only already, a mirror of something else.
        InvalidValueError: ``mirror_of`` is empty.
    """
    if not mirror_of.strip():
        raise InvalidValueError("mirror_of: must not be empty")

    def change(repo: Repository) -> Repository | None:
        if repo.read_only:
            if repo.mirror_of == mirror_of:
                return None
            raise RepositoryRoleConflictError(
                f"repository {repo.id!r} is already read-only"
                + (f", a mirror of {repo.mirror_of!r}" if repo.mirror_of else "")
                + f"; not demoting it to a mirror of {mirror_of!r}"
            )
        return dataclasses.replace(repo, read_only=True, mirror_of=mirror_of)

    repo, _ = _swap_role(ctx, name, change, "demotion")
    for branch in list(ctx.refs.list_branches(repo)):
        _fence(ctx, repo, branch.id)
    return repo


def promote_repository(ctx: CatalogContext, name: str, promotion: Mapping[str, Any]) -> Repository:
    """Make a mirror writable (no ``mirror_of``) and keep ``promotion`` as its newest record.

    Raises:
        RepositoryNotFoundError: no such repository.
        RepositoryNotAMirrorError: the repository is not a mirror (not read-only).
    """
    record = encode_json(dict(promotion))

    def change(repo: Repository) -> Repository:
        if not repo.read_only:
            raise RepositoryNotAMirrorError(repo.id)
        return dataclasses.replace(repo, read_only=False, mirror_of=None)

    repo, _ = _swap_role(ctx, name, change, "promotion")
    # written once the swap succeeded: a record always names a promotion that happened
    ctx.refs.set_promotion(repo, record)
    return repo


def get_promotion(ctx: CatalogContext, name: str) -> dict[str, Any]:
    """Return the newest promotion record of a repository, as it was given.

    Raises:
        RepositoryNotFoundError: no such repository.
        PromotionNotFoundError: it was never promoted.
    """
    return decode_json(ctx.refs.get_promotion(ctx.repository(name)))


def preserve_branch(
    ctx: CatalogContext,
    name: str,
    branch: str,
    head: str,
    records: Sequence[Commit],
) -> Branch:
    """Import commit records (parents first, IDs verified) and create ``branch`` at ``head``.

    Works on a writable or a read-only repository: it copies commits a region accepted but
    never replicated, to keep them on a branch of their own.

    Raises:
        BranchExistsError: the branch exists (before anything is imported).
        InvalidRefError: a record's ID does not match its content.
        CommitNotFoundError: a parent, or ``head``, is in neither the repository nor ``records``.
    """
    repo = ctx.repository(name)
    branch_id = validate_branch_id(branch)
    if ctx.refs.branch_exists(repo, branch_id):
        raise BranchExistsError(f"{branch_id!r} in repository {repo.id!r}")
    for record in records:
        commits.import_commit(ctx, name, record, force=True)
    target = ctx.refs.get_commit(repo, CommitID(head)).id
    created = Branch(branch_id, target, StagingStore.new_token())
    ctx.refs.create_branch(repo, created)
    return created
