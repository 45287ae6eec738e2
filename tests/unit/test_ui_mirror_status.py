"""The mirroring pages' words and charts: a replicant's status and lag history, laid out."""

from __future__ import annotations

from typing import Any

import pytest

from mirror.ui.lag_chart import HEIGHT, WIDTH, lag_charts
from mirror.ui.mirror_status import commits_text, describe, duration
from mirror.ui.views.promotion import expected_loss

NOW = 1_800_000_000.0


def _status(branch: str = "main", **fields: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "branch": branch,
        "state": "synced",
        "source_head": "a" * 64,
        "mirror_head": "a" * 64,
        "lag_seconds": 0.0,
        "lag_commits": 0,
        "lag_commits_at_least": None,
        "missing_objects": 0,
        "missing_sample": [],
        "last_error": None,
        "last_advance": NOW - 30,
    }
    return {**base, **fields}


def _mirror(*statuses: dict[str, Any], worker: str | None = "r1") -> dict[str, Any]:
    return {
        "name": "origin",
        "source_repo": "origin",
        "source_region": "a",
        "region": "b",
        "storage_namespace": "local://origin",
        "branches": ["*"],
        "tags": True,
        "created": int(NOW - 86_400),
        "worker": worker,
        "status": list(statuses),
    }


@pytest.mark.parametrize(
    ("seconds", "text"),
    [
        (0, "0 s"),
        (42.4, "42 s"),
        (60, "1 min"),
        (1002, "16 min 42 s"),
        (3600, "1 h"),
        (7500, "2 h 5 min"),
        (3 * 86_400 + 7200, "3 d 2 h"),
    ],
)
def test_durations_read_as_a_person_says_them(seconds: float, text: str) -> None:
    assert duration(seconds) == text


def test_a_lag_in_commits_is_a_count_or_at_least_a_bound() -> None:
    assert commits_text(0, None) == "0 commits"
    assert commits_text(1, None) == "1 commit"
    assert commits_text(None, 1) == "at least 1 commit"
    assert commits_text(None, 3) == "at least 3 commits"


def test_a_synced_mirror_is_healthy_and_waits_for_nothing() -> None:
    view = describe(_mirror(_status()), NOW)
    assert view.health == "healthy" and view.reasons == ()
    (branch,) = view.branches
    assert (branch.lag, branch.commits, branch.waiting_for) == ("0 s", "0 commits", "")
    assert view.source == "a/origin"


def test_what_the_validator_waits_for_tells_metadata_from_data() -> None:
    sample = ["_lakefs/0c1d", "data/p1/a", "data/p1/b"]
    waiting = _status(
        state="waiting",
        source_head="b" * 64,
        lag_seconds=12.0,
        lag_commits=2,
        missing_objects=3,
        missing_sample=sample,
    )
    (branch,) = describe(_mirror(waiting), NOW).branches
    assert branch.waiting_for == (
        "3 files of the newest source head: 1 range or metarange file, 2 data objects"
    )
    partial = {**waiting, "missing_objects": 40}
    (branch,) = describe(_mirror(partial), NOW).branches
    assert branch.waiting_for == (
        "40 files of the newest source head; of the 3 listed, "
        "1 range or metarange file, 2 data objects"
    )
    validating = _status(state="validating", source_head="b" * 64, lag_commits=None)
    (branch,) = describe(_mirror({**validating, "lag_commits_at_least": 1}), NOW).branches
    assert branch.waiting_for == "checking the newest source head's files"
    assert branch.commits == "at least 1 commit" and not branch.exact


def test_health_and_its_reasons_follow_the_alerts() -> None:
    lagging = _status("dev", state="waiting", lag_seconds=1000.0, lag_commits=1)
    stuck = _status("main", state="error", lag_commits=2, last_advance=NOW - 4000)
    view = describe(_mirror(lagging, stuck), NOW)
    assert view.health == "stuck"
    assert [r.alert for r in view.reasons] == ["LakeMirrorMirrorStuck", "LakeMirrorMirrorLagging"]
    assert view.reasons[0].text == (
        "Branch main is 2 commits behind and has not moved for 1 h 6 min, over 1 h "
        "(LakeMirrorMirrorStuck fires once this holds for 30 min)."
    )
    assert "lags 16 min 40 s behind its source, over 15 min" in view.reasons[1].text
    assert view.lag_seconds == 1000.0
    unworked = describe(_mirror(_status(), worker=None), NOW)
    assert unworked.health == "stuck"
    assert unworked.reasons[0].alert == "LakeMirrorLeaseUnheld"


def test_a_forced_promotion_would_lose_what_the_branches_lag() -> None:
    behind = _status("dev", source_head="b" * 64, lag_seconds=90.0, lag_commits=2)
    bounded = _status(
        "main", source_head="c" * 64, lag_seconds=30.0, lag_commits=None, lag_commits_at_least=1
    )
    loss = expected_loss(describe(_mirror(behind, _status("ok")), NOW))
    assert (loss["commits"], loss["seconds"], loss["none"]) == ("2 commits", "1 min 30 s", False)
    assert [b.branch for b in loss["branches"]] == ["dev"]
    loss = expected_loss(describe(_mirror(behind, bounded), NOW))
    assert loss["commits"] == "at least 3 commits"
    assert expected_loss(describe(_mirror(_status()), NOW))["none"] is True


def _sample(at: float, seconds: float, commits: int | None, bound: int | None = None) -> Any:
    return {
        "time": at,
        "lag_seconds": seconds,
        "lag_commits": commits,
        "lag_commits_at_least": bound,
    }


def test_the_charts_place_each_sample_on_the_hour_and_break_at_gaps() -> None:
    history = {
        "slot_seconds": 10.0,
        "branches": [
            {
                "branch": "main",
                "samples": [
                    _sample(NOW - 3590, 0.0, 0),
                    _sample(NOW - 3580, 400.0, None, 2),
                    # no replica worked the mirror for a while: the line breaks
                    _sample(NOW - 1000, 120.0, 1),
                    _sample(NOW - 990, 0.0, 0),
                ],
            },
            {"branch": "dev", "samples": [_sample(NOW - 5, 10.0, 1)]},
        ],
    }
    seconds, commits = lag_charts(history, NOW)
    assert seconds.samples == commits.samples == 5
    dev, main = seconds.lines
    assert (dev.branch, main.branch) == ("dev", "main")
    assert len(main.segments) == 2 and dev.segments == (), "a lone sample is a point"
    xs = [p.x for p in main.points]
    assert xs == sorted(xs) and seconds.left < xs[0] < xs[-1] < seconds.right <= WIDTH
    assert all(seconds.top <= p.y <= seconds.bottom <= HEIGHT for p in main.points)
    # the y axis spans the peak; 0 is at the bottom
    assert seconds.y_ticks[0].label == "0 s" and seconds.y_ticks[-1].label == "8 min"
    assert main.points[0].y == seconds.bottom
    assert [p.bound for p in commits.lines[1].points] == [False, True, False, False]
    assert commits.lines[1].points[1].text.endswith(": at least 2 commits")
    assert [t.label for t in commits.y_ticks] == ["0", "1", "2"]
    assert len(seconds.x_ticks) == 6, "a mark every 10 minutes, none in the corner"


def test_the_ten_minute_window_keeps_its_samples_only() -> None:
    history = {
        "slot_seconds": 10.0,
        "branches": [
            {"branch": "main", "samples": [_sample(NOW - 3000, 5.0, 1), _sample(NOW - 60, 2.0, 1)]}
        ],
    }
    seconds, _ = lag_charts(history, NOW, "10m")
    assert seconds.samples == 1
    assert len(seconds.x_ticks) == 5, "a mark every 2 minutes, none in the corner"
    empty, _ = lag_charts({"branches": []}, NOW)
    assert empty.samples == 0 and empty.lines == ()
    assert [t.label for t in empty.y_ticks] == ["0 s", "1 s"]
