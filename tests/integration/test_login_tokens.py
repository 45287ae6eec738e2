"""Login tokens against live server processes: ``POST /auth/login``, then Bearer and cookie.

The official ``lakefs_sdk`` logs in (AuthApi.login), then clients configured with only the
token (``access_token``) or only the ``internal_auth_session`` cookie make real calls. Refusals:
wrong credentials, a token that does not verify (also with valid Basic credentials next to it:
no fallback), a token from another installation, the token of a deleted user or of a user whose
keys were all deleted, and an expired token (a second server with ``auth.login_duration`` of a
few seconds, two worker processes: a token from one worker verifies on the other), whose cookie
also stops reading through the S3 gateway, and whose ``/logout`` redirects where
``auth.logout_redirect_url`` says. The CLI's ``lakemirror login`` keeps a token that the other
client commands then sign in with.
"""

from __future__ import annotations

import base64
import json
import os
import secrets
import stat
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import lakefs_sdk
import pytest
from lakefs_sdk.exceptions import UnauthorizedException

from mirror.api.app import WORKER_HEADER
from tests.e2e.regions import wait_for
from tests.integration.browser import s3_code, s3_request
from tests.integration.harness import MakeUser, Server, running_server

SHORT_LIFETIME = 6
LOGOUT_REDIRECT = "/signed-out?from=lakemirror"


def _sdk(server: Server, **settings: Any) -> lakefs_sdk.ApiClient:
    return lakefs_sdk.ApiClient(lakefs_sdk.Configuration(host=f"{server.url}/api/v1", **settings))


def _login(server: Server, key: str, secret: str) -> lakefs_sdk.AuthenticationToken:
    with _sdk(server) as api:
        token: lakefs_sdk.AuthenticationToken = lakefs_sdk.AuthApi(api).login(
            lakefs_sdk.LoginInformation(access_key_id=key, secret_access_key=secret)
        )
        return token


def _claims(token: str) -> tuple[dict[str, Any], dict[str, Any]]:
    head, body, _ = token.split(".")

    def part(text: str) -> dict[str, Any]:
        decoded: dict[str, Any] = json.loads(
            base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
        )
        return decoded

    return part(head), part(body)


# the SDK sends the cookie_auth key as the whole Cookie header: name=value
def _current_user(server: Server, **settings: Any) -> str:
    with _sdk(server, **settings) as api:
        user: lakefs_sdk.CurrentUser = lakefs_sdk.AuthApi(api).get_current_user()
        return str(user.user.id)


def test_login_answers_a_lakefs_jwt_and_the_session_cookie(server: Server) -> None:
    before = int(time.time())
    answer = _login(server, server.access_key_id, server.secret_access_key)
    header, claims = _claims(answer.token)
    assert header["alg"] == "HS256"
    assert claims["iss"] == "auth" and claims["aud"] == "login"
    assert claims["sub"] == "admin"
    assert claims["jti"]
    assert claims["exp"] == answer.token_expiration
    # lakeFS's lifetime: 7 days
    assert claims["exp"] - claims["iat"] == 7 * 86_400
    assert before <= claims["iat"] <= int(time.time())

    raw = httpx.post(
        f"{server.url}/api/v1/auth/login",
        json={
            "access_key_id": server.access_key_id,
            "secret_access_key": server.secret_access_key,
        },
    )
    assert raw.status_code == 200, raw.text
    assert raw.cookies["internal_auth_session"] == raw.json()["token"]
    assert "httponly" in raw.headers["set-cookie"].lower()
    # each login is a new session
    assert raw.json()["token"] != answer.token
    assert server.secret_access_key not in server.log()
    assert answer.token not in server.log()


def test_token_alone_and_cookie_alone_make_real_calls(server: Server, make_user: MakeUser) -> None:
    writer = make_user("Writers")
    token = _login(server, writer.access_key_id, writer.secret_access_key).token
    assert _current_user(server, access_token=token) == writer.user_id
    assert (
        _current_user(server, api_key={"cookie_auth": f"internal_auth_session={token}"})
        == writer.user_id
    )

    # the token carries the user's policies: a writer branches and lists the branches
    name = f"login-{secrets.token_hex(4)}"
    with httpx.Client(
        base_url=f"{server.url}/api/v1", auth=(server.access_key_id, server.secret_access_key)
    ) as admin:
        made = admin.post(
            "/repositories", json={"name": name, "storage_namespace": server.namespace(name)}
        )
        assert made.status_code == 201, made.text
        try:
            with _sdk(server, access_token=token) as api:
                lakefs_sdk.BranchesApi(api).create_branch(
                    name, lakefs_sdk.BranchCreation(name="dev", source="main")
                )
            cookie = {"cookie_auth": f"internal_auth_session={token}"}
            with _sdk(server, api_key=cookie) as api:
                branches = lakefs_sdk.BranchesApi(api).list_branches(name)
                assert [b.id for b in branches.results] == ["dev", "main"]
            # the policies still apply: a writer may not create repositories
            with (
                _sdk(server, access_token=token) as api,
                pytest.raises(lakefs_sdk.ApiException) as denied,
            ):
                lakefs_sdk.RepositoriesApi(api).create_repository(
                    lakefs_sdk.RepositoryCreation(
                        name=f"{name}-x", storage_namespace=server.namespace(f"{name}-x")
                    )
                )
            assert denied.value.status == 403
        finally:
            assert admin.delete(f"/repositories/{name}").status_code == 204


def test_bad_credentials_are_401_with_lakefs_text(server: Server) -> None:
    with pytest.raises(UnauthorizedException) as refused:
        _login(server, server.access_key_id, "not-the-secret")
    assert "error authenticating request" in json.loads(refused.value.body)["message"]
    with pytest.raises(UnauthorizedException):
        _login(server, "AKIANOSUCHKEY0000000", "whatever")


def test_invalid_bearer_is_401_without_falling_back_to_basic(server: Server) -> None:
    token = _login(server, server.access_key_id, server.secret_access_key).token
    head, _, signature = token.split(".")
    forged_claims = _claims(token)[1] | {"sub": "someone-else"}
    forged_body = base64.urlsafe_b64encode(json.dumps(forged_claims).encode()).rstrip(b"=")
    basic = (
        "Basic "
        + base64.b64encode(f"{server.access_key_id}:{server.secret_access_key}".encode()).decode()
    )
    url = f"{server.url}/api/v1/user"
    for bad in ("not-a-jwt", f"{head}.{forged_body.decode()}.{signature}", token[:-4] + "AAAA"):
        for headers in (
            [("Authorization", f"Bearer {bad}"), ("Authorization", basic)],
            [("Authorization", basic), ("Authorization", f"Bearer {bad}")],
        ):
            answer = httpx.get(url, headers=headers)
            assert answer.status_code == 401, (bad, answer.text)
            assert "error authenticating request" in answer.json()["message"]
        # an invalid cookie next to valid Basic: Basic comes first, as in lakeFS
        answer = httpx.get(
            url, headers={"Authorization": basic}, cookies={"internal_auth_session": bad}
        )
        assert answer.status_code == 200
        answer = httpx.get(url, cookies={"internal_auth_session": bad})
        assert answer.status_code == 401
    # the valid token with Basic next to it: the token decides
    answer = httpx.get(
        url, headers=[("Authorization", basic), ("Authorization", f"Bearer {token}")]
    )
    assert answer.status_code == 200
    assert answer.json()["user"]["id"] == "admin"


@pytest.mark.both_backends
def test_deleted_user_and_user_without_keys_lose_their_tokens(
    server: Server, make_user: MakeUser, client: Any
) -> None:
    auth = client.sdk_client.auth_api
    gone_id = f"gone-{secrets.token_hex(4)}"
    auth.create_user(lakefs_sdk.UserCreation(id=gone_id))
    auth.add_group_membership("Readers", gone_id)
    gone_key = auth.create_credentials(gone_id)
    gone_token = _login(server, gone_key.access_key_id, gone_key.secret_access_key).token
    keyless = make_user("Readers")
    keyless_token = _login(server, keyless.access_key_id, keyless.secret_access_key).token
    assert _current_user(server, access_token=gone_token) == gone_id
    assert _current_user(server, access_token=keyless_token) == keyless.user_id

    auth.delete_credentials(keyless.user_id, keyless.access_key_id)
    with pytest.raises(UnauthorizedException):
        _current_user(server, access_token=keyless_token)
    with pytest.raises(UnauthorizedException):
        _current_user(server, api_key={"cookie_auth": f"internal_auth_session={keyless_token}"})

    auth.delete_user(gone_id)
    with pytest.raises(UnauthorizedException) as refused:
        _current_user(server, access_token=gone_token)
    assert "error authenticating request" in json.loads(refused.value.body)["message"]


@pytest.fixture(scope="module")
def short_lived(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """A second installation: its own key, tokens living a few seconds, two workers."""
    root: Path = tmp_path_factory.mktemp("short-login")
    with running_server(
        root / "data",
        root / "server.log",
        access_key_id="AKIASHORTLOGIN000001",
        secret_access_key=secrets.token_urlsafe(30),
        env={
            "LAKEMIRROR_AUTH__LOGIN_DURATION": str(SHORT_LIFETIME),
            "LAKEMIRROR_AUTH__LOGOUT_REDIRECT_URL": LOGOUT_REDIRECT,
            "LAKEMIRROR_SERVER__WORKERS": "2",
        },
    ) as running:
        yield running


def test_token_expires_after_login_duration_and_works_on_every_worker(
    short_lived: Server, server: Server
) -> None:
    answer = _login(short_lived, short_lived.access_key_id, short_lived.secret_access_key)
    _, claims = _claims(answer.token)
    assert claims["exp"] - claims["iat"] == SHORT_LIFETIME
    # the web UI's previews: the session cookie lists the buckets through the S3 gateway
    listed = s3_request(short_lived, "GET", "/", cookie=answer.token)
    assert listed.status_code == 200, listed.text
    url = f"{short_lived.url}/api/v1/user"
    bearer = {"Authorization": f"Bearer {answer.token}"}
    workers: set[str] = set()

    def seen_on_both() -> bool:
        # a new connection each time, so that either worker may take it
        reply = httpx.get(url, headers=bearer)
        assert reply.status_code == 200, reply.text
        workers.add(reply.headers[WORKER_HEADER])
        return len(workers) == 2

    wait_for(seen_on_both, SHORT_LIFETIME - 1, "the token accepted by both workers", 0.01)
    # another installation's key does not verify it
    other = httpx.get(f"{server.url}/api/v1/user", headers=bearer)
    assert other.status_code == 401

    def refused() -> bool:
        return httpx.get(url, headers=bearer).status_code == 401

    wait_for(refused, SHORT_LIFETIME + 10, "the token to expire", 0.2)
    expired = httpx.get(url, headers=bearer)
    assert expired.json() == {"message": "error authenticating request", "detail": "token expired"}
    assert time.time() >= answer.token_expiration
    gone = s3_request(short_lived, "GET", "/", cookie=answer.token)
    assert gone.status_code == 403
    assert s3_code(gone) == "AccessDenied"
    assert "token expired" in gone.text


def test_logout_redirects_to_the_configured_url(short_lived: Server) -> None:
    out = httpx.get(f"{short_lived.url}/logout")
    assert out.status_code == 307
    assert out.headers["location"] == LOGOUT_REDIRECT
    assert out.headers["set-cookie"].startswith('internal_auth_session="";')


def _cli(
    home: Path, env: dict[str, str], *args: str, stdin: bytes = b""
) -> subprocess.CompletedProcess[bytes]:
    """Run `lakemirror` as a process with only ``env`` (and HOME) as its configuration."""
    base = {k: v for k, v in os.environ.items() if not k.startswith(("LAKECTL_", "LAKEMIRROR_"))}
    return subprocess.run(
        [sys.executable, "-m", "mirror.cli.main", *args],
        env={**base, "HOME": str(home), **env},
        input=stdin,
        capture_output=True,
        timeout=60,
        check=False,
    )


def test_cli_login_keeps_a_token_the_other_commands_use(
    server: Server, make_user: MakeUser, tmp_path: Path
) -> None:
    writer = make_user("Writers")
    endpoint = {"LAKECTL_SERVER_ENDPOINT_URL": server.url}
    keys = {
        **endpoint,
        "LAKECTL_CREDENTIALS_ACCESS_KEY_ID": writer.access_key_id,
        "LAKECTL_CREDENTIALS_SECRET_ACCESS_KEY": writer.secret_access_key,
    }
    done = _cli(tmp_path, keys, "login")
    assert done.returncode == 0, done.stderr
    out = done.stdout.decode()
    assert f"logged in as {writer.user_id}" in out and "expires at" in out
    kept = tmp_path / ".lakemirror" / "token.json"
    assert stat.S_IMODE(kept.stat().st_mode) == 0o600
    record = json.loads(kept.read_text())
    assert record["endpoint_url"] == f"{server.url}/api/v1"
    assert record["token"] not in out and writer.secret_access_key not in out
    assert _claims(record["token"])[1]["sub"] == writer.user_id

    # the endpoint alone now signs in with the kept token
    listed = _cli(tmp_path, endpoint, "-o", "json", "repo", "list")
    assert listed.returncode == 0, listed.stderr
    assert isinstance(json.loads(listed.stdout), list)

    printed = _cli(tmp_path, keys, "login", "--print")
    assert printed.returncode == 0, printed.stderr
    token = printed.stdout.decode().strip()
    assert token != record["token"]
    reply = httpx.get(f"{server.url}/api/v1/user", headers={"Authorization": f"Bearer {token}"})
    assert reply.json()["user"]["id"] == writer.user_id
    # --print keeps nothing new
    assert json.loads(kept.read_text())["token"] == record["token"]

    out_again = _cli(tmp_path, endpoint, "logout")
    assert out_again.returncode == 0 and not kept.exists()
    # no key and no token any more: refused before any request
    refused = _cli(tmp_path, endpoint, "repo", "list")
    assert refused.returncode == 2 and b"no credentials" in refused.stderr
