"""The replicant's Prometheus metrics (names of DESIGN.md §6), in a registry of its own."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge

__all__ = ["ReplicantMetrics", "ValidationMetrics"]


class ReplicantMetrics:
    """Counters and gauges of one replicant process, labelled by mirror (and branch)."""

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry or CollectorRegistry()
        r = self.registry
        branch = ("mirror", "branch")
        self.lag_seconds = Gauge(
            "lakemirror_lag_seconds",
            "Age of the oldest source commit the mirror branch does not show yet.",
            branch,
            registry=r,
        )
        self.lag_commits = Gauge(
            "lakemirror_lag_commits",
            "Source commits the mirror branch does not show yet; a lower bound while those "
            "behind a newly seen source head are not counted yet (lag_commits_at_least).",
            branch,
            registry=r,
        )
        self.missing_objects = Gauge(
            "lakemirror_missing_objects",
            "Files of the head being validated that have not arrived yet.",
            branch,
            registry=r,
        )
        self.head_advances = Counter(
            "lakemirror_head_advances",
            "Times a mirror branch head moved to a validated commit.",
            branch,
            registry=r,
        )
        self.commits_skipped = Counter(
            "lakemirror_commits_skipped",
            "Commits copied but never validated because a newer head was validated instead.",
            branch,
            registry=r,
        )
        self.commits_imported = Counter(
            "lakemirror_commits_imported",
            "Commit records copied into mirror repositories.",
            ("mirror",),
            registry=r,
        )
        self.validations = Counter(
            "lakemirror_validations",
            "Validation passes over a commit, by outcome (complete or incomplete).",
            ("mirror", "result"),
            registry=r,
        )
        self.bulk_validations = Counter(
            "lakemirror_bulk_validations",
            "First syncs validated by the Spark bulk job.",
            ("mirror",),
            registry=r,
        )
        self.validation_requests = Counter(
            "lakemirror_validation_requests",
            "Object-store requests made by the validator, by operation.",
            ("mirror", "op"),
            registry=r,
        )
        self.validation_objects = Counter(
            "lakemirror_validation_objects",
            "Objects checked by the validator, by result.",
            ("mirror", "result"),
            registry=r,
        )
        self.cache_hits = Counter(
            "lakemirror_cache_hits",
            "Checks answered from a cache instead of the object store, by cache.",
            ("mirror", "cache"),
            registry=r,
        )
        self.source_errors = Counter(
            "lakemirror_source_errors",
            "Failed calls to a source or destination server.",
            ("mirror",),
            registry=r,
        )
        self.last_advance = Gauge(
            "lakemirror_last_advance_timestamp_seconds",
            "When the mirror branch head last moved (seconds since the epoch).",
            branch,
            registry=r,
        )
        self.lease_held = Gauge(
            "lakemirror_lease_held",
            "1 while this replica holds the mirror's lease.",
            ("mirror",),
            registry=r,
        )
        # Outcomes of promotion and fail-back stay exported after the mirror is gone (a promoted
        # mirror's configuration is removed), so forget_mirror leaves them alone.
        self.promotions = Counter(
            "lakemirror_promotions",
            "Mirrors promoted to writable repositories, by kind (planned or forced).",
            ("mirror", "kind"),
            registry=r,
        )
        self.writes_refused = Gauge(
            "lakemirror_switchover_writes_refused_seconds",
            "How long the last planned switchover refused writes (source demoted to promoted).",
            ("mirror",),
            registry=r,
        )
        self.preserved_commits = Counter(
            "lakemirror_failback_preserved_commits",
            "Commits an adopted repository had and its new source lacked, kept on preserved "
            "branches.",
            ("mirror",),
            registry=r,
        )

        self._labelled: tuple[tuple[Counter | Gauge, tuple[str, ...]], ...] = (
            *((m, branch) for m in self._branch_metrics()),
            *(
                (m, ("mirror",))
                for m in (self.commits_imported, self.bulk_validations, self.source_errors)
            ),
            *((m, ("mirror",)) for m in (self.lease_held,)),
            *(
                (m, ("mirror", label))
                for m, label in (
                    (self.validations, "result"),
                    (self.validation_requests, "op"),
                    (self.validation_objects, "result"),
                    (self.cache_hits, "cache"),
                )
            ),
        )

    def _branch_metrics(self) -> tuple[Counter | Gauge, ...]:
        return (
            self.lag_seconds,
            self.lag_commits,
            self.missing_objects,
            self.head_advances,
            self.commits_skipped,
            self.last_advance,
        )

    def forget_mirror(self, mirror: str) -> None:
        """Stop exporting every series of a mirror that is no longer configured.

        Without this, a deleted mirror's last values (and a lease shown as unheld) would stay
        on every replica's ``/metrics`` until the process restarts.
        """
        for metric, names in self._labelled:
            seen: set[tuple[str, ...]] = set()
            for family in metric.collect():
                for sample in family.samples:
                    values = tuple(sample.labels.get(n, "") for n in names)
                    if values[0] == mirror:
                        seen.add(values)
            for values in seen:
                metric.remove(*values)

    def forget_branch(self, mirror: str, branch: str) -> None:
        """Stop exporting the series of a branch that is no longer mirrored."""
        for metric in self._branch_metrics():
            try:
                metric.remove(mirror, branch)
            except KeyError:
                continue

    def for_validation(self, mirror: str) -> ValidationMetrics:
        """Return validator event hooks that count into this mirror's series."""
        return ValidationMetrics(self, mirror)


class ValidationMetrics:
    """Validator events (see :class:`mirror.validator.ValidationEvents`) as Prometheus counts."""

    def __init__(self, metrics: ReplicantMetrics, mirror: str) -> None:
        self._metrics = metrics
        self._mirror = mirror
        # one series per label value, looked up once: an object checked costs one increment
        # (a look-up by labels costs more than the increment, a million times in a first sync)
        self._requests: dict[str, Counter] = {}
        self._objects: dict[str, Counter] = {}
        self._cache_hits: dict[str, Counter] = {}

    def request(self, op: str) -> None:
        """Count one object-store request."""
        series = self._requests.get(op)
        if series is None:
            series = self._requests[op] = self._metrics.validation_requests.labels(self._mirror, op)
        series.inc()

    def object(self, result: str, count: int = 1) -> None:
        """Count ``count`` objects checked."""
        series = self._objects.get(result)
        if series is None:
            series = self._metrics.validation_objects.labels(self._mirror, result)
            self._objects[result] = series
        series.inc(count)

    def cache_hit(self, cache: str) -> None:
        """Count one check answered from ``cache``."""
        series = self._cache_hits.get(cache)
        if series is None:
            series = self._cache_hits[cache] = self._metrics.cache_hits.labels(self._mirror, cache)
        series.inc()
