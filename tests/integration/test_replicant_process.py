"""`lakemirror replicant` as a process: start-up errors in one line, health and readiness."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import httpx
import yaml

from tests.integration.harness import free_port, wait_healthy


def _run(args: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "mirror.cli.main", "replicant", *args]
    return subprocess.run(command, cwd=cwd, capture_output=True, text=True, timeout=60)


def test_a_region_missing_from_the_configuration_is_one_line_and_exit_2(tmp_path: Path) -> None:
    result = _run(["--data-dir", str(tmp_path / "d"), "--region", "eu"], tmp_path)
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "replicant.region 'eu'" in lines[0]


def test_a_region_without_a_server_url_is_refused(tmp_path: Path) -> None:
    config = tmp_path / "r.yaml"
    regions = {"a": {"access_key_id": "AKIAX"}, "b": {"server_url": "http://127.0.0.1:1"}}
    config.write_text(yaml.safe_dump({"replicant": {"region": "b"}, "regions": regions}))
    result = _run(["--config", str(config), "--data-dir", str(tmp_path / "d")], tmp_path)
    assert result.returncode == 2
    assert "regions without a server_url: a" in result.stderr


def test_health_readiness_and_metrics_answer_without_credentials(tmp_path: Path) -> None:
    port = free_port()
    config = tmp_path / "r.yaml"
    config.write_text(
        yaml.safe_dump(
            {
                "data_dir": str(tmp_path / "d"),
                "replicant": {"region": "b", "port": port, "replica_id": "solo"},
                "regions": {"b": {"server_url": "http://127.0.0.1:1"}},
            }
        )
    )
    log = tmp_path / "replicant.log"
    command = [sys.executable, "-m", "mirror.cli.main", "replicant", "--config", str(config)]
    with open(log, "wb") as out:
        process = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    try:
        wait_healthy(process, url, log)
        with httpx.Client(base_url=url, timeout=10) as http:
            health = http.get("/healthz").json()
            assert health == {"status": "ok", "replica": "solo", "working": []}
            assert http.get("/readyz").json() == {"status": "ready", "mirrors": 0}
            metrics = http.get("/metrics")
            assert metrics.status_code == 200
            assert "# TYPE lakemirror_lag_seconds gauge" in metrics.text
            mirrors = "/service/replication/v1/repositories/origin/mirrors"
            refused = http.get(mirrors)
            assert refused.status_code == 401 and "message" in refused.json()
    finally:
        process.terminate()
        process.wait(timeout=10)
