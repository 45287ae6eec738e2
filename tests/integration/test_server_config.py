"""`lakemirror server` configured by a YAML file and LAKEMIRROR_* variables, embedded and on AWS."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import lakefs
import pytest
import yaml

from tests.integration.harness import free_port, wait_healthy
from tests.integration.moto_fixtures import (
    ACCESS_KEY,
    SECRET_KEY,
    MotoServer,
    create_bucket,
    unique_name,
)

ADMIN_KEY = "AKIAJCONFIGADMIN0001"
ADMIN_SECRET = "config-admin-secret-6b1f0e"


def server_env(extra: dict[str, str]) -> dict[str, str]:
    base = {k: v for k, v in os.environ.items() if not k.upper().startswith("LAKEMIRROR_")}
    return {**base, **extra}


@contextmanager
def serving(
    tmp_path: Path, env: dict[str, str], *args: str, port: int | None = None
) -> Iterator[str]:
    port = port or free_port()
    log_path = tmp_path / "server.log"
    command = [sys.executable, "-m", "mirror.cli.main", "server", "--port", str(port), *args]
    with open(log_path, "ab") as log:
        process = subprocess.Popen(
            command, env=server_env(env), stdout=log, stderr=subprocess.STDOUT
        )
    url = f"http://127.0.0.1:{port}"
    try:
        wait_healthy(process, url, log_path)
        yield url
    finally:
        process.terminate()
        process.wait(timeout=30)


def aws_env(moto: MotoServer, table: str, *, create_table: bool) -> dict[str, str]:
    return {
        "LAKEMIRROR_KV__TYPE": "dynamodb",
        "LAKEMIRROR_AUTH__ENCRYPT_SECRET_KEY": "test secret encryption key",
        "LAKEMIRROR_KV__DYNAMODB__TABLE": table,
        "LAKEMIRROR_KV__DYNAMODB__ENDPOINT_URL": moto.url,
        "LAKEMIRROR_KV__DYNAMODB__REGION": moto.region,
        "LAKEMIRROR_KV__DYNAMODB__ACCESS_KEY_ID": ACCESS_KEY,
        "LAKEMIRROR_KV__DYNAMODB__SECRET_ACCESS_KEY": SECRET_KEY,
        "LAKEMIRROR_KV__DYNAMODB__CREATE_TABLE": str(create_table).lower(),
        "LAKEMIRROR_KV__DYNAMODB__MAX_ATTEMPTS": "2",
        "LAKEMIRROR_BLOCKSTORE__S3__ENDPOINT_URL": moto.url,
        "LAKEMIRROR_BLOCKSTORE__S3__REGION": moto.region,
        "LAKEMIRROR_BLOCKSTORE__S3__ACCESS_KEY_ID": ACCESS_KEY,
        "LAKEMIRROR_BLOCKSTORE__S3__SECRET_ACCESS_KEY": SECRET_KEY,
        "LAKEMIRROR_BLOCKSTORE__S3__ADDRESSING_STYLE": "path",
        "LAKEMIRROR_ADMIN_ACCESS_KEY_ID": ADMIN_KEY,
        "LAKEMIRROR_ADMIN_SECRET_ACCESS_KEY": ADMIN_SECRET,
        "LAKEMIRROR_LOGGING__FORMAT": "json",
    }


def test_server_reads_its_file_and_flags_override_it(tmp_path: Path) -> None:
    data_dir = tmp_path / "elsewhere"
    config = tmp_path / "lakemirror.yaml"
    config.write_text(
        yaml.safe_dump(
            {
                "server": {"host": "127.0.0.1", "port": free_port()},
                "data_dir": str(data_dir),
                "auth": {"admin_access_key_id": ADMIN_KEY, "admin_secret_access_key": "file"},
                "logging": {"format": "json", "level": "warning"},
            }
        )
    )
    env = {"LAKEMIRROR_AUTH__ADMIN_SECRET_ACCESS_KEY": ADMIN_SECRET}
    with serving(tmp_path, env, "--config", str(config)) as url:
        me = httpx.get(f"{url}/api/v1/user", auth=(ADMIN_KEY, ADMIN_SECRET))
        assert me.status_code == 200 and me.json()["user"]["id"] == "admin"
    assert (data_dir / "kv.sqlite").is_file()
    log = (tmp_path / "server.log").read_text()
    assert '"logger": "mirror.access"' not in log  # level warning: no access lines
    assert ADMIN_SECRET not in log


@pytest.mark.s3
def test_missing_table_stops_the_server_with_one_line(
    tmp_path: Path, moto_region: MotoServer
) -> None:
    table = unique_name("absent")
    result = subprocess.run(
        [sys.executable, "-m", "mirror.cli.main", "server", "--port", str(free_port())],
        env=server_env(aws_env(moto_region, table, create_table=False)),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 1
    (line,) = [ln for ln in result.stderr.splitlines() if ln.startswith("lakemirror server:")]
    assert table in line and "missing" in line
    assert SECRET_KEY not in result.stdout + result.stderr


@pytest.mark.s3
def test_server_on_dynamodb_and_s3(tmp_path: Path, moto_region: MotoServer, s3_client: Any) -> None:
    bucket = create_bucket(moto_region, s3_client)
    env = aws_env(moto_region, unique_name("refs"), create_table=True)
    with serving(tmp_path, env, "--data-dir", str(tmp_path / "data")) as url:
        client = lakefs.Client(host=url, username=ADMIN_KEY, password=ADMIN_SECRET)
        repo = lakefs.Repository("on-aws", client=client).create(f"s3://{bucket}/repos/on-aws")
        main = repo.branch("main")
        main.object("raw/a.txt").upload(b"stored in s3")
        main.commit("add a.txt")
        assert main.object("raw/a.txt").reader().read() == b"stored in s3"
        assert httpx.get(f"{url}/readyz").status_code == 200
    listed = s3_client.list_objects_v2(Bucket=bucket, Prefix="repos/on-aws/")
    assert listed["KeyCount"] > 0
    assert not (tmp_path / "data" / "kv.sqlite").exists()
    log = (tmp_path / "server.log").read_text()
    assert ADMIN_SECRET not in log and SECRET_KEY not in log
