"""Repositories, branches, tags and commit records in the KV; refs move only by CAS.

Layout: ``repos/<repo>`` holds the repository record; every other record of a repository lives
under ``refs/<repo>:<instance_uid>/`` so that a repository re-created under the same name never
sees leftovers of a deletion that was cut short.
"""

from __future__ import annotations

import itertools
import threading
from collections import OrderedDict
from collections.abc import Iterator

from mirror.core.errors import (
    BranchExistsError,
    BranchNotFoundError,
    CommitNotFoundError,
    RefPreconditionFailedError,
    RepositoryExistsError,
    RepositoryNotFoundError,
    TagExistsError,
    TagNotFoundError,
)
from mirror.core.ids import BranchID, CommitID, RepositoryID, TagID
from mirror.core.model import Branch, Commit, Repository
from mirror.kv.errors import KeyNotFoundError, KVPreconditionFailedError
from mirror.kv.protocol import KV

__all__ = ["RefStore"]

_REPOS = b"repos/"


class RefStore:
    """CRUD with compare-and-swap for the ref records of every repository."""

    def __init__(self, kv: KV, commit_cache_size: int = 50_000) -> None:
        self.kv = kv
        self._commits: OrderedDict[tuple[str, str], Commit] = OrderedDict()
        self._cache_size = commit_cache_size
        self._lock = threading.Lock()

    @staticmethod
    def _part(repo: Repository) -> bytes:
        return f"refs/{repo.id}:{repo.instance_uid}/".encode()

    # repositories

    def create_repository(
        self, repo: Repository, initial: Commit | None = None, branch: Branch | None = None
    ) -> None:
        """Create ``repo`` with its initial commit and default branch (bare: with neither).

        The repository record is written last, so a failure part-way leaves only unreachable
        records under a fresh instance prefix.

        Raises:
            RepositoryExistsError: a repository of that name exists.
        """
        key = _REPOS + repo.id.encode()
        try:
            self.kv.get(key)
        except KeyNotFoundError:
            pass
        else:
            raise RepositoryExistsError(f"repository {repo.id!r} already exists")
        if initial is not None:
            self.add_commit(repo, initial)
        if branch is not None:
            self.create_branch(repo, branch)
        try:
            self.kv.set_if(key, repo.encode(), None)
        except KVPreconditionFailedError as exc:
            raise RepositoryExistsError(f"repository {repo.id!r} already exists") from exc

    def get_repository(self, repo_id: RepositoryID) -> Repository:
        """Return the repository record.

        Raises:
            RepositoryNotFoundError: no such repository.
        """
        try:
            return Repository.decode(self.kv.get(_REPOS + repo_id.encode()))
        except KeyNotFoundError as exc:
            raise RepositoryNotFoundError(f"{repo_id!r}") from exc

    def list_repositories(self, prefix: str = "", after: str = "") -> Iterator[Repository]:
        """Yield repositories whose names start with ``prefix`` and sort after ``after``."""
        start = _REPOS + after.encode() + b"\x00" if after else b""
        for _, value in self.kv.scan(_REPOS + prefix.encode(), start):
            yield Repository.decode(value)

    def delete_repository(self, repo: Repository) -> None:
        """Delete the repository record, then every record under its instance prefix.

        Only the instance ``repo`` names is deleted: a repository re-created under the same
        name meanwhile (by another process, say) stays.

        Raises:
            RepositoryNotFoundError: that instance of the repository is gone already.
        """
        key = _REPOS + repo.id.encode()
        gone = RepositoryNotFoundError(f"{repo.id!r}")
        try:
            raw = self.kv.get(key)
        except KeyNotFoundError as exc:
            raise gone from exc
        if Repository.decode(raw).instance_uid != repo.instance_uid:
            raise gone
        try:
            self.kv.delete_if(key, raw)
        except KVPreconditionFailedError as exc:
            raise gone from exc
        part = self._part(repo)
        while True:
            keys = [k for k, _ in itertools.islice(self.kv.scan(part), 1000)]
            if not keys:
                return
            for k in keys:
                self.kv.delete(k)

    # branches

    def _branch_key(self, repo: Repository, branch_id: str) -> bytes:
        return self._part(repo) + b"branches/" + branch_id.encode()

    def get_branch_raw(self, repo: Repository, branch_id: BranchID) -> tuple[Branch, bytes]:
        """Return a branch and the exact stored bytes, for a later :meth:`set_branch_if`.

        Raises:
            BranchNotFoundError: no such branch.
        """
        try:
            raw = self.kv.get(self._branch_key(repo, branch_id))
        except KeyNotFoundError as exc:
            raise BranchNotFoundError(f"{branch_id!r} in repository {repo.id!r}") from exc
        return Branch.decode(branch_id, raw), raw

    def get_branch(self, repo: Repository, branch_id: BranchID) -> Branch:
        """Return a branch.

        Raises:
            BranchNotFoundError: no such branch.
        """
        return self.get_branch_raw(repo, branch_id)[0]

    def branch_exists(self, repo: Repository, branch_id: str) -> bool:
        """Return whether the branch exists."""
        try:
            self.kv.get(self._branch_key(repo, branch_id))
        except KeyNotFoundError:
            return False
        return True

    def create_branch(self, repo: Repository, branch: Branch) -> None:
        """Create ``branch`` if absent.

        Raises:
            BranchExistsError: a branch of that name exists.
        """
        try:
            self.kv.set_if(self._branch_key(repo, branch.id), branch.encode(), None)
        except KVPreconditionFailedError as exc:
            raise BranchExistsError(f"{branch.id!r} in repository {repo.id!r}") from exc

    def set_branch_if(self, repo: Repository, branch: Branch, expected: bytes) -> None:
        """Replace the branch record only if it still holds ``expected`` bytes.

        Raises:
            RefPreconditionFailedError: the record changed (or vanished) meanwhile.
        """
        try:
            self.kv.set_if(self._branch_key(repo, branch.id), branch.encode(), expected)
        except KVPreconditionFailedError as exc:
            found = Branch.decode(branch.id, exc.found).commit_id if exc.found else None
            before = Branch.decode(branch.id, expected).commit_id
            raise RefPreconditionFailedError(branch.id, before, found) from exc

    def delete_branch(self, repo: Repository, branch_id: BranchID) -> Branch:
        """Delete a branch and return what it held.

        Raises:
            BranchNotFoundError: no such branch.
        """
        branch, raw = self.get_branch_raw(repo, branch_id)
        try:
            self.kv.delete_if(self._branch_key(repo, branch_id), raw)
        except KVPreconditionFailedError as exc:
            raise RefPreconditionFailedError(branch_id, branch.commit_id, None) from exc
        return branch

    def list_branches(
        self, repo: Repository, prefix: str = "", after: str = ""
    ) -> Iterator[Branch]:
        """Yield branches whose names start with ``prefix`` and sort after ``after``."""
        base = self._part(repo) + b"branches/"
        start = base + after.encode() + b"\x00" if after else b""
        for key, value in self.kv.scan(base + prefix.encode(), start):
            yield Branch.decode(BranchID(key[len(base) :].decode()), value)

    # tags

    def _tag_key(self, repo: Repository, tag_id: str) -> bytes:
        return self._part(repo) + b"tags/" + tag_id.encode()

    def create_tag(self, repo: Repository, tag_id: TagID, commit_id: CommitID) -> None:
        """Create an immutable tag.

        Raises:
            TagExistsError: the tag exists (tags are never moved).
        """
        try:
            self.kv.set_if(self._tag_key(repo, tag_id), commit_id.encode(), None)
        except KVPreconditionFailedError as exc:
            raise TagExistsError(f"{tag_id!r} in repository {repo.id!r}") from exc

    def get_tag(self, repo: Repository, tag_id: TagID) -> CommitID:
        """Return the commit a tag points at.

        Raises:
            TagNotFoundError: no such tag.
        """
        try:
            return CommitID(self.kv.get(self._tag_key(repo, tag_id)).decode())
        except KeyNotFoundError as exc:
            raise TagNotFoundError(f"{tag_id!r} in repository {repo.id!r}") from exc

    def delete_tag(self, repo: Repository, tag_id: TagID) -> None:
        """Delete a tag.

        Raises:
            TagNotFoundError: no such tag.
        """
        key = self._tag_key(repo, tag_id)
        gone = TagNotFoundError(f"{tag_id!r} in repository {repo.id!r}")
        try:
            # only the tag as read: one re-created meanwhile is another tag
            self.kv.delete_if(key, self.kv.get(key))
        except (KeyNotFoundError, KVPreconditionFailedError) as exc:
            raise gone from exc

    def list_tags(
        self, repo: Repository, prefix: str = "", after: str = ""
    ) -> Iterator[tuple[TagID, CommitID]]:
        """Yield ``(tag, commit)`` for tags starting with ``prefix`` and sorting after ``after``."""
        base = self._part(repo) + b"tags/"
        start = base + after.encode() + b"\x00" if after else b""
        for key, value in self.kv.scan(base + prefix.encode(), start):
            yield TagID(key[len(base) :].decode()), CommitID(value.decode())

    # commits

    def _commit_key(self, repo: Repository, commit_id: str) -> bytes:
        return self._part(repo) + b"commits/" + commit_id.encode()

    def add_commit(self, repo: Repository, commit: Commit) -> None:
        """Store a commit record; storing an identical record again is a no-op."""
        try:
            self.kv.set_if(self._commit_key(repo, commit.id), commit.encode(), None)
        except KVPreconditionFailedError:
            pass  # content-addressed: the same ID holds the same commit

    def get_commit(self, repo: Repository, commit_id: CommitID) -> Commit:
        """Return a commit record (cached: commits never change).

        Raises:
            CommitNotFoundError: no such commit.
        """
        ck = (repo.instance_uid, commit_id)
        with self._lock:
            hit = self._commits.get(ck)
            if hit is not None:
                self._commits.move_to_end(ck)
                return hit
        try:
            commit = Commit.decode(self.kv.get(self._commit_key(repo, commit_id)))
        except KeyNotFoundError as exc:
            raise CommitNotFoundError(f"{commit_id!r} in repository {repo.id!r}") from exc
        with self._lock:
            self._commits[ck] = commit
            while len(self._commits) > self._cache_size:
                self._commits.popitem(last=False)
        return commit

    def has_commit(self, repo: Repository, commit_id: str) -> bool:
        """Return whether a commit record exists."""
        try:
            self.get_commit(repo, CommitID(commit_id))
        except CommitNotFoundError:
            return False
        return True

    def commits_with_prefix(self, repo: Repository, prefix: str, limit: int = 2) -> list[CommitID]:
        """Return up to ``limit`` commit IDs starting with ``prefix``, in order."""
        base = self._part(repo) + b"commits/"
        found = []
        for key, _ in self.kv.scan(base + prefix.encode()):
            found.append(CommitID(key[len(base) :].decode()))
            if len(found) >= limit:
                break
        return found
