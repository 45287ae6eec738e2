"""A real Prometheus scraping real regions: the shipped alert rules fire and resolve, and every
dashboard query returns data.

Two regions run as processes (servers ``a`` and ``b``, a replicant of ``b``, simulated
replication); Prometheus scrapes them every second as the jobs ``lakemirror-server`` and
``lakemirror-replicant`` and evaluates ``deploy/prometheus/alerts.yaml`` with its ``for:``
durations and time thresholds divided by :data:`FACTOR` (the expressions are the shipped ones).
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import lakefs
import pytest
import yaml

from mirror.core.committed import METADATA_PREFIX
from mirror.simulate import ReplicationSimulator
from tests.deploy.prometheus import Prometheus, running_prometheus, scaled_rules, seconds
from tests.deploy.test_dashboard import panels
from tests.deploy.tools import ROOT
from tests.e2e.regions import Replicant, TwoRegions, two_regions, unique, wait_for

pytestmark = [pytest.mark.slow, pytest.mark.e2e]

RULES = ROOT / "deploy" / "prometheus" / "alerts.yaml"
DASHBOARD = ROOT / "deploy" / "grafana" / "lakemirror-dashboard.json"
FACTOR = 100
"""Minutes of the shipped rules become seconds here (``for: 5m`` → ``3s``)."""
THRESHOLDS = {
    "LakeMirrorMirrorLagging": {"900": "9"},
    "LakeMirrorMirrorStuck": {"3600": "36"},
    "LakeMirrorObjectsMissing": {"1800": "18"},
}
"""The thresholds that are durations (seconds), divided by :data:`FACTOR` as well."""
RATE_INTERVAL = "4s"
"""Grafana's ``$__rate_interval`` at a 1 s scrape interval: four scrape intervals."""


@dataclass
class Observed:
    """Two regions mirroring under a Prometheus that scrapes them."""

    world: TwoRegions
    replicant: Replicant
    prometheus: Prometheus
    repo: lakefs.Repository
    mirror: str
    sim: ReplicationSimulator
    orphan: str
    """A mirror whose source repository was deleted: its worker keeps failing."""
    jobs: dict[str, list[str]]
    """The scrape jobs: name → base URLs of the targets."""

    def commit(self, what: str) -> str:
        main = self.repo.branch("main")
        main.object(f"data/{unique(what)}.csv").upload(f"{what}\n".encode() * 100)
        return str(main.commit(what).get_commit().id)

    def mirror_head(self) -> str | None:
        return self.world.b.head(self.mirror, "main")


def _wait_scraped(prometheus: Prometheus, jobs: dict[str, list[str]]) -> None:
    """Wait until every target of ``jobs`` was scraped successfully.

    Prometheus hands discovered targets to its scrapers in batches, seconds after it starts.
    """
    wanted = sum(len(urls) for urls in jobs.values())

    def scraped() -> bool:
        targets = prometheus.targets()
        return len(targets) == wanted and all(t["health"] == "up" for t in targets)

    wait_for(scraped, 60, "every target scraped", interval=0.2)


def _alert(prometheus: Prometheus, name: str, mirror: str) -> dict[str, Any] | None:
    for alert in prometheus.alerts():
        labels = alert["labels"]
        if labels["alertname"] == name and labels.get("mirror") == mirror:
            return alert
    return None


@pytest.fixture(scope="module")
def observed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Observed]:
    tmp = tmp_path_factory.mktemp("observed")
    (tmp / "regions").mkdir()
    rules = scaled_rules(yaml.safe_load(RULES.read_text()), FACTOR, THRESHOLDS)
    with two_regions(tmp / "regions") as world, world.replicant("watched", poll=0.25) as replicant:
        jobs = {
            "lakemirror-server": [world.a.server.url, world.b.server.url],
            "lakemirror-replicant": [replicant.url],
        }
        with running_prometheus(tmp / "prometheus", jobs, rules) as prometheus:
            _wait_scraped(prometheus, jobs)
            repo, namespace = world.source_repo("watched")
            name = unique("watched")
            sim = world.simulator(namespace, world.b.namespace(name), seed=7)
            orphan_repo, _ = world.source_repo("orphan")
            orphan = unique("orphan")
            for source, mirror in ((repo.id, name), (orphan_repo.id, orphan)):
                created = world.create_mirror(replicant, source, mirror, world.b.namespace(mirror))
                assert created.status_code == 201, created.text
            orphan_repo.delete()
            observed = Observed(world, replicant, prometheus, repo, name, sim, orphan, jobs)
            # a first advance, then commits during a stall: the mirror skips some of them. The
            # first stalled commit's metarange is held back until the mirror has caught up, so
            # that the mirror cannot land on it (the others' files may arrive in any order, and
            # the mirror moves to any whole commit between it and the head)
            first = observed.commit("first")
            wait_for(lambda: observed.mirror_head() == first, 60, "the first advance")
            sim.stall()
            try:
                heads = [observed.commit(f"stalled-{i}") for i in range(3)]
                metaranges = [repo.commit(h).get_commit().meta_range_id for h in heads]
                assert len(set(metaranges)) == len(heads)
                unreachable = METADATA_PREFIX + metaranges[0]

                def held(key: str) -> bool:
                    return key == unreachable

                sim.withhold(held)
            finally:
                sim.resume()
            try:
                wait_for(lambda: observed.mirror_head() == heads[-1], 60, "the mirror catching up")
            finally:
                sim.release(held)
            assert replicant.metric("lakemirror_commits_skipped_total", mirror=name) >= 1
            yield observed


def test_scaled_rules_keep_the_shipped_expressions() -> None:
    shipped = yaml.safe_load(RULES.read_text())
    scaled = scaled_rules(shipped, FACTOR, THRESHOLDS)
    for group, ours in zip(shipped["groups"], scaled["groups"], strict=True):
        for rule, rewritten in zip(group["rules"], ours["rules"], strict=True):
            expected = rule["expr"]
            for old, new in THRESHOLDS.get(rule["alert"], {}).items():
                expected = expected.replace(old, new)
            assert rewritten["expr"] == expected
            assert seconds(rewritten["for"]) == max(1, round(seconds(rule["for"]) / FACTOR))
            assert {k: v for k, v in rewritten.items() if k not in ("expr", "for")} == {
                k: v for k, v in rule.items() if k not in ("expr", "for")
            }


def test_every_rule_evaluates_without_error(observed: Observed) -> None:
    shipped = {r["alert"] for g in yaml.safe_load(RULES.read_text())["groups"] for r in g["rules"]}

    def evaluated() -> list[dict[str, Any]] | None:
        rules = [r for g in observed.prometheus.rule_groups() for r in g["rules"]]
        done = all(not r["lastEvaluation"].startswith("0001-") for r in rules)
        return rules if done else None

    rules = wait_for(evaluated, 30, "every rule evaluated", interval=0.2)
    assert {r["name"] for r in rules} == shipped
    broken = {r["name"]: r.get("lastError") for r in rules if r["health"] != "ok"}
    assert broken == {}


def test_lag_alert_fires_after_its_for_and_resolves(observed: Observed) -> None:
    prometheus, name = observed.prometheus, observed.mirror
    assert _alert(prometheus, "LakeMirrorMirrorLagging", name) is None
    states: list[str] = []

    def firing() -> dict[str, Any] | None:
        alert = _alert(prometheus, "LakeMirrorMirrorLagging", name)
        if alert is not None:
            states.append(alert["state"])
        return alert if alert is not None and alert["state"] == "firing" else None

    observed.sim.stall()
    try:
        heads = [observed.commit(f"behind-{i}") for i in range(3)]
        alert = wait_for(firing, 90, "the lag alert firing", interval=0.2)
    finally:
        observed.sim.resume()
    assert states[0] == "pending", "the alert waits for its `for:` before firing"
    assert alert["labels"] == {
        "alertname": "LakeMirrorMirrorLagging",
        "mirror": name,
        "branch": "main",
        "severity": "warning",
    }
    assert float(alert["value"]) > 9
    annotations = alert["annotations"]
    assert annotations["summary"] == f"Mirror branch {name}/main is falling behind its source."
    assert f"mirror {name} does not show on branch main" in annotations["description"]
    assert annotations["runbook_url"].endswith("docs/operations.md#lakemirrormirrorlagging")

    wait_for(lambda: observed.mirror_head() == heads[-1], 60, "the mirror catching up")
    wait_for(
        lambda: _alert(prometheus, "LakeMirrorMirrorLagging", name) is None,
        60,
        "the lag alert resolving",
        interval=0.2,
    )
    lag = prometheus.query(f'lakemirror_lag_seconds{{mirror="{name}", branch="main"}}')
    assert [float(s["value"][1]) for s in lag] == [0.0]


def test_source_errors_alert_fires_for_a_mirror_whose_source_is_gone(observed: Observed) -> None:
    def firing() -> dict[str, Any] | None:
        alert = _alert(observed.prometheus, "LakeMirrorSourceErrors", observed.orphan)
        return alert if alert is not None and alert["state"] == "firing" else None

    alert = wait_for(firing, 60, "the source errors alert firing", interval=0.2)
    assert alert["labels"]["severity"] == "warning"
    assert float(alert["value"]) > 0.1


def test_a_healthy_mirror_raises_no_other_alert(observed: Observed) -> None:
    head = observed.commit("healthy")
    wait_for(lambda: observed.mirror_head() == head, 60, "the mirror following")
    _wait_scraped(observed.prometheus, observed.jobs)
    firing = {
        (a["labels"]["alertname"], a["labels"].get("mirror"))
        for a in observed.prometheus.alerts()
        if a["state"] == "firing"
    }
    assert firing <= {("LakeMirrorSourceErrors", observed.orphan)}


def _grafana_substitute(expr: str, values: dict[str, str]) -> str:
    for variable, value in sorted(values.items(), key=lambda kv: -len(kv[0])):
        expr = expr.replace(variable, value)
    return expr


def test_every_dashboard_query_returns_data_while_mirroring(observed: Observed) -> None:
    prometheus = observed.prometheus
    head = observed.commit("dashboard")
    wait_for(lambda: observed.mirror_head() == head, 60, "the mirror following")

    templating = json.loads(DASHBOARD.read_text())["templating"]["list"]
    variable = next(v for v in templating if v["name"] == "mirror")
    parsed = re.fullmatch(r"label_values\((.+), (\w+)\)", variable["query"]["query"])
    assert parsed is not None
    mirrors = prometheus.label_values(parsed[2], parsed[1])
    assert {observed.mirror, observed.orphan} <= set(mirrors)
    assert all(re.fullmatch(r"[a-z0-9-]+", m) for m in mirrors)
    # "All" of a multi-value variable, as Grafana formats it for a Prometheus regex matcher
    values = {"$mirror": "(" + "|".join(mirrors) + ")", "$__rate_interval": RATE_INTERVAL}

    queries = [
        (f"{panel['title']} [{target['refId']}]", target)
        for panel in panels()
        for target in panel["targets"]
    ]

    def problems() -> list[str]:
        found: list[str] = []
        end = time.time()
        for where, target in queries:
            expr = _grafana_substitute(target["expr"], values)
            assert "$" not in expr, f"{where}: unknown variable in {expr}"
            result = prometheus.query_range(expr, end - 60, end, 1)["result"]
            if not result:
                found.append(f"{where}: no data for {expr}")
            legend = re.findall(r"\{\{\s*(\w+)\s*\}\}", target["legendFormat"])
            for series in result:
                absent = [label for label in legend if not series["metric"].get(label)]
                if absent:
                    found.append(f"{where}: series {series['metric']} lacks {absent}")
                    break
        return found

    # a series a few scrapes old has no rate yet: give Prometheus a few intervals
    deadline = time.monotonic() + 30
    while (found := problems()) and time.monotonic() < deadline:
        time.sleep(0.5)  # polling interval of a deadline-bounded wait
    assert found == []
