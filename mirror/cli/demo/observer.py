"""Watch the mirror: its status and the replicant's counters, and the lag seen over time."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import httpx

from mirror.cli.demo.api import BRANCH, MIRROR_REPO, MIRRORS_PATH, SOURCE_REPO, check
from mirror.cli.demo.errors import DemoError

if TYPE_CHECKING:
    from mirror.cli.demo.writer import Writer
    from mirror.simulate import ReplicationStats

__all__ = ["Observer", "Snapshot", "metric_totals"]


def metric_totals(text: str, mirror: str) -> dict[str, float]:
    """Sum the replicant's samples of ``mirror`` by ``name`` and ``name{op|result=value}``."""
    from prometheus_client.parser import text_string_to_metric_families

    totals: dict[str, float] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.labels.get("mirror") != mirror:
                continue
            totals[sample.name] = totals.get(sample.name, 0.0) + sample.value
            for label in ("op", "result"):
                if label in sample.labels:
                    key = f"{sample.name}{{{label}={sample.labels[label]}}}"
                    totals[key] = totals.get(key, 0.0) + sample.value
    return totals


@dataclass(slots=True)
class Snapshot:
    """What the view shows at one moment."""

    elapsed: float = 0.0
    source_head: str | None = None
    commits: int = 0
    writer_errors: int = 0
    mirror_head: str | None = None
    state: str = "starting"
    lag_seconds: float = 0.0
    lag_commits: int = 0
    advances: int = 0
    skipped: int = 0
    validated: int = 0
    missing_seen: int = 0
    requests: int = 0
    requests_by_op: dict[str, int] = field(default_factory=dict)
    pending: int = 0
    copied: int = 0
    dropped: int = 0
    problem: str | None = None


class Observer:
    """Read the mirror's status and the replicant's metrics; keep the lag seen over time."""

    def __init__(self, replicant: httpx.Client, initial_head: str | None) -> None:
        self._replicant = replicant
        self._initial_head = initial_head
        self.last = Snapshot()
        self.lag_seconds: list[float] = []
        self.lag_commits_max = 0

    def observe(
        self, elapsed: float, writer: Writer, stats: ReplicationStats, *, sample: bool
    ) -> Snapshot:
        """Return how things stand now; ``sample``: count the lag seen in the report's figures.

        An unreachable replicant is a problem shown, not an error: its last figures stand.
        """
        snap = Snapshot(
            elapsed=elapsed,
            source_head=writer.head or self._initial_head,
            commits=len(writer.commits),
            writer_errors=writer.errors,
            pending=stats.pending,
            copied=stats.copied,
            dropped=stats.dropped,
        )
        previous = self.last
        try:
            status = self._status()
            totals = metric_totals(self._replicant.get("/metrics").text, MIRROR_REPO)
        except (httpx.HTTPError, DemoError, ValueError) as exc:
            snap.problem = f"replicant unreachable: {exc}"
            for name in ("mirror_head", "state", "lag_seconds", "lag_commits", "advances"):
                setattr(snap, name, getattr(previous, name))
            snap.skipped, snap.validated = previous.skipped, previous.validated
            snap.requests, snap.requests_by_op = previous.requests, previous.requests_by_op
            snap.missing_seen = previous.missing_seen
        else:
            if status is not None:
                snap.mirror_head = status.get("mirror_head")
                snap.state = str(status.get("state") or "waiting")
                snap.lag_seconds = float(status.get("lag_seconds") or 0.0)
                # while the commits behind a new head are being counted, their lower bound
                counted = status.get("lag_commits")
                snap.lag_commits = int(
                    counted if counted is not None else status.get("lag_commits_at_least") or 0
                )
                if status.get("last_error"):
                    snap.problem = str(status["last_error"])
            snap.advances = int(totals.get("lakemirror_head_advances_total", 0))
            snap.skipped = int(totals.get("lakemirror_commits_skipped_total", 0))
            snap.validated = int(
                totals.get("lakemirror_validation_objects_total{result=present}", 0)
            )
            snap.missing_seen = int(
                totals.get("lakemirror_validation_objects_total{result=missing}", 0)
            )
            snap.requests = int(totals.get("lakemirror_validation_requests_total", 0))
            prefix = "lakemirror_validation_requests_total{op="
            snap.requests_by_op = {
                k[len(prefix) : -1]: int(v) for k, v in totals.items() if k.startswith(prefix)
            }
            if sample and status is not None:
                self.lag_seconds.append(snap.lag_seconds)
                self.lag_commits_max = max(self.lag_commits_max, snap.lag_commits)
        if snap.problem is None and writer.last_error and writer.errors:
            snap.problem = f"writer: {writer.last_error}"
        self.last = snap
        return snap

    def _status(self) -> dict[str, Any] | None:
        path = MIRRORS_PATH.format(repo=SOURCE_REPO) + f"/{MIRROR_REPO}"
        body = check(self._replicant.get(path), "read the mirror's status").json()
        for branch in body.get("status", []):
            if branch.get("branch") == BRANCH:
                found: dict[str, Any] = branch
                return found
        return None
