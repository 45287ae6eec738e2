"""Resolution of ref expressions to commits: full IDs, branches, tags, ID prefixes, ``~``/``^``."""

from __future__ import annotations

from dataclasses import dataclass, field

from mirror.core.context import CatalogContext
from mirror.core.errors import (
    BranchNotFoundError,
    InvalidRefError,
    RefNotFoundError,
    StagingNotACommitError,
    TagNotFoundError,
)
from mirror.core.ids import BranchID, CommitID, TagID
from mirror.core.model import Branch, Commit, Repository
from mirror.core.refexpr import Modifier, parse_ref

__all__ = ["ResolvedRef", "commit_of", "require_commit_ref", "resolve_ref"]


@dataclass(frozen=True, slots=True)
class ResolvedRef:
    """What a ref expression points at.

    Attributes:
        commit_id: The commit (for a branch, its head).
        branch: The branch, when the expression names one (possibly with ``@`` or ``$``).
        include_staging: Whether reads see the branch's staging area.
        branch_record: The branch record read while resolving, with its stored bytes (a
            read through the branch starts from it instead of reading it again).
    """

    commit_id: CommitID
    branch: BranchID | None = None
    include_staging: bool = False
    branch_record: tuple[Branch, bytes] | None = field(default=None, compare=False)


def _resolve_base(
    ctx: CatalogContext, repo: Repository, base: str
) -> tuple[CommitID, tuple[Branch, bytes] | None]:
    if len(base) == 64 and all(c in "0123456789abcdef" for c in base):
        if ctx.refs.has_commit(repo, base):
            return CommitID(base), None
    try:
        record = ctx.refs.get_branch_raw(repo, BranchID(base))
        return record[0].commit_id, record
    except BranchNotFoundError:
        pass
    try:
        return ctx.refs.get_tag(repo, TagID(base)), None
    except TagNotFoundError:
        pass
    if 0 < len(base) <= 64 and all(c in "0123456789abcdefABCDEF" for c in base):
        found = ctx.refs.commits_with_prefix(repo, base.lower())
        if len(found) == 1:
            return found[0], None
    raise RefNotFoundError(f"ref {base!r} in repository {repo.id!r}")


def resolve_ref(ctx: CatalogContext, repo: Repository, ref: str) -> ResolvedRef:
    """Resolve a ref expression in ``repo``.

    The base is tried as a full commit ID, then a branch, a tag, and a unique commit-ID prefix.

    Raises:
        InvalidRefError: malformed expression, or ``@``/``$`` after something not a branch.
        RefNotFoundError: nothing matches, or not enough parents for a ``~``/``^`` step.
    """
    expr = parse_ref(ref)
    cid, record = _resolve_base(ctx, repo, expr.base)
    branch = BranchID(expr.base) if record is not None else None
    mod = expr.branch_modifier
    if mod is not None:
        if branch is None:
            raise InvalidRefError(f"invalid ref {ref!r}: '{mod.value}' applies only to a branch")
        return ResolvedRef(cid, branch, mod is Modifier.STAGING, record)
    for step, n in expr.steps:
        if step is Modifier.FIRST_PARENT:
            for _ in range(n):
                parents = ctx.refs.get_commit(repo, cid).parents
                if not parents:
                    raise RefNotFoundError(f"ref {ref!r}: not enough ancestors")
                cid = parents[0]
        elif n > 0:
            parents = ctx.refs.get_commit(repo, cid).parents
            if n > len(parents):
                raise RefNotFoundError(f"ref {ref!r}: commit {cid} has {len(parents)} parents")
            cid = parents[n - 1]
    if expr.steps:
        return ResolvedRef(cid)
    return ResolvedRef(cid, branch, branch is not None, record)


def require_commit_ref(ref: str) -> None:
    """Refuse ``branch$`` where a commit is needed: the staging area is not a commit.

    Raises:
        InvalidRefError: ``ref`` is malformed.
        StagingNotACommitError: ``ref`` names a branch's staging area.
    """
    if parse_ref(ref).branch_modifier is Modifier.STAGING:
        raise StagingNotACommitError(f"ref {ref!r}")


def commit_of(ctx: CatalogContext, repo: Repository, ref: str) -> Commit:
    """Return the commit ``ref`` resolves to (a branch's head, without its staging).

    Raises:
        InvalidRefError, RefNotFoundError: see :func:`resolve_ref`.
        StagingNotACommitError: ``ref`` names a branch's staging area (``branch$``).
    """
    require_commit_ref(ref)
    return ctx.refs.get_commit(repo, resolve_ref(ctx, repo, ref).commit_id)
