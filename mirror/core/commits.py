"""Commits: new records, committing staged changes or a stream, imports, history of a ref."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field

from mirror.core.committed import WriteStats
from mirror.core.context import CatalogContext
from mirror.core.errors import (
    CommitNotFoundError,
    InvalidRefError,
    NoChangesError,
    RefPreconditionFailedError,
    TooManyTriesError,
)
from mirror.core.history import first_parent_history, merge_bases, time_ordered_history
from mirror.core.ids import BranchID, CommitID, MetaRangeID, StagingToken, commit_id
from mirror.core.model import Branch, Commit, Entry, Repository
from mirror.core.protection import check_commit
from mirror.core.resolve import resolve_ref
from mirror.core.staging import StagingStore, Tombstone
from mirror.core.tree_writer import apply_changes
from mirror.core.validate import validate_branch_id, validate_metadata

__all__ = [
    "CommitResult",
    "commit_staged",
    "commit_tree",
    "import_commit",
    "log",
    "merge_base",
    "new_commit",
]


@dataclass(frozen=True, slots=True)
class CommitResult:
    """A new commit and what writing it cost."""

    commit: Commit
    stats: WriteStats = field(default_factory=WriteStats)


def new_commit(
    committer: str,
    message: str,
    metarange: MetaRangeID,
    date: int,
    metadata: Mapping[str, str],
    parents: tuple[CommitID, ...],
    generation: int = 1,
) -> Commit:
    """Return a commit record whose ID derives from its content."""
    cid = commit_id(
        committer=committer,
        message=message,
        metarange_id=metarange,
        creation_date=date,
        metadata=metadata,
        parents=parents,
    )
    return Commit(cid, committer, message, metarange, date, parents, dict(metadata), generation)


def commit_staged(
    ctx: CatalogContext,
    repository: str,
    branch: str,
    message: str,
    *,
    committer: str,
    metadata: Mapping[str, str] | None,
    allow_empty: bool,
    date: int | None,
) -> CommitResult:
    """Commit a branch's staged changes: seal, write the tree, add the commit, move the branch.

    Raises:
        NoChangesError: nothing to commit and not ``allow_empty``.
        TooManyTriesError: lost the branch CAS too many times.
    """
    repo = ctx.writable(repository)
    branch_id = validate_branch_id(branch)
    meta = validate_metadata(metadata)
    check_commit(ctx.kv, repo, branch_id)

    def seal() -> tuple[StagingToken, ...]:
        current, raw = ctx.refs.get_branch_raw(repo, branch_id)
        if ctx.staging.is_empty(current.staging_token):
            if not current.sealed_tokens and not allow_empty:
                ctx.refs.require_writable(repo)  # emptied by a demotion: read-only, say so
                raise NoChangesError(f"nothing to commit on branch {branch!r}")
            return current.sealed_tokens
        sealed = Branch(
            branch_id,
            current.commit_id,
            StagingStore.new_token(),
            (current.staging_token, *current.sealed_tokens),
        )
        ctx.refs.set_branch_if(repo, sealed, raw)
        return sealed.sealed_tokens

    # This commit answers for the tokens sealed when it starts. Tokens sealed later belong to
    # the commits that sealed them, so their seals never make this one start over.
    mine = set(ctx.retry(f"seal branch {branch!r}", seal))

    def attempt() -> tuple[Commit, WriteStats]:
        current = ctx.refs.get_branch(repo, branch_id)
        # commits take the oldest sealed tokens, so what is left of ours is a suffix
        keep = len(current.sealed_tokens)
        while keep > 0 and current.sealed_tokens[keep - 1] in mine:
            keep -= 1
        taken = current.sealed_tokens[keep:]
        if not taken and not allow_empty:
            # a demotion drops the staged changes of every branch: say the repository is
            # read-only rather than that there was nothing to commit
            ctx.refs.require_writable(repo)
            raise NoChangesError(f"nothing to commit on branch {branch!r}")
        parent = ctx.refs.get_commit(repo, current.commit_id)
        changes = (
            (p, None if isinstance(v, Tombstone) else v) for p, v in ctx.staging.iterate(taken)
        )
        mid, applied = apply_changes(
            ctx.committed(repo), ctx.chunking, parent.metarange_id, changes, WriteStats()
        )
        # compare counts, not IDs: the initial commit's empty tree has ID "", an empty tree
        # written later has a real ID
        if applied.changes == 0 and not allow_empty:
            _release_sealed(ctx, repo, branch_id, parent.id, taken, parent.id)
            raise NoChangesError(f"nothing to commit on branch {branch!r}")
        commit = new_commit(
            committer,
            message,
            mid,
            date if date is not None else ctx.now(),
            meta,
            (parent.id,),
            parent.generation + 1,
        )
        ctx.refs.add_commit(repo, commit)
        _release_sealed(ctx, repo, branch_id, parent.id, taken, commit.id)
        return commit, applied

    commit, stats = ctx.retry(f"commit on branch {branch!r}", attempt)
    return CommitResult(commit, stats)


def _release_sealed(
    ctx: CatalogContext,
    repo: Repository,
    branch_id: BranchID,
    parent: CommitID,
    taken: tuple[StagingToken, ...],
    head: CommitID,
) -> None:
    """Move the branch from ``parent`` to ``head`` and drop the committed ``taken`` tokens.

    Tokens sealed meanwhile stay sealed on the branch: losing the CAS to such a seal only
    means reading the branch again.

    Raises:
        RefPreconditionFailedError: the head is no longer ``parent``, or ``taken`` is no
            longer the oldest run of sealed tokens (another commit took them).
    """
    for _ in range(ctx.max_tries):
        current, raw = ctx.refs.get_branch_raw(repo, branch_id)
        keep = len(current.sealed_tokens) - len(taken)
        if current.commit_id != parent or keep < 0 or current.sealed_tokens[keep:] != taken:
            raise RefPreconditionFailedError(branch_id, parent, current.commit_id)
        moved = Branch(branch_id, head, current.staging_token, current.sealed_tokens[:keep])
        try:
            ctx.refs.set_branch_if(repo, moved, raw)
        except RefPreconditionFailedError:
            continue
        for token in taken:
            ctx.staging.drop_token(token)
        return
    raise TooManyTriesError(f"commit on branch {branch_id!r}: sealed tokens kept changing")


def commit_tree(
    ctx: CatalogContext,
    repository: str,
    branch: str,
    changes: Iterable[tuple[str, Entry | None]],
    message: str,
    *,
    committer: str,
    metadata: Mapping[str, str] | None,
    date: int | None,
) -> CommitResult:
    """Commit sorted ``changes`` (``None`` deletes) straight onto the branch head."""
    repo = ctx.writable(repository)
    branch_id = validate_branch_id(branch)
    meta = validate_metadata(metadata)
    current, raw = ctx.refs.get_branch_raw(repo, branch_id)
    check_commit(ctx.kv, repo, branch_id)
    parent = ctx.refs.get_commit(repo, current.commit_id)
    mid, stats = apply_changes(ctx.committed(repo), ctx.chunking, parent.metarange_id, changes)
    commit = new_commit(
        committer,
        message,
        mid,
        date if date is not None else ctx.now(),
        meta,
        (parent.id,),
        parent.generation + 1,
    )
    ctx.refs.add_commit(repo, commit)
    moved = Branch(branch_id, commit.id, current.staging_token, current.sealed_tokens)
    ctx.refs.set_branch_if(repo, moved, raw)
    return CommitResult(commit, stats)


def import_commit(ctx: CatalogContext, repository: str, commit: Commit, *, force: bool) -> None:
    """Add a commit record made elsewhere, after checking its ID against its content.

    Raises:
        InvalidRefError: the ID does not match the content.
        CommitNotFoundError: a parent is missing.
    """
    repo = ctx.writable(repository, force)
    if commit.compute_id() != commit.id:
        raise InvalidRefError(f"commit {commit.id}: ID does not match its content")
    for p in commit.parents:
        if not ctx.refs.has_commit(repo, p):
            raise CommitNotFoundError(f"commit {commit.id}: parent {p} not found; import it first")
    ctx.refs.add_commit(repo, commit)


def log(
    ctx: CatalogContext, repository: str | Repository, ref: str, *, first_parent: bool
) -> Iterator[Commit]:
    """Yield the history of ``ref``: all ancestors newest first, or only first parents."""
    repo = ctx.record(repository)
    head = resolve_ref(ctx, repo, ref).commit_id

    def get(c: CommitID) -> Commit:
        return ctx.refs.get_commit(repo, c)

    if first_parent:
        return first_parent_history(get, head)
    return time_ordered_history(get, head)


def merge_base(ctx: CatalogContext, repository: str, left: str, right: str) -> Commit:
    """Return git's best common ancestor of two refs.

    Raises:
        NoMergeBaseError: the refs share no ancestor.
    """
    repo = ctx.repository(repository)
    a = resolve_ref(ctx, repo, left).commit_id
    b = resolve_ref(ctx, repo, right).commit_id
    return merge_bases(lambda c: ctx.refs.get_commit(repo, c), a, b)[0]
