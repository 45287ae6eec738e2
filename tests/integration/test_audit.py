"""The audit trail of a live server: each kind of change, who and from where, paging, filters.

Every change goes through the official ``lakefs`` SDK where it has the call, HTTP otherwise;
the events are read back through ``GET /api/v1/audit`` (and the KV file itself, for the secret
scan). The session's server is shared with other modules, so each test finds its own events by
the unique names it created.
"""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from datetime import datetime
from typing import Any

import httpx
import lakefs
import lakefs_sdk
import pytest
from lakefs_sdk.exceptions import ApiException

from mirror.audit import kinds
from tests.integration.harness import MakeUser, Server, unique

SDK_AGENT = "lakefs-python-sdk/"


def _all_events(http: httpx.Client, **filters: str) -> list[dict[str, Any]]:
    """Return every event the filters match, newest first, following the pages."""
    events: list[dict[str, Any]] = []
    after = ""
    while True:
        answer = http.get("/audit", params={**filters, "after": after, "amount": 1000})
        assert answer.status_code == 200, answer.text
        body = answer.json()
        events += body["results"]
        if not body["pagination"]["has_more"]:
            return events
        after = body["pagination"]["next_offset"]


def _naming(events: list[dict[str, Any]], **target: str) -> list[dict[str, Any]]:
    """Return the events whose target holds every given name."""
    return [e for e in events if all(e["target"].get(k) == v for k, v in target.items())]


def _one(events: list[dict[str, Any]], kind: str, **target: str) -> dict[str, Any]:
    found = [e for e in _naming(events, **target) if e["kind"] == kind]
    assert len(found) == 1, (kind, target, found)
    return found[0]


@pytest.fixture(scope="module")
def admin_id(http: httpx.Client) -> str:
    return str(http.get("/user").json()["user"]["id"])


def _check_actor(event: dict[str, Any], server: Server, admin_id: str, *, sdk: bool) -> None:
    actor = event["actor"]
    assert actor["user_id"] == admin_id
    assert actor["access_key_id"] == server.access_key_id
    assert actor["address"] == "127.0.0.1" and actor["via"] == "api"
    if sdk:
        assert actor["user_agent"].startswith(SDK_AGENT)
    assert event["request_id"]


def test_auth_changes_are_recorded_with_who_and_what(
    server: Server, client: lakefs.Client, http: httpx.Client, admin_id: str
) -> None:
    auth = client.sdk_client.auth_api
    user, group, policy = unique("aud-user"), unique("aud-group"), unique("aud-policy")
    statement = lakefs_sdk.Statement(effect="allow", action=["fs:ReadRepository"], resource="*")
    wider = lakefs_sdk.Statement(effect="allow", action=["fs:Read*"], resource="*")
    auth.create_user(lakefs_sdk.UserCreation(id=user))
    auth.create_group(lakefs_sdk.GroupCreation(id=group))
    assert http.post(f"/auth/groups/{group}/acl", json={"permission": "Write"}).status_code == 201
    auth.add_group_membership(group, user)
    auth.create_policy(lakefs_sdk.Policy(id=policy, statement=[statement]))
    auth.update_policy(policy, lakefs_sdk.Policy(id=policy, statement=[wider]))
    auth.attach_policy_to_user(user, policy)
    auth.attach_policy_to_group(group, policy)
    key = auth.create_credentials(user).access_key_id
    auth.delete_credentials(user, key)
    auth.detach_policy_from_user(user, policy)
    auth.detach_policy_from_group(group, policy)
    auth.delete_group_membership(group, user)
    nobody = unique("no-such-user")
    with pytest.raises(ApiException) as missing:
        auth.delete_user(nobody)
    assert missing.value.status == 404
    auth.delete_group(group)
    auth.delete_policy(policy)
    auth.delete_user(user)

    events = _all_events(http, kind="auth")
    created = _one(events, kinds.AUTH_USER_CREATE, user=user)
    assert (created["result"], created["status"]) == ("success", 201)
    assert created["after"] == {"email": None} and created["message"] is None
    _check_actor(created, server, admin_id, sdk=True)
    _one(events, kinds.AUTH_GROUP_CREATE, group=group)
    _one(events, kinds.AUTH_GROUP_MEMBER_ADD, group=group, user=user)
    _one(events, kinds.AUTH_GROUP_MEMBER_REMOVE, group=group, user=user)
    assert _one(events, kinds.AUTH_POLICY_CREATE, policy=policy)["after"] == [
        {"effect": "allow", "action": ["fs:ReadRepository"], "resource": "*"}
    ]
    updated = _one(events, kinds.AUTH_POLICY_UPDATE, policy=policy)
    assert updated["before"][0]["action"] == ["fs:ReadRepository"]
    assert updated["after"][0]["action"] == ["fs:Read*"]
    assert _one(events, kinds.AUTH_POLICY_DELETE, policy=policy)["before"][0]["action"] == [
        "fs:Read*"
    ]
    for kind in (kinds.AUTH_POLICY_ATTACH, kinds.AUTH_POLICY_DETACH):
        _one(events, kind, policy=policy, user=user)
        _one(events, kind, policy=policy, group=group)
    keyed = _one(events, kinds.AUTH_CREDENTIALS_CREATE, user=user)
    assert keyed["target"]["access_key_id"] == key and keyed["status"] == 201
    _one(events, kinds.AUTH_CREDENTIALS_DELETE, user=user, access_key_id=key)
    acl = _one(events, kinds.AUTH_GROUP_ACL_SET, group=group)
    assert acl["after"] == {"permission": "Write"} and acl["before"] == {"permission": ""}
    _check_actor(acl, server, admin_id, sdk=False)
    _one(events, kinds.AUTH_GROUP_DELETE, group=group)
    _one(events, kinds.AUTH_USER_DELETE, user=user)
    refused = _one(events, kinds.AUTH_USER_DELETE, user=nobody)
    assert (refused["result"], refused["status"]) == ("failure", 404)
    assert "not found" in refused["message"]
    # newest first: the user's deletion came after its creation
    order = [e["id"] for e in _naming(events, user=user)]
    assert order.index(_one(events, kinds.AUTH_USER_DELETE, user=user)["id"]) < order.index(
        created["id"]
    )
    # every event is a structured log line too
    lines = [json.loads(line) for line in server.log().splitlines() if line.startswith("{")]
    logged = [ln for ln in lines if ln.get("event") == "audit" and ln.get("id") == created["id"]]
    assert len(logged) == 1 and logged[0]["kind"] == kinds.AUTH_USER_CREATE


def test_repository_protection_gc_and_hard_reset_are_recorded(
    server: Server, client: lakefs.Client, http: httpx.Client, admin_id: str
) -> None:
    name = unique("aud-repo")
    repo = lakefs.Repository(name, client=client).create(server.namespace(name))
    main = repo.branch("main")
    first = main.get_commit().id
    main.object("a.txt").upload(b"a")
    second = main.commit("one object").id
    sdk = client.sdk_client
    rule = lakefs_sdk.BranchProtectionRule(pattern="release-*")
    sdk.repositories_api.set_branch_protection_rules(name, [rule])
    with pytest.raises(ApiException) as stale:
        sdk.repositories_api.set_branch_protection_rules(name, [], if_match="stale-etag")
    assert stale.value.status == 412
    rules = lakefs_sdk.GarbageCollectionRules(
        default_retention_days=7,
        branches=[lakefs_sdk.GarbageCollectionRule(branch_id="main", retention_days=30)],
    )
    sdk.repositories_api.set_gc_rules(name, rules)
    sdk.repositories_api.delete_gc_rules(name)
    sdk.experimental_api.hard_reset_branch(name, "main", first)
    repo.delete()

    events = _all_events(http, repository=name)
    assert [e["kind"] for e in events] == [
        kinds.REPOSITORY_DELETE,
        kinds.BRANCH_HARD_RESET,
        kinds.GC_RULES_DELETE,
        kinds.GC_RULES_SET,
        kinds.BRANCH_PROTECTION_SET,
        kinds.BRANCH_PROTECTION_SET,
        kinds.REPOSITORY_CREATE,
    ]
    deleted, reset, gc_deleted, gc_set, refused, protected, created = events
    for event in events:
        _check_actor(event, server, admin_id, sdk=True)
    namespace = server.namespace(name)
    assert created["after"] == {
        "storage_namespace": namespace,
        "default_branch": "main",
        "read_only": False,
        "mirror_of": None,
    }
    assert deleted["before"] == created["after"] and deleted["status"] == 204
    assert (protected["before"], protected["after"]) == ([], ["release-*"])
    assert (refused["result"], refused["status"]) == ("failure", 412)
    assert refused["message"].startswith("Precondition failed")
    assert refused["before"] == ["release-*"] and refused["after"] == []
    lakefs_rules = {
        "default_retention_days": 7,
        "branches": [{"branch_id": "main", "retention_days": 30}],
    }
    assert (gc_set["before"], gc_set["after"]) == (None, lakefs_rules)
    assert gc_deleted["before"] == lakefs_rules
    assert reset["target"] == {"repository": name, "branch": "main"}
    assert reset["before"] == {"commit_id": second}
    assert reset["after"] == {"ref": first, "commit_id": first}


def test_mirror_roles_and_gc_sweeps_are_recorded(
    server: Server, client: lakefs.Client, http: httpx.Client, admin_id: str
) -> None:
    name, mirror = unique("aud-roles"), unique("aud-mirror")
    lakefs.Repository(name, client=client).create(server.namespace(name))
    demoted = http.post(f"/repositories/{name}/mirror/demote", json={"mirror_of": "b/src"})
    assert demoted.status_code == 200, demoted.text
    promoted = http.post(f"/repositories/{name}/mirror/promote", json={"promotion": {"by": "t"}})
    assert promoted.status_code == 200, promoted.text
    again = http.post(f"/repositories/{name}/mirror/promote", json={"promotion": {}})
    assert again.status_code == 409
    body = {"name": mirror, "storage_namespace": server.namespace(mirror), "mirror_of": "b/x"}
    assert http.post("/mirror/repositories", json=body).status_code == 201
    sweep = {"run_id": "run-1", "marked": 3, "marked_bytes": 30, "deleted": 3}
    assert http.post(f"/repositories/{name}/gc/sweeps", json=sweep).status_code == 204
    failed = {**sweep, "run_id": "run-2", "deleted": 1, "error": "S3 said no", "status": 503}
    assert http.post(f"/repositories/{name}/gc/sweeps", json=failed).status_code == 204
    bad = http.post(f"/repositories/{name}/gc/sweeps", json={**sweep, "marked": -1})
    assert bad.status_code == 400
    unknown = http.post(f"/repositories/{unique('none')}/gc/sweeps", json=sweep)
    assert unknown.status_code == 404

    events = _all_events(http, repository=name)
    assert [e["kind"] for e in events] == [
        kinds.GC_SWEEP,
        kinds.GC_SWEEP,
        kinds.REPOSITORY_PROMOTE,
        kinds.REPOSITORY_PROMOTE,
        kinds.REPOSITORY_DEMOTE,
        kinds.REPOSITORY_CREATE,
    ]
    swept_badly, swept, refused, promote, demote, _ = events
    assert (demote["before"], demote["after"]) == (
        {"read_only": False, "mirror_of": None},
        {"read_only": True, "mirror_of": "b/src"},
    )
    assert promote["after"] == {"read_only": False, "mirror_of": None}
    assert promote["details"] == {"promotion_fields": ["by"]}
    assert (refused["result"], refused["status"]) == ("failure", 409)
    assert "is not a mirror" in refused["message"]
    assert swept["result"] == "success" and swept["status"] == 204
    assert swept["details"] == {
        "run_id": "run-1",
        "mark_id": None,
        "marked": 3,
        "marked_bytes": 30,
        "deleted": 3,
        "reported_by": "lakemirror gc",
    }
    assert (swept_badly["result"], swept_badly["status"]) == ("failure", 503)
    assert swept_badly["message"] == "S3 said no"
    for event in events:
        _check_actor(event, server, admin_id, sdk=False)
    [created] = _all_events(http, repository=mirror, kind=kinds.REPOSITORY_CREATE)
    assert created["after"]["read_only"] is True and created["after"]["mirror_of"] == "b/x"
    assert created["details"] == {"bare": True}
    http.delete(f"/repositories/{name}", params={"force": True})
    http.delete(f"/repositories/{mirror}", params={"force": True})


def test_reading_the_trail_needs_auth_read_audit(
    http: httpx.Client, make_user: MakeUser, client: lakefs.Client
) -> None:
    writer = make_user("Writers")
    refused = writer.http.get("/audit")
    assert refused.status_code == 403
    assert "auth:ReadAudit" in refused.json()["message"]
    # a refused change by a caller who may not make it is no event
    attempt = writer.http.post("/auth/users", json={"id": unique("aud-denied")})
    assert attempt.status_code == 403
    assert _all_events(http, user=writer.user_id) == []
    policy = unique("aud-read")
    statement = lakefs_sdk.Statement(effect="allow", action=["auth:ReadAudit"], resource="*")
    auth = client.sdk_client.auth_api
    auth.create_policy(lakefs_sdk.Policy(id=policy, statement=[statement]))
    try:
        auditor = make_user(policies=(policy,))
        answer = auditor.http.get("/audit", params={"amount": 1})
        assert answer.status_code == 200
        assert set(answer.json()) == {"pagination", "results"}
    finally:
        auth.delete_policy(policy)


def test_paging_and_filters(http: httpx.Client, client: lakefs.Client) -> None:
    auth = client.sdk_client.auth_api
    users = [unique("aud-page") for _ in range(5)]
    for user in users:
        auth.create_user(lakefs_sdk.UserCreation(id=user))
    try:
        ours = [
            e
            for e in _all_events(http, kind=kinds.AUTH_USER_CREATE)
            if e["target"].get("user") in users
        ]
        assert [e["target"]["user"] for e in ours] == users[::-1]
        newest, oldest = ours[0], ours[-1]
        # pages of two, newest first, between the first and the last of ours
        window = {"since": oldest["time"], "until": newest["time"], "kind": "auth.user.create"}
        seen: list[str] = []
        after = ""
        for _ in range(10):
            page = http.get("/audit", params={**window, "amount": 2, "after": after}).json()
            assert page["pagination"]["results"] == len(page["results"]) <= 2
            assert page["pagination"]["max_per_page"] == 1000
            seen += [e["target"]["user"] for e in page["results"]]
            if not page["pagination"]["has_more"]:
                break
            after = page["pagination"]["next_offset"]
        assert [u for u in seen if u in users] == users[::-1]
        times = [e["time"] for e in ours]
        assert times == sorted(times, reverse=True)
        # Unix seconds work as well as RFC 3339; the bounds are inclusive
        since = datetime.fromisoformat(oldest["time"]).timestamp()
        answer = http.get("/audit", params={"since": f"{since:.6f}", "kind": "auth.user"})
        listed = [e["target"].get("user") for e in answer.json()["results"]]
        assert set(users) <= set(listed)
        only_newest = http.get("/audit", params={"since": newest["time"], "kind": "auth.user"})
        listed = [e["target"].get("user") for e in only_newest.json()["results"]]
        assert users[-1] in listed and not set(users[:-1]) & set(listed)
        failures = _all_events(http, result="failure")
        assert all(e["result"] == "failure" for e in failures)
    finally:
        for user in users:
            auth.delete_user(user)
    for params, text in (
        ({"since": "yesterday"}, "invalid since 'yesterday'"),
        ({"until": "2025-13-01"}, "invalid until"),
        ({"result": "ok"}, "use success or failure"),
        ({"since": "2025-01-02T00:00:00Z", "until": "2025-01-01T00:00:00Z"}, "is after until"),
    ):
        answer = http.get("/audit", params=params)
        assert answer.status_code == 400 and text in answer.json()["message"], answer.text


def _stored_events(server: Server) -> list[bytes]:
    """Return every audit record in the server's KV file, as stored."""
    path = server.data_dir / "kv.sqlite"
    with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as db:
        rows = db.execute(
            "SELECT value FROM kv WHERE key >= ? AND key < ?", (b"audit/events/", b"audit/events0")
        ).fetchall()
    return [bytes(r[0]) for r in rows]


def test_no_secret_is_in_any_event_or_log_line(
    server: Server, client: lakefs.Client, http: httpx.Client, make_user: MakeUser
) -> None:
    """Create keys, sign in with one, change things with them: no secret shows anywhere."""
    person = make_user("Admins")
    key = client.sdk_client.auth_api.create_credentials(person.user_id)
    login = httpx.post(
        f"{server.url}/api/v1/auth/login",
        json={"access_key_id": key.access_key_id, "secret_access_key": key.secret_access_key},
    )
    assert login.status_code == 200, login.text
    token = str(login.json()["token"])
    # changes signed by the new secret (Basic) and by the login token (Bearer, no access key)
    with httpx.Client(
        base_url=f"{server.url}/api/v1", auth=(key.access_key_id, key.secret_access_key)
    ) as by_key:
        assert by_key.post("/auth/users", json={"id": unique("aud-s1")}).status_code == 201
    bearer = {"Authorization": f"Bearer {token}"}
    by_token = httpx.post(
        f"{server.url}/api/v1/auth/users", json={"id": unique("aud-s2")}, headers=bearer
    )
    assert by_token.status_code == 201

    [token_event] = [
        e
        for e in _all_events(http, kind=kinds.AUTH_USER_CREATE, user=person.user_id)
        if e["actor"]["access_key_id"] is None
    ]
    assert token_event["actor"]["user_id"] == person.user_id
    secrets = {
        key.secret_access_key,
        person.secret_access_key,
        server.secret_access_key,
        token,
    }
    stored = b"\n".join(_stored_events(server)).decode()
    assert f'"access_key_id":"{key.access_key_id}"' in stored
    listed = json.dumps(_all_events(http))
    log = server.log()
    for secret in secrets:
        assert secret not in stored
        assert secret not in listed
        assert secret not in log


def _cli(server: Server, key: tuple[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    """Run ``lakemirror audit`` with lakectl's variables pointing at ``server``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("LAKECTL_")}
    env.update(
        {
            "LAKECTL_SERVER_ENDPOINT_URL": server.url,
            "LAKECTL_CREDENTIALS_ACCESS_KEY_ID": key[0],
            "LAKECTL_CREDENTIALS_SECRET_ACCESS_KEY": key[1],
        }
    )
    command = [sys.executable, "-m", "mirror.cli.main", "audit", *args]
    return subprocess.run(command, env=env, capture_output=True, text=True, timeout=60)


def test_the_audit_command_lists_with_the_same_filters(
    server: Server, client: lakefs.Client, make_user: MakeUser
) -> None:
    policy = unique("aud-cli")
    auth = client.sdk_client.auth_api
    statement = lakefs_sdk.Statement(effect="allow", action=["fs:ReadRepository"], resource="*")
    auth.create_policy(lakefs_sdk.Policy(id=policy, statement=[statement]))
    auth.delete_policy(policy)
    admin = (server.access_key_id, server.secret_access_key)
    as_json = _cli(server, admin, "--kind", "auth.policy", "--amount", "50", "-o", "json")
    assert as_json.returncode == 0, as_json.stderr
    events = [e for e in json.loads(as_json.stdout) if e["target"].get("policy") == policy]
    assert [e["kind"] for e in events] == [kinds.AUTH_POLICY_DELETE, kinds.AUTH_POLICY_CREATE]
    since = events[-1]["time"]
    table = _cli(server, admin, "--kind", "auth.policy", "--since", since, "--result", "success")
    assert table.returncode == 0, table.stderr
    lines = table.stdout.splitlines()
    assert lines[0].split() == ["TIME", "KIND", "USER", "FROM", "TARGET", "RESULT"]
    mine = [line for line in lines if f"policy={policy}" in line]
    assert len(mine) == 2 and all(f"({server.access_key_id})" in line for line in mine)
    assert all("127.0.0.1" in line and line.endswith("success") for line in mine)
    bad = _cli(server, admin, "--since", "yesterday")
    assert bad.returncode != 0 and "invalid since 'yesterday'" in bad.stderr
    writer = make_user("Writers")
    refused = _cli(server, (writer.access_key_id, writer.secret_access_key))
    assert refused.returncode == 3 and "auth:ReadAudit" in refused.stderr
