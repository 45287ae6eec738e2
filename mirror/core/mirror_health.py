"""Whether a mirror is healthy, lagging or stuck, by the thresholds of the shipped alerts.

The numbers are those of ``deploy/prometheus/alerts.yaml`` (a test reads the rules and checks
them against :data:`ALERTS`), so a person looking at a mirror's status sees the verdict the
alerts reach on the same values:

- ``LakeMirrorMirrorLagging`` (warning): a branch's lag is over 15 minutes;
- ``LakeMirrorObjectsMissing`` (warning): files of the head being validated are missing and the
  branch has not moved for 30 minutes;
- ``LakeMirrorMirrorStuck`` (critical): the branch is behind and has not moved for an hour;
- ``LakeMirrorLeaseUnheld`` (critical): no replica holds the mirror's lease.

A warning makes the mirror *lagging*, a critical alert *stuck*. The verdict is the alert's
condition as it holds now; the alert itself fires once the condition has held for its ``for:``
duration (:attr:`AlertRule.holds_for`), which a single status cannot tell. A branch that never
moved is measured from the mirror's creation, where Prometheus has no advance to measure from.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

__all__ = [
    "ALERTS",
    "LAGGING",
    "LEASE_UNHELD",
    "OBJECTS_MISSING",
    "STUCK",
    "AlertRule",
    "BranchLag",
    "Finding",
    "Health",
    "branch_findings",
    "mirror_findings",
    "verdict",
]

Health = Literal["healthy", "lagging", "stuck"]
_RANK: dict[Health, int] = {"healthy": 0, "lagging": 1, "stuck": 2}


@dataclass(frozen=True, slots=True)
class AlertRule:
    """One shipped alert about a mirror: its threshold and how long it must hold to fire.

    Attributes:
        name: The alert's name in ``alerts.yaml``.
        health: What the alert's condition makes the mirror: ``lagging`` (a warning) or
            ``stuck`` (critical).
        threshold: Seconds: the lag over which (Lagging), or the time without an advance after
            which (Stuck, ObjectsMissing), the condition holds; 0 when there is none.
        holds_for: The alert's ``for:``, in seconds.
    """

    name: str
    health: Health
    threshold: float
    holds_for: float


LAGGING = AlertRule("LakeMirrorMirrorLagging", "lagging", 900.0, 300.0)
OBJECTS_MISSING = AlertRule("LakeMirrorObjectsMissing", "lagging", 1800.0, 900.0)
STUCK = AlertRule("LakeMirrorMirrorStuck", "stuck", 3600.0, 1800.0)
LEASE_UNHELD = AlertRule("LakeMirrorLeaseUnheld", "stuck", 0.0, 120.0)
ALERTS = (LAGGING, OBJECTS_MISSING, STUCK, LEASE_UNHELD)
"""The shipped mirror alerts whose conditions decide a mirror's health."""


@dataclass(frozen=True, slots=True)
class BranchLag:
    """What a branch's status says about its lag.

    Attributes:
        lag_seconds: Age of the oldest source commit the mirror branch does not show.
        lag_commits: Source commits it does not show (a count, or its lower bound).
        missing_objects: Files of the head being validated that have not arrived.
        last_advance: When the mirror branch last moved (seconds since the epoch), if ever.
    """

    lag_seconds: float
    lag_commits: int
    missing_objects: int
    last_advance: float | None


@dataclass(frozen=True, slots=True)
class Finding:
    """An alert whose condition holds, and the value that makes it hold.

    Attributes:
        rule: The alert.
        value: The lag in seconds (Lagging), or the seconds since the branch last moved
            (Stuck, ObjectsMissing); 0 for LeaseUnheld.
    """

    rule: AlertRule
    value: float


def branch_findings(lag: BranchLag, now: float, created: float) -> list[Finding]:
    """Return the alerts whose conditions ``lag`` meets at ``now``, the most severe first.

    Args:
        lag: The branch's status.
        now: The time to judge at (seconds since the epoch).
        created: When the mirror was created: the reference of a branch that never moved.
    """
    found: list[Finding] = []
    idle = now - (lag.last_advance if lag.last_advance is not None else created)
    if lag.lag_commits > 0 and idle > STUCK.threshold:
        found.append(Finding(STUCK, idle))
    if lag.lag_seconds > LAGGING.threshold:
        found.append(Finding(LAGGING, lag.lag_seconds))
    if lag.missing_objects > 0 and idle > OBJECTS_MISSING.threshold:
        found.append(Finding(OBJECTS_MISSING, idle))
    return found


def mirror_findings(
    branches: list[BranchLag], *, lease_held: bool, now: float, created: float
) -> list[Finding]:
    """Return the alerts whose conditions a mirror's branches (and lease) meet at ``now``."""
    found = [] if lease_held else [Finding(LEASE_UNHELD, 0.0)]
    for lag in branches:
        found += branch_findings(lag, now, created)
    return sorted(found, key=lambda f: -_RANK[f.rule.health])


def verdict(findings: list[Finding]) -> Health:
    """Return the health ``findings`` amount to: the most severe, ``healthy`` if none."""
    worst: Health = "healthy"
    for finding in findings:
        if _RANK[finding.rule.health] > _RANK[worst]:
            worst = finding.rule.health
    return worst
