"""Authentication and authorization: keys, users, groups, policies, read-only repositories."""

from __future__ import annotations

import httpx
import lakefs
import lakefs_sdk
import pytest
from lakefs.exceptions import ForbiddenException, NotAuthorizedException, PermissionException

from tests.integration.harness import MakeUser, Server, unique


@pytest.fixture
def seeded(repo: lakefs.Repository) -> lakefs.Repository:
    """A repository with a committed object, a second branch with a commit, and a tag."""
    main = repo.branch("main")
    main.object("data/a.csv").upload(b"a\n")
    main.commit("seed")
    repo.tag("v1").create("main")
    dev = repo.branch("dev").create("main")
    dev.object("data/b.csv").upload(b"b\n")
    dev.commit("dev")
    return repo


def test_wrong_or_missing_credentials_get_401(server: Server) -> None:
    wrong = lakefs.Client(host=server.url, username=server.access_key_id, password="not-the-secret")
    with pytest.raises(NotAuthorizedException):
        list(lakefs.repositories(client=wrong))
    with pytest.raises(PermissionException):
        lakefs.Repository("anything", client=wrong).branch("main").object("x").reader().read()
    for auth in ((server.access_key_id, "not-the-secret"), ("AKIAJUNKNOWNKEY00000", "x")):
        response = httpx.get(f"{server.url}/api/v1/repositories", auth=auth)
        assert (response.status_code, response.reason_phrase) == (401, "Unauthorized")
        assert response.json() == {
            "message": "error authenticating request",
            "detail": "invalid credentials",
        }
    garbled = httpx.get(f"{server.url}/api/v1/repositories", headers={"Authorization": "Basic !!!"})
    assert garbled.status_code == 401 and "message" in garbled.json()


def test_current_user(make_user: MakeUser) -> None:
    reader = make_user("Readers")
    body = reader.http.get("/user").json()
    assert body["user"]["id"] == reader.user_id
    assert isinstance(body["user"]["creation_date"], int)


def test_a_user_asks_which_permissions_it_holds(make_user: MakeUser, server: Server) -> None:
    checks = [
        {"action": "fs:ReadRepository", "resource": "arn:lakefs:fs:::repository/any"},
        {"action": "fs:CreateBranch", "resource": "arn:lakefs:fs:::repository/any/branch/*"},
        {"action": "auth:ListUsers", "resource": "*"},
    ]
    body = {"permissions": checks}
    reader, writer = make_user("Readers"), make_user("Writers")
    answers = {
        who: p.http.post("/user/permissions", json=body)
        for who, p in (("r", reader), ("w", writer))
    }
    assert all(a.status_code == 200 for a in answers.values())
    allowed = {who: [r["allowed"] for r in a.json()["results"]] for who, a in answers.items()}
    assert allowed == {"r": [True, False, False], "w": [True, True, False]}
    assert [
        {"action": r["action"], "resource": r["resource"]} for r in answers["r"].json()["results"]
    ] == checks
    # only signed-in users may ask, and about themselves only
    anonymous = httpx.post(f"{server.url}/api/v1/user/permissions", json=body)
    assert anonymous.status_code == 401
    too_many = reader.http.post("/user/permissions", json={"permissions": checks * 400})
    assert too_many.status_code == 400


def _writes(repo: str) -> list[tuple[str, str, dict[str, object]]]:
    branch = f"/repositories/{repo}/branches"
    return [
        (
            "POST",
            "/repositories",
            {"json": {"name": unique("r"), "storage_namespace": "local://r"}},
        ),
        ("DELETE", f"/repositories/{repo}", {}),
        ("POST", branch, {"json": {"name": "new", "source": "main"}}),
        ("DELETE", f"{branch}/dev", {}),
        ("PUT", f"{branch}/main", {"json": {"type": "reset"}}),
        ("POST", f"{branch}/main/commits", {"json": {"message": "m", "allow_empty": True}}),
        ("POST", f"{branch}/main/revert", {"json": {"ref": "main", "parent_number": 0}}),
        ("POST", f"{branch}/main/cherry-pick", {"json": {"ref": "dev"}}),
        ("POST", f"/repositories/{repo}/refs/dev/merge/main", {"json": {}}),
        ("POST", f"/repositories/{repo}/tags", {"json": {"id": "v2", "ref": "main"}}),
        ("DELETE", f"/repositories/{repo}/tags/v1", {}),
        ("POST", f"{branch}/main/objects", {"params": {"path": "x"}, "content": b"x"}),
        ("DELETE", f"{branch}/main/objects", {"params": {"path": "data/a.csv"}}),
        ("POST", f"{branch}/main/objects/delete", {"json": {"paths": ["data/a.csv"]}}),
        (
            "POST",
            f"{branch}/main/objects/copy",
            {"params": {"dest_path": "c"}, "json": {"src_path": "data/a.csv"}},
        ),
    ]


@pytest.mark.both_backends
def test_reader_gets_403_on_every_write(seeded: lakefs.Repository, make_user: MakeUser) -> None:
    reader = make_user("Readers")
    for method, path, kwargs in _writes(seeded.id):
        response = reader.http.request(method, path, **kwargs)  # type: ignore[arg-type]
        assert response.status_code == 403, (method, path, response.text)
        assert response.reason_phrase == "Forbidden"
        assert "insufficient permissions" in response.json()["message"]
    as_reader = lakefs.Repository(seeded.id, client=reader.client)
    with pytest.raises(ForbiddenException):
        as_reader.branch("main").object("y").upload(b"y")
    with pytest.raises(PermissionException):
        as_reader.branch("main").object("data/a.csv").delete()
    with pytest.raises(ForbiddenException):
        as_reader.branch("main").commit("no", allow_empty=True)
    # reads work
    main = as_reader.branch("main")
    assert main.object("data/a.csv").reader().read() == b"a\n"
    assert [o.path for o in main.objects()] == ["data/a.csv"]
    assert len(list(main.log())) == 2
    assert [c.path for c in main.diff(as_reader.branch("dev"))] == ["data/b.csv"]
    assert [b.id for b in as_reader.branches()] == ["dev", "main"]
    # and nothing changed
    assert [c.path for c in seeded.branch("main").uncommitted()] == []


def test_writer_writes_but_cannot_manage_auth(
    seeded: lakefs.Repository, make_user: MakeUser, client: lakefs.Client
) -> None:
    writer = make_user("Writers")
    other = make_user("Readers")
    main = lakefs.Repository(seeded.id, client=writer.client).branch("main")
    main.object("w.txt").upload(b"w")
    assert main.commit("by writer").get_commit().committer == writer.user_id
    denied = [
        ("GET", "/auth/users", {}),
        ("POST", "/auth/users", {"json": {"id": unique("u")}}),
        ("DELETE", f"/auth/users/{other.user_id}", {}),
        ("POST", f"/auth/users/{other.user_id}/credentials", {}),
        ("GET", f"/auth/users/{other.user_id}/credentials", {}),
        ("POST", "/auth/groups", {"json": {"id": unique("g")}}),
        ("PUT", f"/auth/groups/Admins/members/{writer.user_id}", {}),
        ("PUT", f"/auth/users/{writer.user_id}/policies/AuthFullAccess", {}),
        (
            "POST",
            "/auth/policies",
            {
                "json": {
                    "id": "p",
                    "statement": [{"effect": "allow", "action": ["auth:*"], "resource": "*"}],
                }
            },
        ),
        ("DELETE", "/auth/policies/FSReadAll", {}),
        (
            "POST",
            "/repositories",
            {"json": {"name": unique("r"), "storage_namespace": "local://w"}},
        ),
    ]
    for method, path, kwargs in denied:
        response = writer.http.request(method, path, **kwargs)  # type: ignore[arg-type]
        assert response.status_code == 403, (method, path, response.text)
    with pytest.raises(lakefs_sdk.exceptions.ForbiddenException):
        writer.client.sdk_client.auth_api.create_user(lakefs_sdk.UserCreation(id="sneaky"))
    # managing its own keys is allowed (AuthManageOwnCredentials)
    own = writer.http.post(f"/auth/users/{writer.user_id}/credentials")
    assert own.status_code == 201
    assert own.json()["access_key_id"] in [
        c["access_key_id"]
        for c in writer.http.get(f"/auth/users/{writer.user_id}/credentials").json()["results"]
    ]
    assert client.sdk_client.auth_api.get_user(writer.user_id).id == writer.user_id


def test_deny_statements_beat_allows(
    seeded: lakefs.Repository, make_user: MakeUser, http: httpx.Client
) -> None:
    policy = unique("NoSecrets")
    created = http.post(
        "/auth/policies",
        json={
            "id": policy,
            "statement": [
                {
                    "effect": "deny",
                    "action": ["fs:WriteObject", "fs:ReadObject"],
                    "resource": f"arn:lakefs:fs:::repository/{seeded.id}/object/secret/*",
                }
            ],
        },
    )
    assert created.status_code == 201 and isinstance(created.json()["creation_date"], int)
    user = make_user("SuperUsers", policies=(policy,))
    branch = f"/repositories/{seeded.id}/branches/main/objects"
    assert user.http.post(branch, params={"path": "open/x"}, content=b"1").status_code == 201
    assert user.http.post(branch, params={"path": "secret/x"}, content=b"1").status_code == 403
    effective = http.get(
        f"/auth/users/{user.user_id}/policies", params={"effective": "True"}
    ).json()
    assert policy in [p["id"] for p in effective["results"]]
    assert http.delete(f"/auth/policies/{policy}").status_code == 204
    assert user.http.post(branch, params={"path": "secret/x"}, content=b"1").status_code == 201
    bad = http.post(
        "/auth/policies",
        json={"id": "bad", "statement": [{"effect": "maybe", "action": ["x"], "resource": "*"}]},
    )
    assert bad.status_code == 400
    # a body that is not JSON says where the parser stopped and why
    garbled = http.post(
        "/auth/policies",
        content=b'{"id": "p", "statement": [nope]}',
        headers={"Content-Type": "application/json"},
    )
    assert garbled.status_code == 400
    assert garbled.json()["message"] == (
        "invalid request: JSON decode error at character 26: Expecting value"
    )


def test_user_group_and_policy_management(http: httpx.Client, server: Server) -> None:
    user, group = unique("u"), unique("g")
    assert http.post("/auth/users", json={"id": user}).status_code == 201
    assert http.post("/auth/users", json={"id": user}).status_code == 409
    assert http.post("/auth/groups", json={"id": group, "description": "team"}).status_code == 201
    assert http.put(f"/auth/groups/{group}/members/{user}").status_code == 201
    assert http.put(f"/auth/groups/{group}/policies/FSReadAll").status_code == 201
    members = http.get(f"/auth/groups/{group}/members").json()
    assert [m["id"] for m in members["results"]] == [user]
    assert members["pagination"]["max_per_page"] == 1000
    groups = http.get(f"/auth/users/{user}/groups").json()["results"]
    assert [(g["id"], g["name"], g["description"]) for g in groups] == [(group, group, "team")]
    assert [p["id"] for p in http.get(f"/auth/groups/{group}/policies").json()["results"]] == [
        "FSReadAll"
    ]
    listed = {g["id"] for g in http.get("/auth/groups").json()["results"]}
    assert {"Admins", "SuperUsers", "Writers", "Readers", group} <= listed
    policies = {
        p["id"] for p in http.get("/auth/policies", params={"amount": 1000}).json()["results"]
    }
    assert {"FSFullAccess", "FSReadAll", "AuthFullAccess", "Replicator"} <= policies
    key = http.post(f"/auth/users/{user}/credentials").json()
    signed = httpx.get(
        f"{server.url}/api/v1/repositories", auth=(key["access_key_id"], key["secret_access_key"])
    )
    assert signed.status_code == 200
    assert http.delete(f"/auth/users/{user}/credentials/{key['access_key_id']}").status_code == 204
    revoked = httpx.get(
        f"{server.url}/api/v1/repositories", auth=(key["access_key_id"], key["secret_access_key"])
    )
    assert revoked.status_code == 401
    assert http.delete(f"/auth/groups/{group}/members/{user}").status_code == 204
    assert http.get(f"/auth/users/{user}/groups").json()["results"] == []
    assert http.delete(f"/auth/groups/{group}").status_code == 204
    assert http.delete(f"/auth/users/{user}").status_code == 204
    assert http.get(f"/auth/users/{user}").status_code == 404


def test_a_user_is_created_with_an_email_address(http: httpx.Client) -> None:
    # beyond lakeFS's UserCreation: a quoted local part may hold markup, and is kept as given
    user, address = unique("mail"), '"<img src=x onerror=alert(1)>"@example.com'
    made = http.post("/auth/users", json={"id": user, "email": address})
    assert made.status_code == 201 and made.json()["email"] == address
    assert http.get(f"/auth/users/{user}").json()["email"] == address
    listed = http.get("/auth/users", params={"prefix": user}).json()["results"]
    assert [(u["id"], u["email"]) for u in listed] == [(user, address)]
    plain = unique("plain")
    assert "email" not in http.post("/auth/users", json={"id": plain, "email": ""}).json()
    for wrong in ("no-at-sign", "two@at@signs x", "Jane <jane@example.com>", "x" * 250 + "@a.io"):
        refused = http.post("/auth/users", json={"id": unique("bad"), "email": wrong})
        assert refused.status_code == 400, wrong
        assert refused.json()["message"].startswith("invalid email"), refused.text


def test_auth_lists_page_by_prefix_after_and_amount(
    http: httpx.Client, client: lakefs.Client
) -> None:
    auth = client.sdk_client.auth_api
    stem, group = unique("paged"), unique("g")
    users = [f"{stem}-{n}" for n in range(3)]
    for user in users:
        auth.create_user(lakefs_sdk.UserCreation(id=user))
    auth.create_group(lakefs_sdk.GroupCreation(id=group))
    try:
        first = auth.list_users(prefix=stem, amount=2)
        assert [u.id for u in first.results] == users[:2]
        assert first.pagination.to_dict() == {
            "has_more": True,
            "next_offset": users[1],
            "results": 2,
            "max_per_page": 1000,
        }
        rest = auth.list_users(prefix=stem, after=first.pagination.next_offset, amount=2)
        assert [u.id for u in rest.results] == users[2:]
        assert (rest.pagination.has_more, rest.pagination.next_offset) == (False, "")

        # an access key's page ends at its key ID
        keys = sorted(auth.create_credentials(users[0]).access_key_id for _ in range(2))
        page = auth.list_user_credentials(users[0], amount=1)
        assert [c.access_key_id for c in page.results] == keys[:1]
        assert (page.pagination.has_more, page.pagination.next_offset) == (True, keys[0])
        last = auth.list_user_credentials(users[0], after=keys[0])
        assert [c.access_key_id for c in last.results] == keys[1:]
        assert not last.pagination.has_more

        for user in users:
            auth.add_group_membership(group, user)
        members = auth.list_group_members(group, prefix=stem, after=users[0], amount=1)
        assert [m.id for m in members.results] == users[1:2]
        assert members.pagination.next_offset == users[1]

        # a user's own policies, then also its groups' (effective follows the paging)
        auth.attach_policy_to_group(group, "FSReadAll")
        auth.attach_policy_to_user(users[0], "FSReadWriteAll")
        own = auth.list_user_policies(users[0], prefix="FS")
        assert [p.id for p in own.results] == ["FSReadWriteAll"]
        effective = auth.list_user_policies(users[0], prefix="FS", amount=1, effective=True)
        assert [p.id for p in effective.results] == ["FSReadAll"]
        assert (effective.pagination.has_more, effective.pagination.next_offset) == (
            True,
            "FSReadAll",
        )

        refused = http.get("/auth/users", params={"amount": "many"})
        assert refused.status_code == 400
        assert refused.json()["message"].startswith("invalid request: query.amount: ")
    finally:
        auth.delete_group(group)
        for user in users:
            auth.delete_user(user)


def test_setup_is_done_once(server: Server, http: httpx.Client) -> None:
    assert httpx.get(f"{server.url}/api/v1/setup_lakefs").json()["state"] == "initialized"
    again = httpx.post(
        f"{server.url}/api/v1/setup_lakefs",
        json={"username": "intruder", "key": {"access_key_id": "AKIAJX", "secret_access_key": "s"}},
    )
    assert again.status_code == 409
    assert http.get("/auth/users/intruder").status_code == 404


def test_no_secret_in_logs_or_later_responses(
    server: Server, client: lakefs.Client, make_user: MakeUser
) -> None:
    user = make_user("Writers")
    admin = client.sdk_client.auth_api
    extra = admin.create_credentials(user.user_id)
    secrets = [server.secret_access_key, user.secret_access_key, extra.secret_access_key]
    responses = [
        user.http.get("/user"),
        user.http.get(f"/auth/users/{user.user_id}/credentials"),
        user.http.get(f"/auth/users/{user.user_id}/credentials/{extra.access_key_id}"),
        httpx.get(f"{server.url}/api/v1/user", auth=(extra.access_key_id, extra.secret_access_key)),
        httpx.get(f"{server.url}/api/v1/user", auth=(user.access_key_id, "wrong")),
        httpx.post(
            f"{server.url}/api/v1/setup_lakefs",
            json={"key": {"access_key_id": "AKIAJQQQ", "secret_access_key": secrets[1]}},
        ),
        httpx.post(
            f"{server.url}/api/v1/setup_lakefs",
            json={
                "username": "x",
                "key": {"access_key_id": "AKIAJQQQ", "secret_access_key": secrets[1]},
            },
        ),
    ]
    users = client.sdk_client.auth_api.list_users()
    bodies = [r.text for r in responses] + [users.to_json()]
    assert responses[0].status_code == 200 and responses[3].status_code == 200
    assert responses[4].status_code == 401 and responses[5].status_code == 400
    for secret in secrets:
        for body in bodies:
            assert secret not in body
    log = server.log()
    assert '"path": "/api/v1/user"' in log  # the log does capture requests
    for secret in secrets:
        assert secret not in log


@pytest.mark.both_backends
def test_read_only_repository_refuses_every_write(
    server: Server, http: httpx.Client, client: lakefs.Client
) -> None:
    name = unique("mirror")
    created = http.post(
        "/repositories",
        json={"name": name, "storage_namespace": server.namespace(name), "read_only": True},
    )
    assert created.status_code == 201 and created.json()["read_only"] is True
    http.post(f"/repositories/{name}/tags", json={"id": "v1", "ref": "main"})
    for method, path, kwargs in _writes(name)[2:]:
        response = http.request(method, path, **kwargs)  # type: ignore[arg-type]
        if path.endswith("/objects/delete"):
            # a bulk delete answers 200 with an error per path, as lakeFS's does
            assert response.status_code == 200, (method, path, response.text)
            errors = response.json()["errors"]
            assert errors and all(e["status_code"] == 403 for e in errors), response.text
            message = errors[0]["message"]
        else:
            assert response.status_code == 403, (method, path, response.text)
            message = response.json()["message"]
        assert message.startswith("read-only repository"), response.text
        assert name in message, response.text
    with pytest.raises(ForbiddenException):
        lakefs.Repository(name, client=client).branch("main").object("a").upload(b"a")
    assert http.delete(f"/repositories/{name}").status_code == 403
    # reads work, and an administrator may still delete it with force
    assert http.get(f"/repositories/{name}/refs/main/commits").status_code == 200
    assert http.delete(f"/repositories/{name}", params={"force": "true"}).status_code == 204
