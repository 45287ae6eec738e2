"""A `lakemirror server` process per backend for the whole session, and clients signed in to it.

The ``server`` fixture is parametrized: ``embedded`` (SQLite KV, local objects) and ``aws``
(DynamoDB table and S3 bucket on a moto server, chosen through ``LAKEMIRROR_*`` variables).
Tests create repositories under ``server.namespace(name)`` so each backend gets its own kind.
Every server test runs on ``embedded``; on ``aws`` (a moto server answering one request at a
time) only the representative ones marked ``both_backends`` run, the rest are deselected.
"""

from __future__ import annotations

import secrets
from collections.abc import Iterator
from typing import Any

import httpx
import lakefs
import lakefs_sdk
import pytest

from tests.integration.harness import MakeUser, Principal, Server, running_server, unique
from tests.integration.moto_fixtures import (  # noqa: F401  (fixtures for the moto-backed tests)
    MotoServer,
    aws_backend_env,
    create_bucket,
    dynamodb_client,
    moto_log_dir,
    moto_region,
    moto_second_region,
    s3_client,
    unique_name,
)

BACKENDS = ["embedded", pytest.param("aws", marks=pytest.mark.s3)]


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    kept: list[pytest.Item] = []
    dropped: list[pytest.Item] = []
    for item in items:
        callspec = getattr(item, "callspec", None)
        on_aws = callspec is not None and callspec.params.get("server") == "aws"
        if on_aws and item.get_closest_marker("both_backends") is None:
            dropped.append(item)
        else:
            kept.append(item)
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        items[:] = kept


@pytest.fixture(scope="session", params=BACKENDS)
def server(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Server]:
    backend: str = request.param
    root = tmp_path_factory.mktemp(f"server-{backend}")
    env: dict[str, str] = {}
    namespace_root = "local://"
    if backend == "aws":
        moto: MotoServer = request.getfixturevalue("moto_region")
        s3: Any = request.getfixturevalue("s3_client")
        bucket = create_bucket(moto, s3)
        env = aws_backend_env(moto, unique_name("server"))
        namespace_root = f"s3://{bucket}/"
    with running_server(
        root / "data",
        root / "server.log",
        access_key_id="AKIAJ" + secrets.token_hex(8).upper()[:15],
        secret_access_key=secrets.token_urlsafe(30),
        env=env,
        namespace_root=namespace_root,
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
def repo(server: Server, client: lakefs.Client) -> Iterator[lakefs.Repository]:
    name = unique("repo")
    repository = lakefs.Repository(name, client=client).create(server.namespace(name))
    yield repository
    repository.delete()


@pytest.fixture
def make_user(server: Server, client: lakefs.Client) -> Iterator[MakeUser]:
    """Make users (in groups, with policies) for one test; delete them afterwards."""
    made: list[Principal] = []
    auth = client.sdk_client.auth_api

    def make(*groups: str, policies: tuple[str, ...] = ()) -> Principal:
        user_id = unique("user")
        auth.create_user(lakefs_sdk.UserCreation(id=user_id))
        for group in groups:
            auth.add_group_membership(group, user_id)
        for policy in policies:
            auth.attach_policy_to_user(user_id, policy)
        creds = auth.create_credentials(user_id)
        principal = Principal(
            user_id,
            creds.access_key_id,
            creds.secret_access_key,
            lakefs.Client(
                host=server.url, username=creds.access_key_id, password=creds.secret_access_key
            ),
            httpx.Client(
                base_url=f"{server.url}/api/v1",
                auth=(creds.access_key_id, creds.secret_access_key),
                timeout=30.0,
            ),
        )
        made.append(principal)
        return principal

    yield make
    for p in made:
        p.http.close()
        auth.delete_user(p.user_id)
