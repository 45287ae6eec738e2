"""A mirror's health from its branches' status, by the shipped alerts' conditions."""

from __future__ import annotations

from mirror.core.mirror_health import (
    LAGGING,
    LEASE_UNHELD,
    OBJECTS_MISSING,
    STUCK,
    BranchLag,
    Finding,
    branch_findings,
    mirror_findings,
    verdict,
)

NOW = 1_800_000_000.0
CREATED = NOW - 86_400


def _lag(
    seconds: float = 0.0, commits: int = 0, missing: int = 0, advanced: float | None = 0.0
) -> BranchLag:
    return BranchLag(seconds, commits, missing, None if advanced is None else NOW - advanced)


def test_a_synced_branch_is_healthy_however_long_ago_it_moved() -> None:
    assert branch_findings(_lag(advanced=10 * 86_400), NOW, CREATED) == []
    assert verdict([]) == "healthy"


def test_a_lag_over_fifteen_minutes_is_lagging() -> None:
    assert branch_findings(_lag(900.0, 3, advanced=60), NOW, CREATED) == []
    found = branch_findings(_lag(900.5, 3, advanced=60), NOW, CREATED)
    assert found == [Finding(LAGGING, 900.5)]
    assert verdict(found) == "lagging"


def test_a_branch_behind_that_has_not_moved_for_an_hour_is_stuck() -> None:
    assert branch_findings(_lag(10.0, 1, advanced=3600), NOW, CREATED) == []
    found = branch_findings(_lag(10.0, 1, advanced=3601), NOW, CREATED)
    assert found == [Finding(STUCK, 3601)]
    assert verdict(found) == "stuck"


def test_missing_files_with_no_advance_for_half_an_hour_are_lagging() -> None:
    assert branch_findings(_lag(5.0, 0, missing=2, advanced=1800), NOW, CREATED) == []
    found = branch_findings(_lag(5.0, 0, missing=2, advanced=1801), NOW, CREATED)
    assert found == [Finding(OBJECTS_MISSING, 1801)]


def test_a_branch_that_never_moved_is_measured_from_the_mirrors_creation() -> None:
    fresh = _lag(30.0, 2, missing=5, advanced=None)
    assert branch_findings(fresh, NOW, NOW - 60) == []
    found = branch_findings(fresh, NOW, NOW - 4000)
    assert [f.rule for f in found] == [STUCK, OBJECTS_MISSING]
    assert found[0].value == 4000


def test_the_most_severe_finding_decides_and_comes_first() -> None:
    branches = [_lag(1000.0, 4, advanced=120), _lag(), _lag(50.0, 2, advanced=7200)]
    found = mirror_findings(branches, lease_held=True, now=NOW, created=CREATED)
    assert [f.rule for f in found] == [STUCK, LAGGING]
    assert verdict(found) == "stuck"
    unheld = mirror_findings([_lag()], lease_held=False, now=NOW, created=CREATED)
    assert unheld == [Finding(LEASE_UNHELD, 0.0)] and verdict(unheld) == "stuck"
