"""The auth store and policy evaluation, on the in-memory KV."""

from __future__ import annotations

import pytest

from mirror.auth import (
    AuthenticationError,
    AuthStore,
    Effect,
    GroupNotFoundError,
    InvalidAuthValueError,
    Permission,
    Policy,
    PolicyExistsError,
    SetupDoneError,
    Statement,
    UserExistsError,
    UserNotFoundError,
    is_allowed,
    matches,
)
from mirror.auth.hashing import hash_secret, new_access_key_id, verify_secret
from mirror.auth.permissions import object_arn, repository_arn, user_arn
from mirror.kv.memory import MemoryKV


@pytest.fixture
def auth() -> AuthStore:
    store = AuthStore(MemoryKV(), clock=lambda: 1_700_000_000.0)
    store.ensure_builtins()
    return store


@pytest.mark.parametrize(
    ("pattern", "value", "expected"),
    [
        ("*", "anything", True),
        ("fs:*", "fs:ReadObject", True),
        ("fs:Read*", "fs:ReadObject", True),
        ("fs:Read*", "fs:WriteObject", False),
        ("fs:ReadObjec?", "fs:ReadObject", True),
        ("arn:lakefs:fs:::repository/r/*", "arn:lakefs:fs:::repository/r/object/a.b", True),
        ("arn:lakefs:fs:::repository/r", "arn:lakefs:fs:::repository/r2", False),
        ("a.b", "axb", False),
        ("[x]", "[x]", True),
    ],
)
def test_wildcards(pattern: str, value: str, expected: bool) -> None:
    assert matches(pattern, value) is expected


def test_deny_beats_allow_and_user_variable() -> None:
    allow = Policy("a", 0, (Statement(Effect.ALLOW, ("fs:*",), "*"),))
    deny = Policy(
        "d", 0, (Statement(Effect.DENY, ("fs:WriteObject",), object_arn("r", "secret/*")),)
    )
    own = Policy(
        "o",
        0,
        (Statement(Effect.ALLOW, ("auth:CreateCredentials",), "arn:lakefs:auth:::user/${user}"),),
    )
    write = Permission("fs:WriteObject", object_arn("r", "secret/x"))
    assert is_allowed([allow], [write], "u")
    assert not is_allowed([allow, deny], [write], "u")
    assert is_allowed([allow, deny], [Permission("fs:WriteObject", object_arn("r", "x"))], "u")
    assert is_allowed([own], [Permission("auth:CreateCredentials", user_arn("jane"))], "jane")
    assert not is_allowed([own], [Permission("auth:CreateCredentials", user_arn("bob"))], "jane")
    assert not is_allowed([], [Permission("fs:ReadObject", repository_arn("r"))], "u")


def test_secrets_are_salted_and_verified() -> None:
    one, two = hash_secret("s3cret"), hash_secret("s3cret")
    assert one != two and "s3cret" not in one
    assert verify_secret("s3cret", one) and verify_secret("s3cret", two)
    assert not verify_secret("other", one)
    assert not verify_secret("s3cret", "garbage")
    key = new_access_key_id()
    assert key.startswith("AKIAJ") and len(key) == 20


def test_users_keys_and_authentication(auth: AuthStore) -> None:
    user = auth.create_user("jane")
    assert user.creation_date == 1_700_000_000
    with pytest.raises(UserExistsError):
        auth.create_user("jane")
    with pytest.raises(InvalidAuthValueError):
        auth.create_user("has/slash")
    created = auth.create_credentials("jane")
    assert "secret" not in repr(created) and created.secret_access_key not in repr(created)
    assert auth.authenticate(created.access_key_id, created.secret_access_key).id == "jane"
    # the second time is served from the verified cache
    assert auth.authenticate(created.access_key_id, created.secret_access_key).id == "jane"
    with pytest.raises(AuthenticationError):
        auth.authenticate(created.access_key_id, "wrong")
    stored = [c.secret_hash for c in auth.list_credentials("jane")]
    assert stored and created.secret_access_key not in stored[0]
    auth.delete_credentials("jane", created.access_key_id)
    with pytest.raises(AuthenticationError):
        auth.authenticate(created.access_key_id, created.secret_access_key)
    with pytest.raises(UserNotFoundError):
        auth.create_credentials("nobody")


def test_groups_policies_and_effective_permissions(auth: AuthStore) -> None:
    auth.create_user("rita")
    auth.add_member("Readers", "rita")
    read = Permission("fs:ReadObject", object_arn("r", "x"))
    write = Permission("fs:WriteObject", object_arn("r", "x"))
    assert auth.is_allowed("rita", [read]) and not auth.is_allowed("rita", [write])
    effective = [p.id for p in auth.list_user_policies("rita", effective=True)]
    assert effective == ["AuthManageOwnCredentials", "FSReadAll"]
    auth.create_policy(Policy("W", 0, (Statement(Effect.ALLOW, ("fs:WriteObject",), "*"),)))
    with pytest.raises(PolicyExistsError):
        auth.create_policy(Policy("W", 0, (Statement(Effect.ALLOW, ("fs:*",), "*"),)))
    auth.attach_user_policy("rita", "W")
    assert auth.is_allowed("rita", [read, write])
    auth.delete_policy("W")
    assert not auth.is_allowed("rita", [write])
    auth.remove_member("Readers", "rita")
    assert not auth.is_allowed("rita", [read])
    with pytest.raises(GroupNotFoundError):
        auth.add_member("Nope", "rita")
    auth.add_member("Writers", "rita")
    auth.delete_user("rita")
    assert [u.id for u in auth.list_members("Writers")] == []
    assert not auth.is_allowed("rita", [read])


def _admins_policies(auth: AuthStore) -> set[str]:
    return {p.id for p in auth.list_group_policies("Admins")}


def test_a_built_in_policy_added_by_a_release_reaches_the_existing_groups(
    auth: AuthStore,
) -> None:
    auth.delete_policy("RepoManagementFullAccess")  # an installation from before it existed
    assert "RepoManagementFullAccess" not in _admins_policies(auth)
    auth.ensure_builtins()
    assert "RepoManagementFullAccess" in _admins_policies(auth)
    # an administrator's later choice stands
    auth.detach_group_policy("Admins", "RepoManagementFullAccess")
    auth.ensure_builtins()
    assert "RepoManagementFullAccess" not in _admins_policies(auth)
    assert "FSFullAccess" in _admins_policies(auth)


def test_setup_and_bootstrap(auth: AuthStore) -> None:
    assert not auth.is_initialized()
    assert auth.bootstrap_admin("admin", "AKIAJFIRST", "one")
    assert auth.is_initialized()
    assert not auth.bootstrap_admin("admin", "AKIAJFIRST", "one")
    assert auth.bootstrap_admin("admin", "AKIAJFIRST", "two")
    assert auth.authenticate("AKIAJFIRST", "two").id == "admin"
    with pytest.raises(AuthenticationError):
        auth.authenticate("AKIAJFIRST", "one")
    assert [g.id for g in auth.list_user_groups("admin")] == ["Admins"]
    with pytest.raises(SetupDoneError):
        auth.setup("other")
    auth.create_user("bob")
    with pytest.raises(InvalidAuthValueError):
        auth.bootstrap_admin("bob", "AKIAJFIRST", "two")


def test_public_names() -> None:
    import mirror.api
    import mirror.auth

    for module in (mirror.api, mirror.auth):
        assert sorted(module.__all__) == sorted(set(module.__all__))
        for name in module.__all__:
            assert getattr(module, name) is not None
