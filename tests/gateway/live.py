"""A live `lakemirror server` process for the real-client suites, and the clients that reach it.

The S3 gateway shares the API's listener: a client points its endpoint at the server's URL and
signs with a LakeMirror access key. Repositories, commits and tags are made through the REST API
(``/api/v1``) with an admin HTTP client, as a user of both would.
"""

from __future__ import annotations

import secrets
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import boto3
import httpx
from botocore.config import Config

from tests.integration.harness import Server, running_server, unique

REGION = "us-east-1"


@dataclass
class Live:
    """A running server, its administrator's key and an admin client of ``/api/v1``."""

    server: Server
    http: httpx.Client

    @property
    def url(self) -> str:
        return self.server.url

    @property
    def key(self) -> tuple[str, str]:
        return self.server.access_key_id, self.server.secret_access_key

    def s3(self, *, retries: int = 3, **config: Any) -> Any:
        """Return a boto3 S3 client of the gateway (path style, ``retries`` total attempts)."""
        return boto3.client(
            "s3",
            endpoint_url=self.url,
            region_name=REGION,
            aws_access_key_id=self.key[0],
            aws_secret_access_key=self.key[1],
            config=Config(
                s3={"addressing_style": "path"},
                retries={"total_max_attempts": retries, "mode": "standard"},
                **config,
            ),
        )

    def create_repository(self, prefix: str = "repo") -> str:
        """Create a repository (default branch ``main``); return its name."""
        name = unique(prefix)
        made = self.http.post(
            "/repositories",
            json={"name": name, "storage_namespace": self.server.namespace(name)},
        )
        assert made.status_code == 201, made.text
        return name

    def commit(self, repo: str, branch: str = "main", message: str = "commit") -> str:
        """Commit ``branch``; return the commit ID."""
        done = self.http.post(
            f"/repositories/{repo}/branches/{branch}/commits", json={"message": message}
        )
        assert done.status_code == 201, done.text
        return str(done.json()["id"])

    def create_branch(self, repo: str, name: str, source: str = "main") -> None:
        made = self.http.post(
            f"/repositories/{repo}/branches", json={"name": name, "source": source}
        )
        assert made.status_code == 201, made.text

    def create_tag(self, repo: str, tag: str, ref: str) -> None:
        made = self.http.post(f"/repositories/{repo}/tags", json={"id": tag, "ref": ref})
        assert made.status_code == 201, made.text

    def upload(self, repo: str, branch: str, path: str, data: bytes) -> None:
        """Upload through the REST API (no gateway involved)."""
        done = self.http.post(
            f"/repositories/{repo}/branches/{branch}/objects",
            params={"path": path},
            content=data,
        )
        assert done.status_code == 201, done.text

    def read(self, repo: str, ref: str, path: str) -> bytes:
        """Read through the REST API (no gateway involved)."""
        got = self.http.get(f"/repositories/{repo}/refs/{ref}/objects", params={"path": path})
        assert got.status_code == 200, got.text
        return got.content

    def paths(self, repo: str, ref: str, prefix: str = "") -> list[str]:
        """Return every object path at ``ref`` under ``prefix`` (REST API, all pages)."""
        out: list[str] = []
        after = ""
        while True:
            page = self.http.get(
                f"/repositories/{repo}/refs/{ref}/objects/ls",
                params={"prefix": prefix, "after": after, "amount": 1000},
            )
            assert page.status_code == 200, page.text
            body = page.json()
            out += [r["path"] for r in body["results"]]
            if not body["pagination"]["has_more"]:
                return out
            after = body["pagination"]["next_offset"]


def start(tmp: Path) -> Iterator[Live]:
    """Run a server with a fresh administrator key until the generator is closed."""
    with running_server(
        tmp / "data",
        tmp / "server.log",
        access_key_id="AKIAGW" + secrets.token_hex(7).upper(),
        secret_access_key=secrets.token_urlsafe(30),
    ) as server:
        with httpx.Client(
            base_url=f"{server.url}/api/v1",
            auth=(server.access_key_id, server.secret_access_key),
            timeout=60.0,
        ) as http:
            yield Live(server, http)
