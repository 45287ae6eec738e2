"""`lakemirror server` and the secrets' encryption key: generated once into the data directory
with SQLite (shared by worker processes, mode 0600), required with DynamoDB (exit 2 naming the
setting)."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from mirror.auth.secrets import ENCRYPT_KEY_FILE, SecretCipher
from mirror.auth.store import AuthStore
from mirror.kv.sqlite import SqliteKV
from tests.integration.dynalite import Dynalite, running_dynalite
from tests.integration.harness import free_port, running_server, unique

ADMIN = ("AKIASECRETKEYADMIN01", "secret-key-startup-admin-secret-000000")


@pytest.fixture(scope="module")
def dynalite_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Dynalite]:
    with running_dynalite(tmp_path_factory.mktemp("dynalite")) as server:
        yield server


def test_dynamodb_without_the_key_exits_2_naming_the_setting(
    dynalite_server: Dynalite, tmp_path: Path
) -> None:
    env = {
        k: v
        for k, v in dynalite_server.env(unique("nokey")).items()
        if k != "LAKEMIRROR_AUTH__ENCRYPT_SECRET_KEY"
    }
    base = {k: v for k, v in os.environ.items() if not k.upper().startswith("LAKEMIRROR_")}
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "mirror.cli.main",
            "server",
            "--host",
            "127.0.0.1",
            "--port",
            str(free_port()),
            "--data-dir",
            str(tmp_path / "data"),
        ],
        env={**base, **env, "PYTHONPATH": str(Path(__file__).resolve().parents[2])},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 2, done.stderr
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert lines[-1].startswith("lakemirror server: "), done.stderr
    assert "auth.encrypt_secret_key" in lines[-1]
    assert "LAKEMIRROR_AUTH__ENCRYPT_SECRET_KEY" in lines[-1]
    assert "Traceback" not in done.stderr
    assert not (tmp_path / "data" / ENCRYPT_KEY_FILE).exists()


def test_sqlite_generates_the_key_once_for_every_worker(tmp_path: Path) -> None:
    data = tmp_path / "data"
    env = {k: v for k, v in os.environ.items() if not k.startswith("LAKEMIRROR_AUTH__ENCRYPT")}
    env["LAKEMIRROR_SERVER__WORKERS"] = "2"
    created: dict[str, str] = {}
    with running_server(
        data, tmp_path / "server.log", access_key_id=ADMIN[0], secret_access_key=ADMIN[1], env=env
    ) as server:
        key_file = data / ENCRYPT_KEY_FILE
        assert stat.S_IMODE(key_file.stat().st_mode) == 0o600
        with httpx.Client(base_url=f"{server.url}/api/v1", auth=ADMIN, timeout=10) as api:
            assert api.post("/auth/users", json={"id": "carol"}).status_code == 201
            for _ in range(4):  # several requests: both worker processes seal with one key
                made = api.post("/auth/users/carol/credentials")
                assert made.status_code == 201, made.text
                body = made.json()
                created[body["access_key_id"]] = body["secret_access_key"]
    key = key_file.read_text().strip()
    log = (tmp_path / "server.log").read_text()
    assert key not in log
    assert all(secret not in log for secret in created.values())
    kv = SqliteKV(data / "kv.sqlite")
    try:
        auth = AuthStore(kv, cipher=SecretCipher(key))
        assert auth.secret_for_signing(ADMIN[0]).secret == ADMIN[1]
        for key_id, secret in created.items():
            assert auth.secret_for_signing(key_id).secret == secret
    finally:
        kv.close()
    with running_server(data, tmp_path / "again.log", env=env):
        assert key_file.read_text().strip() == key, "a restart keeps the key"
