"""What the chart renders, object by object: hardened pods that start the image's entrypoint
with the right arguments, probes, secrets only through secretKeyRef, checksums that roll the
pods, PodDisruptionBudgets and spread that select the pods, and the embedded mode's volume."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.deploy.chart import config_file, container, example, render
from tests.deploy.pods import Doc, Manifests

SECRETS = {
    "admin": ("AKIAADMINKEY00000001", "admin-secret-5d1e0f"),
    "us-east-1": ("AKIAREADERKEY0000001", "reader-secret-77ac1b"),
    "s3": ("AKIAS3STATICKEY00001", "s3-secret-9b02d4"),
    "dynamodb": ("AKIADYNAMOKEY000001", "dynamo-secret-c4f1e9"),
}
ENCRYPT_KEY = "encryption-key-b71d0a"
CHART_SECRET: dict[str, Any] = {
    "credentials": {
        "existingSecret": "",
        "admin": {"accessKeyId": SECRETS["admin"][0], "secretAccessKey": SECRETS["admin"][1]},
        "encryptSecretKey": ENCRYPT_KEY,
        "regions": {
            "us-east-1": {
                "accessKeyId": SECRETS["us-east-1"][0],
                "secretAccessKey": SECRETS["us-east-1"][1],
            }
        },
        "s3": {"accessKeyId": SECRETS["s3"][0], "secretAccessKey": SECRETS["s3"][1]},
        "dynamodb": {
            "accessKeyId": SECRETS["dynamodb"][0],
            "secretAccessKey": SECRETS["dynamodb"][1],
        },
    }
}
"""The mirror region with the chart's own Secret holding every kind of key."""
DEPLOYMENTS = {"lakemirror-server": "server", "lakemirror-replicant": "replicant"}


@pytest.fixture(scope="module")
def mirror(tmp_path_factory: pytest.TempPathFactory) -> Manifests:
    return render([example("eu-central-1"), CHART_SECRET], tmp_path_factory.mktemp("mirror"))


@pytest.fixture(scope="module")
def embedded(tmp_path_factory: pytest.TempPathFactory) -> Manifests:
    return render([example("embedded")], tmp_path_factory.mktemp("embedded"))


def _pod(manifests: Manifests, name: str) -> Doc:
    pod: Doc = manifests.get("Deployment", name)["spec"]["template"]
    return pod


def _config(manifests: Manifests, name: str) -> dict[str, Any]:
    loaded: dict[str, Any] = yaml.safe_load(config_file(manifests, name)[1])
    return loaded


@pytest.mark.parametrize("name", sorted(DEPLOYMENTS))
def test_pods_are_hardened(mirror: Manifests, name: str) -> None:
    spec = _pod(mirror, name)["spec"]
    pod_security = spec["securityContext"]
    assert pod_security["runAsNonRoot"] is True
    assert pod_security["runAsUser"] == 10001 and pod_security["runAsGroup"] == 10001
    assert pod_security["seccompProfile"] == {"type": "RuntimeDefault"}
    assert spec["automountServiceAccountToken"] is False
    c = container(mirror, name)
    security = c["securityContext"]
    assert security["readOnlyRootFilesystem"] is True
    assert security["allowPrivilegeEscalation"] is False
    assert security["capabilities"] == {"drop": ["ALL"]}
    assert security["runAsNonRoot"] is True and security["runAsUser"] == 10001
    assert security["seccompProfile"] == {"type": "RuntimeDefault"}
    volumes = {v["name"]: v for v in spec["volumes"]}
    mounts = {m["mountPath"]: volumes[m["name"]] for m in c["volumeMounts"]}
    assert mounts["/tmp"] == {"name": "tmp", "emptyDir": {"medium": "Memory", "sizeLimit": "64Mi"}}
    # the data directory must be writable on a read-only root: an emptyDir when stateless
    assert _config(mirror, name)["data_dir"] in mounts
    assert "emptyDir" in mounts[_config(mirror, name)["data_dir"]]
    assert set(c["resources"]) == {"requests", "limits"}
    assert c["resources"]["limits"]["memory"]


@pytest.mark.parametrize("name", sorted(DEPLOYMENTS))
def test_containers_run_the_entrypoint_with_the_subcommand_and_probes(
    mirror: Manifests, name: str
) -> None:
    c = container(mirror, name)
    assert "command" not in c, "the image's ENTRYPOINT (lakemirror) starts the process"
    assert c["args"] == [DEPLOYMENTS[name]]
    assert c["image"] == "111122223333.dkr.ecr.eu-central-1.amazonaws.com/lakemirror:0.1.0"
    (port,) = c["ports"]
    config = _config(mirror, name)
    assert port["containerPort"] == config[DEPLOYMENTS[name]]["port"]
    assert config[DEPLOYMENTS[name]]["host"] == "0.0.0.0"
    for probe, path in (("readinessProbe", "/readyz"), ("livenessProbe", "/healthz")):
        assert c[probe]["httpGet"] == {"path": path, "port": port["name"]}
    assert c["startupProbe"]["httpGet"]["path"] == "/healthz"
    grace = _pod(mirror, name)["spec"]["terminationGracePeriodSeconds"]
    pre_stop = c.get("lifecycle", {}).get("preStop", {}).get("sleep", {}).get("seconds", 0)
    shutdown = config[DEPLOYMENTS[name]]["shutdown_timeout"]
    assert grace >= pre_stop + math.ceil(shutdown) + 1, "SIGKILL must not cut a clean shutdown"


def test_the_replicant_holds_leases_under_its_pod_name(mirror: Manifests) -> None:
    env = {v["name"]: v for v in container(mirror, "lakemirror-replicant")["env"]}
    ref = env["LAKEMIRROR_REPLICANT__REPLICA_ID"]["valueFrom"]["fieldRef"]
    assert ref == {"fieldPath": "metadata.name"}
    replicant = mirror.get("Deployment", "lakemirror-replicant")
    assert replicant["spec"]["replicas"] == 2


def test_secrets_reach_the_processes_only_through_secret_key_refs(mirror: Manifests) -> None:
    secret_values = {v for pair in SECRETS.values() for v in pair} | {ENCRYPT_KEY}
    for doc in mirror.docs:
        if doc["kind"] != "Secret":
            text = yaml.safe_dump(doc)
            leaked = [v for v in secret_values if v in text]
            assert not leaked, f"{doc['kind']} {doc['metadata']['name']} holds {leaked}"
    data = mirror.secret_data("lakemirror")
    assert data["admin-secret-access-key"] == SECRETS["admin"][1]
    assert data["region-us-east-1-secret-access-key"] == SECRETS["us-east-1"][1]
    assert data["encrypt-secret-key"] == ENCRYPT_KEY
    for name in DEPLOYMENTS:
        for var in container(mirror, name)["env"]:
            if "KEY" in var["name"]:
                assert "secretKeyRef" in var["valueFrom"], var
                assert var["valueFrom"]["secretKeyRef"]["name"] == "lakemirror"
    for name in DEPLOYMENTS:
        refs = {v["name"]: v.get("valueFrom") for v in container(mirror, name)["env"]}
        # every replica needs the one key the KV's secrets were encrypted with: not optional
        assert refs["LAKEMIRROR_AUTH__ENCRYPT_SECRET_KEY"] == {
            "secretKeyRef": {"name": "lakemirror", "key": "encrypt-secret-key"}
        }
    server_env = {v["name"] for v in container(mirror, "lakemirror-server")["env"]}
    assert "LAKEMIRROR_AUTH__ADMIN_SECRET_ACCESS_KEY" in server_env
    assert not any(n.startswith("LAKEMIRROR_REGIONS__") for n in server_env), (
        "the server has no use for the replicant's keys"
    )


def test_the_replicant_gets_a_key_for_every_region(mirror: Manifests) -> None:
    refs = {
        v["name"]: v["valueFrom"]["secretKeyRef"]
        for v in container(mirror, "lakemirror-replicant")["env"]
        if "secretKeyRef" in v.get("valueFrom", {})
    }
    # the source region's key, optional: the replicant starts before that key exists
    source = refs["LAKEMIRROR_REGIONS__us-east-1__SECRET_ACCESS_KEY"]
    assert source == {
        "name": "lakemirror",
        "key": "region-us-east-1-secret-access-key",
        "optional": True,
    }
    # its own region: the administrator's key unless a Replicator key is listed
    own = refs["LAKEMIRROR_REGIONS__eu-central-1__SECRET_ACCESS_KEY"]
    assert own == {"name": "lakemirror", "key": "admin-secret-access-key"}
    assert refs["LAKEMIRROR_BLOCKSTORE__S3__SECRET_ACCESS_KEY"]["key"] == "s3-secret-access-key"
    assert refs["LAKEMIRROR_KV__DYNAMODB__SECRET_ACCESS_KEY"]["key"] == (
        "dynamodb-secret-access-key"
    )


def test_an_existing_secret_is_referenced_and_none_is_created(tmp_path: Path) -> None:
    manifests = render([example("eu-central-1")], tmp_path)
    assert not manifests.of_kind("Secret")
    names = set()
    for name in DEPLOYMENTS:
        for var in container(manifests, name)["env"]:
            ref = var.get("valueFrom", {}).get("secretKeyRef")
            if ref:
                names.add(ref["name"])
                if ref["key"].startswith(("s3-", "dynamodb-", "region-")):
                    assert ref["optional"] is True
    assert names == {"lakemirror-credentials"}
    annotations = _pod(manifests, "lakemirror-server")["metadata"]["annotations"]
    assert "checksum/config" in annotations and "checksum/secret" not in annotations


def test_checksums_change_with_the_configuration_and_the_secret(tmp_path: Path) -> None:
    def checksums(*extra: dict[str, Any]) -> dict[str, str]:
        manifests = render([example("eu-central-1"), CHART_SECRET, *extra], tmp_path)
        pods = [_pod(manifests, name)["metadata"]["annotations"] for name in DEPLOYMENTS]
        assert pods[0] == pods[1]
        return {k: v for k, v in pods[0].items() if k.startswith("checksum/")}

    base = checksums()
    assert checksums() == base, "a rendering is deterministic"
    polled = checksums({"replicant": {"pollInterval": 2.5}})
    assert polled["checksum/config"] != base["checksum/config"]
    assert polled["checksum/secret"] == base["checksum/secret"]
    rotated = checksums(
        {
            "credentials": {
                "admin": {
                    "accessKeyId": "AKIAROTATED000000001",
                    "secretAccessKey": "rotated-secret",
                }
            }
        }
    )
    assert rotated["checksum/secret"] != base["checksum/secret"]
    assert rotated["checksum/config"] == base["checksum/config"]


@pytest.mark.parametrize("name", sorted(DEPLOYMENTS))
def test_disruption_budgets_and_spread_select_the_pods(mirror: Manifests, name: str) -> None:
    labels = _pod(mirror, name)["metadata"]["labels"]
    budget = mirror.get("PodDisruptionBudget", name)
    assert budget["spec"]["selector"]["matchLabels"].items() <= labels.items()
    assert budget["spec"]["maxUnavailable"] == 1
    others = [
        d for d in mirror.of_kind("Deployment") if d["metadata"]["name"] != name
    ]  # a budget must not count the other component's pods
    for other in others:
        other_labels = other["spec"]["template"]["metadata"]["labels"]
        assert not budget["spec"]["selector"]["matchLabels"].items() <= other_labels.items()
    spread = _pod(mirror, name)["spec"]["topologySpreadConstraints"]
    assert {c["topologyKey"] for c in spread} == {
        "topology.kubernetes.io/zone",
        "kubernetes.io/hostname",
    }
    for constraint in spread:
        assert constraint["labelSelector"]["matchLabels"].items() <= labels.items()
        assert constraint["whenUnsatisfiable"] == "ScheduleAnyway"


def test_the_service_account_carries_the_iam_role(mirror: Manifests) -> None:
    account = mirror.get("ServiceAccount", "lakemirror")
    assert account["metadata"]["annotations"] == {
        "eks.amazonaws.com/role-arn": "arn:aws:iam::111122223333:role/lakemirror-eu-central-1"
    }
    for name in DEPLOYMENTS:
        assert _pod(mirror, name)["spec"]["serviceAccountName"] == "lakemirror"


def test_network_policies_open_the_ports_to_the_peers_named(mirror: Manifests) -> None:
    server = mirror.get("NetworkPolicy", "lakemirror-server")["spec"]
    replicant = mirror.get("NetworkPolicy", "lakemirror-replicant")["spec"]
    assert server["policyTypes"] == ["Ingress"] and replicant["policyTypes"] == ["Ingress"]
    (rule,) = server["ingress"]
    assert "from" not in rule, "the API is open to clients and to other regions' replicants"
    (rule,) = replicant["ingress"]
    server_pods = {
        "app.kubernetes.io/name": "lakemirror",
        "app.kubernetes.io/instance": "lakemirror",
        "app.kubernetes.io/component": "server",
    }
    assert rule["from"] == [
        {"podSelector": {}},
        {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "monitoring"}}},
        # the web UI's mirroring pages call the replicant from the server
        {"podSelector": {"matchLabels": server_pods}},
    ]
    assert rule["ports"] == [{"port": "http", "protocol": "TCP"}]


def test_embedded_mode_is_one_server_on_a_volume(embedded: Manifests) -> None:
    (deployment,) = embedded.of_kind("Deployment")
    assert deployment["metadata"]["name"] == "lakemirror-server"
    assert deployment["spec"]["replicas"] == 1
    assert deployment["spec"]["strategy"] == {"type": "Recreate"}
    claim = embedded.get("PersistentVolumeClaim", "lakemirror-server")
    assert claim["spec"]["resources"]["requests"]["storage"] == "5Gi"
    assert claim["metadata"]["annotations"]["helm.sh/resource-policy"] == "keep"
    spec = deployment["spec"]["template"]["spec"]
    volumes = {v["name"]: v for v in spec["volumes"]}
    config = _config(embedded, "lakemirror-server")
    mount = next(
        m
        for m in container(embedded, "lakemirror-server")["volumeMounts"]
        if m["mountPath"] == config["data_dir"]
    )
    assert volumes[mount["name"]]["persistentVolumeClaim"] == {"claimName": "lakemirror-server"}
    assert config["kv"] == {"type": "sqlite"}
    assert "region" not in config["blockstore"]["s3"], "no S3 check at start without S3"
    assert spec["securityContext"]["fsGroup"] == 10001, "the volume is writable by the user"
    assert not embedded.of_kind("PodDisruptionBudget")
    assert [s["metadata"]["name"] for s in embedded.of_kind("Service")] == ["lakemirror-server"]
