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
    PromotionNotFoundError,
    RefPreconditionFailedError,
    RepositoryExistsError,
    RepositoryNotFoundError,
    RepositoryPreconditionFailedError,
    RepositoryReadOnlyError,
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

    def get_repository_raw(self, repo_id: RepositoryID) -> tuple[Repository, bytes]:
        """Return the repository record and its exact stored bytes, for :meth:`set_repository_if`.

        Raises:
            RepositoryNotFoundError: no such repository.
        """
        try:
            raw = self.kv.get(_REPOS + repo_id.encode())
        except KeyNotFoundError as exc:
            raise RepositoryNotFoundError(f"{repo_id!r}") from exc
        return Repository.decode(raw), raw

    def set_repository_if(self, repo: Repository, expected: bytes) -> None:
        """Replace the repository record only if it still holds ``expected`` bytes.

        Raises:
            RepositoryPreconditionFailedError: the record changed (or vanished) meanwhile.
        """
        try:
            self.kv.set_if(_REPOS + repo.id.encode(), repo.encode(), expected)
        except KVPreconditionFailedError as exc:
            raise RepositoryPreconditionFailedError(f"repository {repo.id!r} changed") from exc

    def require_writable(self, repo: Repository) -> None:
        """Read the record of ``repo`` again and raise unless that instance is still writable.

        Called after a ref was read (or written) so that a demotion in between is noticed.

        Raises:
            RepositoryNotFoundError: the repository (that instance of it) is gone.
            RepositoryReadOnlyError: the repository is read-only now.
        """
        current = self.get_repository(repo.id)
        if current.instance_uid != repo.instance_uid:
            raise RepositoryNotFoundError(f"{repo.id!r}")
        if current.read_only:
            raise RepositoryReadOnlyError(repo.id)

    def set_promotion(self, repo: Repository, record: bytes) -> None:
        """Store the promotion record of ``repo``, replacing an older one."""
        self.kv.set(self._part(repo) + b"promotion", record)

    def get_promotion(self, repo: Repository) -> bytes:
        """Return the newest promotion record of ``repo``.

        Raises:
            PromotionNotFoundError: the repository was never promoted.
        """
        try:
            return self.kv.get(self._part(repo) + b"promotion")
        except KeyNotFoundError as exc:
            raise PromotionNotFoundError(f"promotion of repository {repo.id!r}") from exc

    def list_repositories(self, prefix: str = "", after: str = "") -> Iterator[Repository]:
        """Yield repositories whose names start with ``prefix`` and sort after ``after``."""
        start = _REPOS + after.encode() + b"\x00" if after else b""
        for _, value in self.kv.scan(_REPOS + prefix.encode(), start):
            yield Repository.decode(value)

    def remove_repository(self, repo: Repository) -> None:
        """Remove the repository record of instance ``repo`` (compare-and-swap).

        Only the instance ``repo`` names is removed: a repository re-created under the same
        name meanwhile (by another process, say) stays. The records under its instance prefix
        are left to :meth:`delete_instance`.

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

    def delete_instance(self, repo: Repository) -> None:
        """Delete every record under the instance prefix of ``repo`` (none left: no error)."""
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

    def create_branch(
        self, repo: Repository, branch: Branch, *, require_writable: bool = False
    ) -> None:
        """Create ``branch`` if absent.

        With ``require_writable`` the repository record is read again once the branch exists:
        if the repository was demoted meanwhile, the branch is deleted again (also when the
        demotion fenced it already) and the creation refused, so no creation is acknowledged
        after a demotion answered (a demotion lists branches only after it marked the
        repository read-only).

        Raises:
            BranchExistsError: a branch of that name exists.
            RepositoryReadOnlyError: ``require_writable`` and the repository is read-only now.
        """
        key = self._branch_key(repo, branch.id)
        encoded = branch.encode()
        try:
            self.kv.set_if(key, encoded, None)
        except KVPreconditionFailedError as exc:
            raise BranchExistsError(f"{branch.id!r} in repository {repo.id!r}") from exc
        if not require_writable:
            return
        try:
            self.require_writable(repo)
        except (RepositoryReadOnlyError, RepositoryNotFoundError):
            self._undo_branch(key, branch)
            raise

    def _undo_branch(self, key: bytes, branch: Branch) -> None:
        """Delete a branch just created, unless someone moved it from ``branch``'s head."""
        raw = branch.encode()
        # a demotion may have fenced it (new fence and staging token, same head) meanwhile
        for _ in range(10):
            try:
                self.kv.delete_if(key, raw)
                return
            except KVPreconditionFailedError as exc:
                if exc.found is None:
                    return
                if Branch.decode(branch.id, exc.found).commit_id != branch.commit_id:
                    return  # moved on by someone else: not ours to delete any more
                raw = exc.found

    def set_branch_if(
        self, repo: Repository, branch: Branch, expected: bytes, *, require_writable: bool = True
    ) -> None:
        """Replace the branch record only if it still holds ``expected`` bytes.

        ``expected`` must have been read before this call: with ``require_writable`` (every
        ordinary write) the repository record is read now, after the branch was, so a
        demotion that began since is either seen here (refused) or fences the branch before
        this compare-and-swap (which then fails and, retried, is refused).

        Raises:
            RefPreconditionFailedError: the record changed (or vanished) meanwhile.
            RepositoryReadOnlyError: ``require_writable`` and the repository is read-only now.
        """
        if require_writable:
            self.require_writable(repo)
        try:
            self.kv.set_if(self._branch_key(repo, branch.id), branch.encode(), expected)
        except KVPreconditionFailedError as exc:
            found = Branch.decode(branch.id, exc.found).commit_id if exc.found else None
            before = Branch.decode(branch.id, expected).commit_id
            raise RefPreconditionFailedError(branch.id, before, found) from exc

    def delete_branch(
        self, repo: Repository, branch_id: BranchID, *, require_writable: bool = False
    ) -> Branch:
        """Delete a branch and return what it held.

        With ``require_writable`` the repository record is read after the branch, as
        :meth:`set_branch_if` does.

        Raises:
            BranchNotFoundError: no such branch.
            RefPreconditionFailedError: the branch changed meanwhile.
            RepositoryReadOnlyError: ``require_writable`` and the repository is read-only now.
        """
        branch, raw = self.get_branch_raw(repo, branch_id)
        if require_writable:
            self.require_writable(repo)
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

    def create_tag(
        self,
        repo: Repository,
        tag_id: TagID,
        commit_id: CommitID,
        *,
        require_writable: bool = False,
    ) -> None:
        """Create an immutable tag.

        With ``require_writable`` the repository record is read again once the tag exists, and
        a tag created on a repository demoted meanwhile is deleted again and refused.

        Raises:
            TagExistsError: the tag exists (tags are never moved).
            RepositoryReadOnlyError: ``require_writable`` and the repository is read-only now.
        """
        key = self._tag_key(repo, tag_id)
        try:
            self.kv.set_if(key, commit_id.encode(), None)
        except KVPreconditionFailedError as exc:
            raise TagExistsError(f"{tag_id!r} in repository {repo.id!r}") from exc
        if not require_writable:
            return
        try:
            self.require_writable(repo)
        except (RepositoryReadOnlyError, RepositoryNotFoundError):
            try:
                self.kv.delete_if(key, commit_id.encode())
            except KVPreconditionFailedError:
                pass
            raise

    def get_tag(self, repo: Repository, tag_id: TagID) -> CommitID:
        """Return the commit a tag points at.

        Raises:
            TagNotFoundError: no such tag.
        """
        try:
            return CommitID(self.kv.get(self._tag_key(repo, tag_id)).decode())
        except KeyNotFoundError as exc:
            raise TagNotFoundError(f"{tag_id!r} in repository {repo.id!r}") from exc

    def delete_tag(
        self, repo: Repository, tag_id: TagID, *, require_writable: bool = False
    ) -> None:
        """Delete a tag.

        With ``require_writable`` the repository record is read again once the tag is gone,
        and a tag deleted from a repository demoted meanwhile is put back and the deletion
        refused.

        Raises:
            TagNotFoundError: no such tag.
            RepositoryReadOnlyError: ``require_writable`` and the repository is read-only now.
        """
        key = self._tag_key(repo, tag_id)
        gone = TagNotFoundError(f"{tag_id!r} in repository {repo.id!r}")
        try:
            raw = self.kv.get(key)
            # only the tag as read: one re-created meanwhile is another tag
            self.kv.delete_if(key, raw)
        except (KeyNotFoundError, KVPreconditionFailedError) as exc:
            raise gone from exc
        if not require_writable:
            return
        try:
            self.require_writable(repo)
        except (RepositoryReadOnlyError, RepositoryNotFoundError):
            try:
                self.kv.set_if(key, raw, None)
            except KVPreconditionFailedError:
                pass  # created again meanwhile: tags never move, so it is the same or newer
            raise

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
