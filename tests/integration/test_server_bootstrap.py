"""How a fresh server gets its first administrator: env keys, generated keys, or setup_lakefs."""

from __future__ import annotations

import re
from pathlib import Path

import httpx
import lakefs

from tests.integration.harness import running_server

_PRINTED = re.compile(r"access_key_id:\s+(\S+)\s+secret_access_key:\s+(\S+)")


def test_generated_admin_is_printed_once(tmp_path: Path) -> None:
    data, log = tmp_path / "data", tmp_path / "server.log"
    with running_server(data, log) as server:
        found = _PRINTED.search(server.log())
        assert found is not None, server.log()
        key_id, secret = found.groups()
        client = lakefs.Client(host=server.url, username=key_id, password=secret)
        assert client.sdk_client.auth_api.get_current_user().user.id == "admin"
    first_run = log.read_text()
    with running_server(data, log) as server:
        client = lakefs.Client(host=server.url, username=key_id, password=secret)
        assert list(lakefs.repositories(client=client)) == []
    assert log.read_text().count(secret) == first_run.count(secret) == 1


def test_setup_lakefs_creates_the_first_admin(tmp_path: Path) -> None:
    with running_server(
        tmp_path / "data", tmp_path / "server.log", args=["--wait-for-setup"]
    ) as server:
        api = f"{server.url}/api/v1"
        assert httpx.get(f"{api}/setup_lakefs").json()["state"] == "not_initialized"
        assert httpx.get(f"{api}/repositories", auth=("AKIAJANY", "x")).status_code == 401
        key = {"access_key_id": "AKIAJSETUPKEY0000001", "secret_access_key": "s3cr3t-chosen"}
        created = httpx.post(f"{api}/setup_lakefs", json={"username": "jane", "key": key})
        assert created.status_code == 200
        assert created.json()["access_key_id"] == key["access_key_id"]
        assert isinstance(created.json()["creation_date"], int)
        assert httpx.get(f"{api}/setup_lakefs").json()["state"] == "initialized"
        again = httpx.post(f"{api}/setup_lakefs", json={"username": "mallory"})
        assert again.status_code == 409
        me = httpx.get(f"{api}/user", auth=(key["access_key_id"], key["secret_access_key"]))
        assert me.json()["user"]["id"] == "jane"
        groups = httpx.get(
            f"{api}/auth/users/jane/groups",
            auth=(key["access_key_id"], key["secret_access_key"]),
        ).json()["results"]
        assert [g["id"] for g in groups] == ["Admins"]
        # the setup is in the audit trail, anonymous, with the key's ID and never its secret
        trail = httpx.get(
            f"{api}/audit",
            params={"kind": "auth.setup"},
            auth=(key["access_key_id"], key["secret_access_key"]),
        )
        [event] = trail.json()["results"]
        assert event["actor"]["user_id"] is None and event["actor"]["address"] == "127.0.0.1"
        assert event["target"] == {"user": "jane", "access_key_id": key["access_key_id"]}
        assert "s3cr3t-chosen" not in trail.text
        assert "s3cr3t-chosen" not in server.log()
