"""The work on one mirror: copy commits, validate the newest head, move the mirror branch.

One :class:`MirrorWorker` runs per mirror in the replica holding the mirror's lease. It keeps a
loop per mirrored branch (DESIGN.md §6):

1. read the source head H; if the mirror branch is at H, wait for the next poll;
2. copy every commit record reachable from H that the mirror lacks, parents first;
3. validate H, not every commit in between, and, once started, keep validating H until all
   its files have arrived (so the head always advances);
4. while H still waits for files, check a few commits between the mirror head and H on H's
   first-parent chain (newest first) and move the mirror branch to the newest one found whole,
   so that a commit whose files are all there is not held back by its successor's;
5. move the mirror branch from its old head to H by compare-and-swap; a branch the mirror does
   not have yet is created at H by a compare-and-swap from "absent".

A mirror branch therefore only ever points at a commit whose metarange, ranges and data objects
were all seen in the mirror's namespace. A mirror repository starts bare (no commit, no branch,
not even its default branch), so each branch appears with its first validated head and never
shows a commit the source lacks. Tags are copied once their commit validates; branches and
tags deleted at the source are deleted on the mirror, except the mirror's preserved branches and
tags (heads and tags an adopted repository had that its new source lacks). An adopted
repository is followed from the commits it has: only the records it lacks are copied.
"""

from __future__ import annotations

import asyncio
import enum
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Final, Literal

from mirror.errors import LakeMirrorError, NotFoundError, PreconditionFailedError
from mirror.logging import get_logger
from mirror.replicant.client import LakeFSClient, RemoteCommit
from mirror.replicant.commit_records import CommitRecords
from mirror.replicant.history import (
    Ahead,
    Ancestry,
    commits_ahead,
    intermediate_probes,
    parents_first,
)
from mirror.replicant.lag_history import LagHistory, LagSample
from mirror.replicant.metrics import ReplicantMetrics
from mirror.replicant.state import BranchState, BranchStatus, Lag, MirrorConfig, ReplicantStore
from mirror.replicant.tag_mirror import TagMirror
from mirror.validator import ValidationReport, Validator

__all__ = ["FirstSync", "MirrorWorker", "WorkerSettings", "intermediate_probes", "parents_first"]

FirstSync = Callable[[str], Awaitable[ValidationReport | None]]
"""Validates a metarange with no base in bulk, or answers ``None`` to leave it to the validator."""


class _Retarget(enum.Enum):
    """The source head moved on while its commit waited for files: sync to the new head."""

    RETARGET = "retarget"


_RETARGET: Final = _Retarget.RETARGET
_LAG_WALK_LIMIT = 100_000


@dataclass(slots=True)
class _Progress:
    """Where the mirror branch is while the worker waits for the source head's files."""

    current: str | None
    base: str
    ahead: Ahead


@dataclass(frozen=True, slots=True)
class WorkerSettings:
    """How often a worker looks, and how far it walks back."""

    poll_interval: float = 1.0
    release_interval: float = 300.0
    """Seconds between looks for deleted branches' and tags' retained validated ranges."""
    release_idle: float = 3600.0
    """How long a retained head must not have moved before it counts as deleted."""


class MirrorWorker:
    """Mirror the branches (and tags) of one source repository into its local mirror.

    Args:
        config: The mirror.
        source: The source region's API (read-only use).
        dest: This region's API, called with the replicant's ``fs:MirrorRepository`` credentials.
        validator: Checks commits against the mirror's storage namespace.
        store: Where branch status is persisted.
        metrics: Where progress is counted.
        settings: Poll interval.
        clock: Wall-clock seconds (lag is measured against commit dates).
        first_sync: Validates a branch's first commit (no base) in bulk when it is large.
    """

    def __init__(
        self,
        config: MirrorConfig,
        source: LakeFSClient,
        dest: LakeFSClient,
        validator: Validator,
        store: ReplicantStore,
        metrics: ReplicantMetrics,
        settings: WorkerSettings | None = None,
        clock: Callable[[], float] = time.time,
        first_sync: FirstSync | None = None,
    ) -> None:
        self.config = config
        self.source = source
        self.dest = dest
        self.validator = validator
        self.store = store
        self.metrics = metrics
        self.settings = settings or WorkerSettings()
        self._clock = clock
        self.history = LagHistory(store.kv, config.name)
        self._log = get_logger("mirror.replicant").bind(mirror=config.name)
        self.records = CommitRecords(config, source, dest, metrics, self._log)
        """The mirror's commit records: read from the source, copied parents first."""
        self.tags = TagMirror(self.records, validator)
        """The mirror's tags, made once their commits validate."""
        # a replica taking the mirror over starts from what the last one saw: a forced promotion
        # reports the source heads seen before the source went away, even after a restart
        self._status: dict[str, BranchStatus] = {
            s.branch: s for s in store.list_status(config.name)
        }
        self._branch_tasks: dict[str, asyncio.Task[None]] = {}
        self._first_sync = first_sync
        self._next_release = 0.0
        # each poll round's listing of both sides' heads, and the event the round sets: a
        # synced branch's loop reads its heads there instead of asking for them itself
        self._heads: tuple[dict[str, str], dict[str, str]] = ({}, {})
        self._round = asyncio.Event()
        self.rounds = 0
        """Poll rounds that listed both sides' heads."""

    # the loops

    async def run(self) -> None:
        """Work the mirror until cancelled."""
        self._log.info("mirror worker started", source=self._source_name())
        try:
            while True:
                await self.poll_once()
                await asyncio.sleep(self.settings.poll_interval)
        finally:
            for task in self._branch_tasks.values():
                task.cancel()
            await asyncio.gather(*self._branch_tasks.values(), return_exceptions=True)
            self._branch_tasks.clear()
            try:
                self.history.flush()
            except LakeMirrorError as exc:
                self._log.warning("the last lag samples were not kept", error=str(exc))
            self._log.info("mirror worker stopped")

    async def poll_once(self) -> None:
        """Start loops for new source branches, remove vanished ones, and mirror tags."""
        try:
            heads = await self.source.list_branches(self.config.source_repo)
            mirror_heads = await self.dest.list_branches(self.config.name)
        except LakeMirrorError as exc:
            self.metrics.source_errors.labels(self.config.name).inc()
            self._log.warning("listing branches failed", error=str(exc))
            return
        self._heads = (heads, mirror_heads)
        self.rounds += 1
        listed, self._round = self._round, asyncio.Event()
        listed.set()
        wanted = {b for b in heads if self.config.mirrors_branch(b)}
        for branch in sorted(wanted):
            task = self._branch_tasks.get(branch)
            if task is None or task.done():
                self._branch_tasks[branch] = asyncio.create_task(
                    self._branch_loop(branch), name=f"mirror:{self.config.name}:{branch}"
                )
        for branch in sorted(set(self._branch_tasks) - wanted):
            task = self._branch_tasks.pop(branch)
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
        # a branch gone from the source before the mirror had it (one created, merged and
        # deleted within a few rounds) has nothing to delete on the mirror: forget it here, or
        # its status, lag history and series would stay for good, one set per such branch
        for branch in sorted(set(self._status) - set(heads) - set(mirror_heads)):
            self._forget_branch(branch)
        await self._delete_vanished_branches(set(heads), mirror_heads)
        if self.config.tags:
            await self.tags.sync(self.rounds)
        await self._release_dropped_heads()

    async def _release_dropped_heads(self) -> None:
        """Now and then, stop retaining the validated ranges of deleted branches and tags."""
        now = self._clock()
        if now < self._next_release:
            return
        self._next_release = now + self.settings.release_interval
        try:
            heads = await self.dest.list_branches(self.config.name)
            tags = await self.dest.list_tags(self.config.name)
            commits = sorted(set(heads.values()) | set(tags.values()))
            trees = [await self.records.tree_on_mirror(c) for c in commits if c]
            dropped = await self.validator.keep_only(trees, idle_seconds=self.settings.release_idle)
        except LakeMirrorError as exc:
            self._log.warning("releasing the ranges of deleted heads failed", error=str(exc))
            return
        if dropped:
            self._log.info("ranges of deleted heads released", ranges=dropped)

    async def _delete_vanished_branches(
        self, source_branches: set[str], mirror_heads: dict[str, str]
    ) -> None:
        vanished = [
            branch
            for branch in sorted(mirror_heads)
            if branch not in source_branches
            and branch not in self.config.preserved
            and self.config.mirrors_branch(branch)
        ]
        if not vanished:
            return  # the common round: no request for the mirror's default branch
        try:
            default = str((await self.dest.get_repository(self.config.name))["default_branch"])
        except LakeMirrorError as exc:
            self._log.warning("reading the mirror repository failed", error=str(exc))
            return
        for branch in vanished:
            if branch == default:
                continue
            try:
                await self.dest.delete_branch(self.config.name, branch)
            except NotFoundError:
                pass
            except LakeMirrorError as exc:
                self._log.warning("deleting a branch failed", branch=branch, error=str(exc))
                continue
            self._forget_branch(branch)
            self._log.info("branch deleted at the source; deleted on the mirror", branch=branch)

    def _forget_branch(self, branch: str) -> None:
        """Drop a branch's status (here and in the KV), lag history and metric series."""
        self._status.pop(branch, None)
        self.store.drop_status(self.config.name, branch)
        self.history.drop_branch(branch)
        self.metrics.forget_branch(self.config.name, branch)

    async def _branch_loop(self, branch: str) -> None:
        status = self._status.setdefault(branch, BranchStatus(branch))
        while True:
            try:
                moved = await self.sync_branch(branch)
            except asyncio.CancelledError:
                raise
            except LakeMirrorError as exc:
                self.metrics.source_errors.labels(self.config.name).inc()
                self._set(status, "error", last_error=f"{type(exc).__name__}: {exc}")
                moved = False
            except Exception as exc:  # keep the loop alive; the status says what broke
                self._log.exception("mirroring a branch failed", branch=branch)
                self._set(status, "error", last_error=f"{type(exc).__name__}: {exc}")
                moved = False
            if not moved:
                await self._until_changed(status)

    async def _until_changed(self, status: BranchStatus) -> None:
        """Wait for the next poll round, and on while the rounds show ``status``'s branch synced.

        A synced branch whose heads the rounds list unchanged on both sides costs no request of
        its own (each round's listings answer for it; its lag history gets the round's sample).
        Anything else (a source head that moved, a mirror head moved by someone else, a branch
        not synced, no round within two intervals) returns: the branch syncs with heads read
        afresh.
        """
        branch = status.branch
        while True:
            listed = self._round
            try:
                # not wait_for: it swallows a cancellation that comes with the event set
                async with asyncio.timeout(2 * self.settings.poll_interval + 1.0):
                    await listed.wait()
            except TimeoutError:
                return
            source, mirror = self._heads
            head = source.get(branch)
            synced = status.state == "synced" and head is not None
            if not synced or not head == mirror.get(branch) == status.mirror_head:
                return
            self.history.record(branch, LagSample(self._clock(), 0.0, 0, True))

    # one branch

    async def sync_branch(self, branch: str) -> bool:
        """Bring the mirror branch to the source head once; return whether the head moved.

        Once the mirror branch has a head, a source head that moves while its commit waits for
        files is followed at once: the newest head is the target, the lag counts every commit.

        Raises:
            LakeMirrorError: a server could not be reached or refused a call.
        """
        while True:
            outcome = await self._sync_once(branch)
            if outcome is not _RETARGET:
                return outcome is True

    async def _sync_once(self, branch: str) -> bool | Literal[_Retarget.RETARGET]:
        """Sync to the source head as read now; :data:`_RETARGET` if the source moved meanwhile."""
        name = self.config.name
        status = self._status.setdefault(branch, BranchStatus(branch))
        head = await self.source.get_branch_head(self.config.source_repo, branch)
        if head is None:
            return False
        current = await self.dest.get_branch_head(name, branch)
        seen = status.source_head != head
        status.source_head = head
        status.mirror_head = current
        if seen:
            if current != head:
                # at least one commit behind until the commits ahead are counted below: a lower
                # bound, never "0 behind" nor the previous head's count
                status.set_lag(Lag(1, exact=False))
                self.metrics.lag_commits.labels(name, branch).set(status.lag.commits)
            # what a forced promotion reports as possibly missing: kept before any copying
            self.store.put_status(name, status)
        if current == head:
            self._set(status, "synced", lag_seconds=0.0, lag=Lag(0), missing=0)
            return False
        await self.records.copy_chain(head)
        target = await self.records.source_commit(head)
        ahead = await self._ahead(head, current)
        self._set(status, "validating", lag=ahead.lag, oldest=ahead.oldest)
        progress = _Progress(current, await self.records.metarange_of(current), ahead)
        report = await self._validate_until_complete(status, target, progress)
        if report is _RETARGET:
            return _RETARGET
        if report is None:
            return False
        if not await self._advance(status, progress.current, head, len(progress.ahead.ids), report):
            return False
        self._set(status, "synced", lag_seconds=0.0, lag=Lag(0), missing=0)
        return True

    async def _advance(
        self,
        status: BranchStatus,
        current: str | None,
        new: str,
        commits: int,
        report: ValidationReport,
    ) -> bool:
        """Move the mirror branch from ``current`` to ``new`` (validated), ``commits`` ahead.

        Returns whether it moved: ``False`` if the mirror head is no longer ``current``.
        """
        name, branch = self.config.name, status.branch
        try:
            # expected None: create the branch, failing if another replica created it first
            await self.dest.set_branch_head(name, branch, new, current)
        except PreconditionFailedError as exc:
            self._log.warning("mirror head moved meanwhile", branch=branch, error=str(exc))
            return False
        now = self._clock()
        status.mirror_head = new
        status.last_advance = now
        labels = (name, branch)
        self.metrics.head_advances.labels(*labels).inc()
        if commits > 1:
            self.metrics.commits_skipped.labels(*labels).inc(commits - 1)
        self.metrics.last_advance.labels(*labels).set(now)
        self._log.info(
            "mirror head advanced" if current is not None else "mirror branch created",
            branch=branch,
            old=current,
            new=new,
            source_head=status.source_head,
            commits=commits,
            skipped=max(0, commits - 1),
            ranges_read=report.ranges_read,
            objects_checked=report.objects_checked,
        )
        return True

    async def _validate_until_complete(
        self, status: BranchStatus, target: RemoteCommit, progress: _Progress
    ) -> ValidationReport | Literal[_Retarget.RETARGET] | None:
        """Validate ``target`` until complete; ``None`` if the mirror head moved meanwhile.

        :data:`_RETARGET` if the source head moved on from ``target`` meanwhile (once the
        mirror branch has a head).

        While ``target`` waits for files, the mirror branch may move, after each round, to a
        whole commit between it and the mirror head (``progress`` follows it). Those are checked
        every round: ``target``'s missing files say little about theirs (a range file of
        ``target`` that has not arrived hides which objects it waits for, and their range files
        are not ``target``'s), and the validator's caches make each check cost what is still
        missing.
        """
        name = self.config.name
        bulk = not progress.base and self._first_sync is not None
        while True:
            report = None
            if bulk and self._first_sync is not None:
                bulk = False
                report = await self._first_sync(target.meta_range_id)
                if report is not None:
                    self.metrics.bulk_validations.labels(name).inc()
            if report is None:
                report = await self.validator.validate(target.meta_range_id, progress.base)
            self._count(report)
            if report.complete:
                return report
            if not await self._advance_between(status, progress):
                return None
            self._set(
                status,
                "waiting",
                lag=progress.ahead.lag,
                oldest=progress.ahead.oldest,
                missing=report.missing_count,
                sample=list(report.missing[:10]),
            )
            await asyncio.sleep(self.settings.poll_interval)
            if await self.dest.get_branch_head(name, status.branch) != progress.current:
                return None
            if progress.base and (
                await self.source.get_branch_head(self.config.source_repo, status.branch)
                != target.id
            ):
                # the source moved on while ``target`` waited: aim at its new head at once (the
                # commits in between stay candidates), so that the lag counts every commit. A
                # first sync keeps its target: with no commits in between to move to, chasing
                # heads that each wait for files would never show anything.
                return _RETARGET

    def _count(self, report: ValidationReport) -> None:
        result = "complete" if report.complete else "incomplete"
        self.metrics.validations.labels(self.config.name, result).inc()

    async def _advance_between(self, status: BranchStatus, progress: _Progress) -> bool:
        """Move the mirror branch to the newest whole commit probed between it and the head.

        Only commits on the source head's first-parent chain that descend from the mirror head
        are candidates, and only one found complete is moved to: the mirror head moves forward
        along that chain and never shows a commit with a file missing. A mirror without a head
        (a first sync, with no base tree to make checks cheap) waits for the source head alone.

        Returns:
            ``False`` if the mirror head moved meanwhile (another replica), else ``True``.
        """
        ahead = progress.ahead
        if not progress.base or not ahead.from_head:
            return True
        between = ahead.ids[1:]
        for index in intermediate_probes(len(between)):
            commit = await self.records.source_commit(between[index])
            report = await self.validator.validate(commit.meta_range_id, progress.base)
            self._count(report)
            if not report.complete:
                continue
            commits = len(between) - index
            if not await self._advance(status, progress.current, commit.id, commits, report):
                return False
            newer = ahead.ids[: index + 1]
            oldest = (await self.records.source_commit(newer[-1])).creation_date
            progress.current = commit.id
            progress.base = commit.meta_range_id
            progress.ahead = Ahead(newer, oldest, True, Lag(len(newer)))
            return True
        return True

    def _set(
        self,
        status: BranchStatus,
        state: BranchState,
        *,
        lag_seconds: float | None = None,
        lag: Lag | None = None,
        oldest: int | None = None,
        missing: int | None = None,
        sample: list[str] | None = None,
        last_error: str | None = None,
    ) -> None:
        now = self._clock()
        changed = state != status.state
        if changed:
            self._log.info(
                "branch state changed",
                branch=status.branch,
                state=state,
                was=status.state,
                source_head=status.source_head,
                mirror_head=status.mirror_head,
            )
        status.state = state
        if oldest is not None:
            status.behind_since = oldest
        if lag_seconds is not None:
            status.behind_since = None
            status.lag_seconds = lag_seconds
        elif status.behind_since is not None:
            status.lag_seconds = max(0.0, now - status.behind_since)
        if lag is not None:
            status.set_lag(lag)
        if missing is not None:
            status.missing_objects = missing
            status.missing_sample = sample or []
        status.last_error = last_error if state == "error" else None
        status.updated = now
        labels = (self.config.name, status.branch)
        self.metrics.lag_seconds.labels(*labels).set(status.lag_seconds)
        # while only a lower bound is known the gauge shows it (never an overstated count)
        self.metrics.lag_commits.labels(*labels).set(status.lag.commits)
        self.metrics.missing_objects.labels(*labels).set(status.missing_objects)
        self.store.put_status(self.config.name, status)
        lag = status.lag
        self.history.record(
            status.branch, LagSample(now, status.lag_seconds, lag.commits, lag.exact)
        )

    # commits

    def _source_name(self) -> str:
        return f"{self.config.source_region}/{self.config.source_repo}"

    async def _ahead(self, head: str, current: str | None) -> Ahead:
        """Return the commits ``head`` is ahead of ``current`` along first parents.

        Called once ``head``'s records are copied: the walk reads the mirror's copies, so it
        needs nothing more of the source region.
        """
        ancestry = await Ancestry.of(self.dest, self.config.name, current)
        copied = self.records.copied_commit
        return await commits_ahead(copied, ancestry, head, current, _LAG_WALK_LIMIT)

    # status

    def status(self) -> list[BranchStatus]:
        """Return the live status of every branch this worker mirrors."""
        return [self._status[b] for b in sorted(self._status)]

    @property
    def pending_tags(self) -> dict[str, str]:
        """Return tags waiting for their commit's files, with their commits."""
        return self.tags.pending
