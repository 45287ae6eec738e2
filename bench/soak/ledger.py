"""What the source region acknowledged, and how far the mirror has got.

Every acknowledged write is an :class:`~tests.e2e.failover.Ack`, as the chaos tests keep them: a
commit the source answered ``201`` for, with one object of it (its path and bytes), or with no
object (``path == ""``: a merge). An upload acknowledged before its branch's next commit is
asked for is held as *staged* until that commit is acknowledged, then becomes an ``Ack`` of it;
one whose commit never is stays staged and must still be found on its branch at the end.

A merge into ``main`` acknowledged after a branch's commit was acknowledged contains it: from
then on the commit's objects are *on main* at that merge, which is what the mirror's readers
read (by commit ID) once the mirror's ``main`` has reached it, and what the janitor deletes from
``main`` to keep its tree small.
"""

from __future__ import annotations

import random
import threading
from collections.abc import Iterable
from dataclasses import dataclass

from tests.e2e.failover import Ack

__all__ = ["Ledger", "OnMain", "Staged"]


@dataclass(frozen=True, slots=True)
class Staged:
    """An upload the source acknowledged whose commit has not been acknowledged (yet)."""

    branch: str
    path: str
    data: bytes
    at: float


@dataclass(frozen=True, slots=True)
class OnMain:
    """An acknowledged object and the first acknowledged ``main`` commit holding it."""

    path: str
    data: bytes
    commit: str


class Ledger:
    """The soak's record of acknowledged writes and of the mirror's progress (thread-safe)."""

    def __init__(self, region: str, repo: str, seed: int) -> None:
        self.region = region
        self.repo = repo
        self._lock = threading.Lock()
        self._random = random.Random(seed)
        self.acks: list[Ack] = []
        self.staged: list[Staged] = []
        self._acked_commits: set[str] = set()
        self._pending: dict[str, list[Ack]] = {}
        """Branch → object acks not yet merged into ``main``."""
        self._on_main: dict[str, OnMain] = {}
        """Path → where it reached ``main``, for objects still on ``main`` (oldest first)."""
        self._ever_on_main: list[OnMain] = []
        self.main_acked: dict[str, float] = {}
        """``main`` commit → when it was acknowledged."""
        self.reached: dict[str, float] = {}
        """``main`` commit → when the mirror's ``main`` was first seen at or past it."""
        self.lags: list[tuple[float, float]] = []
        """(when, seconds) from a ``main`` commit's acknowledgement to the mirror reaching it."""

    # acknowledgements

    def staged_upload(self, branch: str, path: str, data: bytes, at: float) -> None:
        """Record an upload to ``branch`` the source acknowledged."""
        with self._lock:
            self.staged.append(Staged(branch, path, data, at))

    def committed(self, branch: str, commit: str, parent: str | None, at: float) -> list[Ack]:
        """Record a commit of ``branch`` the source acknowledged; return its acks.

        Every upload to ``branch`` still staged is in it (each branch is written by one thread,
        which waits for an upload's answer before it asks for the commit).
        """
        with self._lock:
            mine = [s for s in self.staged if s.branch == branch]
            self.staged = [s for s in self.staged if s.branch != branch]
            objects = [(s.path, s.data) for s in mine] or [("", b"")]
            acks = [
                Ack(self.region, self.repo, branch, commit, parent, path, data, at)
                for path, data in objects
            ]
            self._add(acks)
            return acks

    def absorb(self, acks: Iterable[Ack]) -> None:
        """Record acks made elsewhere (a :class:`~tests.e2e.failover.ContinuousWriter`'s)."""
        with self._lock:
            self._add([a for a in acks if a.commit not in self._acked_commits])

    def _add(self, acks: list[Ack]) -> None:
        for ack in acks:
            self.acks.append(ack)
            self._acked_commits.add(ack.commit)
            if ack.path:
                self._pending.setdefault(ack.branch, []).append(ack)
            if ack.branch == "main":
                self._main_acked(ack.commit, ack.at)

    def merged(self, branch: str, commit: str, parent: str | None, sent: float, at: float) -> None:
        """Record a merge of ``branch`` into ``main`` (asked for at ``sent``) acknowledged at
        ``at`` as merge commit ``commit``: every commit of ``branch`` acknowledged before
        ``sent`` is in it."""
        with self._lock:
            self._add([Ack(self.region, self.repo, "main", commit, parent, "", b"", at)])
            pending = self._pending.get(branch, [])
            now_on_main = [a for a in pending if a.at < sent]
            self._pending[branch] = [a for a in pending if a.at >= sent]
            for ack in now_on_main:
                record = OnMain(ack.path, ack.data, commit)
                self._on_main.setdefault(ack.path, record)
                self._ever_on_main.append(record)

    def deleted_from_main(self, paths: Iterable[str]) -> None:
        """Record that ``paths`` were deleted from ``main`` (by an acknowledged merge)."""
        with self._lock:
            for path in paths:
                self._on_main.pop(path, None)

    # what the load reads and deletes

    def oldest_on_main(self, keep: int) -> list[str]:
        """Return the paths on ``main`` beyond the newest ``keep``, oldest first."""
        with self._lock:
            paths = list(self._on_main)
        return paths[: max(0, len(paths) - keep)]

    def on_main_count(self) -> int:
        """Return how many acknowledged objects are on ``main`` now."""
        with self._lock:
            return len(self._on_main)

    def mirrored_sample(self) -> OnMain | None:
        """Return a random acknowledged object of a ``main`` commit the mirror has reached."""
        with self._lock:
            for _ in range(20):
                if not self._ever_on_main:
                    return None
                record = self._random.choice(self._ever_on_main)
                if record.commit in self.reached:
                    return record
        return None

    # the mirror

    def _main_acked(self, commit: str, at: float) -> None:
        self.main_acked[commit] = at
        seen = self.reached.get(commit)
        if seen is not None:
            # the mirror got there before the acknowledgement was read (an async merge's status)
            self.lags.append((seen, max(0.0, seen - at)))

    def mirror_reached(self, commits: Iterable[str], at: float) -> None:
        """Record that the mirror's ``main`` reached ``commits`` (first seen at ``at``)."""
        with self._lock:
            for commit in commits:
                if commit in self.reached:
                    continue
                self.reached[commit] = at
                acked = self.main_acked.get(commit)
                if acked is not None:
                    self.lags.append((at, max(0.0, at - acked)))

    def snapshot(self) -> tuple[list[Ack], list[Staged]]:
        """Return the acks and the staged uploads so far."""
        with self._lock:
            return list(self.acks), list(self.staged)
