"""What the demo asks of the regions' servers: its repositories, keys, heads and listings."""

from __future__ import annotations

import secrets
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import httpx

from mirror.cli.demo.errors import DemoError

__all__ = [
    "BRANCH",
    "HTTP_TIMEOUT",
    "MIRRORS_PATH",
    "MIRROR_REGION",
    "MIRROR_REPO",
    "SOURCE_REPO",
    "Key",
    "check",
    "create_replicator",
    "head",
    "history",
    "listing",
    "new_key",
    "paged",
    "read_object",
]

SOURCE_REPO = "origin"
MIRROR_REPO = "origin-mirror"
BRANCH = "main"
MIRROR_REGION = "b"
MIRRORS_PATH = "/service/replication/v1/repositories/{repo}/mirrors"
HTTP_TIMEOUT = 30.0


@dataclass(frozen=True, slots=True)
class Key:
    """An access key of one region's server."""

    access_key_id: str
    secret_access_key: str

    @property
    def auth(self) -> tuple[str, str]:
        """Return the key as an httpx ``auth`` pair."""
        return self.access_key_id, self.secret_access_key


def new_key(region: str) -> Key:
    """Generate the administrator key of ``region``'s server."""
    return Key(f"AKIADEMO{region.upper()}{secrets.token_hex(6).upper()}", secrets.token_hex(20))


def check(response: httpx.Response, what: str, *expected: int) -> httpx.Response:
    """Return ``response`` if its status is one of ``expected`` (default 200).

    Raises:
        DemoError: another status; the message starts with ``what``.
    """
    if response.status_code not in (expected or (200,)):
        raise DemoError(f"{what}: HTTP {response.status_code}: {response.text[:300]}")
    return response


def create_replicator(api: httpx.Client) -> Key:
    """Create user ``replicator`` with the built-in ``Replicator`` policy; return its new key."""
    check(api.post("/auth/users", json={"id": "replicator"}), "create user replicator", 201)
    check(
        api.put("/auth/users/replicator/policies/Replicator"),
        "attach policy Replicator to replicator",
        201,
    )
    created = check(
        api.post("/auth/users/replicator/credentials"), "create replicator's key", 201
    ).json()
    return Key(str(created["access_key_id"]), str(created["secret_access_key"]))


def head(api: httpx.Client, repo: str) -> str | None:
    """Return the commit ID at the head of ``repo``'s demo branch (None: no such branch)."""
    response = api.get(f"/repositories/{repo}/branches/{BRANCH}")
    if response.status_code == 404:
        return None
    return str(check(response, f"read {repo}/{BRANCH}").json()["commit_id"])


def paged(api: httpx.Client, path: str, what: str) -> Iterator[dict[str, Any]]:
    """Yield the results of a paginated listing, every page of it."""
    after = ""
    while True:
        body = check(api.get(path, params={"after": after, "amount": 1000}), what).json()
        yield from body["results"]
        if not body["pagination"]["has_more"]:
            return
        after = body["pagination"]["next_offset"]


def listing(api: httpx.Client, repo: str, commit: str) -> dict[str, tuple[int, str]]:
    """Return ``path → (size, checksum)`` of every object of ``repo`` at ``commit``."""
    rows = paged(api, f"/repositories/{repo}/refs/{commit}/objects/ls", f"list {repo}@{commit}")
    return {
        str(r["path"]): (int(r["size_bytes"]), str(r["checksum"]))
        for r in rows
        if r.get("path_type", "object") == "object"
    }


def history(api: httpx.Client, repo: str, commit: str) -> list[str]:
    """Return the IDs of ``commit`` and its ancestors, newest first."""
    rows = paged(api, f"/repositories/{repo}/refs/{commit}/commits", f"log {repo}@{commit}")
    return [str(r["id"]) for r in rows]


def read_object(api: httpx.Client, repo: str, commit: str, path: str) -> bytes | str:
    """Return an object's bytes, or why it could not be read."""
    response = api.get(f"/repositories/{repo}/refs/{commit}/objects", params={"path": path})
    if response.status_code != 200:
        return f"HTTP {response.status_code}: {response.text[:200]}"
    return response.content
