"""The Grafana dashboard: the committed files are what the generator produces, and its structure
holds (panel ids, queries, grid, variables). Its queries run against a real Prometheus in
:mod:`tests.deploy.test_prometheus`."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from typing import Any

import pytest
import yaml
from grafana_foundation_sdk.cog.plugins import register_default_plugins
from grafana_foundation_sdk.models.dashboard import Dashboard as DashboardModel
from prometheus_client import CollectorRegistry

from deploy.grafana import dashboard
from mirror.httputil.metrics import HttpMetrics
from mirror.replicant.metrics import ReplicantMetrics
from tests.deploy.tools import ROOT

GRID_WIDTH = 24


def _committed() -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads(dashboard.JSON_PATH.read_text())
    return loaded


def panels() -> list[dict[str, Any]]:
    """Return the dashboard's panels that show data (rows left out)."""
    return [p for p in _committed()["panels"] if p["type"] != "row"]


def test_committed_json_is_what_the_generator_produces() -> None:
    assert dashboard.JSON_PATH.read_text() == dashboard.render_json(), (
        "run `python -m deploy.grafana.dashboard`"
    )


def test_committed_configmap_is_what_the_generator_produces() -> None:
    text = dashboard.CONFIGMAP_PATH.read_text()
    assert text == dashboard.render_configmap(dashboard.render_json())
    configmap = yaml.safe_load(text)
    assert configmap["apiVersion"] == "v1"
    assert configmap["kind"] == "ConfigMap"
    assert configmap["metadata"]["labels"]["grafana_dashboard"] == "1"
    (key,) = configmap["data"]
    assert key.endswith(".json")
    assert json.loads(configmap["data"][key]) == _committed()


def test_check_mode_of_the_generator_passes_on_the_committed_files() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "deploy.grafana.dashboard", "--check"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr


def test_grafana_models_read_the_json_back() -> None:
    register_default_plugins()
    model = DashboardModel.from_json(_committed())
    assert model.uid == dashboard.UID
    assert len(model.panels or []) == len(_committed()["panels"])


def test_panel_ids_are_unique() -> None:
    ids = [p["id"] for p in _committed()["panels"]]
    assert all(isinstance(i, int) and i > 0 for i in ids)
    assert len(ids) == len(set(ids))


@pytest.mark.parametrize("panel", panels(), ids=lambda p: p["title"])
def test_every_panel_queries_prometheus_through_the_datasource_variable(
    panel: dict[str, Any],
) -> None:
    assert panel["datasource"] == {"type": "prometheus", "uid": "${datasource}"}
    assert panel["targets"], "a panel without a query shows nothing"
    refs = [t["refId"] for t in panel["targets"]]
    assert len(refs) == len(set(refs))
    for target in panel["targets"]:
        assert target["datasource"] == panel["datasource"]
        assert target["expr"].strip()
        assert target.get("legendFormat")
    assert panel["title"] and panel["description"]
    assert panel["options"], "Grafana needs the options of a panel's visualization"


def test_grid_positions_fit_the_grid_and_do_not_overlap() -> None:
    taken: dict[tuple[int, int], str] = {}
    for panel in _committed()["panels"]:
        pos = panel["gridPos"]
        assert pos["w"] > 0 and pos["h"] > 0
        assert 0 <= pos["x"] and pos["x"] + pos["w"] <= GRID_WIDTH, panel["title"]
        for x in range(pos["x"], pos["x"] + pos["w"]):
            for y in range(pos["y"], pos["y"] + pos["h"]):
                assert (x, y) not in taken, f"{panel['title']} overlaps {taken[(x, y)]}"
                taken[(x, y)] = panel["title"]


def test_variables_are_a_prometheus_datasource_and_mirrors_from_label_values() -> None:
    variables = {v["name"]: v for v in _committed()["templating"]["list"]}
    assert set(variables) == {"datasource", "mirror"}
    assert variables["datasource"]["type"] == "datasource"
    assert variables["datasource"]["query"] == "prometheus"
    mirror = variables["mirror"]
    assert mirror["type"] == "query"
    assert mirror["datasource"]["uid"] == "${datasource}"
    assert re.fullmatch(r"label_values\(.+, mirror\)", mirror["query"]["query"])
    assert mirror["multi"] and mirror["includeAll"]


def _exported_names() -> set[str]:
    """Return every sample name the replicant and the server export."""
    names: set[str] = set()
    registries: list[CollectorRegistry] = [ReplicantMetrics().registry, HttpMetrics().registry]
    for registry in registries:
        for family in registry.collect():
            names.add(family.name)
            kind = family.type
            suffixes = {
                "counter": ["_total"],
                "histogram": ["_bucket", "_sum", "_count"],
                "gauge": [""],
            }.get(kind, [""])
            names.update(family.name + suffix for suffix in suffixes)
    return names


def test_every_metric_a_panel_reads_is_exported() -> None:
    exported = _exported_names()
    exprs = [t["expr"] for p in panels() for t in p["targets"]]
    variable = next(v for v in _committed()["templating"]["list"] if v["name"] == "mirror")
    exprs.append(variable["query"]["query"])
    read = {name for expr in exprs for name in re.findall(r"\blakemirror_[a-z_]+", expr)}
    assert read - exported == set()


def test_dashboard_shows_what_operators_ask_for() -> None:
    exprs = "\n".join(t["expr"] for p in panels() for t in p["targets"])
    for wanted in (
        "lakemirror_lag_seconds",
        "lakemirror_lag_commits",
        "lakemirror_head_advances_total",
        "lakemirror_commits_skipped_total",
        "lakemirror_validation_requests_total",
        "lakemirror_missing_objects",
        "lakemirror_source_errors_total",
        "lakemirror_lease_held",
        "lakemirror_http_requests_total",
        "lakemirror_http_request_duration_seconds_bucket",
        "lakemirror_http_requests_in_flight",
        "histogram_quantile",
    ):
        assert wanted in exprs, wanted
