"""Deleting a repository: its record, then every record of that instance, even after a failure.

Every record a repository has beside its ``repos/<repo>`` record is keyed by its instance
(``<repo>:<instance_uid>``), so a repository created again under the name sees none of them;
deleting the repository removes them too. In order:

1. a marker ``deleted-repos/<repo>:<instance_uid>`` (the repository record) is written;
2. the repository record is removed by compare-and-swap: from here on the repository is gone
   (404, the name is free);
3. the records of the instance go, each kind by its own cleanup: the staged changes of its
   branches, its refs (branches, tags, commits, settings), pull requests, metadata, and what the
   layers above the core registered on a :class:`CleanupRegistry` (action runs, imports, hidden
   branches, GC rules, the S3 gateway's multipart uploads: each layer offers the cleanup of the
   records it keeps, and the process assembling the layers registers every one);
4. the marker goes, once every cleanup succeeded.

The record goes first so that a failure half-way never leaves a repository that still answers
but lost some of its records (pull requests gone, branches kept): a repository is either all
there or gone. What a failure leaves is unreachable (keyed by an instance no record names any
more) and still marked, so :meth:`RepositoryDeletion.resume` (after every deletion, and when a
server starts) runs the cleanups again. They are idempotent: removing what is gone already is no
error, so resuming never fails on what an earlier attempt did.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from contextlib import suppress
from typing import Protocol

from mirror.core.model import Repository
from mirror.core.pulls import PullRequestStore
from mirror.core.refs import RefStore
from mirror.core.repository_metadata import RepositoryMetadataStore
from mirror.core.staging import StagingStore
from mirror.errors import LakeMirrorError, NotFoundError
from mirror.kv.errors import KVPreconditionFailedError
from mirror.kv.protocol import KV

__all__ = ["MARKERS", "CleanupRegistry", "RepositoryCleanup", "RepositoryDeletion"]

log = logging.getLogger(__name__)

MARKERS = b"deleted-repos/"
"""Where the deletions whose cleanups have not all succeeded yet are marked."""

RepositoryCleanup = Callable[[Repository], None]
"""Removes every record one kind keeps of a deleted repository instance; idempotent."""


class CleanupRegistry(Protocol):
    """Where the layers above the core register the cleanup of each kind of record they keep.

    :class:`~mirror.core.catalog.Catalog` is one: its deletions run every cleanup registered.
    """

    def add_repository_cleanup(self, name: str, cleanup: RepositoryCleanup) -> None:
        """Run ``cleanup`` on every deleted repository instance (``name``: replaces its like)."""
        ...


def _marker(repo: Repository) -> bytes:
    return MARKERS + f"{repo.id}:{repo.instance_uid}".encode()


class RepositoryDeletion:
    """Deletes repositories and, however often it takes, every record of theirs.

    Args:
        kv: Where every record lives.
        refs: The repository and ref records.
        staging: The staged changes of every branch.
    """

    def __init__(self, kv: KV, refs: RefStore, staging: StagingStore) -> None:
        self.kv = kv
        self.refs = refs
        self.staging = staging
        self._cleanups: dict[str, RepositoryCleanup] = {
            # staged changes are found through the branches, so before the refs
            "staging": self._drop_staging,
            "refs": refs.delete_instance,
            "pull requests": PullRequestStore(kv).delete_repository,
            "metadata": RepositoryMetadataStore(kv).delete_repository,
        }

    def register(self, name: str, cleanup: RepositoryCleanup) -> None:
        """Run ``cleanup`` on every deleted repository instance (``name``: replaces its like)."""
        self._cleanups[name] = cleanup

    def delete(self, repo: Repository) -> None:
        """Delete the repository instance ``repo`` and every record of it.

        A cleanup that fails is logged and left to :meth:`resume`; the repository is gone all
        the same.

        Raises:
            RepositoryNotFoundError: that instance of the repository is gone already.
        """
        marker = _marker(repo)
        try:
            self.kv.set_if(marker, repo.encode(), None)
            marked = True
        except KVPreconditionFailedError:
            marked = False  # an earlier attempt's: it stays, whatever happens here
        try:
            self.refs.remove_repository(repo)
        except BaseException:
            if marked:
                with suppress(LakeMirrorError):
                    self.kv.delete(marker)
            raise
        # the repository is gone: from here on nothing may fail the deletion
        try:
            self.finish(repo)
            self.resume()
        except LakeMirrorError as exc:
            log.warning("deletion of %s (%s) left to resume: %s", repo.id, repo.instance_uid, exc)

    def finish(self, repo: Repository) -> bool:
        """Run every cleanup on the deleted instance ``repo``; return whether all succeeded.

        The marker goes only when they all did.
        """
        done = True
        for name, cleanup in list(self._cleanups.items()):
            try:
                cleanup(repo)
            except Exception as exc:  # the others still run; this one runs again on resume
                done = False
                log.warning(
                    "%s of deleted repository %s (%s) not removed: %s",
                    name,
                    repo.id,
                    repo.instance_uid,
                    exc,
                )
        if done:
            self.kv.delete(_marker(repo))
        return done

    def resume(self) -> int:
        """Finish the deletions that failures left half-done; return how many are done now.

        A marker whose instance still has its repository record (its deletion failed before
        removing it, or runs now in another process) is left alone.
        """
        finished = 0
        for _, raw in list(self.kv.scan(MARKERS)):
            repo = Repository.decode(raw)
            try:
                if self.refs.get_repository(repo.id).instance_uid == repo.instance_uid:
                    continue
            except NotFoundError:
                pass
            finished += self.finish(repo)
        return finished

    def _drop_staging(self, repo: Repository) -> None:
        for branch in list(self.refs.list_branches(repo)):
            for token in branch.tokens:
                self.staging.drop_token(token)
