"""The object and diff half of the :class:`~mirror.core.catalog.Catalog` facade.

Reads, writes and listings of objects and the diffs between trees, each handed to the module of
its concept (``objects``, ``listing``, ``changes``) over the catalog's
:class:`~mirror.core.context.CatalogContext`.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from typing import BinaryIO

from mirror.block.protocol import BlockStore
from mirror.core import changes, listing, objects
from mirror.core.context import CatalogContext
from mirror.core.diff import TreeDiff
from mirror.core.listing import ListResult
from mirror.core.model import DiffEntry, Entry, ObjectStat, Repository


class ObjectsFacade:
    """Objects and diffs of a :class:`~mirror.core.catalog.Catalog` (mixed into it)."""

    _ctx: CatalogContext

    # objects

    def physical_address(self, repo: Repository, entry: Entry) -> str:
        """Return the absolute URI of an entry's bytes."""
        return objects.physical_address(repo, entry)

    def open_entry(self, repo: Repository, entry: Entry) -> tuple[BlockStore, str]:
        """Return the store holding an entry's bytes and the key inside it."""
        return objects.open_entry(self._ctx, repo, entry)

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
        return objects.upload_object(
            self._ctx,
            repository,
            branch,
            path,
            data,
            content_type=content_type,
            metadata=metadata,
        )

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
        return objects.stage_objects(self._ctx, repository, branch, items, force=force)

    def stat_object(self, repository: str | Repository, ref: str, path: str) -> ObjectStat:
        """Return an object's entry at ``ref`` (``repository``: a name, or a record just read).

        Raises:
            ObjectNotFoundError: nothing at ``path``.
        """
        return objects.stat_object(self._ctx, repository, ref, path)

    def read_object(
        self, repository: str, ref: str, path: str, start: int = 0, end: int | None = None
    ) -> bytes:
        """Return bytes ``[start, end)`` of the object at ``path`` of ``ref``.

        Raises:
            ObjectNotFoundError: nothing at ``path``.
            InvalidRangeError: ``start`` lies beyond the end.
        """
        return objects.read_object(self._ctx, repository, ref, path, start, end)

    def delete_object(self, repository: str, branch: str, path: str) -> None:
        """Stage the deletion of ``path`` on ``branch``.

        Raises:
            ObjectNotFoundError: nothing at ``path`` on the branch.
        """
        self.delete_objects(repository, branch, [path])

    def update_user_metadata(
        self, repository: str, branch: str, path: str, metadata: Mapping[str, str]
    ) -> ObjectStat:
        """Replace an object's user metadata on ``branch`` (a staged change).

        Raises:
            ObjectNotFoundError, ProtectedBranchWriteError, RepositoryReadOnlyError.
        """
        return objects.update_user_metadata(self._ctx, repository, branch, path, metadata)

    def delete_objects(self, repository: str, branch: str, paths: Iterable[str]) -> list[str]:
        """Stage deletions of every existing path in ``paths``; return the missing ones.

        Raises:
            ObjectNotFoundError: a single path was given and it does not exist.
        """
        return objects.delete_objects(self._ctx, repository, branch, paths)

    def iter_objects(
        self, repository: str, ref: str, prefix: str = "", after: str = ""
    ) -> Iterator[ObjectStat]:
        """Yield every object under ``prefix`` at ``ref`` with path ``> after``, in path order.

        A branch is read once, when the iteration starts; the objects stream from its staging
        area and head as they are read. :meth:`list_objects` answers pages that are consistent
        with commits landing meanwhile.
        """
        return listing.iter_objects(self._ctx, repository, ref, prefix, after)

    def list_objects(
        self,
        repository: str | Repository,
        ref: str,
        prefix: str = "",
        *,
        after: str = "",
        amount: int = 1000,
        delimiter: str = "",
    ) -> ListResult:
        """Return one page of objects (and common prefixes, with a delimiter) under ``prefix``.

        ``repository``: a name, or a record just read.

        On a branch, the page is read again if a commit moved the branch meanwhile, so that it
        never lacks an object staged before the listing started.
        """
        return listing.list_objects(
            self._ctx, repository, ref, prefix, after=after, amount=amount, delimiter=delimiter
        )

    # diffs

    def diff(self, repository: str, left: str, right: str, *, three_dot: bool = False) -> TreeDiff:
        """Return the differences between the commits of two refs, in path order.

        ``three_dot`` diffs ``right`` against the merge base of the two (what a merge of
        ``right`` into ``left`` would bring). The answer is an iterator that can also jump
        ahead (:meth:`TreeDiff.seek`), passing over unread whatever it skips.
        """
        return changes.diff_refs(self._ctx, repository, left, right, three_dot=three_dot)

    def diff_uncommitted(
        self, repository: str, branch: str, prefix: str = ""
    ) -> Iterator[DiffEntry]:
        """Yield the staged changes of a branch against its head commit, in path order."""
        return changes.diff_uncommitted(self._ctx, repository, branch, prefix)
