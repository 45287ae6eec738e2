"""`lakemirror server` refuses to start on a missing table or an unreachable S3 or DynamoDB.

moto accepts any credentials, so wrong credentials cannot be shown here; the missing-table and
unreachable-endpoint cases are.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from mirror.cli.server import check_s3
from mirror.config import LakeMirrorConfig
from mirror.errors import UnavailableError
from tests.integration.harness import free_port
from tests.integration.moto_fixtures import ACCESS_KEY, SECRET_KEY, MotoServer, unique_name


def start(env: dict[str, str], tmp_path: Path) -> subprocess.CompletedProcess[str]:
    base = {k: v for k, v in os.environ.items() if not k.upper().startswith("LAKEMIRROR_")}
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "mirror.cli.main",
            "server",
            "--port",
            str(free_port()),
            "--data-dir",
            str(tmp_path / "data"),
        ],
        env={
            **base,
            **env,
            "LAKEMIRROR_LOGGING__FORMAT": "json",
            "PYTHONPATH": str(Path(__file__).resolve().parents[2]),
        },
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def only_line(result: subprocess.CompletedProcess[str]) -> str:
    assert "Traceback" not in result.stderr, result.stderr
    lines = [ln for ln in result.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("lakemirror server: "), lines[0]
    assert SECRET_KEY not in result.stdout + result.stderr
    assert "serving" not in result.stdout
    return lines[0]


def dynamo_env(url: str, table: str) -> dict[str, str]:
    return {
        "LAKEMIRROR_KV__TYPE": "dynamodb",
        "LAKEMIRROR_AUTH__ENCRYPT_SECRET_KEY": "test secret encryption key",
        "LAKEMIRROR_KV__DYNAMODB__TABLE": table,
        "LAKEMIRROR_KV__DYNAMODB__ENDPOINT_URL": url,
        "LAKEMIRROR_KV__DYNAMODB__REGION": "us-east-1",
        "LAKEMIRROR_KV__DYNAMODB__ACCESS_KEY_ID": ACCESS_KEY,
        "LAKEMIRROR_KV__DYNAMODB__SECRET_ACCESS_KEY": SECRET_KEY,
        "LAKEMIRROR_KV__DYNAMODB__MAX_ATTEMPTS": "1",
    }


def s3_env(url: str) -> dict[str, str]:
    return {
        "LAKEMIRROR_BLOCKSTORE__S3__ENDPOINT_URL": url,
        "LAKEMIRROR_BLOCKSTORE__S3__REGION": "us-east-1",
        "LAKEMIRROR_BLOCKSTORE__S3__ACCESS_KEY_ID": ACCESS_KEY,
        "LAKEMIRROR_BLOCKSTORE__S3__SECRET_ACCESS_KEY": SECRET_KEY,
        "LAKEMIRROR_BLOCKSTORE__S3__ADDRESSING_STYLE": "path",
        "LAKEMIRROR_BLOCKSTORE__S3__MAX_ATTEMPTS": "1",
    }


@pytest.mark.s3
def test_missing_table_is_one_line_naming_it(tmp_path: Path, moto_region: MotoServer) -> None:
    table = unique_name("absent")
    result = start({**dynamo_env(moto_region.url, table), **s3_env(moto_region.url)}, tmp_path)
    assert result.returncode != 0
    line = only_line(result)
    assert table in line and "missing" in line


def test_unreachable_dynamodb_is_one_line(tmp_path: Path) -> None:
    url = f"http://127.0.0.1:{free_port()}"
    result = start(dynamo_env(url, unique_name("nowhere")), tmp_path)
    assert result.returncode != 0
    line = only_line(result)
    assert "dynamodb" in line.lower()


def test_unreachable_s3_endpoint_is_one_line(tmp_path: Path) -> None:
    url = f"http://127.0.0.1:{free_port()}"
    result = start(s3_env(url), tmp_path)
    assert result.returncode != 0
    line = only_line(result)
    assert "blockstore.s3" in line and url in line and "unreachable" in line


@pytest.mark.s3
def test_unreachable_s3_region_entry_is_one_line_naming_it(
    tmp_path: Path, moto_region: MotoServer
) -> None:
    url = f"http://127.0.0.1:{free_port()}"
    env = {"LAKEMIRROR_BLOCKSTORE__S3__REGIONS": f'{{"eu": {{"endpoint_url": "{url}"}}}}'}
    result = start({**s3_env(moto_region.url), **env}, tmp_path)
    assert result.returncode != 0
    line = only_line(result)
    assert "blockstore.s3.regions.eu" in line and url in line


@pytest.mark.s3
def test_check_s3_passes_on_a_reachable_endpoint(moto_region: MotoServer) -> None:
    config = LakeMirrorConfig(
        blockstore={
            "s3": {
                "endpoint_url": moto_region.url,
                "region": moto_region.region,
                "access_key_id": ACCESS_KEY,
                "secret_access_key": SECRET_KEY,
                "max_attempts": 1,
            }
        }
    )
    check_s3(config)
    unreachable = config.blockstore.s3.model_copy(
        update={"endpoint_url": f"http://127.0.0.1:{free_port()}"}
    )
    broken = config.model_copy(
        update={"blockstore": config.blockstore.model_copy(update={"s3": unreachable})}
    )
    with pytest.raises(UnavailableError, match="unreachable"):
        check_s3(broken)


def test_check_s3_skips_an_unconfigured_section() -> None:
    check_s3(LakeMirrorConfig())
