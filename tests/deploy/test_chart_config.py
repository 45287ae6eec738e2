"""LakeMirror's own loader accepts the configuration the chart renders: ``lakemirror config show``
reads the rendered ConfigMap's file with each container's rendered environment (its Secret's
keys included) and shows the intended regions, KV and object store, every secret redacted."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.deploy.chart import config_file, container, example, render, secret
from tests.deploy.pods import ENTRYPOINT, Manifests

REDACTED = "**********"
KEYS = {
    "admin-access-key-id": "AKIAADMINKEY00000001",
    "admin-secret-access-key": "admin-secret-0a9f3c",
    "region-us-east-1-access-key-id": "AKIAREADERKEY0000001",
    "region-us-east-1-secret-access-key": "reader-secret-5be210",
    "region-eu-central-1-access-key-id": "AKIAREADERKEY0000002",
    "region-eu-central-1-secret-access-key": "reader-secret-e2c771",
    "encrypt-secret-key": "encryption-key-41d8e2",
}
"""The existing Secret of the examples, as `kubectl create secret generic` makes it."""
OTHER = {"us-east-1": "eu-central-1", "eu-central-1": "us-east-1"}


def show(manifests: Manifests, deployment: str, tmp: Path) -> dict[str, Any]:
    """Run ``lakemirror config show`` as the container would see its configuration."""
    _, text = config_file(manifests, deployment)
    path = tmp / f"{deployment}.yaml"
    path.write_text(text)
    fields = {"metadata.name": f"{deployment}-7d9c5b6f4-x2x8q"}
    env = {
        "PATH": "/usr/bin:/bin",
        **manifests.container_env(container(manifests, deployment), fields),
    }
    done = subprocess.run(
        [*ENTRYPOINT, "config", "show", "--config", str(path), "-o", "json"],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    for value in KEYS.values():
        if "secret" in value:
            assert value not in done.stdout + done.stderr, "a secret shown in clear"
    shown: dict[str, Any] = json.loads(done.stdout)
    return shown


@pytest.mark.parametrize("region", ["us-east-1", "eu-central-1"])
@pytest.mark.parametrize("deployment", ["lakemirror-server", "lakemirror-replicant"])
def test_a_region_configuration_is_what_the_values_say(
    region: str, deployment: str, tmp_path: Path
) -> None:
    manifests = render([example(region)], tmp_path)
    manifests.docs.append(secret("lakemirror-credentials", KEYS))
    config = show(manifests, deployment, tmp_path)
    other = OTHER[region]
    assert config["regions"][other]["server_url"] == f"https://lakemirror.{other}.example.com"
    assert config["regions"][region]["server_url"] == "http://lakemirror-server.lakemirror.svc:8000"
    assert config["replicant"]["region"] == region
    assert config["kv"]["type"] == "dynamodb"
    assert config["kv"]["dynamodb"]["table"] == f"lakemirror-{region}"
    assert config["kv"]["dynamodb"]["region"] == region
    assert config["kv"]["dynamodb"]["create_table"] is False
    assert config["kv"]["dynamodb"]["access_key_id"] is None, "the IAM role, not a static key"
    assert config["blockstore"]["s3"]["region"] == region
    assert config["blockstore"]["s3"]["secret_access_key"] is None
    assert config["logging"] == {"format": "json", "level": "info"}
    assert config["data_dir"] == "/var/lib/lakemirror"
    assert config["ui"] == {
        "enabled": True,
        "replicant_url": "http://lakemirror-replicant.lakemirror.svc:8001",
    }
    if deployment == "lakemirror-server":
        assert config["server"]["host"] == "0.0.0.0" and config["server"]["port"] == 8000
        assert config["server"]["workers"] == (2 if region == "us-east-1" else 1)
        assert config["auth"]["admin_access_key_id"] == REDACTED
        assert config["auth"]["admin_secret_access_key"] == REDACTED
        assert config["auth"]["encrypt_secret_key"] == REDACTED
        assert all(r["access_key_id"] is None for r in config["regions"].values())
    else:
        assert config["replicant"]["host"] == "0.0.0.0" and config["replicant"]["port"] == 8001
        assert config["replicant"]["replica_id"] == "lakemirror-replicant-7d9c5b6f4-x2x8q"
        # the source region's key from the Secret (merged into the file's regions by name)
        source = config["regions"][other]
        assert source["access_key_id"] == KEYS[f"region-{other}-access-key-id"]
        assert source["secret_access_key"] == REDACTED
        # its own region: the administrator's key
        own = config["regions"][region]
        assert own["access_key_id"] == KEYS["admin-access-key-id"]
        assert own["secret_access_key"] == REDACTED
        assert config["auth"]["admin_secret_access_key"] is None


def test_a_missing_source_key_leaves_the_configuration_valid(tmp_path: Path) -> None:
    """Before the source region's key exists the replicant still starts (it is optional)."""
    manifests = render([example("eu-central-1")], tmp_path)
    keys = {k: v for k, v in KEYS.items() if k.startswith(("admin-", "encrypt-"))}
    manifests.docs.append(secret("lakemirror-credentials", keys))
    config = show(manifests, "lakemirror-replicant", tmp_path)
    assert config["regions"]["us-east-1"]["access_key_id"] is None
    assert config["regions"]["us-east-1"]["server_url"].startswith("https://")


def test_static_keys_and_endpoints_reach_the_configuration(tmp_path: Path) -> None:
    values: dict[str, Any] = {
        "credentials": {
            "existingSecret": "",
            "admin": {"accessKeyId": KEYS["admin-access-key-id"], "secretAccessKey": "adm-s3cr3t"},
            "encryptSecretKey": KEYS["encrypt-secret-key"],
            "regions": {
                "eu-central-1": {"accessKeyId": "AKIAOWN", "secretAccessKey": "own-s3cr3t"}
            },
            "s3": {"accessKeyId": "AKIAS3", "secretAccessKey": "s3-s3cr3t"},
            "dynamodb": {"accessKeyId": "AKIADDB", "secretAccessKey": "ddb-s3cr3t"},
        },
        "kv": {"dynamodb": {"endpointUrl": "http://dynamodb.local:8000", "createTable": True}},
        "blockstore": {
            "s3": {
                "endpointUrl": "http://minio.local:9000",
                "addressingStyle": "path",
                "regions": {"us-east-1": {"region": "us-east-1", "maxAttempts": 5}},
            }
        },
        "extraConfig": {"replicant": {"object_cache_size": 2000000}},
    }
    manifests = render([example("eu-central-1"), values], tmp_path)
    config = show(manifests, "lakemirror-replicant", tmp_path)
    assert config["kv"]["dynamodb"]["endpoint_url"] == "http://dynamodb.local:8000"
    assert config["kv"]["dynamodb"]["create_table"] is True
    assert config["kv"]["dynamodb"]["access_key_id"] == "AKIADDB"
    assert config["kv"]["dynamodb"]["secret_access_key"] == REDACTED
    s3 = config["blockstore"]["s3"]
    assert s3["endpoint_url"] == "http://minio.local:9000" and s3["addressing_style"] == "path"
    assert s3["access_key_id"] == "AKIAS3" and s3["secret_access_key"] == REDACTED
    assert s3["regions"]["us-east-1"]["max_attempts"] == 5
    assert config["regions"]["eu-central-1"]["access_key_id"] == "AKIAOWN"
    assert config["replicant"]["object_cache_size"] == 2000000
    for secret_value in ("adm-s3cr3t", "own-s3cr3t", "s3-s3cr3t", "ddb-s3cr3t"):
        assert secret_value not in json.dumps(config)


def test_the_embedded_configuration(tmp_path: Path) -> None:
    manifests = render([example("embedded")], tmp_path)
    manifests.docs.append(secret("lakemirror-credentials", KEYS))
    config = show(manifests, "lakemirror-server", tmp_path)
    assert config["kv"]["type"] == "sqlite"
    assert config["kv"]["sqlite"]["path"] == "/var/lib/lakemirror/kv.sqlite"
    assert config["blockstore"]["local"]["root"] == "/var/lib/lakemirror"
    assert config["blockstore"]["s3"]["region"] is None
    assert config["ui"] == {"enabled": True, "replicant_url": ""}, "no replicant runs"
