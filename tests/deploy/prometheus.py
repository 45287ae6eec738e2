"""A real Prometheus server for the tests: scrape jobs, rules scaled to seconds, and its HTTP API.

The alert rules are loaded from ``deploy/prometheus/alerts.yaml`` with only their ``for:``
durations and the named numeric thresholds replaced (:func:`scaled_rules`): the expressions a
test runs are the shipped ones.
"""

from __future__ import annotations

import re
import subprocess
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import yaml

from tests.deploy.tools import require_tool
from tests.integration.harness import free_port, stop_process

_UNITS = {"ms": 0.001, "s": 1, "m": 60, "h": 3600, "d": 86400}


def seconds(duration: str) -> float:
    """Return a Prometheus duration (``5m``, ``1h30m``) in seconds."""
    parts = re.findall(r"(\d+)(ms|s|m|h|d)", duration)
    if not parts or "".join(n + u for n, u in parts) != duration:
        raise ValueError(f"not a Prometheus duration: {duration!r}")
    return sum(int(n) * _UNITS[u] for n, u in parts)


def scaled_rules(
    rules: Mapping[str, Any], factor: float, thresholds: Mapping[str, Mapping[str, str]]
) -> dict[str, Any]:
    """Return ``rules`` with every ``for:`` divided by ``factor`` and thresholds replaced.

    ``thresholds`` maps an alert to ``{old literal: new literal}``; each old literal must occur
    exactly once in that alert's expression (so a changed shipped threshold fails loudly).
    """
    out: dict[str, Any] = {"groups": []}
    unknown = set(thresholds)
    for group in rules["groups"]:
        rewritten = []
        for rule in group["rules"]:
            rule = dict(rule)
            name = rule.get("alert")
            if "for" in rule:
                rule["for"] = f"{max(1, round(seconds(rule['for']) / factor))}s"
            for old, new in thresholds.get(name or "", {}).items():
                pattern = rf"(?<![\w.]){re.escape(old)}(?![\w.])"
                expr, count = re.subn(pattern, new, rule["expr"])
                if count != 1:
                    raise ValueError(f"{name}: threshold {old} occurs {count} times in {expr!r}")
                rule["expr"] = expr
            unknown.discard(name or "")
            rewritten.append(rule)
        out["groups"].append({**group, "rules": rewritten})
    if unknown:
        raise ValueError(f"no such alerts: {sorted(unknown)}")
    return out


@dataclass
class Prometheus:
    """A running Prometheus server and a client of its HTTP API."""

    url: str
    process: subprocess.Popen[bytes]
    log_path: Path
    http: httpx.Client

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def _get(self, path: str, params: Mapping[str, Any] | None = None) -> Any:
        response = self.http.get(path, params=params)
        body = response.json()
        if response.status_code != 200 or body.get("status") != "success":
            raise AssertionError(f"GET {path} {params} answered {response.status_code}: {body}")
        return body["data"]

    def query(self, expr: str) -> list[dict[str, Any]]:
        """Run an instant query; return its vector."""
        data = self._get("/api/v1/query", {"query": expr})
        result: list[dict[str, Any]] = data["result"]
        return result

    def query_range(self, expr: str, start: float, end: float, step: float) -> dict[str, Any]:
        """Run a range query as Grafana's panels do; return its ``data``."""
        data: dict[str, Any] = self._get(
            "/api/v1/query_range", {"query": expr, "start": start, "end": end, "step": step}
        )
        return data

    def label_values(self, label: str, match: str) -> list[str]:
        """Return the values of ``label`` on series matching ``match`` (Grafana's label_values)."""
        values: list[str] = self._get(f"/api/v1/label/{label}/values", {"match[]": match})
        return values

    def alerts(self) -> list[dict[str, Any]]:
        """Return the pending and firing alerts, from Prometheus's own alerts API."""
        alerts: list[dict[str, Any]] = self._get("/api/v1/alerts")["alerts"]
        return alerts

    def targets(self) -> list[dict[str, Any]]:
        """Return the active scrape targets."""
        targets: list[dict[str, Any]] = self._get("/api/v1/targets")["activeTargets"]
        return targets

    def rule_groups(self) -> list[dict[str, Any]]:
        """Return the loaded rule groups."""
        groups: list[dict[str, Any]] = self._get("/api/v1/rules")["groups"]
        return groups


def _host_port(url: str) -> str:
    return url.removeprefix("http://").removeprefix("https://").rstrip("/")


@contextmanager
def running_prometheus(
    tmp: Path, jobs: Mapping[str, list[str]], rules: Mapping[str, Any], interval: str = "1s"
) -> Iterator[Prometheus]:
    """Run Prometheus scraping ``jobs`` (job name → base URLs) every ``interval`` with ``rules``.

    Rules are evaluated every ``interval`` too. The server listens on 127.0.0.1 only.
    """
    binary = require_tool("prometheus")
    tmp.mkdir(parents=True, exist_ok=True)
    rules_path = tmp / "alerts.yaml"
    rules_path.write_text(yaml.safe_dump(dict(rules), sort_keys=False))
    config = {
        "global": {
            "scrape_interval": interval,
            "scrape_timeout": interval,
            "evaluation_interval": interval,
        },
        "rule_files": [str(rules_path)],
        "scrape_configs": [
            {
                "job_name": job,
                "static_configs": [{"targets": [_host_port(u) for u in urls]}],
            }
            for job, urls in jobs.items()
        ],
    }
    config_path = tmp / "prometheus.yml"
    config_path.write_text(yaml.safe_dump(config, sort_keys=False))
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    log_path = tmp / "prometheus.log"
    command = [
        binary,
        f"--config.file={config_path}",
        f"--web.listen-address=127.0.0.1:{port}",
        f"--storage.tsdb.path={tmp / 'data'}",
        "--log.level=warn",
    ]
    with open(log_path, "ab") as log:
        process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT)
    http = httpx.Client(base_url=url, timeout=30.0)
    try:
        _wait_ready(process, http, log_path)
        yield Prometheus(url, process, log_path, http)
    finally:
        http.close()
        stop_process(process, timeout=20)


def _wait_ready(process: subprocess.Popen[bytes], http: httpx.Client, log_path: Path) -> None:
    deadline = time.monotonic() + 60
    while True:
        if process.poll() is not None:
            raise AssertionError(
                f"prometheus exited with {process.returncode}:\n{log_path.read_text()}"
            )
        try:
            if http.get("/-/ready").status_code == 200:
                return
        except httpx.TransportError:
            pass
        if time.monotonic() > deadline:
            raise AssertionError(f"prometheus not ready after 60 s:\n{log_path.read_text()}")
        time.sleep(0.1)  # polling interval of a deadline-bounded wait
