"""``prepare_commits``: decide which commits a run retains and write them down as lakeFS does.

The retained commits go to ``<ns>/_lakefs/retention/gc/commits/run_id=<run>/commits.csv``, one
row per retained commit: ``commit_id,expired,metarange_id`` with ``expired`` always ``false``.
A garbage collection job reads that file, then the retained commits' metaranges and ranges
straight from the namespace.
"""

from __future__ import annotations

import csv
import io
import time
from collections.abc import Iterator
from dataclasses import dataclass

from mirror.core.catalog import Catalog
from mirror.core.ids import CommitID, MetaRangeID
from mirror.core.model import Repository
from mirror.gc.errors import GCReadOnlyError
from mirror.gc.layout import ADDRESSES_PREFIX, commits_key, new_run_id
from mirror.gc.retention import CommitNode, retained_commits
from mirror.gc.rules import GCRulesStore

__all__ = ["COMMITS_HEADER", "PreparedCommits", "gc_repository", "prepare_commits"]

COMMITS_HEADER = ("commit_id", "expired", "metarange_id")
"""The columns of the retained-commits CSV."""


@dataclass(frozen=True, slots=True)
class PreparedCommits:
    """What ``prepare_commits`` wrote.

    Attributes:
        run_id: The run's ID.
        commits_location: The full URI of the CSV.
        addresses_location: lakeFS's legacy addresses location (nothing is written there).
        retained: ``(commit, metarange)`` of every retained commit, by commit ID.
    """

    run_id: str
    commits_location: str
    addresses_location: str
    retained: tuple[tuple[CommitID, MetaRangeID], ...]


def gc_repository(catalog: Catalog, name: str) -> Repository:
    """Return the repository called ``name`` if garbage collection may touch it.

    Raises:
        RepositoryNotFoundError: no such repository.
        GCReadOnlyError: the repository is read-only (a mirror).
    """
    repo = catalog.get_repository(name)
    if repo.read_only:
        detail = (
            f"repository {repo.id!r} is a read-only mirror of {repo.mirror_of!r}: garbage "
            "collection runs on the source, and its deletions reach the mirror by replication"
            if repo.mirror_of
            else f"repository {repo.id!r} is read-only"
        )
        raise GCReadOnlyError(repo.id, detail)
    return repo


def _commits(catalog: Catalog, repo: Repository) -> Iterator[tuple[CommitID, CommitNode]]:
    refs = catalog.refs
    for cid in refs.commits_with_prefix(repo, "", limit=1 << 62):
        yield cid, CommitNode.of(refs.get_commit(repo, cid))


def _csv(retained: list[tuple[CommitID, MetaRangeID]]) -> bytes:
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(COMMITS_HEADER)
    for cid, mid in retained:
        writer.writerow((cid, "false", mid))
    return out.getvalue().encode()


def prepare_commits(catalog: Catalog, repository: str, now: int | None = None) -> PreparedCommits:
    """Compute the commits the repository's rules retain and write them to the namespace.

    Commits are read before branch heads, so a commit made meanwhile is either read or reached
    from a head (and then read on its own).

    Raises:
        RepositoryNotFoundError: no such repository.
        GCReadOnlyError: the repository is read-only (a mirror).
        GCRulesNotFoundError: the repository has no rules (lakeFS: 404; a job then retains
            every commit).
    """
    repo = gc_repository(catalog, repository)
    rules = GCRulesStore(catalog.kv).get(repo)
    at = int(time.time()) if now is None else now
    nodes = dict(_commits(catalog, repo))
    heads = [(b.id, b.commit_id) for b in catalog.refs.list_branches(repo)]
    refs = catalog.refs

    def lookup(cid: CommitID) -> CommitNode:
        found = nodes[cid] = CommitNode.of(refs.get_commit(repo, cid))
        return found

    keep = retained_commits(nodes, heads, rules, at, lookup=lookup)
    retained = sorted((cid, nodes[cid].metarange_id) for cid in keep)
    run_id = new_run_id(at)
    key = commits_key(run_id)
    catalog.block_store(repo).put(key, _csv(retained))
    namespace = repo.storage_namespace.rstrip("/")
    return PreparedCommits(
        run_id=run_id,
        commits_location=f"{namespace}/{key}",
        addresses_location=f"{namespace}/{ADDRESSES_PREFIX}",
        retained=tuple(retained),
    )
