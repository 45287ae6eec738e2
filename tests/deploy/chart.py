"""Render the Helm chart with the real ``helm`` and read what it renders.

The tests of the chart (``test_chart*.py``) render it as an operator installs it: one release
per region, the example values of that region, and overrides on top.
"""

from __future__ import annotations

import base64
import os
import subprocess
import sys
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.deploy.pods import Doc, Manifests
from tests.deploy.tools import CHART, run_tool

EXAMPLES = CHART / "examples"
"""The chart's example values, one file per region (and one of the embedded mode)."""
RELEASE = "lakemirror"
NAMESPACE = "lakemirror"
KUBE_VERSIONS = ("1.30.0", "1.35.0")
"""Kubernetes versions the rendered objects are validated against: the chart's minimum
(``kubeVersion`` in Chart.yaml) and a recent release."""
MONITORING_KINDS = {"ServiceMonitor", "PrometheusRule"}
"""monitoring.coreos.com/v1 kinds: Kubernetes's schemas do not know them."""


def example(name: str) -> Path:
    """Return the example values file ``name`` (e.g. ``us-east-1``)."""
    path = EXAMPLES / f"{name}.yaml"
    assert path.is_file(), f"no example values {path}"
    return path


def helm(args: Sequence[str], *, check: bool = True) -> subprocess.CompletedProcess[str]:
    """Run ``helm`` with ``args`` (HOME and caches in a throwaway place, no repositories)."""
    return run_tool("helm", list(args), check=check, env=_helm_env())


def _helm_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("HELM_")}
    cache = Path(os.environ.get("TMPDIR", "/tmp")) / f"lakemirror-helm-{os.getuid()}"
    env.update(
        HELM_CACHE_HOME=str(cache / "cache"),
        HELM_CONFIG_HOME=str(cache / "config"),
        HELM_DATA_HOME=str(cache / "data"),
    )
    return env


def template_args(
    values: Sequence[Path | Mapping[str, Any]], tmp: Path, *, release: str = RELEASE
) -> list[str]:
    """Return ``helm template`` arguments for ``values`` (files, or mappings written to ``tmp``)."""
    args = ["template", release, str(CHART), "--namespace", NAMESPACE]
    for item in values:
        if isinstance(item, Mapping):
            with tempfile.NamedTemporaryFile(
                "w", dir=tmp, prefix="values-", suffix=".yaml", delete=False
            ) as f:
                yaml.safe_dump(dict(item), f)
            item = Path(f.name)
        args += ["--values", str(item)]
    return args


def render(
    values: Sequence[Path | Mapping[str, Any]], tmp: Path, *, release: str = RELEASE
) -> Manifests:
    """Return what ``helm template`` renders with ``values`` (later ones win)."""
    done = helm(template_args(values, tmp, release=release))
    return Manifests(parse(done.stdout))


def parse(text: str) -> list[Doc]:
    """Return the objects of a multi-document YAML stream (empty documents left out)."""
    return [doc for doc in yaml.safe_load_all(text) if doc]


def secret(name: str, data: Mapping[str, str]) -> Doc:
    """Return a Secret as ``kubectl create secret generic NAME --from-literal=...`` makes it."""
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": name, "namespace": NAMESPACE},
        "type": "Opaque",
        "data": {k: base64.b64encode(v.encode()).decode() for k, v in data.items()},
    }


def container(manifests: Manifests, deployment: str) -> Doc:
    """Return the one container of Deployment ``deployment``."""
    (only,) = manifests.get("Deployment", deployment)["spec"]["template"]["spec"]["containers"]
    return only


def config_file(manifests: Manifests, deployment: str) -> tuple[str, str]:
    """Return the path a Deployment's container reads its configuration from, and its text.

    The path is the container's ``LAKEMIRROR_CONFIG``; the text is the ConfigMap entry the
    volume mounted over that path's directory projects there.
    """
    spec = manifests.get("Deployment", deployment)["spec"]["template"]["spec"]
    env = {v["name"]: v.get("value") for v in container(manifests, deployment)["env"]}
    path = env["LAKEMIRROR_CONFIG"]
    assert path, "LAKEMIRROR_CONFIG is not a literal value"
    volumes = {v["name"]: v for v in spec["volumes"]}
    for mount in container(manifests, deployment)["volumeMounts"]:
        directory = mount["mountPath"].rstrip("/") + "/"
        if path.startswith(directory) and "configMap" in volumes[mount["name"]]:
            key = path.removeprefix(directory)
            data = manifests.config_map_data(volumes[mount["name"]]["configMap"]["name"])
            return path, data[key]
    raise AssertionError(f"no ConfigMap volume of {deployment} holds {path}")


def kubernetes_validate() -> str:
    """Return the ``kubernetes-validate`` program of the interpreter running the tests."""
    program = Path(sys.executable).with_name("kubernetes-validate")
    if not program.exists():
        pytest.fail("kubernetes-validate is not installed: run `make install`")
    return str(program)
