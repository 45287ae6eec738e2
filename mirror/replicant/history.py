"""Walks over commit history: ancestry, the commits ahead of a head, probes, parents-first order."""

from __future__ import annotations

import heapq
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from mirror.errors import NotFoundError
from mirror.replicant.client import LakeFSClient, RemoteCommit
from mirror.replicant.state import Lag

__all__ = [
    "Ahead",
    "Ancestry",
    "CommitReader",
    "commits_ahead",
    "intermediate_probes",
    "parents_first",
]

CommitReader = Callable[[str], Awaitable[RemoteCommit | None]]
"""Reads a commit record by ID; ``None`` when the record is not known (not copied yet)."""


class Ancestry:
    """The ancestors of a mirror head, read from the mirror newest generation first, lazily.

    A commit's generation exceeds its parents', so whether a commit of generation ``g`` is an
    ancestor is decided once every ancestor of generation ``g`` or more has been read.
    """

    def __init__(self, dest: LakeFSClient, repo: str) -> None:
        self._dest = dest
        self._repo = repo
        self._seen: set[str] = set()
        self._frontier: list[tuple[int, str]] = []

    @classmethod
    async def of(cls, dest: LakeFSClient, repo: str, head: str | None) -> Ancestry:
        """Return the ancestry of ``head`` on ``repo`` (empty for ``None`` or an unknown head)."""
        ancestry = cls(dest, repo)
        if head is not None:
            try:
                commit = await dest.get_commit(repo, head)
            except NotFoundError:
                return ancestry
            if commit.generation > 0:
                heapq.heappush(ancestry._frontier, (-commit.generation, head))
        return ancestry

    async def reaches(self, commit: RemoteCommit) -> bool:
        """Return whether ``commit`` is the head or one of its ancestors."""
        while self._frontier and -self._frontier[0][0] >= commit.generation:
            _, cid = heapq.heappop(self._frontier)
            if cid in self._seen:
                continue
            self._seen.add(cid)
            for parent in (await self._dest.get_commit(self._repo, cid)).parents:
                if parent not in self._seen:
                    generation = (await self._dest.get_commit(self._repo, parent)).generation
                    heapq.heappush(self._frontier, (-generation, parent))
        return commit.id in self._seen


@dataclass(frozen=True, slots=True)
class Ahead:
    """The first-parent chain of a source head ahead of a mirror head.

    Attributes:
        ids: The commits ahead that were read, newest (the source head) first.
        oldest: The creation date of the oldest of them, ``None`` when there is none.
        from_head: Whether the chain ends at the mirror head itself, so that every commit on it
            descends from the mirror head (and moving there is moving forward).
        lag: How many commits are ahead: ``len(ids)`` when the walk reached its end, a lower
            bound when it stopped at a record it could not read or at its length limit.
    """

    ids: tuple[str, ...]
    oldest: int | None
    from_head: bool
    lag: Lag


async def commits_ahead(
    read: CommitReader,
    ancestry: Ancestry,
    head: str,
    current: str | None,
    limit: int,
) -> Ahead:
    """Walk first parents from ``head`` to ``current`` (whose ancestry is ``ancestry``).

    The walk stops at ``current`` or at the first of its ancestors met, so a mirror head off the
    source's history (an adopted repository's diverged head) counts only the commits since the
    fork; and at a root commit when ``current`` is not on ``head``'s history at all. A record
    ``read`` does not know is ahead too (the mirror holds every ancestor of its head) and ends
    the walk with a lower bound, as does reaching ``limit`` commits.
    """
    ids: list[str] = []
    oldest: int | None = None
    cid: str | None = head
    while cid is not None and cid != current:
        if len(ids) >= limit:
            return Ahead(tuple(ids), oldest, False, Lag(len(ids), exact=False))
        commit = await read(cid)
        if commit is None:
            return Ahead(tuple(ids), oldest, False, Lag(len(ids) + 1, exact=False))
        if await ancestry.reaches(commit):
            break
        if not commit.parents and current is not None:
            # a root commit: the mirror's head is not on this history (the source branch was
            # reset onto another history, or the mirror was made with a commit of its own by
            # an earlier version)
            break
        ids.append(cid)
        oldest = commit.creation_date
        cid = commit.parents[0] if commit.parents else None
    return Ahead(tuple(ids), oldest, current is not None and cid == current, Lag(len(ids)))


def intermediate_probes(count: int) -> list[int]:
    """Pick which of ``count`` commits between a mirror head and the source head to check.

    Positions count back from the source head's parent (0) to the commit just after the mirror
    head (``count - 1``). The picks, newest first, are at distances 1, 2, 4, 8... from the
    head, then the oldest: at most about ``log2(count) + 2`` validations a round, the near end
    (the likeliest to be whole) always among them.
    """
    picks: list[int] = []
    step = 1
    while step - 1 < count:
        picks.append(step - 1)
        step *= 2
    if count and picks[-1] != count - 1:
        picks.append(count - 1)
    return picks


def parents_first(commits: dict[str, RemoteCommit]) -> list[RemoteCommit]:
    """Order ``commits`` so every commit comes after those of its parents in the set."""
    ordered: list[RemoteCommit] = []
    done: set[str] = set()
    for start in sorted(commits):
        stack: list[tuple[str, bool]] = [(start, False)]
        while stack:
            cid, expanded = stack.pop()
            if cid in done or cid not in commits:
                continue
            if expanded:
                done.add(cid)
                ordered.append(commits[cid])
                continue
            stack.append((cid, True))
            stack.extend((p, False) for p in commits[cid].parents if p not in done)
    return ordered
