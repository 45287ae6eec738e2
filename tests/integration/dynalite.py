"""dynalite processes: DynamoDB on LevelDB, faithful to conditional writes under concurrency.

moto's DynamoDB loses conditional updates when several clients race, so every test that runs
several server processes or replicant replicas on DynamoDB uses dynalite (``make tools`` installs
it under ``.tools/bin``). A missing dynalite fails the test with the command to run; it never
skips it.
"""

from __future__ import annotations

import shutil
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import boto3
import pytest
from botocore.config import Config

from tests.integration.harness import free_port, stop_process

ROOT = Path(__file__).resolve().parents[2]
ACCESS_KEY = "AKIADYNALITETESTING0"
SECRET_KEY = "dynalite-testing-secret"
START_DEADLINE = 30.0


@dataclass(frozen=True)
class Dynalite:
    """A running dynalite server."""

    url: str
    region: str
    process: subprocess.Popen[bytes]

    def client(self) -> object:
        """Return a boto3 DynamoDB client of this server."""
        return boto3.client(
            "dynamodb",
            endpoint_url=self.url,
            region_name=self.region,
            aws_access_key_id=ACCESS_KEY,
            aws_secret_access_key=SECRET_KEY,
            config=Config(retries={"max_attempts": 3, "mode": "standard"}),
        )

    def env(self, table: str, *, create_table: bool = True) -> dict[str, str]:
        """Return the ``LAKEMIRROR_*`` variables of a KV in ``table`` on this server."""
        return {
            "LAKEMIRROR_KV__TYPE": "dynamodb",
            "LAKEMIRROR_AUTH__ENCRYPT_SECRET_KEY": "test secret encryption key",
            "LAKEMIRROR_KV__DYNAMODB__TABLE": table,
            "LAKEMIRROR_KV__DYNAMODB__ENDPOINT_URL": self.url,
            "LAKEMIRROR_KV__DYNAMODB__REGION": self.region,
            "LAKEMIRROR_KV__DYNAMODB__ACCESS_KEY_ID": ACCESS_KEY,
            "LAKEMIRROR_KV__DYNAMODB__SECRET_ACCESS_KEY": SECRET_KEY,
            "LAKEMIRROR_KV__DYNAMODB__CREATE_TABLE": "true" if create_table else "false",
        }


def dynalite_command() -> str:
    """Return the dynalite program; fail the test (never skip it) when it is missing."""
    found = shutil.which("dynalite") or shutil.which("dynalite", path=str(ROOT / ".tools" / "bin"))
    if found is None:
        pytest.fail("dynalite is not installed: run `make tools` (tests/tools/install.sh)")
    return found


@contextmanager
def running_dynalite(
    log_dir: Path,
    region: str = "us-east-1",
    *,
    path: Path | None = None,
    port: int | None = None,
) -> Iterator[Dynalite]:
    """Start dynalite on 127.0.0.1, wait until it answers, stop it when the block ends.

    Args:
        log_dir: where its log goes (appended to, so a restart keeps the earlier lines).
        region: the region its clients name.
        path: a LevelDB directory to keep the tables in, so that a dynalite started again on it
            (after a kill, say) has them; ``None``: in memory.
        port: the port to listen on (``None``: a free one); a restart passes the old one, so
            that its clients reach it again.
    """
    port = port or free_port()
    url = f"http://127.0.0.1:{port}"
    log_path = log_dir / f"dynalite-{port}.log"
    storage = () if path is None else ("--path", str(path))
    with open(log_path, "ab") as log:
        process = subprocess.Popen(
            [
                *(dynalite_command(), "--host", "127.0.0.1", "--port", str(port)),
                *("--createTableMs", "50", *storage),
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
        )
    server = Dynalite(url, region, process)
    try:
        client = server.client()
        deadline = time.monotonic() + START_DEADLINE
        while True:
            try:
                client.list_tables()  # type: ignore[attr-defined]
                break
            except Exception as exc:
                if time.monotonic() > deadline:
                    raise RuntimeError(f"dynalite on {url} did not answer: {exc}") from exc
            try:
                code = process.wait(timeout=0.05)
            except subprocess.TimeoutExpired:
                continue
            raise RuntimeError(f"dynalite exited with {code}: {log_path.read_text()}")
        yield server
    finally:
        stop_process(process)


@pytest.fixture(scope="session")
def dynalite(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Dynalite]:
    """Return a dynalite server shared by the session (give each test a table of its own)."""
    with running_dynalite(tmp_path_factory.mktemp("dynalite")) as server:
        yield server


@pytest.fixture(scope="session")
def dynalite_second_region(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Dynalite]:
    """Return a second, independent dynalite server (``eu-west-1``), shared by the session."""
    with running_dynalite(tmp_path_factory.mktemp("dynalite-b"), region="eu-west-1") as server:
        yield server
