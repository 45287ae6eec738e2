"""The alert rules: read by promtool, unit-tested with `promtool test rules`, and each one
documented by a runbook section of docs/operations.md that its ``runbook_url`` points at."""

from __future__ import annotations

import re
from typing import Any

import pytest
import yaml

from mirror.core.mirror_health import ALERTS, AlertRule
from tests.deploy.tools import ROOT, run_tool

RULES = ROOT / "deploy" / "prometheus" / "alerts.yaml"
RULE_TESTS = ROOT / "deploy" / "prometheus" / "alerts_test.yaml"
OPERATIONS = ROOT / "docs" / "operations.md"
RUNBOOK_BASE = "https://github.com/lakemirror/lakemirror/blob/main/docs/operations.md#"
JOBS = {"lakemirror-server", "lakemirror-replicant"}


def _alerts() -> list[dict[str, Any]]:
    groups = yaml.safe_load(RULES.read_text())["groups"]
    return [rule for group in groups for rule in group["rules"] if "alert" in rule]


def _github_anchor(heading: str) -> str:
    """Return the anchor GitHub gives a Markdown heading."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


def test_promtool_accepts_the_rules() -> None:
    done = run_tool("promtool", ["check", "rules", str(RULES)])
    assert f"SUCCESS: {len(_alerts())} rules found" in done.stdout


def test_promtool_unit_tests_pass() -> None:
    done = run_tool("promtool", ["test", "rules", str(RULE_TESTS)], cwd=RULE_TESTS.parent)
    assert "SUCCESS" in done.stdout


def test_every_alert_is_unit_tested_firing_and_quiet() -> None:
    tests = yaml.safe_load(RULE_TESTS.read_text())["tests"]
    firing: set[str] = set()
    quiet: set[str] = set()
    for case in tests:
        for check in case.get("alert_rule_test", []):
            (firing if check["exp_alerts"] else quiet).add(check["alertname"])
    names = {rule["alert"] for rule in _alerts()}
    assert names - firing == set(), "alerts never shown firing"
    assert names - quiet == set(), "alerts never shown quiet (before `for:` or resolved)"


def test_alert_names_are_unique_and_follow_the_convention() -> None:
    names = [rule["alert"] for rule in _alerts()]
    assert len(names) == len(set(names))
    for name in names:
        assert re.fullmatch(r"LakeMirror[A-Z][A-Za-z]+", name), name


@pytest.mark.parametrize("rule", _alerts(), ids=lambda rule: rule["alert"])
def test_alert_has_severity_annotations_and_a_runbook(rule: dict[str, Any]) -> None:
    assert rule["labels"]["severity"] in {"warning", "critical"}
    assert re.fullmatch(r"\d+[smh]", rule["for"]), "every alert waits before it fires"
    annotations = rule["annotations"]
    assert set(annotations) == {"summary", "description", "runbook_url"}
    assert "$labels" in annotations["summary"] + annotations["description"] or (
        "absent(" in rule["expr"]
    ), "annotations name what is affected"
    url = annotations["runbook_url"]
    assert url == RUNBOOK_BASE + rule["alert"].lower()
    headings = {
        _github_anchor(line.lstrip("#"))
        for line in OPERATIONS.read_text().splitlines()
        if line.startswith("### ")
    }
    assert url.rpartition("#")[2] in headings, f"docs/operations.md has no section for {url}"


@pytest.mark.parametrize("rule", _alerts(), ids=lambda rule: rule["alert"])
def test_alert_reads_only_the_scrape_jobs_everyone_uses(rule: dict[str, Any]) -> None:
    jobs = set(re.findall(r'job="([^"]+)"', rule["expr"]))
    assert jobs <= JOBS
    if "up{" in rule["expr"]:
        assert len(jobs) == 1


def test_runbook_sections_exist_only_for_alerts() -> None:
    """Every runbook section under "Alerts" belongs to an alert of the rules file."""
    text = OPERATIONS.read_text()
    section = text.split("\n## Alerts", 1)[1].split("\n## ", 1)[0]
    documented = {line[4:].strip() for line in section.splitlines() if line.startswith("### ")}
    assert documented == {rule["alert"] for rule in _alerts()}


def _seconds(duration: str) -> float:
    number, unit = re.fullmatch(r"(\d+)([smh])", duration).groups()  # type: ignore[union-attr]
    return float(number) * {"s": 1, "m": 60, "h": 3600}[unit]


@pytest.mark.parametrize("health", ALERTS, ids=lambda rule: rule.name)
def test_the_health_of_mirrors_uses_the_alerts_thresholds(health: AlertRule) -> None:
    """The web UI's healthy / lagging / stuck (mirror.core.mirror_health) is these rules'."""
    rule = {r["alert"]: r for r in _alerts()}[health.name]
    assert _seconds(rule["for"]) == health.holds_for
    severity = {"lagging": "warning", "stuck": "critical"}[health.health]
    assert rule["labels"]["severity"] == severity
    # the comparisons of the expression (but the lease holder's selection): the largest is
    # the threshold, the others are "> 0"
    expr = rule["expr"].replace("(lakemirror_lease_held == 1)", "")
    compared = [float(n) for n in re.findall(r"(?:[<>]|==)\s*(\d+(?:\.\d+)?)", expr)]
    assert max(compared) == health.threshold
    assert set(compared) - {health.threshold} <= {0.0}


def test_every_mirror_alert_but_the_error_rate_decides_a_mirrors_health() -> None:
    groups = yaml.safe_load(RULES.read_text())["groups"]
    (mirroring,) = [g for g in groups if g["name"] == "lakemirror-mirroring"]
    names = {rule["alert"] for rule in mirroring["rules"]}
    # a rate of failed calls needs Prometheus; a branch's last_error shows those failures
    assert names - {rule.name for rule in ALERTS} == {"LakeMirrorSourceErrors"}
