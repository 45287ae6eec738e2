"""moto server processes standing in for two AWS regions, over real HTTP.

Each region is its own process: two moto servers in one process would share their state. Each
process serves one request at a time (see :mod:`tests.integration.moto_serial` for why). The
fixtures are session-scoped; tests isolate themselves with a fresh bucket or table each.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from mirror.block.s3 import S3Settings, make_s3_client
from mirror.kv.dynamodb import DynamoSettings, make_dynamodb_client
from tests.integration.harness import stop_process

__all__ = [
    "MotoServer",
    "aws_backend_env",
    "create_bucket",
    "dynamo_settings",
    "dynamodb_client",
    "moto_region",
    "moto_second_region",
    "running_moto",
    "s3_client",
    "s3_settings",
    "unique_name",
]

ACCESS_KEY = "AKIAMOTOTESTING00000"
SECRET_KEY = "moto-testing-secret"
START_DEADLINE = 30.0


@dataclass(frozen=True)
class MotoServer:
    """A running ``moto_server`` simulating one region."""

    url: str
    region: str
    process: subprocess.Popen[bytes]

    def reset(self) -> None:
        """Drop every bucket and table of this server."""
        httpx.post(f"{self.url}/moto-api/reset", timeout=10.0).raise_for_status()


def unique_name(prefix: str) -> str:
    """Return a bucket- and table-safe name nobody else in the session uses."""
    return f"{prefix}-{uuid.uuid4().hex[:16]}"


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@pytest.fixture(scope="session")
def moto_log_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("moto")


def running_moto(region: str, log_dir: Path) -> Iterator[MotoServer]:
    """Start a moto server on a free port, wait until it answers, stop it afterwards."""
    port = _free_port()
    url = f"http://127.0.0.1:{port}"
    log = open(log_dir / f"moto-{region}.log", "wb")
    env = {**os.environ, "AWS_DEFAULT_REGION": region}
    process = subprocess.Popen(
        [sys.executable, "-m", "tests.integration.moto_serial", "127.0.0.1", str(port)],
        stdout=log,
        stderr=subprocess.STDOUT,
        env=env,
        cwd=Path(__file__).resolve().parents[2],
    )
    try:
        deadline = time.monotonic() + START_DEADLINE
        while True:
            try:
                if httpx.get(f"{url}/moto-api/", timeout=1.0).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError(f"moto_server on {url} did not answer within {START_DEADLINE}s")
            try:
                code = process.wait(timeout=0.05)
            except subprocess.TimeoutExpired:
                continue
            raise RuntimeError(
                f"moto_server exited with {code}: {(log_dir / f'moto-{region}.log').read_text()}"
            )
        yield MotoServer(url, region, process)
    finally:
        stop_process(process)
        log.close()


@pytest.fixture(scope="session")
def moto_region(moto_log_dir: Path) -> Iterator[MotoServer]:
    """Return the moto server of the first region, ``us-east-1``."""
    yield from running_moto("us-east-1", moto_log_dir)


@pytest.fixture(scope="session")
def moto_second_region(moto_log_dir: Path) -> Iterator[MotoServer]:
    """Return the moto server of a second, independent region, ``eu-west-1``."""
    yield from running_moto("eu-west-1", moto_log_dir)


def s3_settings(server: MotoServer, **overrides: Any) -> S3Settings:
    """Return settings reaching ``server``'s S3 with path-style addressing."""
    base: dict[str, Any] = {
        "endpoint_url": server.url,
        "region": server.region,
        "access_key_id": ACCESS_KEY,
        "secret_access_key": SECRET_KEY,
        "addressing_style": "path",
        "max_attempts": 3,
    }
    return S3Settings(**{**base, **overrides})


def dynamo_settings(server: MotoServer, table: str, **overrides: Any) -> DynamoSettings:
    """Return settings reaching ``table`` on ``server``'s DynamoDB."""
    base: dict[str, Any] = {
        "table": table,
        "endpoint_url": server.url,
        "region": server.region,
        "access_key_id": ACCESS_KEY,
        "secret_access_key": SECRET_KEY,
        "max_attempts": 3,
    }
    return DynamoSettings(**{**base, **overrides})


def aws_backend_env(
    server: MotoServer, table: str, *, s3_endpoint_url: str | None = None, s3_max_attempts: int = 3
) -> dict[str, str]:
    """Return ``LAKEMIRROR_*`` variables putting a server's KV in ``table`` and objects in S3.

    ``s3_endpoint_url`` sends S3 requests elsewhere than ``server`` (through a proxy, say).
    """
    return {
        "LAKEMIRROR_KV__TYPE": "dynamodb",
        "LAKEMIRROR_AUTH__ENCRYPT_SECRET_KEY": "test secret encryption key",
        "LAKEMIRROR_KV__DYNAMODB__TABLE": table,
        "LAKEMIRROR_KV__DYNAMODB__ENDPOINT_URL": server.url,
        "LAKEMIRROR_KV__DYNAMODB__REGION": server.region,
        "LAKEMIRROR_KV__DYNAMODB__ACCESS_KEY_ID": ACCESS_KEY,
        "LAKEMIRROR_KV__DYNAMODB__SECRET_ACCESS_KEY": SECRET_KEY,
        "LAKEMIRROR_KV__DYNAMODB__CREATE_TABLE": "true",
        "LAKEMIRROR_BLOCKSTORE__S3__ENDPOINT_URL": s3_endpoint_url or server.url,
        "LAKEMIRROR_BLOCKSTORE__S3__REGION": server.region,
        "LAKEMIRROR_BLOCKSTORE__S3__ACCESS_KEY_ID": ACCESS_KEY,
        "LAKEMIRROR_BLOCKSTORE__S3__SECRET_ACCESS_KEY": SECRET_KEY,
        "LAKEMIRROR_BLOCKSTORE__S3__ADDRESSING_STYLE": "path",
        "LAKEMIRROR_BLOCKSTORE__S3__MAX_ATTEMPTS": str(s3_max_attempts),
    }


def create_bucket(server: MotoServer, client: Any, name: str | None = None) -> str:
    """Create a fresh bucket on ``server`` and return its name."""
    bucket = name or unique_name("bucket")
    if server.region == "us-east-1":
        client.create_bucket(Bucket=bucket)
    else:
        client.create_bucket(
            Bucket=bucket, CreateBucketConfiguration={"LocationConstraint": server.region}
        )
    return bucket


@pytest.fixture(scope="session")
def s3_client(moto_region: MotoServer) -> Any:
    """Return a boto3 S3 client of the first region."""
    return make_s3_client(s3_settings(moto_region))


@pytest.fixture(scope="session")
def dynamodb_client(moto_region: MotoServer) -> Any:
    """Return a boto3 DynamoDB client of the first region."""
    return make_dynamodb_client(dynamo_settings(moto_region, "unused"))
