"""The LakeMirror Grafana dashboard, built with Grafana's own SDK (``grafana-foundation-sdk``).

``python -m deploy.grafana.dashboard`` writes the dashboard as JSON (for import or the Helm
chart) and as a ConfigMap that Grafana's dashboard sidecar loads; ``--check`` only reports
whether the committed files are what this module produces. Never edit the JSON by hand.

Every query reads the scrape jobs ``lakemirror-replicant`` and ``lakemirror-server``. Mirror
gauges are read from the replica holding the mirror's lease only, as the alert rules do: a
replica that lost a lease keeps its last values.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass
from pathlib import Path

from grafana_foundation_sdk.builders import dashboard as dash
from grafana_foundation_sdk.builders import prometheus, stat, statetimeline, timeseries
from grafana_foundation_sdk.builders.common import ReduceDataOptions, VizLegendOptions
from grafana_foundation_sdk.cog.builder import Builder
from grafana_foundation_sdk.cog.encoder import JSONEncoder
from grafana_foundation_sdk.models import dashboard as model
from grafana_foundation_sdk.models.common import (
    BigValueColorMode,
    BigValueGraphMode,
    BigValueJustifyMode,
    BigValueTextMode,
    LegendDisplayMode,
    LegendPlacement,
    VisibilityMode,
    VizOrientation,
)

__all__ = [
    "CONFIGMAP_PATH",
    "JSON_PATH",
    "UID",
    "build",
    "main",
    "render_configmap",
    "render_json",
]

UID = "lakemirror"
"""The dashboard's uid (stable, so links and provisioning keep working across versions)."""
HERE = Path(__file__).resolve().parent
JSON_PATH = HERE / "lakemirror-dashboard.json"
"""Where the dashboard JSON is committed."""
CONFIGMAP_PATH = HERE / "lakemirror-dashboard-configmap.yaml"
"""Where the sidecar ConfigMap is committed."""
CONFIGMAP_NAME = "lakemirror-dashboard"
SIDECAR_LABEL = "grafana_dashboard"
"""The label Grafana's dashboard sidecar (kube-prometheus-stack's default) looks for."""

REPLICANT = 'job="lakemirror-replicant"'
SERVER = 'job="lakemirror-server"'
MIRROR = 'mirror=~"$mirror"'
RATE = "$__rate_interval"
DATASOURCE = model.DataSourceRef(type_val="prometheus", uid="${datasource}")


def _leader(metric: str) -> str:
    """Return ``metric`` of the selected mirrors, as exported by their lease holders."""
    return (
        f"max by (mirror, branch) (\n  {metric}{{{REPLICANT}, {MIRROR}}}\n"
        f"  and on (namespace, job, instance, mirror) "
        f"(lakemirror_lease_held{{{REPLICANT}}} == 1)\n)"
    )


@dataclass(frozen=True, slots=True)
class Query:
    """One PromQL query of a panel and the legend of its series."""

    expr: str
    legend: str


def _query(query: Query, ref: str) -> prometheus.Dataquery:
    return (
        prometheus.Dataquery()
        .expr(query.expr)
        .legend_format(query.legend)
        .ref_id(ref)
        .range()
        .datasource(DATASOURCE)
    )


def _legend() -> VizLegendOptions:
    return (
        VizLegendOptions()
        .display_mode(LegendDisplayMode.TABLE)
        .placement(LegendPlacement.BOTTOM)
        .show_legend(True)
        .calcs(["lastNotNull", "max"])
    )


def _series(
    title: str, description: str, unit: str, *queries: Query, width: int = 12
) -> timeseries.Panel:
    panel = (
        timeseries.Panel()
        .title(title)
        .description(description)
        .datasource(DATASOURCE)
        .unit(unit)
        .min(0)
        .height(8)
        .span(width)
        .legend(_legend())
    )
    for ref, query in zip("ABCDEFGH", queries, strict=False):
        panel = panel.with_target(_query(query, ref))
    return panel


def _mirror_panels() -> list[Builder[model.Panel]]:
    per_branch = "{{mirror}}/{{branch}}"
    return [
        _series(
            "Lag",
            "Age of the oldest source commit each mirror branch does not show yet "
            "(0 when synced). Alert: LakeMirrorMirrorLagging.",
            "s",
            Query(_leader("lakemirror_lag_seconds"), per_branch),
        ),
        _series(
            "Commits behind",
            "Source commits each mirror branch does not show yet.",
            "short",
            Query(_leader("lakemirror_lag_commits"), per_branch),
        ),
        _series(
            "Head advances",
            "Times a second each mirror branch moved to a newly validated commit.",
            "ops",
            Query(
                f"sum by (mirror, branch) (rate(lakemirror_head_advances_total"
                f"{{{REPLICANT}, {MIRROR}}}[{RATE}]))",
                per_branch,
            ),
            width=8,
        ),
        _series(
            "Skipped commits",
            "Commits copied but never validated because a newer head was validated instead "
            "(a commit storm, or files arriving late): skipping keeps the mirror moving.",
            "short",
            Query(
                f"sum by (mirror, branch) (increase(lakemirror_commits_skipped_total"
                f"{{{REPLICANT}, {MIRROR}}}[{RATE}]))",
                per_branch,
            ),
            width=8,
        ),
        _stat_since_advance(),
        _series(
            "Missing files",
            "Files of the head being validated that have not arrived in the mirror's namespace. "
            "Alert: LakeMirrorObjectsMissing.",
            "short",
            Query(_leader("lakemirror_missing_objects"), per_branch),
            width=8,
        ),
        _series(
            "Validation requests",
            "Object-store requests made by the validator, by operation.",
            "reqps",
            Query(
                f"sum by (mirror, op) (rate(lakemirror_validation_requests_total"
                f"{{{REPLICANT}, {MIRROR}}}[{RATE}]))",
                "{{mirror}} {{op}}",
            ),
            width=8,
        ),
        _series(
            "Objects checked",
            "Objects checked by the validator, by result.",
            "ops",
            Query(
                f"sum by (mirror, result) (rate(lakemirror_validation_objects_total"
                f"{{{REPLICANT}, {MIRROR}}}[{RATE}]))",
                "{{mirror}} {{result}}",
            ),
            width=8,
        ),
        _series(
            "Source errors",
            "Failed calls of each mirror to its source or local server. "
            "Alert: LakeMirrorSourceErrors.",
            "ops",
            Query(
                f"sum by (mirror) (rate(lakemirror_source_errors_total"
                f"{{{REPLICANT}, {MIRROR}}}[{RATE}]))",
                "{{mirror}}",
            ),
        ),
        _lease_panel(),
    ]


def _stat_since_advance() -> stat.Panel:
    query = Query(
        f"time() - max by (mirror, branch) (lakemirror_last_advance_timestamp_seconds"
        f"{{{REPLICANT}, {MIRROR}}})",
        "{{mirror}}/{{branch}}",
    )
    return (
        stat.Panel()
        .title("Since last advance")
        .description(
            "Time since each mirror branch last moved. Old is fine while the source is idle; "
            "Commits behind > 0 as well is not (alert: LakeMirrorMirrorStuck)."
        )
        .datasource(DATASOURCE)
        .unit("s")
        .height(8)
        .span(8)
        .reduce_options(ReduceDataOptions().calcs(["lastNotNull"]).values(False))
        .graph_mode(BigValueGraphMode.NONE)
        .color_mode(BigValueColorMode.VALUE)
        .justify_mode(BigValueJustifyMode.AUTO)
        .text_mode(BigValueTextMode.VALUE_AND_NAME)
        .orientation(VizOrientation.AUTO)
        .with_target(_query(query, "A"))
    )


def _lease_panel() -> statetimeline.Panel:
    query = Query(
        f"max by (mirror, instance) (lakemirror_lease_held{{{REPLICANT}, {MIRROR}}})",
        "{{mirror}} on {{instance}}",
    )
    held = model.ValueMap(
        options={
            "0": model.ValueMappingResult(text="standby", color="transparent", index=0),
            "1": model.ValueMappingResult(text="holds lease", color="green", index=1),
        }
    )
    return (
        statetimeline.Panel()
        .title("Lease holder")
        .description(
            "Which replicant replica works each mirror; exactly one should at any time. "
            "Alert: LakeMirrorLeaseUnheld."
        )
        .datasource(DATASOURCE)
        .mappings([held])
        .show_value(VisibilityMode.NEVER)
        .merge_values(True)
        .legend(_legend())
        .height(8)
        .span(12)
        .with_target(_query(query, "A"))
    )


def _server_panels() -> list[Builder[model.Panel]]:
    requests = "lakemirror_http_requests_total"
    buckets = f"lakemirror_http_request_duration_seconds_bucket{{{SERVER}}}"
    return [
        _series(
            "Requests",
            "Requests answered by the servers of the region, by status.",
            "reqps",
            Query(f"sum by (status) (rate({requests}{{{SERVER}}}[{RATE}]))", "{{status}}"),
        ),
        _series(
            "Error ratio",
            "Share of requests answered with a 5xx status (a mirror answers 503 to reads of "
            "commits whose files have not arrived). Alert: LakeMirrorServerErrors.",
            "percentunit",
            Query(
                f'(sum(rate({requests}{{{SERVER}, status=~"5.."}}[{RATE}])) or vector(0))\n'
                f"/\nsum(rate({requests}{{{SERVER}}}[{RATE}]))",
                "5xx",
            ),
        ),
        _series(
            "Latency",
            "Quantiles of the time from a request's arrival to the end of its response.",
            "s",
            *(
                Query(
                    f"histogram_quantile({q}, sum by (le) (rate({buckets}[{RATE}])))",
                    f"p{round(q * 100)}",
                )
                for q in (0.5, 0.9, 0.99)
            ),
            width=8,
        ),
        _series(
            "Latency p99 by route",
            "99th percentile of request duration per route template.",
            "s",
            Query(
                f"histogram_quantile(0.99, sum by (le, method, route) (rate({buckets}[{RATE}])))",
                "{{method}} {{route}}",
            ),
            width=8,
        ),
        _series(
            "Latency p99 by status",
            "99th percentile of request duration per status: slow errors point at timeouts.",
            "s",
            Query(
                f"histogram_quantile(0.99, sum by (le, status) (rate({buckets}[{RATE}])))",
                "{{status}}",
            ),
            width=8,
        ),
        _series(
            "Requests in flight",
            "Requests being served right now, per server replica.",
            "short",
            Query(
                f"sum by (instance) (lakemirror_http_requests_in_flight{{{SERVER}}})",
                "{{instance}}",
            ),
        ),
        _series(
            "Targets up",
            "Scraped replicas of the server and the replicant. "
            "Alerts: LakeMirrorServerDown, LakeMirrorReplicantDown.",
            "short",
            Query(
                'sum by (job) (up{job=~"lakemirror-server|lakemirror-replicant"})',
                "{{job}}",
            ),
        ),
    ]


def _variables() -> list[Builder[model.VariableModel]]:
    datasource = (
        dash.DatasourceVariable("datasource")
        .label("Data source")
        .type("prometheus")
        .current(model.VariableOption(selected=True, text="default", value="default"))
    )
    mirror = (
        dash.QueryVariable("mirror")
        .label("Mirror")
        .datasource(DATASOURCE)
        .query(
            {
                "query": f"label_values(lakemirror_lease_held{{{REPLICANT}}}, mirror)",
                "refId": "mirror",
            }
        )
        .refresh(model.VariableRefresh.ON_TIME_RANGE_CHANGED)
        .sort(model.VariableSort.ALPHABETICAL_ASC)
        .multi(True)
        .include_all(True)
        .current(model.VariableOption(selected=True, text="All", value="$__all"))
    )
    return [datasource, mirror]


def build() -> model.Dashboard:
    """Build the dashboard: mirror health first, then the servers of the region."""
    board = (
        dash.Dashboard("LakeMirror")
        .uid(UID)
        .description("Mirror lag, validation and leases of the replicant; traffic of the server.")
        .tags(["lakemirror"])
        .editable()
        .tooltip(model.DashboardCursorSync.CROSSHAIR)
        .refresh("30s")
        .time("now-3h", "now")
        .timezone("browser")
        .variables(_variables())
        .with_row(dash.Row("Mirrors"))
    )
    for panel in _mirror_panels():
        board = board.with_panel(panel)
    board = board.with_row(dash.Row("Server"))
    for panel in _server_panels():
        board = board.with_panel(panel)
    built = board.build()
    for number, built_panel in enumerate(built.panels or [], start=1):
        built_panel.id_val = number
    return built


def render_json() -> str:
    """Return the dashboard as the JSON text Grafana imports (stable key order)."""
    return JSONEncoder(sort_keys=True, indent=2).encode(build()) + "\n"


def render_configmap(dashboard_json: str) -> str:
    """Return a ConfigMap holding ``dashboard_json`` for Grafana's dashboard sidecar."""
    body = "".join(
        f"    {line}\n" if line else "\n" for line in dashboard_json.rstrip("\n").split("\n")
    )
    return (
        "# Generated by `python -m deploy.grafana.dashboard`; do not edit.\n"
        "apiVersion: v1\n"
        "kind: ConfigMap\n"
        "metadata:\n"
        f"  name: {CONFIGMAP_NAME}\n"
        "  labels:\n"
        f'    {SIDECAR_LABEL}: "1"\n'
        "    app.kubernetes.io/name: lakemirror\n"
        "    app.kubernetes.io/component: dashboard\n"
        "data:\n"
        f"  {JSON_PATH.name}: |-\n"
        f"{body}"
    )


def main(argv: list[str] | None = None) -> int:
    """Write (or, with ``--check``, compare) the dashboard JSON and its ConfigMap."""
    parser = argparse.ArgumentParser(prog="python -m deploy.grafana.dashboard")
    parser.add_argument(
        "--check", action="store_true", help="fail if the committed files are out of date"
    )
    args = parser.parse_args(argv)
    text = render_json()
    wanted = {JSON_PATH: text, CONFIGMAP_PATH: render_configmap(text)}
    if args.check:
        stale = [p for p, t in wanted.items() if not p.exists() or p.read_text() != t]
        for path in stale:
            print(f"{path} is out of date: run python -m deploy.grafana.dashboard", file=sys.stderr)
        return 1 if stale else 0
    for path, content in wanted.items():
        path.write_text(content)
        print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
