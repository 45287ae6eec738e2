"""Refs dump and restore: every commit, tag and branch of a repository as three metaranges.

As lakeFS's ``refs/dump`` does, each kind of ref becomes a metarange in the repository's
storage namespace, written with the same range writer as committed data
(:class:`~mirror.core.tree_writer.MetaRangeWriter`), keyed by the ref's ID in order:

- commits: the key is the commit ID; the record holds the whole commit (committer, message,
  metarange, date, parents, metadata, generation, version);
- tags: the key is the tag; the record holds the commit it points at;
- branches: the key is the branch; the record holds its head commit.

A record's entry carries the encoded ref in its metadata (``record``), with a content type
naming its kind, its size and SHA-256, and in ``address`` the ID it points at (the commit's
metarange, the tag's or branch's commit). The three IDs are also written, as JSON, to
``_lakefs/refs_manifest.json``.

Restoring reads the three metaranges back into a bare repository (no commit, branch or tag),
on a namespace holding the dumped files (the same one, or a copy): commits first, each
checked against its content-derived ID and its parents against the dump, then tags, then
branches. Ranges are read and written uncached, and a restore keeps one ID per commit in memory.
"""

from __future__ import annotations

import hashlib
import json
import sys
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING

from mirror.core.committed import METADATA_PREFIX, CommittedStore, WriteStats
from mirror.core.errors import (
    CommitNotFoundError,
    InvalidRefError,
    LakeFSText,
    RepositoryReadOnlyError,
)
from mirror.core.ids import BranchID, CommitID, TagID
from mirror.core.model import Branch, Commit, Entry, Repository, decode_json, encode_json
from mirror.core.staging import StagingStore
from mirror.core.tree_writer import MetaRangeWriter
from mirror.errors import InvalidValueError

if TYPE_CHECKING:
    from mirror.core.catalog import Catalog

__all__ = [
    "BRANCH_RECORD",
    "COMMIT_RECORD",
    "MANIFEST_KEY",
    "TAG_RECORD",
    "InvalidDumpError",
    "NotBareRepositoryError",
    "RefsDump",
    "dump_refs",
    "require_bare",
    "restore_refs",
]

MANIFEST_KEY = METADATA_PREFIX + "refs_manifest.json"
"""Where a dump writes its three metarange IDs, relative to the namespace (lakeFS's name)."""

COMMIT_RECORD = "application/vnd.lakemirror.commit+json"
TAG_RECORD = "application/vnd.lakemirror.tag+json"
BRANCH_RECORD = "application/vnd.lakemirror.branch+json"
_RECORD = "record"
_ALL = sys.maxsize


class NotBareRepositoryError(LakeFSText, InvalidValueError):
    """A restore into a repository that has commits, branches or tags already (400)."""

    lakefs_text = "can only restore into a bare repository"


class InvalidDumpError(InvalidValueError):
    """A metarange named for a restore does not hold refs of the kind expected (400)."""


@dataclass(frozen=True, slots=True)
class RefsDump:
    """The three metaranges of a dump (lakeFS's ``RefsDump``)."""

    commits_meta_range_id: str
    tags_meta_range_id: str
    branches_meta_range_id: str

    def to_json(self) -> dict[str, str]:
        """Return the dump as lakeFS's JSON object."""
        return {
            "commits_meta_range_id": self.commits_meta_range_id,
            "tags_meta_range_id": self.tags_meta_range_id,
            "branches_meta_range_id": self.branches_meta_range_id,
        }


def _entry(kind: str, points_at: str, record: bytes, mtime: int = 0) -> Entry:
    return Entry(
        address=points_at,
        size=len(record),
        checksum=hashlib.sha256(record).hexdigest(),
        mtime=mtime,
        content_type=kind,
        metadata={_RECORD: record.decode()},
    )


def _write(catalog: Catalog, repo: Repository, records: Iterable[tuple[str, Entry]]) -> str:
    writer = MetaRangeWriter(_uncached(catalog, repo), catalog.chunking, WriteStats())
    for key, entry in records:
        writer.add(key, entry)
    return str(writer.close())


def _commit_records(commits: Iterable[Commit]) -> Iterator[tuple[str, Entry]]:
    for commit in commits:
        yield (
            commit.id,
            _entry(COMMIT_RECORD, commit.metarange_id, commit.encode(), commit.creation_date),
        )


def _pointer(commit_id: str) -> bytes:
    return encode_json({"commit_id": commit_id})


def dump_refs(catalog: Catalog, repository: str) -> RefsDump:
    """Write every commit, tag and branch of ``repository`` as three metaranges.

    Branches and tags are read before commits, so every commit they point at is dumped (a
    commit is stored before any ref points at it). Allowed on read-only repositories.

    Raises:
        RepositoryNotFoundError: no such repository.
    """
    repo = catalog.get_repository(repository)
    refs = catalog.refs
    branches = [(b.id, b.commit_id) for b in refs.list_branches(repo)]
    tags = list(refs.list_tags(repo))
    commit_ids = refs.commits_with_prefix(repo, "", limit=_ALL)
    commits_mid = _write(
        catalog, repo, _commit_records(refs.get_commit(repo, c) for c in commit_ids)
    )
    tags_mid = _write(catalog, repo, ((t, _entry(TAG_RECORD, c, _pointer(c))) for t, c in tags))
    branches_mid = _write(
        catalog, repo, ((b, _entry(BRANCH_RECORD, c, _pointer(c))) for b, c in branches)
    )
    dump = RefsDump(commits_mid, tags_mid, branches_mid)
    # lakeFS writes its generated struct indented, fields in name order
    manifest = json.dumps(dump.to_json(), indent=2, sort_keys=True).encode()
    catalog.block_store(repo).put(MANIFEST_KEY, manifest)
    return dump


def _uncached(catalog: Catalog, repo: Repository) -> CommittedStore:
    # a dump's ranges are read or written once: caching them would only hold memory
    return CommittedStore(catalog.block_store(repo), cache_size=0)


def _records(store: CommittedStore, mid: str, kind: str) -> Iterator[tuple[str, bytes]]:
    if not mid:
        raise InvalidDumpError(f"{kind}: no metarange ID given")
    for key, entry in store.iterate(mid):
        record = entry.metadata.get(_RECORD)
        if entry.content_type != kind or record is None:
            raise InvalidDumpError(
                f"metarange {mid} holds {key!r} of type {entry.content_type!r}, not {kind}"
            )
        yield key, record.encode()


def _target(raw: bytes, what: str) -> CommitID:
    try:
        value = decode_json(raw).get("commit_id")
    except ValueError as exc:
        raise InvalidDumpError(f"{what}: unreadable record: {exc}") from exc
    if not isinstance(value, str) or not value:
        raise InvalidDumpError(f"{what}: the record names no commit")
    return CommitID(value)


def require_bare(catalog: Catalog, repo: Repository) -> None:
    """Return if ``repo`` has no commit, branch or tag.

    Raises:
        NotBareRepositoryError: it has one.
    """
    refs = catalog.refs
    if (
        refs.commits_with_prefix(repo, "", limit=1)
        or next(iter(refs.list_branches(repo)), None) is not None
        or next(iter(refs.list_tags(repo)), None) is not None
    ):
        raise NotBareRepositoryError(
            f"repository {repo.id!r} has commits, branches or tags already"
        )


def _commits(store: CommittedStore, mid: str) -> Iterator[Commit]:
    """Yield the dump's commits in ID order, each checked against its content-derived ID."""
    for key, raw in _records(store, mid, COMMIT_RECORD):
        try:
            commit = Commit.decode(raw)
        except (ValueError, KeyError, TypeError) as exc:
            raise InvalidDumpError(f"commit {key}: unreadable record: {exc}") from exc
        if commit.id != key or commit.compute_id() != commit.id:
            raise InvalidRefError(f"commit {key}: record does not match its ID")
        yield commit


def restore_refs(catalog: Catalog, repository: str, dump: RefsDump, *, force: bool = False) -> None:
    """Load a dump's commits, tags and branches into the bare repository ``repository``.

    Every record is read and checked before anything is written: a first pass over the
    commits keeps only their IDs (and parents not seen yet), a second one writes them, so
    memory grows with the number of commits by an ID each, not by their records. ``force``
    allows a read-only repository that is not a mirror (as lakeFS's ``force``); a mirror's refs
    are only ever written by replication, so a mirror always refuses.

    Raises:
        RepositoryNotFoundError: no such repository.
        RepositoryReadOnlyError: a mirror, or read-only without ``force``.
        NotBareRepositoryError: the repository has a commit, branch or tag.
        InvalidDumpError: a metarange holds something else than the refs expected.
        InvalidRefError: a commit record does not match its ID.
        CommitNotFoundError: a parent, tag or branch names a commit not in the dump.
        BlockNotFoundError: a metarange or range file is missing from the namespace.
    """
    repo = catalog.get_repository(repository)
    if repo.read_only and (repo.mirror_of or not force):
        raise RepositoryReadOnlyError(repo.id)
    require_bare(catalog, repo)
    store = _uncached(catalog, repo)
    ids: set[str] = set()
    unseen: set[str] = set()
    for commit in _commits(store, dump.commits_meta_range_id):
        ids.add(commit.id)
        unseen.discard(commit.id)
        unseen.update(p for p in commit.parents if p not in ids)
    if unseen:
        raise CommitNotFoundError(f"commit {min(unseen)}, a parent, is not in the dump")
    tags = [
        (TagID(k), _target(raw, f"tag {k}"))
        for k, raw in _records(store, dump.tags_meta_range_id, TAG_RECORD)
    ]
    branches = [
        (BranchID(k), _target(raw, f"branch {k}"))
        for k, raw in _records(store, dump.branches_meta_range_id, BRANCH_RECORD)
    ]
    for name, target in (*tags, *branches):
        if target not in ids:
            raise CommitNotFoundError(f"{name}: commit {target} is not in the dump")
    refs = catalog.refs
    # no ref points at a commit before the branches are written last, so the order of the
    # commits themselves does not matter
    for commit in _commits(store, dump.commits_meta_range_id):
        refs.add_commit(repo, commit)
    # a demotion meanwhile stops the restore (unless forced, as a read-only write is)
    for tag, target in tags:
        refs.create_tag(repo, tag, target, require_writable=not force)
    for branch, target in branches:
        fresh = Branch(branch, target, StagingStore.new_token())
        refs.create_branch(repo, fresh, require_writable=not force)
