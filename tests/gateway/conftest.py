"""Fixtures of the gateway tests: one live server for the session, its clients and users.

``live`` is a `lakemirror server` process on the embedded default (SQLite KV, local objects)
whose administrator key signs boto3's requests; ``s3_client`` makes a boto3 client of the gateway
for any key (path style, or with ``Config`` options); ``reader`` is a second, non-admin user
holding only the built-in ``FSReadAll`` policy, for AccessDenied checks. A module may define its
own ``live`` (a server of its own) instead.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import boto3
import pytest
from botocore.config import Config

from tests.gateway.live import REGION, Live, start
from tests.integration.harness import unique

S3ClientFactory = Callable[..., Any]
"""``s3_client(key=(id, secret), **config)`` returns a boto3 S3 client of the gateway."""


@dataclass(frozen=True)
class User:
    """A user made through the REST API, with its access key."""

    user_id: str
    access_key_id: str
    secret_access_key: str

    @property
    def key(self) -> tuple[str, str]:
        return self.access_key_id, self.secret_access_key


@pytest.fixture(scope="session")
def live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Live]:
    yield from start(tmp_path_factory.mktemp("gateway"))


@pytest.fixture(scope="session")
def s3_client(live: Live) -> S3ClientFactory:
    def make(key: tuple[str, str] | None = None, **config: Any) -> Any:
        key_id, secret = key or live.key
        options: dict[str, Any] = {
            "s3": {"addressing_style": "path"},
            "retries": {"total_max_attempts": 1},
        }
        options.update(config)
        return boto3.client(
            "s3",
            endpoint_url=live.url,
            region_name=REGION,
            aws_access_key_id=key_id,
            aws_secret_access_key=secret,
            config=Config(**options),
        )

    return make


@pytest.fixture(scope="session")
def s3(s3_client: S3ClientFactory) -> Any:
    """A boto3 client signed with the administrator's key (no retries: errors show at once)."""
    return s3_client()


def make_user(live: Live, *policies: str) -> User:
    """Create a user holding ``policies`` and a key of it (REST API, as the administrator)."""
    user_id = unique("user")
    made = live.http.post("/auth/users", json={"id": user_id})
    assert made.status_code == 201, made.text
    for policy in policies:
        attached = live.http.put(f"/auth/users/{user_id}/policies/{policy}")
        assert attached.status_code == 201, attached.text
    creds = live.http.post(f"/auth/users/{user_id}/credentials")
    assert creds.status_code == 201, creds.text
    body = creds.json()
    return User(user_id, body["access_key_id"], body["secret_access_key"])


@pytest.fixture(scope="session")
def reader(live: Live) -> User:
    """A non-admin user that may only list and read (``FSReadAll``)."""
    return make_user(live, "FSReadAll")


@pytest.fixture
def repo(live: Live) -> str:
    """A fresh repository (branch ``main``) for one test."""
    return live.create_repository("gw")
