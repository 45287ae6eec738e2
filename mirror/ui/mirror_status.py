"""A mirror as the mirroring pages show it: its branches' lag in words, and its health.

The replicant answers a mirror with the status of each branch (``GET …/mirrors/{name}``, see
docs/mirroring.md). This module turns that into what a person reads: the lag in seconds and in
commits (exact, or "at least" while only a lower bound is known), what the validator waits for
(metadata files, that is ranges and metaranges, and data objects, told apart in the sample the
status carries), and a health mark, healthy, lagging or stuck, reached with the shipped alerts'
thresholds (:mod:`mirror.core.mirror_health`), each reason saying which alert it is and after
how long that alert fires.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from mirror.core.mirror_health import (
    LAGGING,
    LEASE_UNHELD,
    OBJECTS_MISSING,
    STUCK,
    BranchLag,
    Finding,
    Health,
    branch_findings,
    verdict,
)

__all__ = [
    "BranchView",
    "MirrorView",
    "Reason",
    "commits_text",
    "describe",
    "duration",
]

_METADATA_PREFIX = "_lakefs/"
"""Where a namespace keeps ranges and metaranges (the rest of a sample is data objects)."""


def duration(seconds: float) -> str:
    """Return ``seconds`` as a person reads it: ``42 s``, ``16 min 40 s``, ``2 h 5 min``."""
    whole = max(0, round(seconds))
    if whole < 60:
        return f"{whole} s"
    minutes, secs = divmod(whole, 60)
    if minutes < 60:
        return f"{minutes} min {secs} s" if secs else f"{minutes} min"
    hours, minutes = divmod(minutes, 60)
    if hours < 48:
        return f"{hours} h {minutes} min" if minutes else f"{hours} h"
    days, hours = divmod(hours, 24)
    return f"{days} d {hours} h" if hours else f"{days} d"


def _commits(count: int) -> str:
    return f"{count} commit" if count == 1 else f"{count} commits"


def commits_text(exact: int | None, at_least: int | None) -> str:
    """Return a lag in commits: the count, or ``at least N`` while only a bound is known."""
    if exact is not None:
        return _commits(exact)
    return f"at least {_commits(at_least or 0)}"


@dataclass(frozen=True, slots=True)
class Reason:
    """Why a mirror is not healthy: the alert whose condition holds, in words."""

    health: Health
    alert: str
    text: str


@dataclass(frozen=True, slots=True)
class BranchView:
    """One mirrored branch as a page shows it."""

    branch: str
    state: str
    source_head: str
    mirror_head: str
    lag_seconds: float
    lag: str
    """The lag in seconds, in words."""
    commits: str
    """The lag in commits, in words (``at least`` when a bound)."""
    lag_commits: int
    """The count, or its lower bound."""
    exact: bool
    waiting_for: str
    """What the validator waits for, in words; empty when nothing."""
    missing_objects: int
    missing_sample: tuple[str, ...]
    last_error: str
    last_advance: float | None


@dataclass(frozen=True, slots=True)
class MirrorView:
    """A mirror, its branches and its health, as the pages show them."""

    name: str
    source_repo: str
    source_region: str
    region: str
    storage_namespace: str
    branch_patterns: tuple[str, ...]
    tags: bool
    created: int
    worker: str
    adopted: bool
    branches: tuple[BranchView, ...]
    health: Health
    reasons: tuple[Reason, ...]

    @property
    def source(self) -> str:
        """Return ``<region>/<repository>`` of the source."""
        return f"{self.source_region}/{self.source_repo}"

    @property
    def lag_seconds(self) -> float:
        """Return the largest lag of its branches, in seconds."""
        return max((b.lag_seconds for b in self.branches), default=0.0)


def _files(count: int, what: str) -> str:
    return f"{count} {what}{'s' if count != 1 else ''}"


def _waiting_for(status: dict[str, Any]) -> str:
    missing = int(status.get("missing_objects") or 0)
    if missing:
        sample = [str(k) for k in status.get("missing_sample") or []]
        metadata = sum(1 for k in sample if k.startswith(_METADATA_PREFIX))
        kinds = []
        if metadata:
            kinds.append(_files(metadata, "range or metarange file"))
        if len(sample) - metadata:
            kinds.append(_files(len(sample) - metadata, "data object"))
        files = f"{_files(missing, 'file')} of the newest source head"
        if not kinds:
            return files
        if len(sample) >= missing:
            return f"{files}: {', '.join(kinds)}"
        return f"{files}; of the {len(sample)} listed, {', '.join(kinds)}"
    state = status.get("state")
    if state == "validating":
        return "checking the newest source head's files"
    if state == "waiting" and status.get("source_head") != status.get("mirror_head"):
        return "the newest source head's files"
    return ""


def _branch(status: dict[str, Any]) -> BranchView:
    exact = status.get("lag_commits")
    bound = status.get("lag_commits_at_least")
    count = int(exact if exact is not None else bound or 0)
    return BranchView(
        branch=str(status["branch"]),
        state=str(status.get("state") or ""),
        source_head=str(status.get("source_head") or ""),
        mirror_head=str(status.get("mirror_head") or ""),
        lag_seconds=float(status.get("lag_seconds") or 0.0),
        lag=duration(float(status.get("lag_seconds") or 0.0)),
        commits=commits_text(exact, bound),
        lag_commits=count,
        exact=exact is not None,
        waiting_for=_waiting_for(status),
        missing_objects=int(status.get("missing_objects") or 0),
        missing_sample=tuple(str(k) for k in status.get("missing_sample") or []),
        last_error=str(status.get("last_error") or ""),
        last_advance=status.get("last_advance"),
    )


def _reason(branch: str, finding: Finding, lag: BranchLag) -> Reason:
    rule = finding.rule
    fires = f"{rule.name} fires once this holds for {duration(rule.holds_for)}"
    if rule is LAGGING:
        text = (
            f"Branch {branch} lags {duration(finding.value)} behind its source, over "
            f"{duration(rule.threshold)} ({fires})."
        )
    elif rule is STUCK:
        text = (
            f"Branch {branch} is {_commits(lag.lag_commits)} behind and has not moved for "
            f"{duration(finding.value)}, over {duration(rule.threshold)} ({fires})."
        )
    else:
        assert rule is OBJECTS_MISSING
        text = (
            f"Branch {branch} waits for {lag.missing_objects} file(s) and has not moved for "
            f"{duration(finding.value)}, over {duration(rule.threshold)} ({fires})."
        )
    return Reason(rule.health, rule.name, text)


def describe(mirror: dict[str, Any], now: float) -> MirrorView:
    """Return the replicant's answer for a mirror as the pages show it, judged at ``now``."""
    branches = tuple(_branch(s) for s in mirror.get("status") or [])
    created = float(mirror.get("created") or now)
    findings: list[Finding] = []
    reasons: list[Reason] = []
    if not mirror.get("worker"):
        findings.append(Finding(LEASE_UNHELD, 0.0))
        reasons.append(
            Reason(
                "stuck",
                LEASE_UNHELD.name,
                "No replicant replica holds the mirror's lease, so nothing mirrors it "
                f"({LEASE_UNHELD.name} fires once this holds for "
                f"{duration(LEASE_UNHELD.holds_for)}).",
            )
        )
    for view in branches:
        lag = BranchLag(view.lag_seconds, view.lag_commits, view.missing_objects, view.last_advance)
        for finding in branch_findings(lag, now, created):
            findings.append(finding)
            reasons.append(_reason(view.branch, finding, lag))
    order = {"stuck": 0, "lagging": 1, "healthy": 2}
    return MirrorView(
        name=str(mirror["name"]),
        source_repo=str(mirror["source_repo"]),
        source_region=str(mirror["source_region"]),
        region=str(mirror.get("region") or ""),
        storage_namespace=str(mirror.get("storage_namespace") or ""),
        branch_patterns=tuple(mirror.get("branches") or ()),
        tags=bool(mirror.get("tags", True)),
        created=int(mirror.get("created") or 0),
        worker=str(mirror.get("worker") or ""),
        adopted=bool(mirror.get("adopted", False)),
        branches=branches,
        health=verdict(findings),
        reasons=tuple(sorted(reasons, key=lambda r: order[r.health])),
    )
