"""The chart's Ingress carries the API, the web UI and the S3 gateway (one listener), with the
gateway's virtual-host names; the web UI reaches the release's replicant through configuration
the chart fills in. What it renders is checked against Kubernetes's schemas."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import yaml

from tests.deploy.chart import (
    KUBE_VERSIONS,
    config_file,
    example,
    helm,
    kubernetes_validate,
    render,
    template_args,
)
from tests.deploy.pods import Manifests

HOST = "lakemirror.us-east-1.example.com"
GATEWAY = "s3.lakemirror.us-east-1.example.com"
REPLICANT_URL = "http://lakemirror-replicant.lakemirror.svc:8001"
WITH_GATEWAY: dict[str, Any] = {
    "server": {
        "ingress": {
            "gatewayDomains": [GATEWAY],
            "tls": [{"secretName": "lakemirror-tls", "hosts": [HOST, GATEWAY, f"*.{GATEWAY}"]}],
        }
    }
}


def _config(manifests: Manifests, deployment: str) -> dict[str, Any]:
    loaded: dict[str, Any] = yaml.safe_load(config_file(manifests, deployment)[1])
    return loaded


def test_the_ingress_sends_the_api_the_ui_and_the_gateways_names_to_the_server(
    tmp_path: Path,
) -> None:
    manifests = render([example("us-east-1"), WITH_GATEWAY], tmp_path)
    ingress = manifests.get("Ingress", "lakemirror-server")
    spec = ingress["spec"]
    assert spec["ingressClassName"] == "alb"
    assert [rule["host"] for rule in spec["rules"]] == [HOST, GATEWAY, f"*.{GATEWAY}"]
    service = manifests.get("Service", "lakemirror-server")
    assert service["spec"]["ports"][0]["name"] == "http"
    for rule in spec["rules"]:
        (path,) = rule["http"]["paths"]
        assert path["path"] == "/" and path["pathType"] == "Prefix", "/api/v1, /ui/ and S3 keys"
        assert path["backend"] == {
            "service": {"name": "lakemirror-server", "port": {"name": "http"}}
        }
    assert spec["tls"] == WITH_GATEWAY["server"]["ingress"]["tls"]
    # the server answers S3 on those names, path style and <bucket>.<name>
    for deployment in ("lakemirror-server", "lakemirror-replicant"):
        assert _config(manifests, deployment)["gateway"] == {"domain_names": [GATEWAY]}
    path = tmp_path / "ingress.yaml"
    path.write_text(yaml.safe_dump(ingress))
    args = ["--strict"] + [a for v in KUBE_VERSIONS for a in ("-k", v)]
    done = subprocess.run(
        [kubernetes_validate(), *args, str(path)], capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.count("passed for resource ingress/lakemirror-server") == len(KUBE_VERSIONS)


def test_without_gateway_domains_the_gateway_keeps_its_default(tmp_path: Path) -> None:
    manifests = render([example("us-east-1")], tmp_path)
    hosts = [r["host"] for r in manifests.get("Ingress", "lakemirror-server")["spec"]["rules"]]
    assert hosts == [HOST]
    assert "gateway" not in _config(manifests, "lakemirror-server")
    off = render([example("us-east-1"), {"server": {"ingress": {"enabled": False}}}], tmp_path)
    assert off.of_kind("Ingress") == []


def test_the_ui_calls_the_releases_replicant_unless_told_another(tmp_path: Path) -> None:
    manifests = render([example("eu-central-1")], tmp_path)
    replicant = manifests.get("Service", "lakemirror-replicant")
    assert REPLICANT_URL.endswith(f":{replicant['spec']['ports'][0]['port']}")
    assert _config(manifests, "lakemirror-server")["ui"] == {
        "enabled": True,
        "replicant_url": REPLICANT_URL,
    }
    other = "https://replicant.eu-central-1.example.com"
    overridden = render([example("eu-central-1"), {"ui": {"replicantUrl": other}}], tmp_path)
    assert _config(overridden, "lakemirror-server")["ui"]["replicant_url"] == other
    # the server pods may then reach only what the operator's rules allow
    (rule,) = overridden.get("NetworkPolicy", "lakemirror-replicant")["spec"]["ingress"]
    assert all("server" not in str(peer) for peer in rule["from"])
    off = render([example("eu-central-1"), {"ui": {"enabled": False}}], tmp_path)
    assert _config(off, "lakemirror-server")["ui"]["enabled"] is False
    embedded = render([example("embedded")], tmp_path)
    assert _config(embedded, "lakemirror-server")["ui"]["replicant_url"] == ""


def test_bad_ui_and_gateway_values_fail_with_the_schemas_message(tmp_path: Path) -> None:
    for values, where in (
        (
            {"server": {"ingress": {"gatewayDomains": ["S3 Example"]}}},
            "/server/ingress/gatewayDomains/0",
        ),
        ({"ui": {"replicantUrl": "replicant:8001"}}, "/ui/replicantUrl"),
        ({"ui": {"replicant_url": "http://r"}}, "/ui"),
    ):
        done = helm(template_args([example("us-east-1"), values], tmp_path), check=False)
        assert done.returncode != 0
        assert "values don't meet the specifications of the schema" in done.stderr
        assert f"at '{where}'" in done.stderr, done.stderr
