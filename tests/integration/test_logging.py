"""The server's logs in production form: JSON lines, a request ID on each, never a secret."""

from __future__ import annotations

import json
import os
import secrets
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import httpx

from tests.integration.harness import ADMIN_KEY_ENV, ADMIN_SECRET_ENV, free_port, wait_healthy


def serve_and_stop(
    tmp_path: Path, env: dict[str, str], exercise: Callable[[str], None], *args: str
) -> tuple[list[str], str]:
    """Run the server, call ``exercise(url)``, stop it; return its stderr lines and stdout."""
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    stdout_path, stderr_path = tmp_path / "stdout.log", tmp_path / "stderr.log"
    base = {k: v for k, v in os.environ.items() if not k.upper().startswith("LAKEMIRROR_")}
    command = [sys.executable, "-m", "mirror.cli.main", "server", "--port", str(port), *args]
    with open(stdout_path, "wb") as out, open(stderr_path, "wb") as err:
        process = subprocess.Popen(command, env={**base, **env}, stdout=out, stderr=err)
    try:
        wait_healthy(process, url, stderr_path)
        exercise(url)
    finally:
        process.terminate()
        process.wait(timeout=30)
    return stderr_path.read_text().splitlines(), stdout_path.read_text()


def test_api_log_lines_are_json_with_request_ids_and_no_secrets(tmp_path: Path) -> None:
    key_id = "AKIAJLOG" + secrets.token_hex(6).upper()
    secret = "admin-secret-" + secrets.token_urlsafe(16)
    other = "user-secret-" + secrets.token_urlsafe(16)
    query_secret = "query-secret-" + secrets.token_urlsafe(8)
    data_dir = tmp_path / "data"
    env = {
        ADMIN_KEY_ENV: key_id,
        ADMIN_SECRET_ENV: secret,
        "LAKEMIRROR_DATA_DIR": str(data_dir),
        "LAKEMIRROR_LOGGING__FORMAT": "json",
        "LAKEMIRROR_BLOCKSTORE__S3__SECRET_ACCESS_KEY": "s3-" + secret,
    }
    responses: list[httpx.Response] = []

    def exercise(url: str) -> None:
        api = f"{url}/api/v1"
        with httpx.Client(base_url=api, auth=(key_id, secret), timeout=30.0) as http:
            responses.append(http.get("/user", headers={"X-Request-ID": "trace-0001"}))
            responses.append(http.get("/repositories", params={"secret": query_secret}))
            responses.append(
                http.post(
                    "/repositories",
                    json={"name": "logs", "storage_namespace": "local://logs"},
                    headers={"X-Request-ID": "bad id with spaces"},
                )
            )
            responses.append(http.post("/auth/users", json={"id": "jane"}))
            responses.append(
                http.post(
                    "/setup_lakefs",
                    json={"key": {"access_key_id": "AKIAJQQQ", "secret_access_key": other}},
                )
            )
        responses.append(httpx.get(f"{api}/user", auth=(key_id, "wrong-" + secret)))
        responses.append(httpx.get(f"{api}/repositories"))

    lines, stdout = serve_and_stop(tmp_path, env, exercise)

    assert [r.status_code for r in responses] == [200, 200, 201, 201, 400, 401, 401]
    assert responses[0].headers["X-Request-ID"] == "trace-0001"
    ids = [r.headers["X-Request-ID"] for r in responses]
    assert len(set(ids)) == len(ids)
    assert ids[2] != "bad id with spaces"

    events = [json.loads(line) for line in lines]  # every line of the log is JSON
    access = [e for e in events if e.get("logger") == "mirror.access"]
    api_lines = [e for e in access if e["path"].startswith("/api/v1/")]
    assert [e["request_id"] for e in api_lines] == ids
    for event in access:
        assert event["event"] == "request"
        assert event["request_id"]
        assert {"method", "path", "status", "duration_ms", "timestamp", "level"} <= set(event)
    first = api_lines[0]
    assert (first["method"], first["path"], first["status"]) == ("GET", "/api/v1/user", 200)
    assert first["user_id"] == "admin"
    assert "user_id" not in api_lines[-1]
    assert api_lines[-1]["status"] == 401
    assert [e["path"] for e in api_lines].count("/api/v1/repositories") == 3
    assert any(e["event"] == "Application startup complete." for e in events)

    everything = "\n".join(lines) + stdout
    for leaked in (secret, other, query_secret, "Basic "):
        assert leaked not in everything


def test_console_format_is_readable(tmp_path: Path) -> None:
    def exercise(url: str) -> None:
        assert httpx.get(f"{url}/api/v1/repositories").status_code == 401

    lines, _ = serve_and_stop(
        tmp_path,
        {"LAKEMIRROR_DATA_DIR": str(tmp_path / "data")},
        exercise,
        "--log-format",
        "console",
        "--wait-for-setup",
    )
    (line,) = [ln for ln in lines if "path=/api/v1/repositories" in ln]
    assert not line.startswith("{")
    assert "request" in line and "status=401" in line and "request_id=" in line
