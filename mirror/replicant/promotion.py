"""Promotion: turn a mirror into the writable repository of its region (switchover, failover).

A **planned** promotion (a switchover, no commit lost) demotes the source repository through its
region's server, waits until the mirror shows every mirrored branch head and tag of the source
(re-reading the source until two readings agree, so a commit acknowledged just before the demotion
is waited for too), then promotes the local repository. If the mirror does not catch up within the
timeout, the source is made writable again and the promotion is refused with the lag.

A **forced** promotion (a failover, the source region is gone) calls nothing in the source region:
the mirror becomes writable at its validated heads, and the report records what it may be missing:
for every branch, the last source head the worker saw but had not validated, and how many commits
the promoted head is behind it. That number is counted on the commit records the mirror holds
(the worker copies them before validating): exact when the chain from the seen head back to the
promoted head is there (``lag_commits``), else a lower bound in a field of its own
(``lag_commits_at_least``), never an understated count.

A planned promotion needs the replicant's key in the source region to hold
``fs:MirrorRepository`` on the source repository (it demotes it); refused, it answers 403 with the
source's text and what key to give, having changed nothing.

Either way the mirror's configuration is removed (the repository is no longer a mirror) and the
report is kept in the replicant's KV, so a second promotion is refused naming the first.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from typing import Any, Protocol

from mirror.core.errors import RepositoryNotAMirrorError
from mirror.errors import (
    ConflictError,
    LakeMirrorError,
    NotFoundError,
    PermissionDeniedError,
    UnavailableError,
)
from mirror.logging import get_logger
from mirror.replicant.client import LakeFSClient, RemoteCommit
from mirror.replicant.history import Ancestry, commits_ahead
from mirror.replicant.host import ReplicantHost
from mirror.replicant.settings import ServiceSettings
from mirror.replicant.state import (
    BranchStatus,
    Lag,
    MirrorConfig,
    MirrorNotFoundError,
)

__all__ = [
    "AlreadyPromotedError",
    "NotSyncedError",
    "PromotionHost",
    "PromotionReport",
    "promote",
]

_log = get_logger("mirror.replicant")
_LAG_WALK_LIMIT = 100_000


class PromotionHost(ReplicantHost, Protocol):
    """What a promotion uses of its region's replicant: a host that knows its peers."""

    @property
    def settings(self) -> ServiceSettings:
        """Return the replica's region, peers and tuning."""
        ...

    def get_mirror(self, source_repo: str, name: str) -> MirrorConfig:
        """Return a mirror of ``source_repo``; raise :class:`MirrorNotFoundError` if none."""
        ...

    def status(self, name: str) -> list[BranchStatus]:
        """Return the status of a mirror's branches."""
        ...

    def promotion_lock(self, name: str) -> asyncio.Lock:
        """Return the lock serializing the replica's promotions of mirror ``name``."""
        ...

    async def stop_local_worker(self, name: str) -> None:
        """Stop the replica's worker of a mirror being promoted."""
        ...

    async def delete_mirror(self, source_repo: str, name: str) -> None:
        """Stop mirroring; the mirror repository stays."""
        ...


class AlreadyPromotedError(ConflictError):
    """The mirror was promoted already (its configuration is gone; its report is kept)."""


class NotSyncedError(ConflictError):
    """The mirror did not show the source's heads in time; the source stays writable."""


@dataclass(frozen=True, slots=True)
class PromotionReport:
    """What a promotion did: the heads the promoted repository starts from, and what it lacks."""

    mirror: str
    source: str
    """``"<region>/<repo>"`` of the source the repository mirrored."""
    forced: bool
    heads: dict[str, str]
    tags: dict[str, str]
    missing: dict[str, dict[str, Any]] = field(default_factory=dict)
    """Per branch: ``mirror_head``, ``source_head`` (last seen, not validated), and the commits
    between them: ``lag_commits`` when counted, else ``None`` and a lower bound in
    ``lag_commits_at_least``."""
    writes_refused_seconds: float | None = None
    """From the source's demotion to the mirror's promotion (planned only)."""
    promoted_at: float = 0.0

    def to_json(self) -> dict[str, Any]:
        """Return the report as plain data (the API's and the KV's form)."""
        return asdict(self)


def _when(epoch: float) -> str:
    return datetime.fromtimestamp(epoch, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _lookup(service: PromotionHost, source_repo: str, name: str) -> MirrorConfig:
    try:
        return service.get_mirror(source_repo, name)
    except MirrorNotFoundError:
        done = service.store.get_promotion(name)
        if done is not None and str(done.get("source", "")).endswith(f"/{source_repo}"):
            raise AlreadyPromotedError(
                f"mirror {name!r} of {source_repo!r} already promoted at "
                f"{_when(float(done.get('promoted_at', 0)))}"
                f" ({'forced' if done.get('forced') else 'planned'})"
            ) from None
        raise


async def _mirrored_heads(client: LakeFSClient, repo: str, config: MirrorConfig) -> dict[str, str]:
    # preserved branches are the mirror's own, whether or not they were copied to the source
    heads = await client.list_branches(repo)
    return {
        b: h for b, h in heads.items() if config.mirrors_branch(b) and b not in config.preserved
    }


async def _tags(client: LakeFSClient, repo: str, config: MirrorConfig) -> dict[str, str]:
    if not config.tags:
        return {}
    tags = await client.list_tags(repo)
    return {t: c for t, c in tags.items() if t not in config.preserved_tags}


async def promote(
    service: PromotionHost,
    source_repo: str,
    name: str,
    *,
    force: bool = False,
    timeout: float = 60.0,
) -> PromotionReport:
    """Promote mirror ``name`` of ``source_repo`` to a writable repository.

    Args:
        service: The region's replicant.
        source_repo: The source repository's name.
        name: The mirror (its local repository's name).
        force: Promote without the source region (at the mirror's validated heads).
        timeout: Seconds a planned promotion waits for the mirror to catch up.

    Returns:
        The promotion's report (also kept in the replicant's KV).

    Raises:
        MirrorNotFoundError: no such mirror of ``source_repo``.
        AlreadyPromotedError: the mirror was promoted already.
        NotSyncedError: a planned promotion timed out (the source is writable again).
        UnavailableError: a planned promotion could not reach the source region.
        PermissionDeniedError: the replicant's key may not demote the source (planned).
        ConflictError: the source is a mirror of something else, or the mirror is not read-only.
    """
    _lookup(service, source_repo, name)
    async with service.promotion_lock(name):
        config = _lookup(service, source_repo, name)
        if force:
            return await _forced(service, config)
        return await _planned(service, config, timeout)


async def _forced(service: PromotionHost, config: MirrorConfig) -> PromotionReport:
    statuses = service.status(config.name)
    await service.stop_local_worker(config.name)
    heads = await _mirrored_heads(service.local, config.name, config)
    tags = await _tags(service.local, config.name, config)
    missing = {
        s.branch: await _missing(service.local, config.name, s, s.source_head, heads.get(s.branch))
        for s in statuses
        if s.source_head is not None
        and s.source_head != heads.get(s.branch)
        and s.branch not in config.preserved
    }
    report = PromotionReport(
        mirror=config.name,
        source=f"{config.source_region}/{config.source_repo}",
        forced=True,
        heads=heads,
        tags=tags,
        missing=missing,
        promoted_at=service.now(),
    )
    return await _finish(service, config, report)


async def _planned(service: PromotionHost, config: MirrorConfig, timeout: float) -> PromotionReport:
    source = service.client(config.source_region)
    source_name = f"{config.source_region}/{config.source_repo}"
    local = await service.local.get_repository(config.name)
    if not local.get("read_only"):
        # demoting the source now would leave no writable repository at the end
        raise RepositoryNotAMirrorError(config.name)
    started = time.monotonic()
    try:
        await source.demote_repository(
            config.source_repo, f"{service.settings.region}/{config.name}"
        )
    except UnavailableError as exc:
        raise UnavailableError(
            f"source {source_name} unreachable ({exc}); {_lag_text(service, config)}; "
            "promote with force to fail over without it"
        ) from exc
    except PermissionDeniedError as exc:
        # a key that only reads (FSReadAll) mirrors fine but cannot switch over: say which
        # permission, on what, for which key, after the source's own text
        raise PermissionDeniedError(
            f"{exc}; a planned promotion demotes the source repository, so the replicant's "
            f"key for region {config.source_region!r} (regions.{config.source_region} in its "
            f"configuration) needs fs:MirrorRepository on "
            f"arn:lakefs:fs:::repository/{config.source_repo} in that region (the built-in "
            f"Replicator policy grants it); nothing was changed"
        ) from exc
    _log.info("source demoted for a switchover", mirror=config.name, source=source_name)
    deadline = started + timeout
    last: tuple[dict[str, str], dict[str, str]] | None = None
    heads: dict[str, str] = {}
    tags: dict[str, str] = {}
    while True:
        try:
            source_state = (
                await _mirrored_heads(source, config.source_repo, config),
                await _tags(source, config.source_repo, config),
            )
            heads = await _mirrored_heads(service.local, config.name, config)
            tags = await _tags(service.local, config.name, config)
        except LakeMirrorError as exc:
            _log.warning("reading heads during a switchover failed", error=str(exc))
            source_state = None
        if source_state is not None and source_state == (heads, tags):
            if source_state == last:
                break
            last = source_state
            continue
        last = None
        if time.monotonic() >= deadline:
            await _restore(service, config, source)
            raise NotSyncedError(
                f"mirror {config.name!r} did not catch up with {source_name} within "
                f"{timeout:g}s; the source is writable again; {_lag_text(service, config)}"
            )
        await asyncio.sleep(service.settings.poll_interval)
    await service.stop_local_worker(config.name)
    report = PromotionReport(
        mirror=config.name,
        source=source_name,
        forced=False,
        heads=heads,
        tags=tags,
        promoted_at=service.now(),
    )
    return await _finish(service, config, report, started=started)


async def _missing(
    local: LakeFSClient, repo: str, status: BranchStatus, seen: str, head: str | None
) -> dict[str, Any]:
    """Return what branch ``status.branch``, promoted at ``head``, may lack of the source.

    The commits are counted on the promoted repository's own records, back from ``seen``, the
    last source head the worker saw: the worker copies a head's records before validating it,
    so they are usually all there, even when the worker never got to count them (the source
    went away, or the replica restarted, in between).
    """

    async def read(commit_id: str) -> RemoteCommit | None:
        try:
            return await local.get_commit(repo, commit_id)
        except NotFoundError:
            return None

    ancestry = await Ancestry.of(local, repo, head)
    lag = (await commits_ahead(read, ancestry, seen, head, _LAG_WALK_LIMIT)).lag
    if not lag.exact and status.mirror_head == head:
        # the worker's own count (or bound) against the same head may know more
        known = status.lag
        lag = known if known.exact else Lag(max(lag.commits, known.commits), exact=False)
    return {
        "mirror_head": head,
        "source_head": seen,
        "lag_commits": lag.commits if lag.exact else None,
        "lag_commits_at_least": None if lag.exact else lag.commits,
    }


def _behind(lag: Lag) -> str:
    return f"{lag.commits} commit(s)" if lag.exact else f"at least {lag.commits} commit(s)"


def _lag_text(service: PromotionHost, config: MirrorConfig) -> str:
    behind = [
        f"{s.branch}: {_behind(s.lag)} behind (mirror at {s.mirror_head}, source at "
        f"{s.source_head}, {s.missing_objects} file(s) missing)"
        for s in service.status(config.name)
        if s.source_head != s.mirror_head or s.state != "synced"
    ]
    return "lag: " + ("; ".join(behind) if behind else "no branch behind at the last poll")


async def _restore(service: PromotionHost, config: MirrorConfig, source: LakeFSClient) -> None:
    """Make the source writable again after a switchover that did not complete."""
    record = {
        "from": f"{service.settings.region}/{config.name}",
        "at": service.now(),
        "kind": "switchover-aborted",
        "reason": f"mirror {config.name!r} did not catch up",
    }
    try:
        await source.promote_repository(config.source_repo, record)
    except LakeMirrorError as exc:
        _log.error(
            "the source could not be made writable again after an aborted switchover",
            mirror=config.name,
            error=str(exc),
        )
        raise UnavailableError(
            f"switchover aborted, and the source {config.source_region}/{config.source_repo} "
            f"could not be made writable again ({exc}); {_lag_text(service, config)}"
        ) from exc
    _log.warning("switchover aborted; source writable again", mirror=config.name)


async def _finish(
    service: PromotionHost,
    config: MirrorConfig,
    report: PromotionReport,
    *,
    started: float | None = None,
) -> PromotionReport:
    record = {
        "from": report.source,
        "at": report.promoted_at,
        "forced": report.forced,
        "heads": report.heads,
        "tags": report.tags,
        "missing": report.missing,
        "mirror": config.name,
    }
    await service.local.promote_repository(config.name, record)
    refused = None if started is None else time.monotonic() - started
    final = PromotionReport(**{**asdict(report), "writes_refused_seconds": refused})
    service.store.put_promotion(config.name, final.to_json())
    await service.delete_mirror(config.source_repo, config.name)
    kind = "forced" if report.forced else "planned"
    service.metrics.promotions.labels(config.name, kind).inc()
    if refused is not None:
        service.metrics.writes_refused.labels(config.name).set(refused)
    _log.info(
        "mirror promoted",
        mirror=config.name,
        source=report.source,
        kind=kind,
        writes_refused_seconds=refused,
        missing=sorted(report.missing),
    )
    return final
