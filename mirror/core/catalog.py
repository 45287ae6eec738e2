"""The public Python API of the versioning core: repositories, branches, objects, commits.

Everything above the core (the HTTP API, the replicant, Spark, the CLI) goes through
:class:`Catalog`. It holds no state of its own beyond caches: refs and staging live in the KV,
objects and committed trees in each repository's storage namespace.

:class:`Catalog` is the front of the core: each method hands its work to the module of its
concept (``repositories``, ``resolve``, ``branches``, ``objects``, ``listing``, ``changes``,
``commits``, ``threeway``), which all work on one :class:`~mirror.core.context.CatalogContext`.
Objects and diffs are in :class:`~mirror.core.catalog_objects.ObjectsFacade`, mixed in.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Any

from mirror.block.protocol import BlockStore, NamespaceResolver
from mirror.core import (
    announce,
    branches,
    commits,
    repositories,
    roles,
    threeway,
)
from mirror.core.catalog_objects import ObjectsFacade
from mirror.core.commits import CommitResult
from mirror.core.committed import ChunkingParams, CommittedStore
from mirror.core.context import CatalogContext
from mirror.core.deletion import RepositoryCleanup, RepositoryDeletion
from mirror.core.errors import BranchNotFoundError
from mirror.core.hooks import HookAbortError, HookEvent, HookRun, Hooks, NoHooks
from mirror.core.ids import CommitID, TagID
from mirror.core.listing import ListResult
from mirror.core.merge import MergeStrategy
from mirror.core.model import Branch, Commit, Entry, Repository
from mirror.core.paths import DataPathProvider
from mirror.core.refs import RefStore
from mirror.core.repositories import FIRST_COMMIT_MESSAGE
from mirror.core.resolve import ResolvedRef, require_commit_ref, resolve_ref
from mirror.core.staging import StagingStore
from mirror.core.threeway import CHERRY_PICK_ORIGIN, MERGE_STRATEGY_KEY
from mirror.core.validate import validate_branch_id, validate_tag_id
from mirror.kv.protocol import KV

__all__ = [
    "CHERRY_PICK_ORIGIN",
    "FIRST_COMMIT_MESSAGE",
    "MERGE_STRATEGY_KEY",
    "Catalog",
    "CommitResult",
    "ListResult",
    "ResolvedRef",
]


class Catalog(ObjectsFacade):
    """Versioned repositories over a KV store and object stores.

    Args:
        kv: Where refs, commits and staging live.
        blocks: Opens the object store of each storage namespace.
        chunking: How committed trees split into ranges.
        clock: Returns the current time in seconds (tests may fix it).
        max_tries: Attempts of a branch compare-and-swap before :class:`TooManyTriesError`.
        backoff: Initial and maximal back-off between attempts, in seconds.
        range_cache_size: Decoded ranges kept per namespace.
        namespace_cache_size: Namespaces whose range caches are kept (least recently used go).
        hooks: Runs the hooks of the actions each write's events match (none by default).
    """

    def __init__(
        self,
        kv: KV,
        blocks: NamespaceResolver,
        *,
        chunking: ChunkingParams | None = None,
        clock: Callable[[], float] = time.time,
        max_tries: int = 10,
        backoff: tuple[float, float] = (0.005, 0.5),
        range_cache_size: int = 256,
        namespace_cache_size: int = 64,
        hooks: Hooks | None = None,
    ) -> None:
        self._hooks: Hooks = hooks or NoHooks()
        self._ctx = CatalogContext(
            kv,
            blocks,
            chunking=chunking or ChunkingParams(),
            clock=clock,
            max_tries=max_tries,
            backoff=backoff,
            range_cache_size=range_cache_size,
            namespace_cache_size=namespace_cache_size,
        )
        # the committed stores kept open, one per namespace; namespace_cache_size bounds them
        self._committed = self._ctx.committed_stores
        self._deletion = RepositoryDeletion(kv, self._ctx.refs, self._ctx.staging)

    # plumbing

    @property
    def kv(self) -> KV:
        """Where refs, commits and staging live."""
        return self._ctx.kv

    @property
    def blocks(self) -> NamespaceResolver:
        """Opens the object store of each storage namespace."""
        return self._ctx.blocks

    @property
    def refs(self) -> RefStore:
        """The repository, branch, tag and commit records."""
        return self._ctx.refs

    @property
    def staging(self) -> StagingStore:
        """The staging areas of every branch."""
        return self._ctx.staging

    @property
    def paths(self) -> DataPathProvider:
        """Fresh physical addresses for uploaded objects."""
        return self._ctx.paths

    @property
    def chunking(self) -> ChunkingParams:
        """How committed trees split into ranges (settable; later commits follow it)."""
        return self._ctx.chunking

    @chunking.setter
    def chunking(self, value: ChunkingParams) -> None:
        self._ctx.chunking = value

    @property
    def hooks(self) -> Hooks:
        """Runs the hooks of lakeFS actions around writes (settable; :class:`NoHooks` = none)."""
        return self._hooks

    @hooks.setter
    def hooks(self, value: Hooks) -> None:
        self._hooks = value

    def committed(self, repo: Repository) -> CommittedStore:
        """Return the committed-data store of ``repo``'s storage namespace."""
        return self._ctx.committed(repo)

    def block_store(self, repo: Repository) -> BlockStore:
        """Return the object store of ``repo``'s storage namespace."""
        return self._ctx.block_store(repo)

    # repositories

    def create_repository(
        self,
        name: str,
        storage_namespace: str,
        default_branch: str = "main",
        *,
        read_only: bool = False,
        mirror_of: str | None = None,
        bare: bool = False,
    ) -> Repository:
        """Create a repository with an initial commit ("Repository created") on its branch.

        A ``bare`` repository (a mirror's) has no commit and no branch until some are imported.

        Raises:
            InvalidNameError: bad repository or branch name.
            InvalidNamespaceError: the namespace URI is malformed or unsupported.
            RepositoryExistsError: the name is taken.
        """
        return repositories.create_repository(
            self._ctx,
            name,
            storage_namespace,
            default_branch,
            read_only=read_only,
            mirror_of=mirror_of,
            bare=bare,
        )

    def get_repository(self, name: str | Repository) -> Repository:
        """Return a repository (a record just read is returned as it is).

        Raises:
            RepositoryNotFoundError: no such repository.
        """
        return self._ctx.record(name)

    def list_repositories(self, prefix: str = "", after: str = "") -> Iterator[Repository]:
        """Yield repositories in name order."""
        return self._ctx.refs.list_repositories(prefix, after)

    def delete_repository(self, name: str, *, force: bool = False) -> None:
        """Delete a repository and every KV record of it (its storage namespace is left as it is).

        See :mod:`mirror.core.deletion`: the records the layers above keep go through the
        cleanups registered with :meth:`add_repository_cleanup`.
        """
        repo = self._ctx.writable(name, force)
        self._deletion.delete(repo)

    def add_repository_cleanup(self, name: str, cleanup: RepositoryCleanup) -> None:
        """Have :meth:`delete_repository` run ``cleanup`` on every deleted repository instance.

        ``cleanup`` removes the records one kind keeps of it (the core cannot import the layers
        that keep them) and must be idempotent. A second cleanup under ``name`` replaces the first.
        """
        self._deletion.register(name, cleanup)

    def resume_deletions(self) -> int:
        """Finish the deletions a failure left half-done (see :mod:`mirror.core.deletion`)."""
        return self._deletion.resume()

    # roles (mirror or source)

    def demote_repository(self, name: str, mirror_of: str) -> Repository:
        """Make a repository a read-only mirror of ``mirror_of``; see :mod:`mirror.core.roles`."""
        return roles.demote_repository(self._ctx, name, mirror_of)

    def promote_repository(self, name: str, promotion: Mapping[str, Any]) -> Repository:
        """Make a mirror writable, keeping ``promotion`` as its newest promotion record."""
        return roles.promote_repository(self._ctx, name, promotion)

    def get_promotion(self, name: str) -> dict[str, Any]:
        """Return the newest promotion record (:class:`PromotionNotFoundError` if none)."""
        return roles.get_promotion(self._ctx, name)

    def preserve_branch(
        self, name: str, branch: str, head: str, records: Sequence[Commit]
    ) -> Branch:
        """Import ``records`` (parents first) and create the new ``branch`` at ``head``."""
        return roles.preserve_branch(self._ctx, name, branch, head, records)

    # commits and refs

    def get_commit(self, repository: str | Repository, commit: str) -> Commit:
        """Return a commit by its full ID (``repository``: a name, or a record just read).

        Raises:
            CommitNotFoundError: no such commit.
        """
        return self._ctx.refs.get_commit(self._ctx.record(repository), CommitID(commit))

    def resolve_ref(self, repository: str | Repository, ref: str) -> ResolvedRef:
        """Resolve a ref expression (``repository``: a name, or a record just read).

        The base is tried as a full commit ID, then a branch, a tag, and a unique commit-ID prefix.

        Raises:
            InvalidRefError: malformed expression, or ``@``/``$`` after something not a branch.
            RefNotFoundError: nothing matches, or not enough parents for a ``~``/``^`` step.
        """
        return resolve_ref(self._ctx, self._ctx.record(repository), ref)

    def log(
        self, repository: str | Repository, ref: str, *, first_parent: bool = False
    ) -> Iterator[Commit]:
        """Yield the history of ``ref``: all ancestors newest first, or only first parents."""
        return commits.log(self._ctx, repository, ref, first_parent=first_parent)

    def merge_base(self, repository: str, left: str, right: str) -> Commit:
        """Return git's best common ancestor of two refs.

        Raises:
            NoMergeBaseError: the refs share no ancestor.
        """
        return commits.merge_base(self._ctx, repository, left, right)

    # branches

    def create_branch(self, repository: str, name: str, source: str) -> Branch:
        """Create a branch at the commit ``source`` resolves to (staging is not copied).

        Raises:
            InvalidNameError, BranchExistsError, RefNotFoundError, RepositoryReadOnlyError.
        """
        ran = announce.create_branch(self._ctx, self._hooks, repository, name, source)
        branch = branches.create_branch(self._ctx, repository, name, source)
        announce.post(self._hooks, ran, commit_id=branch.commit_id)
        return branch

    def get_branch(self, repository: str | Repository, name: str) -> Branch:
        """Return a branch (``repository``: a name, or a record just read).

        Raises:
            BranchNotFoundError: no such branch.
        """
        return self._ctx.refs.get_branch(self._ctx.record(repository), validate_branch_id(name))

    def list_branches(
        self, repository: str | Repository, prefix: str = "", after: str = ""
    ) -> Iterator[Branch]:
        """Yield branches in name order (``repository``: a name, or a record just read)."""
        return self._ctx.refs.list_branches(self._ctx.record(repository), prefix, after)

    def delete_branch(self, repository: str, name: str, *, force: bool = False) -> None:
        """Delete a branch and its staged changes; the default branch cannot be deleted.

        Raises:
            BranchNotFoundError, RepositoryReadOnlyError, InvalidRefError (default branch).
        """
        ran = announce.delete_branch(self._ctx, self._hooks, repository, name, force=force)
        branches.delete_branch(self._ctx, repository, name, force=force)
        announce.post(self._hooks, ran)

    def set_branch_head(
        self, repository: str, name: str, commit: str, expected: str | None, *, force: bool = False
    ) -> Branch:
        """Point a branch at ``commit`` if it now points at ``expected`` (compare-and-swap).

        With ``expected=None`` the branch is created if absent. Staging is left untouched. A
        forced move of a read-only (mirror) repository's branch is announced to the hooks as a
        ``post-commit`` event of the new head, which they run only if told to
        (``actions.mirror_post_hooks``).

        Raises:
            RefPreconditionFailedError: the head is not ``expected``.
            CommitNotFoundError: ``commit`` is unknown in this repository.
        """
        moved = branches.set_branch_head(self._ctx, repository, name, commit, expected, force=force)
        if force and moved.commit_id != expected:
            announce.mirror_advanced(self._ctx, self._hooks, repository, moved)
        return moved

    # tags

    def create_tag(self, repository: str, name: str, ref: str, *, force: bool = False) -> CommitID:
        """Create an immutable tag at the commit ``ref`` resolves to.

        Raises:
            InvalidNameError, TagExistsError, RefNotFoundError, RepositoryReadOnlyError.
        """
        ran = announce.create_tag(self._ctx, self._hooks, repository, name, ref, force=force)
        repo = self._ctx.writable(repository, force)
        tag_id = validate_tag_id(name)
        require_commit_ref(ref)
        cid = resolve_ref(self._ctx, repo, ref).commit_id
        self._ctx.refs.create_tag(repo, tag_id, cid, require_writable=not force)
        announce.post(self._hooks, ran)
        return cid

    def get_tag(self, repository: str | Repository, name: str) -> CommitID:
        """Return the commit a tag points at (``repository``: a name, or a record just read).

        Raises:
            TagNotFoundError: no such tag.
        """
        return self._ctx.refs.get_tag(self._ctx.record(repository), validate_tag_id(name))

    def list_tags(
        self, repository: str | Repository, prefix: str = "", after: str = ""
    ) -> Iterator[tuple[TagID, CommitID]]:
        """Yield ``(tag, commit)`` in tag order (``repository``: a name, or a record just read)."""
        return self._ctx.refs.list_tags(self._ctx.record(repository), prefix, after)

    def delete_tag(self, repository: str, name: str, *, force: bool = False) -> None:
        """Delete a tag.

        Raises:
            TagNotFoundError, RepositoryReadOnlyError.
        """
        ran = announce.delete_tag(self._ctx, self._hooks, repository, name, force=force)
        repo = self._ctx.writable(repository, force)
        self._ctx.refs.delete_tag(repo, validate_tag_id(name), require_writable=not force)
        announce.post(self._hooks, ran)

    # commit

    def commit(
        self,
        repository: str,
        branch: str,
        message: str,
        *,
        committer: str = "",
        metadata: Mapping[str, str] | None = None,
        allow_empty: bool = False,
        date: int | None = None,
    ) -> CommitResult:
        """Commit a branch's staged changes.

        Seal the staging token (CAS), apply the sealed changes onto the head's tree, write the new
        ranges and metarange, add the commit record, then move the branch (CAS). A failure at any
        step leaves every staged change readable; the next commit picks the sealed tokens up.

        Raises:
            NoChangesError: nothing to commit and not ``allow_empty``.
            TooManyTriesError: lost the branch CAS too many times.
            HookAbortError: a prepare-commit or pre-commit hook failed.
        """
        ran = announce.on_commit(
            self._ctx,
            self._hooks,
            repository,
            branch,
            message=message,
            committer=committer,
            metadata=dict(metadata or {}),
        )
        result = commits.commit_staged(
            self._ctx,
            repository,
            branch,
            message,
            committer=committer,
            metadata=metadata,
            allow_empty=allow_empty,
            date=date,
        )
        announce.post_commit(self._hooks, ran, result.commit)
        return result

    def commit_tree(
        self,
        repository: str,
        branch: str,
        changes: Iterable[tuple[str, Entry | None]],
        message: str,
        *,
        committer: str = "",
        metadata: Mapping[str, str] | None = None,
        date: int | None = None,
    ) -> CommitResult:
        """Commit sorted ``changes`` straight onto the branch head, bypassing staging.

        For bulk imports: the changes (``None`` deletes) must be sorted by path and are streamed,
        never held in the KV. Staged changes of the branch stay staged.
        """
        return commits.commit_tree(
            self._ctx,
            repository,
            branch,
            changes,
            message,
            committer=committer,
            metadata=metadata,
            date=date,
        )

    # reset

    def reset_branch(self, repository: str, branch: str) -> None:
        """Drop every staged change of a branch."""
        branches.reset_branch(self._ctx, repository, branch)

    def hard_reset_branch(self, repository: str, branch: str, ref: str) -> Branch:
        """Point a branch without uncommitted changes at the commit of ``ref`` (a hard reset).

        Raises:
            DirtyBranchError, ProtectedBranchError, RepositoryReadOnlyError.
        """
        return branches.hard_reset_branch(self._ctx, repository, branch, ref)

    def reset_objects(self, repository: str, branch: str, prefix: str, *, exact: bool) -> int:
        """Drop staged changes at one path (``exact``) or under a prefix; return how many paths.

        The paths are dropped from every staging token of the branch, sealed ones included, so
        they read as committed again.
        """
        return branches.reset_objects(self._ctx, repository, branch, prefix, exact=exact)

    # merge, revert, cherry-pick

    def merge(
        self,
        repository: str,
        source: str,
        destination: str,
        *,
        committer: str = "",
        message: str | None = None,
        metadata: Mapping[str, str] | None = None,
        strategy: str | MergeStrategy | None = None,
        allow_empty: bool = False,
        squash: bool = False,
        force: bool = False,
    ) -> CommitResult:
        """Merge ``source`` (any ref) into branch ``destination`` with a two-parent commit.

        Raises:
            DirtyBranchError: the destination has uncommitted changes.
            NoChangesError: the source brings nothing (its tree equals the merge base's).
            MergeConflictError: conflicts and no strategy; lists the paths.
            NoMergeBaseError: no common ancestor.
        """
        ran: list[tuple[HookEvent, HookRun]] = []
        before_move = None
        if not force:
            before_move = announce.before_merge(
                self._ctx, self._hooks, repository, source, destination, ran
            )
        try:
            result = threeway.merge(
                self._ctx,
                repository,
                source,
                destination,
                committer=committer,
                message=message,
                metadata=metadata,
                strategy=strategy,
                allow_empty=allow_empty,
                squash=squash,
                force=force,
                before_move=before_move,
            )
        except HookAbortError as exc:
            raise exc.with_prefix(f"update branch {destination}: ") from None
        announce.post_commit(self._hooks, ran[0] if ran else None, result.commit)
        return result

    def revert(
        self,
        repository: str,
        branch: str,
        ref: str,
        *,
        parent_number: int = 0,
        committer: str = "",
        allow_empty: bool = False,
        message: str | None = None,
    ) -> CommitResult:
        """Commit onto ``branch`` the inverse of the changes ``ref`` made to its parent.

        Raises:
            DirtyBranchError, MergeConflictError (the branch changed the same paths since),
            InvalidRefError (merge commit without a valid ``parent_number``), NoChangesError.
        """
        ran = announce.on_branch(self._ctx, self._hooks, "pre-revert", repository, branch)
        result = threeway.revert(
            self._ctx,
            repository,
            branch,
            ref,
            parent_number=parent_number,
            committer=committer,
            allow_empty=allow_empty,
            message=message,
        )
        announce.post_commit(self._hooks, ran, result.commit)
        return result

    def cherry_pick(
        self,
        repository: str,
        branch: str,
        ref: str,
        *,
        parent_number: int = 0,
        committer: str = "",
    ) -> CommitResult:
        """Apply the changes ``ref`` made to its parent onto ``branch`` as a new commit.

        The new commit keeps the picked commit's message and metadata and records the picked
        commit under ``cherry-pick-origin`` (and its committer under ``cherry-pick-committer``).

        Raises:
            DirtyBranchError, MergeConflictError, InvalidRefError, NoChangesError.
        """
        ran = announce.on_branch(self._ctx, self._hooks, "pre-cherry-pick", repository, branch)
        result = threeway.cherry_pick(
            self._ctx, repository, branch, ref, parent_number=parent_number, committer=committer
        )
        announce.post_commit(self._hooks, ran, result.commit)
        return result

    # integrity

    def verify_commit(self, repository: str, commit: str) -> bool:
        """Return whether a stored commit's ID matches its recomputed content hash."""
        found = self.get_commit(repository, commit)
        return found.compute_id() == found.id

    def import_commit(self, repository: str, commit: Commit, *, force: bool = False) -> None:
        """Add a commit record made elsewhere, after checking its ID against its content.

        Raises:
            InvalidRefError: the ID does not match the content.
            CommitNotFoundError: a parent is missing (import parents first).
        """
        commits.import_commit(self._ctx, repository, commit, force=force)

    def branch_exists(self, repository: str | Repository, name: str) -> bool:
        """Return whether a branch exists (``repository``: a name, or a record just read)."""
        try:
            self.get_branch(repository, name)
        except BranchNotFoundError:
            return False
        return True
