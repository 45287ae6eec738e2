"""lakeFS's group ACLs and auth capabilities against the session's live server.

``lakefs_sdk`` does not generate these operations (``getGroupACL``, ``setGroupACL``,
``getAuthCapabilities``), so the calls are raw HTTP; what an ACL grants is checked with the
official clients of users in the group.
"""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import lakefs
import lakefs_sdk
import pytest
from lakefs.exceptions import ForbiddenException

from tests.integration.harness import MakeUser, Server, unique

ACL_PREFIX = "ACL(_-_)"


@pytest.fixture
def group(http: httpx.Client) -> Iterator[str]:
    """A fresh group; its ACL policy (if one was written) is deleted with it."""
    group_id = unique("acl-group")
    made = http.post("/auth/groups", json={"id": group_id})
    assert made.status_code == 201, made.text
    yield group_id
    assert http.delete(f"/auth/groups/{group_id}").status_code == 204
    http.delete(f"/auth/policies/{ACL_PREFIX}{group_id}")


def _attached(http: httpx.Client, group_id: str) -> list[str]:
    answer = http.get(f"/auth/groups/{group_id}/policies")
    assert answer.status_code == 200, answer.text
    return [p["id"] for p in answer.json()["results"]]


def _set_acl(http: httpx.Client, group_id: str, permission: str) -> None:
    made = http.post(f"/auth/groups/{group_id}/acl", json={"permission": permission})
    assert made.status_code == 201, made.text


def test_auth_capabilities_need_no_sign_in(server: Server, http: httpx.Client) -> None:
    anonymous = httpx.get(f"{server.url}/api/v1/auth/capabilities", timeout=30.0)
    assert anonymous.status_code == 200, anonymous.text
    # lakeFS without an e-mail service: no invitations, and no forgot_password field at all
    assert anonymous.json() == {"invite_user": False}
    assert http.get("/auth/capabilities").json() == {"invite_user": False}


def test_acl_of_a_group_without_an_acl_policy(http: httpx.Client, group: str) -> None:
    # no policy attached: lakeFS's blank ACL, which allows nothing
    blank = http.get(f"/auth/groups/{group}/acl")
    assert (blank.status_code, blank.json()) == (200, {"permission": ""})

    assert http.put(f"/auth/groups/{group}/policies/FSReadAll").status_code == 201
    one = http.get(f"/auth/groups/{group}/acl")
    assert one.status_code == 404
    assert one.json() == {"message": "Policy attached to group has no ACL", "no_acl": True}

    several = http.get("/auth/groups/Admins/acl")
    assert several.status_code == 404
    assert several.json() == {
        "message": "Multiple policies attached to group - no ACL",
        "no_acl": True,
    }


def test_set_acl_replaces_the_group_policies(
    http: httpx.Client, client: lakefs.Client, group: str
) -> None:
    assert http.put(f"/auth/groups/{group}/policies/FSReadAll").status_code == 201
    assert http.put(f"/auth/groups/{group}/policies/AuthManageOwnCredentials").status_code == 201

    for permission in ("Read", "Write", "Super", "Admin"):
        made = http.post(f"/auth/groups/{group}/acl", json={"permission": permission})
        assert (made.status_code, made.content) == (201, b""), made.text
        got = http.get(f"/auth/groups/{group}/acl")
        assert (got.status_code, got.json()) == (200, {"permission": permission})
        assert _attached(http, group) == [ACL_PREFIX + group]

    # the derived policy is an ordinary policy to the rest of the auth API
    policy = client.sdk_client.auth_api.get_policy(ACL_PREFIX + group)
    assert [(s.effect, s.action, s.resource) for s in policy.statement] == [
        ("allow", ["fs:*", "auth:*", "ci:*", "retention:*", "branches:*"], "*")
    ]
    _set_acl(http, group, "Read")
    policy = client.sdk_client.auth_api.get_policy(ACL_PREFIX + group)
    assert [(s.action, s.resource) for s in policy.statement] == [
        (["fs:List*", "fs:Read*"], "*"),
        (["fs:ReadConfig"], "*"),
        (
            [
                "auth:CreateCredentials",
                "auth:DeleteCredentials",
                "auth:ListCredentials",
                "auth:ReadCredentials",
            ],
            "arn:lakefs:auth:::user/${user}",
        ),
    ]
    # a policy attached by hand afterwards makes the ACL unreadable again, as in lakeFS
    assert http.put(f"/auth/groups/{group}/policies/FSReadAll").status_code == 201
    assert http.get(f"/auth/groups/{group}/acl").json()["no_acl"] is True


def test_acl_refusals(http: httpx.Client, group: str) -> None:
    bad = http.post(f"/auth/groups/{group}/acl", json={"permission": "Owner"})
    assert bad.status_code == 400
    assert bad.json()["message"] == (
        f"{group}: translate ACL {{Permission:Owner}} to statements: "
        'validation error: Bad ACL permission "Owner"'
    )
    assert _attached(http, group) == []
    assert http.post(f"/auth/groups/{group}/acl", json={}).status_code == 400

    missing = unique("no-such-group")
    for answer in (
        http.get(f"/auth/groups/{missing}/acl"),
        http.post(f"/auth/groups/{missing}/acl", json={"permission": "Read"}),
    ):
        assert answer.status_code == 404, answer.text
        assert answer.json()["message"] == f"group {missing!r} not found"
    assert http.get(f"/auth/policies/{ACL_PREFIX}{missing}").status_code == 404
    # the permission is checked before the group, as lakeFS translates the ACL first
    assert http.post(f"/auth/groups/{missing}/acl", json={"permission": "x"}).status_code == 400


def test_acl_calls_need_lakefs_permissions(
    http: httpx.Client, make_user: MakeUser, group: str
) -> None:
    policy_id = unique("acl-reader")
    statement = {"effect": "allow", "action": ["auth:ReadGroup"], "resource": "*"}
    made = http.post("/auth/policies", json={"id": policy_id, "statement": [statement]})
    assert made.status_code == 201, made.text
    try:
        user = make_user(policies=(policy_id,))
        # auth:ReadGroup alone: reading the ACL also needs auth:ReadPolicy on its policy
        assert user.http.get(f"/auth/groups/{group}/acl").status_code == 403
        read_policy = {
            "effect": "allow",
            "action": ["auth:ReadPolicy"],
            "resource": f"arn:lakefs:auth:::policy/{ACL_PREFIX}{group}",
        }
        updated = http.put(
            f"/auth/policies/{policy_id}",
            json={"id": policy_id, "statement": [statement, read_policy]},
        )
        assert updated.status_code == 200, updated.text
        assert user.http.get(f"/auth/groups/{group}/acl").status_code == 200
        # setting it needs auth:AttachPolicy and auth:UpdatePolicy on the policy as well
        refused = user.http.post(f"/auth/groups/{group}/acl", json={"permission": "Admin"})
        assert refused.status_code == 403
        assert _attached(http, group) == []
    finally:
        http.delete(f"/auth/policies/{policy_id}")


def test_acl_grants_its_permission_to_the_members(
    server: Server, http: httpx.Client, client: lakefs.Client, make_user: MakeUser, group: str
) -> None:
    name = unique("acl-repo")
    repo = lakefs.Repository(name, client=client).create(server.namespace(name))
    try:
        repo.branch("main").object("seed.txt").upload(b"seed")
        member = make_user(group)
        as_member = lakefs.Repository(name, client=member.client).branch("main")

        _set_acl(http, group, "Read")
        assert as_member.object("seed.txt").reader().read() == b"seed"
        with pytest.raises(ForbiddenException):
            as_member.object("by-reader.txt").upload(b"no")
        own_keys = member.http.get(f"/auth/users/{member.user_id}/credentials")
        assert own_keys.status_code == 200, own_keys.text

        _set_acl(http, group, "Write")
        as_member.object("by-writer.txt").upload(b"yes")
        assert as_member.commit("by an ACL writer").get_commit().committer == member.user_id
        with pytest.raises(ForbiddenException):
            lakefs.Repository(unique("acl-denied"), client=member.client).create(
                server.namespace(unique("acl-denied"))
            )
        assert member.http.get("/auth/users").status_code == 403

        _set_acl(http, group, "Admin")
        users = member.client.sdk_client.auth_api.list_users(amount=1000)
        assert member.user_id in [u.id for u in users.results]
        assert isinstance(users, lakefs_sdk.UserList)
    finally:
        repo.delete()
