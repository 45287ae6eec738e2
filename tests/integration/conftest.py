"""A `lakemirror server` process for the whole session, and clients signed in to it."""

from __future__ import annotations

import secrets
from collections.abc import Iterator

import httpx
import lakefs
import pytest

from tests.integration.harness import Server, running_server, unique
from tests.integration.moto_fixtures import (  # noqa: F401  (fixtures for the moto-backed tests)
    dynamodb_client,
    moto_log_dir,
    moto_region,
    moto_second_region,
    s3_client,
)


@pytest.fixture(scope="session")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    root = tmp_path_factory.mktemp("server")
    with running_server(
        root / "data",
        root / "server.log",
        access_key_id="AKIAJ" + secrets.token_hex(8).upper()[:15],
        secret_access_key=secrets.token_urlsafe(30),
    ) as running:
        yield running


@pytest.fixture(scope="session")
def client(server: Server) -> lakefs.Client:
    return lakefs.Client(
        host=server.url, username=server.access_key_id, password=server.secret_access_key
    )


@pytest.fixture(scope="session")
def http(server: Server) -> Iterator[httpx.Client]:
    """A raw HTTP client signed in as the administrator, for wire-level checks."""
    with httpx.Client(
        base_url=f"{server.url}/api/v1",
        auth=(server.access_key_id, server.secret_access_key),
        timeout=30.0,
    ) as c:
        yield c


@pytest.fixture
def repo(client: lakefs.Client) -> Iterator[lakefs.Repository]:
    name = unique("repo")
    repository = lakefs.Repository(name, client=client).create(f"local://{name}")
    yield repository
    repository.delete()
