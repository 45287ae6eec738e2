"""`lakemirror kv init`: create the configured KV store, idempotently, over real HTTP (moto)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.integration.harness import free_port
from tests.integration.moto_fixtures import ACCESS_KEY, SECRET_KEY, MotoServer, unique_name


def kv_init(env: dict[str, str], cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    base = {k: v for k, v in os.environ.items() if not k.upper().startswith("LAKEMIRROR_")}
    return subprocess.run(
        [sys.executable, "-m", "mirror.cli.main", "kv", "init", *args],
        env={**base, **env, "PYTHONPATH": str(Path(__file__).resolve().parents[2])},
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def dynamo_env(moto: MotoServer, table: str) -> dict[str, str]:
    return {
        "LAKEMIRROR_KV__TYPE": "dynamodb",
        "LAKEMIRROR_KV__DYNAMODB__TABLE": table,
        "LAKEMIRROR_KV__DYNAMODB__ENDPOINT_URL": moto.url,
        "LAKEMIRROR_KV__DYNAMODB__REGION": moto.region,
        "LAKEMIRROR_KV__DYNAMODB__ACCESS_KEY_ID": ACCESS_KEY,
        "LAKEMIRROR_KV__DYNAMODB__SECRET_ACCESS_KEY": SECRET_KEY,
        "LAKEMIRROR_KV__DYNAMODB__MAX_ATTEMPTS": "2",
    }


@pytest.mark.s3
def test_kv_init_creates_the_table_then_says_it_exists(
    tmp_path: Path, moto_region: MotoServer, dynamodb_client: Any
) -> None:
    table = unique_name("init")
    env = dynamo_env(moto_region, table)
    assert table not in dynamodb_client.list_tables()["TableNames"]

    first = kv_init(env, tmp_path)
    assert first.returncode == 0, first.stderr
    assert first.stdout.strip() == f"created DynamoDB table {table}"
    described = dynamodb_client.describe_table(TableName=table)["Table"]
    assert described["TableStatus"] == "ACTIVE"
    assert {k["AttributeName"] for k in described["KeySchema"]} == {"pk", "sk"}

    second = kv_init(env, tmp_path)
    assert second.returncode == 0, second.stderr
    assert second.stdout.strip() == f"exists DynamoDB table {table}"
    assert SECRET_KEY not in first.stdout + first.stderr + second.stdout + second.stderr


@pytest.mark.s3
def test_kv_init_reads_the_config_file(
    tmp_path: Path, moto_region: MotoServer, dynamodb_client: Any
) -> None:
    table = unique_name("fromfile")
    config = tmp_path / "lakemirror.yaml"
    config.write_text(
        "kv:\n"
        "  type: dynamodb\n"
        "  dynamodb:\n"
        f"    table: {table}\n"
        f"    endpoint_url: {moto_region.url}\n"
        f"    region: {moto_region.region}\n"
        f"    access_key_id: {ACCESS_KEY}\n"
        f"    secret_access_key: {SECRET_KEY}\n"
    )
    result = kv_init({}, tmp_path, "--config", str(config))
    assert result.returncode == 0, result.stderr
    assert table in dynamodb_client.list_tables()["TableNames"]


def test_kv_init_unreachable_dynamodb_is_one_line_and_exit_1(tmp_path: Path) -> None:
    env = {
        "LAKEMIRROR_KV__TYPE": "dynamodb",
        "LAKEMIRROR_KV__DYNAMODB__ENDPOINT_URL": f"http://127.0.0.1:{free_port()}",
        "LAKEMIRROR_KV__DYNAMODB__REGION": "us-east-1",
        "LAKEMIRROR_KV__DYNAMODB__ACCESS_KEY_ID": ACCESS_KEY,
        "LAKEMIRROR_KV__DYNAMODB__SECRET_ACCESS_KEY": SECRET_KEY,
        "LAKEMIRROR_KV__DYNAMODB__MAX_ATTEMPTS": "1",
    }
    result = kv_init(env, tmp_path)
    assert result.returncode == 1
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("lakemirror kv init:"), result.stderr
    assert "Traceback" not in result.stderr


def test_kv_init_creates_the_sqlite_file(tmp_path: Path) -> None:
    path = tmp_path / "sub" / "kv.sqlite"
    env = {"LAKEMIRROR_KV__SQLITE__PATH": str(path)}
    first = kv_init(env, tmp_path)
    assert first.returncode == 0, first.stderr
    assert first.stdout.strip() == f"created SQLite file {path}"
    assert path.is_file()
    second = kv_init(env, tmp_path)
    assert second.returncode == 0
    assert second.stdout.strip() == f"exists SQLite file {path}"


def test_kv_init_invalid_configuration_exits_2(tmp_path: Path) -> None:
    result = kv_init({"LAKEMIRROR_KV__TYPE": "postgres"}, tmp_path)
    assert result.returncode == 2
    assert "kv.type" in result.stderr
