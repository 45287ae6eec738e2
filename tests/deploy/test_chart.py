"""The Helm chart passes ``helm lint --strict``, renders every example, and what it renders is
valid Kubernetes (``kubernetes-validate --strict``) or, for the monitoring.coreos.com kinds,
valid by their own structure and by ``promtool``. Bad values fail with the schema's message."""

from __future__ import annotations

import copy
import json
import re
import subprocess
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml

from tests.deploy.chart import (
    EXAMPLES,
    KUBE_VERSIONS,
    MONITORING_KINDS,
    example,
    helm,
    kubernetes_validate,
    parse,
    render,
    template_args,
)
from tests.deploy.pods import Doc, Manifests
from tests.deploy.tools import CHART, ROOT, run_tool

REGIONS = ("us-east-1", "eu-central-1")
EXAMPLE_NAMES = (*REGIONS, "embedded")
ALERTS = ROOT / "deploy" / "prometheus" / "alerts.yaml"
DASHBOARD = ROOT / "deploy" / "grafana" / "lakemirror-dashboard.json"
JOBS = {"server": "lakemirror-server", "replicant": "lakemirror-replicant"}

EVERYTHING: dict[str, Any] = {
    "credentials": {
        "existingSecret": "",
        "admin": {"accessKeyId": "AKIAADMIN00000000001", "secretAccessKey": "admin-secret"},
        "encryptSecretKey": "encryption-key-7f20c1",
        "regions": {
            "eu-central-1": {"accessKeyId": "AKIAREADER000000001", "secretAccessKey": "r-secret"},
            "us-east-1": {"accessKeyId": "AKIAREPLICATOR00001", "secretAccessKey": "w-secret"},
        },
        "s3": {"accessKeyId": "AKIAS3000000000001", "secretAccessKey": "s3-secret"},
        "dynamodb": {"accessKeyId": "AKIADYNAMO00000001", "secretAccessKey": "ddb-secret"},
    },
    "server": {
        "ingress": {
            "tls": [{"secretName": "lakemirror-tls", "hosts": ["lm.example.com"]}],
            "gatewayDomains": ["s3.lm.example.com"],
        },
        "service": {
            "type": "LoadBalancer",
            "port": 80,
            "annotations": {"a.example.com/x": "value"},
        },
    },
    "networkPolicy": {
        "enabled": True,
        "serverFrom": [{"ipBlock": {"cidr": "10.0.0.0/8"}}],
        "replicantFrom": [{"podSelector": {}}],
        "metricsFrom": [{"namespaceSelector": {"matchLabels": {"name": "monitoring"}}}],
    },
}
"""Overrides turning on what the examples leave off: the chart's own Secret with every key,
TLS, the S3 gateway's domains on the Ingress, a LoadBalancer, restricted NetworkPolicies."""


@pytest.fixture(scope="module")
def rendered(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Manifests]:
    tmp = tmp_path_factory.mktemp("rendered")
    out = {name: render([example(name)], tmp) for name in EXAMPLE_NAMES}
    out["everything"] = render([example("us-east-1"), EVERYTHING], tmp)
    return out


def test_the_examples_are_one_per_region_and_embedded() -> None:
    assert sorted(p.stem for p in EXAMPLES.glob("*.yaml")) == sorted(EXAMPLE_NAMES)
    for name in REGIONS:
        assert yaml.safe_load(example(name).read_text())["region"] == name


@pytest.mark.parametrize("name", EXAMPLE_NAMES)
def test_lint_strict_with_each_example(name: str) -> None:
    done = helm(["lint", "--strict", str(CHART), "--values", str(example(name))])
    assert "1 chart(s) linted, 0 chart(s) failed" in done.stdout
    assert "[WARNING]" not in done.stdout and "[ERROR]" not in done.stdout


@pytest.mark.parametrize("name", EXAMPLE_NAMES)
def test_template_renders_each_example(name: str, rendered: dict[str, Manifests]) -> None:
    kinds = sorted(doc["kind"] for doc in rendered[name].docs)
    for doc in rendered[name].docs:
        assert doc["metadata"]["namespace"] == "lakemirror" or doc["kind"] == "Secret"
        assert doc["metadata"]["labels"]["app.kubernetes.io/instance"] == "lakemirror"
    if name == "embedded":
        assert kinds == sorted(
            [
                "ConfigMap",
                "Deployment",
                "PersistentVolumeClaim",
                "Service",
                "ServiceAccount",
            ]
        )
    else:
        assert kinds.count("Deployment") == 2 and kinds.count("Service") == 2
        assert kinds.count("PodDisruptionBudget") == 2
        assert kinds.count("ServiceMonitor") == 2 and kinds.count("PrometheusRule") == 1


def _write_stream(path: Path, docs: list[Doc]) -> Path:
    path.write_text(yaml.safe_dump_all(docs, sort_keys=False))
    return path


def test_rendered_objects_are_valid_kubernetes(
    rendered: dict[str, Manifests], tmp_path: Path
) -> None:
    files: list[str] = []
    expected_passes = 0
    for name, manifests in rendered.items():
        files.append(str(_write_stream(tmp_path / f"{name}.yaml", manifests.docs)))
        expected_passes += sum(d["kind"] not in MONITORING_KINDS for d in manifests.docs)
    args = ["--strict"] + [a for v in KUBE_VERSIONS for a in ("-k", v)]
    done = subprocess.run(
        [kubernetes_validate(), *args, *files], capture_output=True, text=True, check=False
    )
    output = done.stdout + done.stderr
    assert done.returncode == 0, output
    assert output.count("passed for resource") == expected_passes * len(KUBE_VERSIONS), output
    unknown = re.findall(r"Couldn't find schema for kind (\w+)", output)
    assert set(unknown) == MONITORING_KINDS, output


def test_the_validator_rejects_what_kubernetes_would(
    rendered: dict[str, Manifests], tmp_path: Path
) -> None:
    """The validation above can fail: an unknown field and a wrong type are caught."""
    deployment = rendered["us-east-1"].get("Deployment", "lakemirror-server")
    typo = copy.deepcopy(deployment)
    typo["spec"]["template"]["spec"]["containers"][0]["readinesProbe"] = {}
    wrong_type = copy.deepcopy(deployment)
    wrong_type["spec"]["replicas"] = "three"
    for bad, problem in ((typo, "'readinesProbe' was unexpected"), (wrong_type, "'three'")):
        path = _write_stream(tmp_path / "bad.yaml", [bad])
        done = subprocess.run(
            [kubernetes_validate(), "--strict", "-k", KUBE_VERSIONS[0], str(path)],
            capture_output=True,
            text=True,
            check=False,
        )
        assert done.returncode != 0, done.stdout + done.stderr
        assert "did not validate for resource deployment/lakemirror-server" in done.stdout
        assert problem in done.stdout


# Field names and types of the monitoring.coreos.com/v1 CRDs (prometheus-operator) that the
# chart uses; anything else is refused, as the API server's structural schema would prune it.
_STR = {"type": "string"}
_LABELS = {"type": "object", "additionalProperties": {"type": "string"}}
_DURATION = {
    "type": "string",
    "pattern": "^(0|(([0-9]+)y)?(([0-9]+)w)?(([0-9]+)d)?(([0-9]+)h)?"
    "(([0-9]+)m)?(([0-9]+)s)?(([0-9]+)ms)?)$",
}
_METADATA = {
    "type": "object",
    "required": ["name", "namespace"],
    "properties": {"name": _STR, "namespace": _STR, "labels": _LABELS, "annotations": _LABELS},
    "additionalProperties": False,
}
SERVICE_MONITOR_SCHEMA = {
    "type": "object",
    "required": ["apiVersion", "kind", "metadata", "spec"],
    "additionalProperties": False,
    "properties": {
        "apiVersion": {"const": "monitoring.coreos.com/v1"},
        "kind": {"const": "ServiceMonitor"},
        "metadata": _METADATA,
        "spec": {
            "type": "object",
            "required": ["selector", "endpoints"],
            "additionalProperties": False,
            "properties": {
                "jobLabel": _STR,
                "selector": {
                    "type": "object",
                    "properties": {"matchLabels": _LABELS},
                    "additionalProperties": False,
                },
                "namespaceSelector": {
                    "type": "object",
                    "properties": {"matchNames": {"type": "array", "items": _STR}},
                    "additionalProperties": False,
                },
                "endpoints": {
                    "type": "array",
                    "minItems": 1,
                    "items": {
                        "type": "object",
                        "additionalProperties": False,
                        "properties": {
                            "port": _STR,
                            "path": _STR,
                            "scheme": {"enum": ["http", "https"]},
                            "interval": _DURATION,
                            "scrapeTimeout": _DURATION,
                        },
                    },
                },
            },
        },
    },
}
_RULE = {
    "type": "object",
    "required": ["expr"],
    "additionalProperties": False,
    "oneOf": [{"required": ["alert"]}, {"required": ["record"]}],
    "properties": {
        "alert": _STR,
        "record": _STR,
        "expr": {"type": ["string", "integer"]},
        "for": _DURATION,
        "keep_firing_for": _DURATION,
        "labels": _LABELS,
        "annotations": _LABELS,
    },
}
PROMETHEUS_RULE_SCHEMA = {
    "type": "object",
    "required": ["apiVersion", "kind", "metadata", "spec"],
    "additionalProperties": False,
    "properties": {
        "apiVersion": {"const": "monitoring.coreos.com/v1"},
        "kind": {"const": "PrometheusRule"},
        "metadata": _METADATA,
        "spec": {
            "type": "object",
            "required": ["groups"],
            "additionalProperties": False,
            "properties": {
                "groups": {
                    "type": "array",
                    "minItems": 1,
                    "items": {
                        "type": "object",
                        "required": ["name", "rules"],
                        "additionalProperties": False,
                        "properties": {
                            "name": _STR,
                            "interval": _DURATION,
                            "rules": {"type": "array", "items": _RULE},
                        },
                    },
                }
            },
        },
    },
}


def _selects(selector: dict[str, str], labels: dict[str, str]) -> bool:
    return selector.items() <= labels.items()


@pytest.mark.parametrize("name", REGIONS)
def test_service_monitors_produce_the_jobs_the_alerts_match(
    name: str, rendered: dict[str, Manifests]
) -> None:
    manifests = rendered[name]
    values = yaml.safe_load(example(name).read_text())
    jobs: set[str] = set()
    for monitor in manifests.of_kind("ServiceMonitor"):
        jsonschema.validate(monitor, SERVICE_MONITOR_SCHEMA)
        spec = monitor["spec"]
        assert monitor["metadata"]["labels"]["release"] == "kube-prometheus-stack"
        assert spec["namespaceSelector"]["matchNames"] == [monitor["metadata"]["namespace"]]
        services = [
            s
            for s in manifests.of_kind("Service")
            if _selects(spec["selector"]["matchLabels"], s["metadata"]["labels"])
        ]
        assert len(services) == 1, f"{monitor['metadata']['name']} selects {len(services)}"
        (service,) = services
        job = service["metadata"]["labels"][spec["jobLabel"]]
        jobs.add(job)
        component = service["metadata"]["labels"]["app.kubernetes.io/component"]
        assert job == JOBS[component]
        port_names = {p["name"] for p in service["spec"]["ports"]}
        for endpoint in spec["endpoints"]:
            assert endpoint["port"] in port_names and endpoint["path"] == "/metrics"
        # the Service's port leads to the container port serving /metrics
        deployment = manifests.get("Deployment", service["metadata"]["name"])
        pod_labels = deployment["spec"]["template"]["metadata"]["labels"]
        assert _selects(service["spec"]["selector"], pod_labels)
    assert jobs == set(JOBS.values())
    assert values["metrics"]["serviceMonitor"]["enabled"]
    alert_jobs = set(re.findall(r'job="([^"]+)"', ALERTS.read_text()))
    assert alert_jobs and alert_jobs <= jobs, (
        f"alerts match jobs {alert_jobs}, monitors make {jobs}"
    )


@pytest.mark.parametrize("name", REGIONS)
def test_prometheus_rule_holds_the_alert_rules_and_promtool_accepts_them(
    name: str, rendered: dict[str, Manifests], tmp_path: Path
) -> None:
    (rule,) = rendered[name].of_kind("PrometheusRule")
    jsonschema.validate(rule, PROMETHEUS_RULE_SCHEMA)
    assert rule["metadata"]["labels"]["release"] == "kube-prometheus-stack"
    source = yaml.safe_load(ALERTS.read_text())
    assert rule["spec"]["groups"] == source["groups"]
    rules_file = tmp_path / "rules.yaml"
    rules_file.write_text(yaml.safe_dump({"groups": rule["spec"]["groups"]}))
    done = run_tool("promtool", ["check", "rules", str(rules_file)])
    count = sum(len(g["rules"]) for g in source["groups"])
    assert f"SUCCESS: {count} rules found" in done.stdout


def test_runbook_url_points_the_alerts_at_the_operators_copy(tmp_path: Path) -> None:
    url = "https://wiki.example.com/lakemirror/operations"
    overrides = {"metrics": {"prometheusRule": {"runbookUrl": url + "/"}}}
    (rule,) = render([example("us-east-1"), overrides], tmp_path).of_kind("PrometheusRule")
    alerts = [r for g in rule["spec"]["groups"] for r in g["rules"] if "alert" in r]
    assert alerts
    for alert in alerts:
        expected = f"{url}#{alert['alert'].lower()}"
        assert alert["annotations"]["runbook_url"] == expected


@pytest.mark.parametrize("name", REGIONS)
def test_dashboard_configmap_for_grafanas_sidecar(
    name: str, rendered: dict[str, Manifests]
) -> None:
    dashboards = [
        c
        for c in rendered[name].of_kind("ConfigMap")
        if c["metadata"]["labels"].get("grafana_dashboard") == "1"
    ]
    assert len(dashboards) == 1
    (dashboard,) = dashboards
    assert dashboard["metadata"]["annotations"] == {"grafana_folder": "LakeMirror"}
    (key,) = dashboard["data"]
    assert key.endswith(".json")
    assert json.loads(dashboard["data"][key]) == json.loads(DASHBOARD.read_text())


BAD_VALUES = [
    pytest.param(
        ["metrics.prometheusRule.runbookUrl=docs/operations.md"],
        "at '/metrics/prometheusRule/runbookUrl'",
        id="runbook-url",
    ),
    pytest.param(
        ["server.replicas=-1"], "at '/server/replicas': minimum: got -1, want 1", id="replicas"
    ),
    pytest.param(
        ["kv.type=postgres"],
        "at '/kv/type': value must be one of 'dynamodb', 'sqlite'",
        id="kv-type",
    ),
    pytest.param(
        ["mode=embedded", "kv.type=sqlite", "server.replicas=2"],
        "at '/server/replicas': value must be 1",
        id="embedded-replicas",
    ),
    pytest.param(["mode=embedded"], "at '/kv/type': value must be 'sqlite'", id="embedded-kv"),
    pytest.param(
        ["mode=cluster"], "at '/mode': value must be one of 'distributed', 'embedded'", id="mode"
    ),
    pytest.param(["region=US_East"], "at '/region': 'US_East' does not match pattern", id="region"),
    pytest.param(["region="], "at '/region': minLength: got 0, want 1", id="no-region"),
    pytest.param(["serverr.replicas=3"], "additional properties 'serverr' not allowed", id="typo"),
    pytest.param(
        ["replicant.pollInterval=0"], "at '/replicant/pollInterval': exclusiveMinimum", id="poll"
    ),
    pytest.param(
        ["server.workers=0"], "at '/server/workers': minimum: got 0, want 1", id="workers"
    ),
    pytest.param(
        ["kv.dynamodb.table=ab"], "at '/kv/dynamodb/table': minLength: got 2, want 3", id="table"
    ),
    pytest.param(
        ["credentials.existingSecret="],
        "at '/credentials/admin/accessKeyId': minLength: got 0, want 1",
        id="no-admin-key",
    ),
    pytest.param(
        [
            "credentials.existingSecret=",
            "credentials.admin.accessKeyId=AKIA1",
            "credentials.admin.secretAccessKey=s",
        ],
        "at '/credentials/encryptSecretKey': minLength: got 0, want 1",
        id="no-encryption-key",
    ),
    pytest.param(
        ["credentials.s3.accessKeyId=AKIA1"],
        "at '/credentials/s3/secretAccessKey': minLength: got 0, want 1",
        id="half-key",
    ),
    pytest.param(
        ["regions.eu-central-1.serverUrl=lakemirror.example.com"],
        "at '/regions/eu-central-1/serverUrl'",
        id="url",
    ),
    pytest.param(
        ["blockstore.s3.addressingStyle=dns"],
        "at '/blockstore/s3/addressingStyle'",
        id="addressing",
    ),
    pytest.param(
        ["server.service.annotations.x=true"],
        "at '/server/service/annotations/x': got boolean, want string",
        id="annotation",
    ),
]


@pytest.mark.parametrize(("sets", "message"), BAD_VALUES)
def test_bad_values_fail_with_the_schemas_message(
    sets: list[str], message: str, tmp_path: Path
) -> None:
    args = template_args([example("us-east-1")], tmp_path)
    for value in sets:
        args += ["--set", value]
    done = helm(args, check=False)
    assert done.returncode != 0
    assert "values don't meet the specifications of the schema" in done.stderr
    assert message in done.stderr, done.stderr
    assert "apiVersion" not in done.stdout, "nothing may be rendered"


def test_lint_strict_fails_on_bad_values() -> None:
    done = helm(
        ["lint", "--strict", str(CHART), "-f", str(example("us-east-1")), "--set", "kv.type=x"],
        check=False,
    )
    assert done.returncode != 0
    assert "at '/kv/type': value must be one of 'dynamodb', 'sqlite'" in done.stdout


def test_a_default_install_needs_only_a_region_and_keys(tmp_path: Path) -> None:
    values: dict[str, Any] = {
        "region": "us-east-1",
        "credentials": {
            "admin": {"accessKeyId": "AKIA1", "secretAccessKey": "s"},
            "encryptSecretKey": "e",
        },
    }
    manifests = render([values], tmp_path)
    assert manifests.get("Deployment", "lakemirror-server")["spec"]["replicas"] == 2
    assert manifests.get("Deployment", "lakemirror-replicant")["spec"]["replicas"] == 2
    assert not manifests.of_kind("ServiceMonitor") and not manifests.of_kind("NetworkPolicy")
    values.pop("region")
    done = helm(template_args([values], tmp_path), check=False)
    assert done.returncode != 0 and "at '/region'" in done.stderr


def test_the_packaged_chart_carries_the_rules_and_the_dashboard(tmp_path: Path) -> None:
    """``helm package`` follows the links in files/: the published chart renders the same."""
    done = helm(["package", str(CHART), "--destination", str(tmp_path)])
    (archive,) = tmp_path.glob("lakemirror-*.tgz")
    assert str(archive) in done.stdout
    args = template_args([example("eu-central-1")], tmp_path)
    args[2] = str(archive)
    packaged = Manifests(parse(helm(args).stdout))
    (rule,) = packaged.of_kind("PrometheusRule")
    assert rule["spec"]["groups"] == yaml.safe_load(ALERTS.read_text())["groups"]
    dashboard = packaged.get("ConfigMap", "lakemirror-dashboard")
    assert json.loads(dashboard["data"]["lakemirror-dashboard.json"]) == json.loads(
        DASHBOARD.read_text()
    )


@pytest.mark.parametrize("name", EXAMPLE_NAMES)
def test_install_prints_the_notes(name: str) -> None:
    done = helm(
        [
            *("install", "lakemirror", str(CHART), "--namespace", "lakemirror"),
            *("--dry-run=client", "--values", str(example(name))),
        ]
    )
    notes = done.stdout.partition("NOTES:")[2]
    region = yaml.safe_load(example(name).read_text())["region"]
    assert f"for region {region}" in notes
    assert "kubectl -n lakemirror port-forward svc/lakemirror-server 8000:8000" in notes
    if name == "embedded":
        assert "No replicant runs in this mode" in notes
    else:
        assert f"https://lakemirror.{name}.example.com" in notes
        assert "/service/replication/v1/repositories/<source-repo>/mirrors" in notes
