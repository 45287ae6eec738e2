"""The public Python API of the versioning core: repositories, branches, objects, commits.

Everything above the core (the HTTP API, the replicant, Spark, the CLI) goes through
:class:`Catalog`. It holds no state of its own beyond caches: refs and staging live in the KV,
objects and committed trees in each repository's storage namespace.
"""

from __future__ import annotations

import random
import threading
import time
import uuid
from collections import OrderedDict
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import BinaryIO, TypeVar

from mirror.block.protocol import BlockStore, NamespaceResolver
from mirror.block.resolver import split_namespace
from mirror.core.committed import (
    ChunkingParams,
    CommittedStore,
    WriteStats,
    apply_changes,
)
from mirror.core.diff import diff_trees
from mirror.core.errors import (
    BranchNotFoundError,
    CommitNotFoundError,
    DirtyBranchError,
    InvalidRefError,
    NoChangesError,
    ObjectNotFoundError,
    RefNotFoundError,
    RefPreconditionFailedError,
    RepositoryReadOnlyError,
    TagNotFoundError,
    TooManyTriesError,
)
from mirror.core.history import first_parent_history, merge_bases, time_ordered_history
from mirror.core.ids import (
    BranchID,
    CommitID,
    MetaRangeID,
    StagingToken,
    TagID,
    commit_id,
)
from mirror.core.merge import MergeStrategy, merge_changes
from mirror.core.model import (
    DEFAULT_CONTENT_TYPE,
    AddressType,
    Branch,
    Commit,
    DiffEntry,
    DiffType,
    Entry,
    ObjectStat,
    Repository,
)
from mirror.core.paths import DataPathProvider
from mirror.core.refexpr import Modifier, parse_ref
from mirror.core.refs import RefStore
from mirror.core.staging import TOMBSTONE, StagingStore, Tombstone, merge_staged
from mirror.core.validate import (
    validate_branch_id,
    validate_path,
    validate_repository_id,
    validate_tag_id,
)
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

FIRST_COMMIT_MESSAGE = "Repository created"
MERGE_STRATEGY_KEY = ".lakefs.merge.strategy"
CHERRY_PICK_ORIGIN = "cherry-pick-origin"
CHERRY_PICK_COMMITTER = "cherry-pick-committer"

T = TypeVar("T")

_MAX_CHAR = "\U0010ffff"


@dataclass(frozen=True, slots=True)
class ResolvedRef:
    """What a ref expression points at.

    Attributes:
        commit_id: The commit (for a branch, its head).
        branch: The branch, when the expression names one (possibly with ``@`` or ``$``).
        include_staging: Whether reads see the branch's staging area.
    """

    commit_id: CommitID
    branch: BranchID | None = None
    include_staging: bool = False


@dataclass(frozen=True, slots=True)
class _View:
    """What one read sees of a ref: a head commit and, on a branch, its staging tokens."""

    commit_id: CommitID
    tokens: tuple[StagingToken, ...] = ()


@dataclass(frozen=True, slots=True)
class ListResult:
    """One page of a listing."""

    objects: list[ObjectStat]
    common_prefixes: list[str]
    has_more: bool
    next_offset: str


@dataclass(frozen=True, slots=True)
class CommitResult:
    """A new commit and what writing it cost."""

    commit: Commit
    stats: WriteStats = field(default_factory=WriteStats)


def _check_metadata(metadata: Mapping[str, str] | None) -> dict[str, str]:
    out = dict(metadata or {})
    for k, v in out.items():
        if not isinstance(k, str) or not isinstance(v, str):
            raise InvalidRefError(f"metadata must map strings to strings, got {k!r}: {v!r}")
    return out


class Catalog:
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
    ) -> None:
        self.kv = kv
        self.blocks = blocks
        self.refs = RefStore(kv)
        self.staging = StagingStore(kv)
        self.chunking = chunking or ChunkingParams()
        self.paths = DataPathProvider()
        self._clock = clock
        self._max_tries = max_tries
        self._backoff = backoff
        self._range_cache_size = range_cache_size
        self._namespace_cache_size = max(1, namespace_cache_size)
        self._committed: OrderedDict[str, CommittedStore] = OrderedDict()
        self._lock = threading.Lock()

    # plumbing

    def _now(self) -> int:
        return int(self._clock())

    def committed(self, repo: Repository) -> CommittedStore:
        """Return the committed-data store of ``repo``'s storage namespace."""
        ns = repo.storage_namespace
        with self._lock:
            store = self._committed.get(ns)
            if store is None:
                store = CommittedStore(self.blocks.open(ns), self._range_cache_size)
                self._committed[ns] = store
                while len(self._committed) > self._namespace_cache_size:
                    self._committed.popitem(last=False)
            else:
                self._committed.move_to_end(ns)
            return store

    def block_store(self, repo: Repository) -> BlockStore:
        """Return the object store of ``repo``'s storage namespace."""
        return self.blocks.open(repo.storage_namespace)

    def _repo(self, repository: str) -> Repository:
        return self.refs.get_repository(validate_repository_id(repository))

    def _writable(self, repository: str, force: bool = False) -> Repository:
        repo = self._repo(repository)
        if repo.read_only and not force:
            raise RepositoryReadOnlyError(repo.id)
        return repo

    def _on_branch(self, repo: Repository, branch_id: BranchID, read: Callable[[_View], T]) -> T:
        """Return what ``read`` finds in a view of a branch that was still current when it ended.

        A commit drops the staging tokens it committed right after it moves the branch. A read
        that took the branch before the move and a token after the drop would miss a staged
        object, or answer the value of the old head's tree instead. So the branch is read again
        once ``read`` is done, and the read starts over if the branch changed meanwhile.
        ``read`` must not leave anything to be read lazily later.

        Raises:
            BranchNotFoundError: the branch is gone.
            TooManyTriesError: the branch changed during every attempt.
        """
        branch, raw = self.refs.get_branch_raw(repo, branch_id)
        for _ in range(self._max_tries):
            result = read(_View(branch.commit_id, branch.tokens))
            again, raw_again = self.refs.get_branch_raw(repo, branch_id)
            if raw_again == raw:
                return result
            branch, raw = again, raw_again
        raise TooManyTriesError(
            f"read of branch {branch_id!r}: the branch changed during every attempt"
        )

    def _consistent(self, repo: Repository, resolved: ResolvedRef, read: Callable[[_View], T]) -> T:
        """Return what ``read`` finds at ``resolved`` (see :meth:`_on_branch` for branches)."""
        if resolved.include_staging and resolved.branch is not None:
            return self._on_branch(repo, resolved.branch, read)
        return read(_View(resolved.commit_id))

    def _retry(self, what: str, attempt: Callable[[], T]) -> T:
        """Run ``attempt`` until it stops losing compare-and-swap races, with jittered back-off."""
        delay, cap = self._backoff
        for _ in range(self._max_tries):
            try:
                return attempt()
            except RefPreconditionFailedError:
                time.sleep(random.uniform(0, delay))
                delay = min(cap, delay * 2)
        raise TooManyTriesError(f"{what}: gave up after {self._max_tries} concurrent updates")

    # repositories

    def create_repository(
        self,
        name: str,
        storage_namespace: str,
        default_branch: str = "main",
        *,
        read_only: bool = False,
        mirror_of: str | None = None,
    ) -> Repository:
        """Create a repository with an initial commit ("Repository created") on its branch.

        Raises:
            InvalidNameError: bad repository or branch name.
            InvalidNamespaceError: the namespace URI is malformed or unsupported.
            RepositoryExistsError: the name is taken.
        """
        repo_id = validate_repository_id(name)
        branch_id = validate_branch_id(default_branch)
        split_namespace(storage_namespace)
        self.blocks.open(storage_namespace)
        now = self._now()
        repo = Repository(
            id=repo_id,
            storage_namespace=storage_namespace.rstrip("/"),
            default_branch=branch_id,
            creation_date=now,
            instance_uid=uuid.uuid4().hex[:16],
            read_only=read_only,
            mirror_of=mirror_of,
        )
        initial = self._new_commit("", FIRST_COMMIT_MESSAGE, MetaRangeID(""), now, {}, ())
        branch = Branch(branch_id, initial.id, StagingStore.new_token())
        self.refs.create_repository(repo, initial, branch)
        return repo

    def get_repository(self, name: str) -> Repository:
        """Return a repository.

        Raises:
            RepositoryNotFoundError: no such repository.
        """
        return self._repo(name)

    def list_repositories(self, prefix: str = "", after: str = "") -> Iterator[Repository]:
        """Yield repositories in name order."""
        return self.refs.list_repositories(prefix, after)

    def delete_repository(self, name: str, *, force: bool = False) -> None:
        """Delete a repository's records (its storage namespace is left as it is)."""
        repo = self._writable(name, force)
        self.refs.delete_repository(repo)

    # commits and refs

    def _new_commit(
        self,
        committer: str,
        message: str,
        metarange: MetaRangeID,
        date: int,
        metadata: Mapping[str, str],
        parents: tuple[CommitID, ...],
        generation: int = 1,
    ) -> Commit:
        cid = commit_id(
            committer=committer,
            message=message,
            metarange_id=metarange,
            creation_date=date,
            metadata=metadata,
            parents=parents,
        )
        return Commit(cid, committer, message, metarange, date, parents, dict(metadata), generation)

    def get_commit(self, repository: str, commit: str) -> Commit:
        """Return a commit by its full ID.

        Raises:
            CommitNotFoundError: no such commit.
        """
        return self.refs.get_commit(self._repo(repository), CommitID(commit))

    def _resolve_base(self, repo: Repository, base: str) -> tuple[CommitID, BranchID | None]:
        if len(base) == 64 and all(c in "0123456789abcdef" for c in base):
            if self.refs.has_commit(repo, base):
                return CommitID(base), None
        try:
            return self.refs.get_branch(repo, BranchID(base)).commit_id, BranchID(base)
        except BranchNotFoundError:
            pass
        try:
            return self.refs.get_tag(repo, TagID(base)), None
        except TagNotFoundError:
            pass
        if 0 < len(base) <= 64 and all(c in "0123456789abcdefABCDEF" for c in base):
            found = self.refs.commits_with_prefix(repo, base.lower())
            if len(found) == 1:
                return found[0], None
        raise RefNotFoundError(f"ref {base!r} not found in repository {repo.id!r}")

    def _resolve(self, repo: Repository, ref: str) -> ResolvedRef:
        expr = parse_ref(ref)
        cid, branch = self._resolve_base(repo, expr.base)
        mod = expr.branch_modifier
        if mod is not None:
            if branch is None:
                raise InvalidRefError(
                    f"invalid ref {ref!r}: '{mod.value}' applies only to a branch"
                )
            return ResolvedRef(cid, branch, mod is Modifier.STAGING)
        for step, n in expr.steps:
            if step is Modifier.FIRST_PARENT:
                for _ in range(n):
                    parents = self.refs.get_commit(repo, cid).parents
                    if not parents:
                        raise RefNotFoundError(f"ref {ref!r}: not enough ancestors")
                    cid = parents[0]
            elif n > 0:
                parents = self.refs.get_commit(repo, cid).parents
                if n > len(parents):
                    raise RefNotFoundError(f"ref {ref!r}: commit {cid} has {len(parents)} parents")
                cid = parents[n - 1]
        if expr.steps:
            return ResolvedRef(cid)
        return ResolvedRef(cid, branch, branch is not None)

    def resolve_ref(self, repository: str, ref: str) -> ResolvedRef:
        """Resolve a ref expression.

        The base is tried as a full commit ID, then a branch, a tag, and a unique commit-ID prefix.

        Raises:
            InvalidRefError: malformed expression, or ``@``/``$`` after something not a branch.
            RefNotFoundError: nothing matches, or not enough parents for a ``~``/``^`` step.
        """
        return self._resolve(self._repo(repository), ref)

    def _commit_of(self, repo: Repository, ref: str) -> Commit:
        return self.refs.get_commit(repo, self._resolve(repo, ref).commit_id)

    def log(self, repository: str, ref: str, *, first_parent: bool = False) -> Iterator[Commit]:
        """Yield the history of ``ref``: all ancestors newest first, or only first parents."""
        repo = self._repo(repository)
        head = self._resolve(repo, ref).commit_id

        def get(c: CommitID) -> Commit:
            return self.refs.get_commit(repo, c)

        if first_parent:
            return first_parent_history(get, head)
        return time_ordered_history(get, head)

    def merge_base(self, repository: str, left: str, right: str) -> Commit:
        """Return git's best common ancestor of two refs.

        Raises:
            NoMergeBaseError: the refs share no ancestor.
        """
        repo = self._repo(repository)
        a = self._resolve(repo, left).commit_id
        b = self._resolve(repo, right).commit_id
        return merge_bases(lambda c: self.refs.get_commit(repo, c), a, b)[0]

    # branches

    def create_branch(self, repository: str, name: str, source: str) -> Branch:
        """Create a branch at the commit ``source`` resolves to (staging is not copied).

        Raises:
            InvalidNameError, BranchExistsError, RefNotFoundError, RepositoryReadOnlyError.
        """
        repo = self._writable(repository)
        branch_id = validate_branch_id(name)
        cid = self._resolve(repo, source).commit_id
        branch = Branch(branch_id, cid, StagingStore.new_token())
        self.refs.create_branch(repo, branch)
        return branch

    def get_branch(self, repository: str, name: str) -> Branch:
        """Return a branch.

        Raises:
            BranchNotFoundError: no such branch.
        """
        return self.refs.get_branch(self._repo(repository), validate_branch_id(name))

    def list_branches(self, repository: str, prefix: str = "", after: str = "") -> Iterator[Branch]:
        """Yield branches in name order."""
        return self.refs.list_branches(self._repo(repository), prefix, after)

    def delete_branch(self, repository: str, name: str, *, force: bool = False) -> None:
        """Delete a branch and its staged changes; the default branch cannot be deleted.

        Raises:
            BranchNotFoundError, RepositoryReadOnlyError, InvalidRefError (default branch).
        """
        repo = self._writable(repository, force)
        branch_id = validate_branch_id(name)
        if branch_id == repo.default_branch:
            raise InvalidRefError(f"cannot delete the default branch {name!r}")
        branch = self.refs.delete_branch(repo, branch_id)
        for token in branch.tokens:
            self.staging.drop_token(token)

    def set_branch_head(
        self, repository: str, name: str, commit: str, expected: str | None, *, force: bool = False
    ) -> Branch:
        """Point a branch at ``commit`` if it now points at ``expected`` (compare-and-swap).

        With ``expected=None`` the branch is created if absent. Staging is left untouched.

        Raises:
            RefPreconditionFailedError: the head is not ``expected``.
            CommitNotFoundError: ``commit`` is unknown in this repository.
        """
        repo = self._writable(repository, force)
        branch_id = validate_branch_id(name)
        cid = self.refs.get_commit(repo, CommitID(commit)).id
        if expected is None:
            branch = Branch(branch_id, cid, StagingStore.new_token())
            try:
                self.refs.create_branch(repo, branch)
            except Exception as exc:
                found = self.refs.get_branch(repo, branch_id).commit_id
                raise RefPreconditionFailedError(branch_id, None, found) from exc
            return branch
        current, raw = self.refs.get_branch_raw(repo, branch_id)
        if current.commit_id != expected:
            raise RefPreconditionFailedError(branch_id, expected, current.commit_id)
        new = Branch(branch_id, cid, current.staging_token, current.sealed_tokens)
        self.refs.set_branch_if(repo, new, raw)
        return new

    # tags

    def create_tag(self, repository: str, name: str, ref: str, *, force: bool = False) -> CommitID:
        """Create an immutable tag at the commit ``ref`` resolves to.

        Raises:
            InvalidNameError, TagExistsError, RefNotFoundError, RepositoryReadOnlyError.
        """
        repo = self._writable(repository, force)
        tag_id = validate_tag_id(name)
        cid = self._resolve(repo, ref).commit_id
        self.refs.create_tag(repo, tag_id, cid)
        return cid

    def get_tag(self, repository: str, name: str) -> CommitID:
        """Return the commit a tag points at.

        Raises:
            TagNotFoundError: no such tag.
        """
        return self.refs.get_tag(self._repo(repository), validate_tag_id(name))

    def list_tags(
        self, repository: str, prefix: str = "", after: str = ""
    ) -> Iterator[tuple[TagID, CommitID]]:
        """Yield ``(tag, commit)`` in tag order."""
        return self.refs.list_tags(self._repo(repository), prefix, after)

    def delete_tag(self, repository: str, name: str, *, force: bool = False) -> None:
        """Delete a tag.

        Raises:
            TagNotFoundError, RepositoryReadOnlyError.
        """
        repo = self._writable(repository, force)
        self.refs.delete_tag(repo, validate_tag_id(name))

    # objects

    def physical_address(self, repo: Repository, entry: Entry) -> str:
        """Return the absolute URI of an entry's bytes."""
        if entry.address_type is AddressType.FULL:
            return entry.address
        return f"{repo.storage_namespace}/{entry.address}"

    def open_entry(self, repo: Repository, entry: Entry) -> tuple[BlockStore, str]:
        """Return the store holding an entry's bytes and the key inside it."""
        if entry.address_type is AddressType.RELATIVE:
            return self.block_store(repo), entry.address
        scheme, rest = split_namespace(entry.address)
        lead = "/" if rest.startswith("/") else ""
        root, _, key = rest.lstrip("/").partition("/")
        return self.blocks.open(f"{scheme}://{lead}{root}"), key

    def _staged_write(
        self, repo: Repository, branch_id: BranchID, write: Callable[[StagingToken], None]
    ) -> None:
        # a commit may seal the token between our read and our write; if the token changed,
        # write again to the new one (writes are idempotent)
        for _ in range(self._max_tries):
            token = self.refs.get_branch(repo, branch_id).staging_token
            write(token)
            if self.refs.get_branch(repo, branch_id).staging_token == token:
                return
        raise TooManyTriesError(f"write to branch {branch_id!r}: staging token kept changing")

    def upload_object(
        self,
        repository: str,
        branch: str,
        path: str,
        data: bytes | BinaryIO,
        *,
        content_type: str | None = None,
        metadata: Mapping[str, str] | None = None,
    ) -> ObjectStat:
        """Store ``data`` at a fresh address and stage it at ``path`` on ``branch``.

        Raises:
            InvalidPathError, BranchNotFoundError, RepositoryReadOnlyError.
        """
        repo = self._writable(repository)
        branch_id = validate_branch_id(branch)
        validate_path(path)
        meta = _check_metadata(metadata)
        self.refs.get_branch(repo, branch_id)
        address = self.paths.new_path()
        info = self.block_store(repo).put(address, data)
        entry = Entry(
            address=address,
            size=info.size,
            checksum=info.etag,
            mtime=self._now(),
            content_type=content_type or DEFAULT_CONTENT_TYPE,
            metadata=meta,
        )
        self._staged_write(repo, branch_id, lambda t: self.staging.set(t, path, entry))
        return ObjectStat(path, entry, self.physical_address(repo, entry))

    def stage_object(
        self, repository: str, branch: str, path: str, entry: Entry, *, force: bool = False
    ) -> ObjectStat:
        """Stage an entry whose bytes are already written (link by physical address)."""
        return self.stage_objects(repository, branch, [(path, entry)], force=force)[0]

    def stage_objects(
        self,
        repository: str,
        branch: str,
        items: Iterable[tuple[str, Entry]],
        *,
        force: bool = False,
    ) -> list[ObjectStat]:
        """Stage many already-written entries in one KV batch."""
        repo = self._writable(repository, force)
        branch_id = validate_branch_id(branch)
        staged = [(validate_path(p), e) for p, e in items]
        self.refs.get_branch(repo, branch_id)
        self._staged_write(repo, branch_id, lambda t: self.staging.set_many(t, staged))
        return [ObjectStat(p, e, self.physical_address(repo, e)) for p, e in staged]

    def _value(self, repo: Repository, view: _View, path: str) -> Entry | None:
        for token in view.tokens:
            staged = self.staging.get(token, path)
            if staged is not None:
                return None if isinstance(staged, Tombstone) else staged
        head = self.refs.get_commit(repo, view.commit_id)
        return self.committed(repo).lookup(head.metarange_id, path)

    def _lookup(self, repo: Repository, ref: str, path: str) -> Entry | None:
        resolved = self._resolve(repo, ref)
        return self._consistent(repo, resolved, lambda view: self._value(repo, view, path))

    def stat_object(self, repository: str, ref: str, path: str) -> ObjectStat:
        """Return an object's entry at ``ref``.

        Raises:
            ObjectNotFoundError: nothing at ``path``.
        """
        repo = self._repo(repository)
        validate_path(path)
        entry = self._lookup(repo, ref, path)
        if entry is None:
            raise ObjectNotFoundError(f"object {path!r} not found at {repository}/{ref}")
        return ObjectStat(path, entry, self.physical_address(repo, entry))

    def read_object(
        self, repository: str, ref: str, path: str, start: int = 0, end: int | None = None
    ) -> bytes:
        """Return bytes ``[start, end)`` of the object at ``path`` of ``ref``.

        Raises:
            ObjectNotFoundError: nothing at ``path``.
            InvalidRangeError: ``start`` lies beyond the end.
        """
        repo = self._repo(repository)
        stat = self.stat_object(repository, ref, path)
        store, key = self.open_entry(repo, stat.entry)
        return store.get(key, start, end)

    def delete_object(self, repository: str, branch: str, path: str) -> None:
        """Stage the deletion of ``path`` on ``branch``.

        Raises:
            ObjectNotFoundError: nothing at ``path`` on the branch.
        """
        self.delete_objects(repository, branch, [path])

    def delete_objects(self, repository: str, branch: str, paths: Iterable[str]) -> list[str]:
        """Stage deletions of every existing path in ``paths``; return the missing ones.

        Raises:
            ObjectNotFoundError: a single path was given and it does not exist.
        """
        repo = self._writable(repository)
        branch_id = validate_branch_id(branch)
        wanted = [validate_path(p) for p in paths]
        present = self._on_branch(
            repo,
            branch_id,
            lambda view: [p for p in wanted if self._value(repo, view, p) is not None],
        )
        found = set(present)
        missing = [p for p in wanted if p not in found]
        if len(wanted) == 1 and missing:
            raise ObjectNotFoundError(f"object {wanted[0]!r} not found on branch {branch!r}")
        tombs: list[tuple[str, Entry | Tombstone]] = [(p, TOMBSTONE) for p in present]
        self._staged_write(repo, branch_id, lambda t: self.staging.set_many(t, tombs))
        return missing

    def iter_objects(
        self, repository: str, ref: str, prefix: str = "", after: str = ""
    ) -> Iterator[ObjectStat]:
        """Yield every object under ``prefix`` at ``ref`` with path ``> after``, in path order.

        A branch is read once, when the iteration starts; the objects stream from its staging
        area and head as they are read. :meth:`list_objects` answers pages that are consistent
        with commits landing meanwhile.
        """
        repo = self._repo(repository)
        resolved = self._resolve(repo, ref)
        view = _View(resolved.commit_id)
        if resolved.include_staging and resolved.branch is not None:
            branch = self.refs.get_branch(repo, resolved.branch)
            view = _View(branch.commit_id, branch.tokens)
        return self._iter_view(repo, view, prefix, after)

    def _iter_view(
        self, repo: Repository, view: _View, prefix: str, after: str
    ) -> Iterator[ObjectStat]:
        start = after + "\x00" if after and after >= prefix else prefix
        sources = [self.staging.scan(t, prefix, start) for t in view.tokens]
        tree = self.refs.get_commit(repo, view.commit_id).metarange_id
        committed: Iterator[tuple[str, Entry | Tombstone]] = iter(
            self.committed(repo).iterate(tree, start)
        )
        for path, value in merge_staged([*sources, committed]):
            if not path.startswith(prefix):
                if path > prefix:
                    return
                continue
            if isinstance(value, Entry):
                yield ObjectStat(path, value, self.physical_address(repo, value))

    def list_objects(
        self,
        repository: str,
        ref: str,
        prefix: str = "",
        *,
        after: str = "",
        amount: int = 1000,
        delimiter: str = "",
    ) -> ListResult:
        """Return one page of objects (and common prefixes, with a delimiter) under ``prefix``.

        On a branch, the page is read again if a commit moved the branch meanwhile, so that it
        never lacks an object staged before the listing started.
        """
        repo = self._repo(repository)
        resolved = self._resolve(repo, ref)
        return self._consistent(
            repo,
            resolved,
            lambda view: self._list_page(repo, view, prefix, after, amount, delimiter),
        )

    def _list_page(
        self, repo: Repository, view: _View, prefix: str, after: str, amount: int, delimiter: str
    ) -> ListResult:
        objects: list[ObjectStat] = []
        prefixes: list[str] = []
        cursor = after
        cut = after.find(delimiter, len(prefix)) if delimiter and after.startswith(prefix) else -1
        if cut >= 0 and cut + len(delimiter) == len(after):
            # resuming after a common prefix: skip everything under it (an object whose path
            # ends with the delimiter inside ``prefix``, such as ``prefix`` itself, is not one)
            cursor = after + _MAX_CHAR
        while True:
            restart = False
            for stat in self._iter_view(repo, view, prefix, cursor):
                if len(objects) + len(prefixes) >= amount:
                    last = objects[-1].path if objects else ""
                    lastp = prefixes[-1] if prefixes else ""
                    return ListResult(objects, prefixes, True, max(last, lastp))
                if delimiter:
                    cut = stat.path.find(delimiter, len(prefix))
                    if cut >= 0:
                        common = stat.path[: cut + len(delimiter)]
                        prefixes.append(common)
                        # skip everything under this common prefix in one jump
                        cursor = common + _MAX_CHAR
                        restart = True
                        break
                objects.append(stat)
            if not restart:
                return ListResult(objects, prefixes, False, "")

    # diffs

    def diff(
        self, repository: str, left: str, right: str, *, three_dot: bool = False
    ) -> Iterator[DiffEntry]:
        """Yield differences between the commits of two refs, in path order.

        ``three_dot`` diffs ``right`` against the merge base of the two (what a merge of
        ``right`` into ``left`` would bring).
        """
        repo = self._repo(repository)
        lc = self._commit_of(repo, left)
        rc = self._commit_of(repo, right)
        if three_dot:
            lc = merge_bases(lambda c: self.refs.get_commit(repo, c), lc.id, rc.id)[0]
        return diff_trees(self.committed(repo), lc.metarange_id, rc.metarange_id)

    def diff_uncommitted(
        self, repository: str, branch: str, prefix: str = ""
    ) -> Iterator[DiffEntry]:
        """Yield the staged changes of a branch against its head commit, in path order."""
        repo = self._repo(repository)
        current = self.refs.get_branch(repo, validate_branch_id(branch))
        return self._uncommitted(repo, current, prefix)

    def _uncommitted(
        self, repo: Repository, branch: Branch, prefix: str = ""
    ) -> Iterator[DiffEntry]:
        head = self.refs.get_commit(repo, branch.commit_id)
        store = self.committed(repo)
        for path, value in self.staging.iterate(branch.tokens, prefix):
            old = store.lookup(head.metarange_id, path)
            if isinstance(value, Tombstone):
                if old is not None:
                    yield DiffEntry(path, DiffType.REMOVED, old, None)
            elif old is None:
                yield DiffEntry(path, DiffType.ADDED, None, value)
            elif old.identity != value.identity:
                yield DiffEntry(path, DiffType.CHANGED, old, value)

    def _is_dirty(self, repo: Repository, branch: Branch) -> bool:
        return next(self._uncommitted(repo, branch), None) is not None

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
        """
        repo = self._writable(repository)
        branch_id = validate_branch_id(branch)
        meta = _check_metadata(metadata)

        def seal() -> tuple[StagingToken, ...]:
            current, raw = self.refs.get_branch_raw(repo, branch_id)
            if self.staging.is_empty(current.staging_token):
                if not current.sealed_tokens and not allow_empty:
                    raise NoChangesError(f"no changes to commit on branch {branch!r}")
                return current.sealed_tokens
            sealed = Branch(
                branch_id,
                current.commit_id,
                StagingStore.new_token(),
                (current.staging_token, *current.sealed_tokens),
            )
            self.refs.set_branch_if(repo, sealed, raw)
            return sealed.sealed_tokens

        # This commit answers for the tokens sealed when it starts. Tokens sealed later belong to
        # the commits that sealed them, so their seals never make this one start over.
        mine = set(self._retry(f"seal branch {branch!r}", seal))

        def attempt() -> tuple[Commit, WriteStats]:
            current = self.refs.get_branch(repo, branch_id)
            # commits take the oldest sealed tokens, so what is left of ours is a suffix
            keep = len(current.sealed_tokens)
            while keep > 0 and current.sealed_tokens[keep - 1] in mine:
                keep -= 1
            taken = current.sealed_tokens[keep:]
            if not taken and not allow_empty:
                raise NoChangesError(f"no changes to commit on branch {branch!r}")
            parent = self.refs.get_commit(repo, current.commit_id)
            changes = (
                (p, None if isinstance(v, Tombstone) else v) for p, v in self.staging.iterate(taken)
            )
            mid, applied = apply_changes(
                self.committed(repo), self.chunking, parent.metarange_id, changes, WriteStats()
            )
            # compare counts, not IDs: the initial commit's empty tree has ID "", an empty tree
            # written later has a real ID
            if applied.changes == 0 and not allow_empty:
                self._release_sealed(repo, branch_id, parent.id, taken, parent.id)
                raise NoChangesError(f"no changes to commit on branch {branch!r}")
            commit = self._new_commit(
                committer,
                message,
                mid,
                date if date is not None else self._now(),
                meta,
                (parent.id,),
                parent.generation + 1,
            )
            self.refs.add_commit(repo, commit)
            self._release_sealed(repo, branch_id, parent.id, taken, commit.id)
            return commit, applied

        commit, stats = self._retry(f"commit on branch {branch!r}", attempt)
        return CommitResult(commit, stats)

    def _release_sealed(
        self,
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
        for _ in range(self._max_tries):
            current, raw = self.refs.get_branch_raw(repo, branch_id)
            keep = len(current.sealed_tokens) - len(taken)
            if current.commit_id != parent or keep < 0 or current.sealed_tokens[keep:] != taken:
                raise RefPreconditionFailedError(branch_id, parent, current.commit_id)
            moved = Branch(branch_id, head, current.staging_token, current.sealed_tokens[:keep])
            try:
                self.refs.set_branch_if(repo, moved, raw)
            except RefPreconditionFailedError:
                continue
            for token in taken:
                self.staging.drop_token(token)
            return
        raise TooManyTriesError(f"commit on branch {branch_id!r}: sealed tokens kept changing")

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
        repo = self._writable(repository)
        branch_id = validate_branch_id(branch)
        meta = _check_metadata(metadata)
        current, raw = self.refs.get_branch_raw(repo, branch_id)
        parent = self.refs.get_commit(repo, current.commit_id)
        mid, stats = apply_changes(
            self.committed(repo), self.chunking, parent.metarange_id, changes
        )
        commit = self._new_commit(
            committer,
            message,
            mid,
            date if date is not None else self._now(),
            meta,
            (parent.id,),
            parent.generation + 1,
        )
        self.refs.add_commit(repo, commit)
        moved = Branch(branch_id, commit.id, current.staging_token, current.sealed_tokens)
        self.refs.set_branch_if(repo, moved, raw)
        return CommitResult(commit, stats)

    # reset

    def reset_branch(self, repository: str, branch: str) -> None:
        """Drop every staged change of a branch."""
        repo = self._writable(repository)
        branch_id = validate_branch_id(branch)

        def attempt() -> Branch:
            current, raw = self.refs.get_branch_raw(repo, branch_id)
            cleared = Branch(branch_id, current.commit_id, StagingStore.new_token(), ())
            self.refs.set_branch_if(repo, cleared, raw)
            return current

        old = self._retry(f"reset branch {branch!r}", attempt)
        for token in old.tokens:
            self.staging.drop_token(token)

    def reset_objects(self, repository: str, branch: str, prefix: str, *, exact: bool) -> int:
        """Drop staged changes at one path (``exact``) or under a prefix; return how many paths.

        The paths are dropped from every staging token of the branch, sealed ones included, so
        they read as committed again.
        """
        repo = self._writable(repository)
        branch_id = validate_branch_id(branch)
        if exact:
            validate_path(prefix)
        current = self.refs.get_branch(repo, branch_id)
        dropped: set[str] = set()
        for token in current.tokens:
            for path, _ in list(self.staging.scan(token, prefix)):
                if exact and path != prefix:
                    continue
                self.staging.drop(token, path)
                dropped.add(path)
        return len(dropped)

    # merge, revert, cherry-pick

    def _apply_three_way(
        self,
        repository: str,
        branch: str,
        what: str,
        make: Callable[[Repository, Commit], tuple[str, str, str, MergeStrategy, Commit | None]],
        build: Callable[[Commit, MetaRangeID, Commit | None], Commit],
        *,
        allow_empty: bool,
        force: bool = False,
    ) -> CommitResult:
        repo = self._writable(repository, force)
        branch_id = validate_branch_id(branch)
        stats = WriteStats()

        def attempt() -> Commit:
            current, raw = self.refs.get_branch_raw(repo, branch_id)
            if self._is_dirty(repo, current):
                raise DirtyBranchError(f"{what}: branch {branch!r} has uncommitted changes")
            head = self.refs.get_commit(repo, current.commit_id)
            base, source, dest, strategy, other = make(repo, head)
            store = self.committed(repo)
            # tree IDs decide, as in lakeFS: the initial commit's empty tree is "", an empty tree
            # written later has a real ID, and merging that one is a change
            if source == base and not allow_empty:
                raise NoChangesError(f"{what} into branch {branch!r}: no changes")
            if dest == base:
                mid = MetaRangeID(source)
            else:
                changes = merge_changes(store, base, source, dest, strategy, stats)
                mid, _ = apply_changes(store, self.chunking, dest, changes, stats)
            commit = build(head, mid, other)
            self.refs.add_commit(repo, commit)
            moved = Branch(branch_id, commit.id, current.staging_token, current.sealed_tokens)
            self.refs.set_branch_if(repo, moved, raw)
            return commit

        return CommitResult(self._retry(f"{what} into branch {branch!r}", attempt), stats)

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
        how = MergeStrategy.parse(strategy)
        meta = _check_metadata(metadata)
        text = message or f"Merge '{source}' into '{destination}'"

        def make(
            repo: Repository, head: Commit
        ) -> tuple[str, str, str, MergeStrategy, Commit | None]:
            src = self._commit_of(repo, source)
            base = merge_bases(lambda c: self.refs.get_commit(repo, c), head.id, src.id)[0]
            return base.metarange_id, src.metarange_id, head.metarange_id, how, src

        def build(head: Commit, mid: MetaRangeID, src: Commit | None) -> Commit:
            assert src is not None
            parents = (head.id,) if squash else (head.id, src.id)
            return self._new_commit(
                committer,
                text,
                mid,
                self._now(),
                {**meta, MERGE_STRATEGY_KEY: how.value},
                parents,
                max(head.generation, src.generation) + 1,
            )

        return self._apply_three_way(
            repository,
            destination,
            f"merge of {source!r}",
            make,
            build,
            allow_empty=allow_empty,
            force=force,
        )

    def _pick_parent(self, repo: Repository, commit: Commit, parent_number: int) -> Commit:
        if not commit.parents:
            raise InvalidRefError(f"commit {commit.id} has no parent")
        if len(commit.parents) > 1 and parent_number < 1:
            raise InvalidRefError(
                f"commit {commit.id} is a merge commit: give a parent number "
                f"1..{len(commit.parents)}"
            )
        index = max(parent_number, 1) - 1
        if index >= len(commit.parents):
            raise InvalidRefError(
                f"commit {commit.id} has {len(commit.parents)} parent(s), not {parent_number}"
            )
        return self.refs.get_commit(repo, commit.parents[index])

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

        def make(
            repo: Repository, head: Commit
        ) -> tuple[str, str, str, MergeStrategy, Commit | None]:
            target = self._commit_of(repo, ref)
            parent = self._pick_parent(repo, target, parent_number)
            return (
                target.metarange_id,
                parent.metarange_id,
                head.metarange_id,
                (MergeStrategy.NONE),
                target,
            )

        def build(head: Commit, mid: MetaRangeID, target: Commit | None) -> Commit:
            assert target is not None
            return self._new_commit(
                committer,
                message or f"Revert {target.id}",
                mid,
                self._now(),
                {},
                (head.id,),
                head.generation + 1,
            )

        return self._apply_three_way(
            repository, branch, f"revert of {ref!r}", make, build, allow_empty=allow_empty
        )

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

        def make(
            repo: Repository, head: Commit
        ) -> tuple[str, str, str, MergeStrategy, Commit | None]:
            target = self._commit_of(repo, ref)
            parent = self._pick_parent(repo, target, parent_number)
            return (
                parent.metarange_id,
                target.metarange_id,
                head.metarange_id,
                (MergeStrategy.NONE),
                target,
            )

        def build(head: Commit, mid: MetaRangeID, target: Commit | None) -> Commit:
            assert target is not None
            meta = {
                **target.metadata,
                CHERRY_PICK_ORIGIN: target.id,
                CHERRY_PICK_COMMITTER: target.committer,
            }
            return self._new_commit(
                committer, target.message, mid, self._now(), meta, (head.id,), head.generation + 1
            )

        return self._apply_three_way(
            repository, branch, f"cherry-pick of {ref!r}", make, build, allow_empty=False
        )

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
        repo = self._writable(repository, force)
        if commit.compute_id() != commit.id:
            raise InvalidRefError(f"commit {commit.id}: ID does not match its content")
        for p in commit.parents:
            if not self.refs.has_commit(repo, p):
                raise CommitNotFoundError(
                    f"commit {commit.id}: parent {p} not found; import it first"
                )
        self.refs.add_commit(repo, commit)

    def branch_exists(self, repository: str, name: str) -> bool:
        """Return whether a branch exists."""
        try:
            self.get_branch(repository, name)
        except BranchNotFoundError:
            return False
        return True
