"""The commit records of one mirror: read from the source, copied to the mirror parents first.

A mirror branch may only point at a commit the mirror has, and a commit record may only be
added once its parents are there. :class:`CommitRecords` copies the records reachable from a
head that the mirror lacks, keeps the records it read (the source's and the mirror's copies
are the same records), and remembers which commits are known to be on the mirror, so that a
later chain stops there without asking.
"""

from __future__ import annotations

import asyncio
from collections import OrderedDict
from typing import Any

from mirror.errors import NotFoundError
from mirror.replicant.client import LakeFSClient, RemoteCommit
from mirror.replicant.history import parents_first
from mirror.replicant.metrics import ReplicantMetrics
from mirror.replicant.state import MirrorConfig

__all__ = ["COMMIT_CACHE", "CommitRecords"]

COMMIT_CACHE = 10_000
"""Commit records kept, and commits remembered as copied, per mirror (least recent dropped)."""


class CommitRecords:
    """Read, cache and copy the commit records of one mirror.

    Args:
        config: The mirror.
        source: The source region's API (read-only use).
        dest: This region's API, with the replicant's credentials.
        metrics: Where copied commits are counted.
        log: The mirror worker's logger.
    """

    def __init__(
        self,
        config: MirrorConfig,
        source: LakeFSClient,
        dest: LakeFSClient,
        metrics: ReplicantMetrics,
        log: Any,
    ) -> None:
        self.config = config
        self.source = source
        self.dest = dest
        self.metrics = metrics
        self.log = log
        """The mirror worker's logger."""
        self._commits: OrderedDict[str, RemoteCommit] = OrderedDict()
        # commits known to be on the mirror; forgetting one only costs a lookup on the mirror
        self._copied: OrderedDict[str, None] = OrderedDict()
        self._lock = asyncio.Lock()

    def _keep(self, commit_id: str, commit: RemoteCommit) -> RemoteCommit:
        self._commits[commit_id] = commit
        while len(self._commits) > COMMIT_CACHE:
            self._commits.popitem(last=False)
        return commit

    def _kept(self, commit_id: str) -> RemoteCommit | None:
        found = self._commits.get(commit_id)
        if found is not None:
            self._commits.move_to_end(commit_id)
        return found

    async def source_commit(self, commit_id: str) -> RemoteCommit:
        """Return a commit of the source, read once while kept."""
        found = self._kept(commit_id)
        if found is not None:
            return found
        commit = await self.source.get_commit(self.config.source_repo, commit_id)
        return self._keep(commit_id, commit)

    async def copied_commit(self, commit_id: str) -> RemoteCommit | None:
        """Return a commit as the mirror has it, or ``None`` if the mirror lacks it."""
        found = self._kept(commit_id)
        if found is not None:
            return found
        try:
            return self._keep(commit_id, await self.dest.get_commit(self.config.name, commit_id))
        except NotFoundError:
            return None

    async def tree_on_mirror(self, commit_id: str) -> str:
        """Return the metarange of a commit on the mirror (a preserved head is on it only)."""
        known = self._commits.get(commit_id)
        if known is not None:
            return known.meta_range_id
        return (await self.dest.get_commit(self.config.name, commit_id)).meta_range_id

    async def metarange_of(self, commit_id: str | None) -> str:
        """Return the metarange of a commit already on the mirror (validated), ``""`` if none."""
        if commit_id is None:
            return ""
        try:
            return (await self.dest.get_commit(self.config.name, commit_id)).meta_range_id
        except NotFoundError:
            return ""

    async def copy_chain(self, head: str) -> int:
        """Copy every commit reachable from ``head`` that the mirror lacks; return how many."""
        async with self._lock:
            missing: dict[str, RemoteCommit] = {}
            todo = [head]
            while todo:
                cid = todo.pop()
                if cid in self._copied or cid in missing:
                    continue
                if await self.dest.has_commit(self.config.name, cid):
                    self._remember_copied(cid)
                    continue
                commit = await self.source_commit(cid)
                missing[cid] = commit
                todo.extend(commit.parents)
            for commit in parents_first(missing):
                await self.dest.import_commit(self.config.name, commit)
                self._remember_copied(commit.id)
                self.metrics.commits_imported.labels(self.config.name).inc()
            if missing:
                self.log.info("commits copied", count=len(missing), head=head)
            return len(missing)

    def _remember_copied(self, commit_id: str) -> None:
        self._copied[commit_id] = None
        self._copied.move_to_end(commit_id)
        while len(self._copied) > COMMIT_CACHE:
            self._copied.popitem(last=False)
