"""lakeFS's web UI against a live server: signing in, signing out, and previewing through S3.

The UI (lakeFS's ``webui/``) treats a 401 as "signed out" only when its content type is exactly
``application/json`` and its message equals ``error authenticating request``; it reads an empty
``GET /user`` as signed out, needs ``login_config`` from ``GET /setup_lakefs``, signs out through
``GET /logout``, and previews objects with DuckDB-WASM through the S3 gateway on the same origin,
signing with a placeholder key and sending the session cookie. Each is checked over HTTP (raw
headers and bodies with httpx) and, where the official ``lakefs_sdk`` reaches, with it. The
gateway requests are built by hand, as a browser sends them: the cookie and a well-formed AWS
signature that does not verify.
"""

from __future__ import annotations

import base64
import hashlib
import json
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from http.cookies import SimpleCookie
from typing import Any
from xml.etree import ElementTree

import httpx
import lakefs_sdk
import pytest
from lakefs_sdk.exceptions import UnauthorizedException
from lakefs_spec import LakeFSFileSystem

from tests.integration.browser import (
    PLACEHOLDER_KEY,
    login,
    s3_code,
    s3_request,
    session_cookie,
)
from tests.integration.harness import MakeUser, Server, unique

SIGNED_OUT = "error authenticating request"
S3_NS = "{http://s3.amazonaws.com/doc/2006-03-01/}"
CSV = b"name,age\nada,36\ngrace,45\n"


def _sdk(server: Server, **settings: Any) -> lakefs_sdk.ApiClient:
    return lakefs_sdk.ApiClient(lakefs_sdk.Configuration(host=f"{server.url}/api/v1", **settings))


def _forged(token: str) -> str:
    """Return ``token`` with another user in its claims and its old signature."""
    head, body, signature = token.split(".")
    claims = json.loads(base64.urlsafe_b64decode(body + "=" * (-len(body) % 4)))
    claims["sub"] = "someone-else"
    forged = base64.urlsafe_b64encode(json.dumps(claims).encode()).rstrip(b"=").decode()
    return f"{head}.{forged}.{signature}"


def _set_cookie(response: httpx.Response) -> SimpleCookie:
    jar: SimpleCookie = SimpleCookie()
    jar.load(response.headers["set-cookie"])
    return jar


def _assert_signed_out(response: httpx.Response, detail: str) -> None:
    """Check the 401 lakeFS's UI reads as signed out, with LakeMirror's detail beside it."""
    assert response.status_code == 401, response.text
    assert "www-authenticate" not in response.headers
    assert response.headers["content-type"] == "application/json"
    body = response.json()
    assert body["message"] == SIGNED_OUT
    assert detail in body["detail"], body


# 1 and 2: every 401 of /api/v1 is lakeFS's signed-out answer


def test_a_401_has_lakefs_exact_message_and_content_type_and_no_basic_challenge(
    server: Server,
) -> None:
    api = f"{server.url}/api/v1"
    # the UI's first calls, from a browser that never signed in
    for path in ("/config", "/repositories", "/auth/users"):
        _assert_signed_out(httpx.get(api + path), "no credentials (HTTP Basic)")
    _assert_signed_out(
        httpx.get(f"{api}/config", auth=(server.access_key_id, "not-the-secret")),
        "invalid credentials",
    )
    # a Basic header FastAPI cannot decode is refused before any route runs
    _assert_signed_out(
        httpx.get(f"{api}/config", headers={"Authorization": "Basic !!!"}),
        "malformed credentials (HTTP Basic)",
    )
    token = session_cookie(server)
    _assert_signed_out(
        httpx.get(f"{api}/config", headers={"Cookie": f"internal_auth_session={_forged(token)}"}),
        "invalid token signature",
    )
    _assert_signed_out(
        httpx.get(f"{api}/config", headers={"Authorization": "Bearer not-a-jwt"}),
        "malformed token",
    )
    # a HEAD keeps no body, and no challenge either
    head = httpx.head(f"{api}/repositories/any/refs/main/objects", params={"path": "a.csv"})
    assert head.status_code == 401
    assert head.content == b""
    assert "www-authenticate" not in head.headers


def test_other_errors_keep_lakefs_text_then_the_detail(server: Server) -> None:
    missing = httpx.get(
        f"{server.url}/api/v1/repositories/{unique('absent')}",
        auth=(server.access_key_id, server.secret_access_key),
    )
    assert missing.status_code == 404
    assert missing.headers["content-type"] == "application/json"
    assert missing.json()["message"].startswith("repository not found")
    assert "detail" not in missing.json()


def test_official_clients_still_read_a_401(server: Server) -> None:
    with (
        _sdk(server, username=server.access_key_id, password="not-the-secret") as api,
        pytest.raises(UnauthorizedException) as refused,
    ):
        lakefs_sdk.ConfigApi(api).get_config()
    body = json.loads(refused.value.body)
    assert body == {"message": SIGNED_OUT, "detail": "invalid credentials"}
    # lakefs-spec maps a 401 to PermissionError
    LakeFSFileSystem.clear_instance_cache()
    wrong = LakeFSFileSystem(
        host=server.url, username=server.access_key_id, password="not-the-secret"
    )
    with pytest.raises(PermissionError, match="401"):
        wrong.cat(f"{unique('repo')}/main/a.csv")
    LakeFSFileSystem.clear_instance_cache()


# 3: GET /user without credentials is lakeFS's empty user


def test_current_user_without_credentials_is_lakefs_empty_user(server: Server) -> None:
    anonymous = httpx.get(f"{server.url}/api/v1/user")
    assert anonymous.status_code == 200, anonymous.text
    assert anonymous.headers["content-type"] == "application/json"
    assert anonymous.json() == {"user": {"id": "", "creation_date": 0}}
    with _sdk(server) as api:
        user = lakefs_sdk.AuthApi(api).get_current_user().user
    assert (user.id, user.creation_date) == ("", 0)

    # credentials that do not sign anyone in stay 401, whichever scheme carries them
    url = f"{server.url}/api/v1/user"
    _assert_signed_out(httpx.get(url, auth=("AKIAJUNKNOWNKEY00000", "x")), "invalid credentials")
    token = session_cookie(server)
    _assert_signed_out(
        httpx.get(url, headers={"Cookie": f"internal_auth_session={_forged(token)}"}),
        "invalid token signature",
    )
    with (
        _sdk(server, username=server.access_key_id, password="not-the-secret") as api,
        pytest.raises(UnauthorizedException),
    ):
        lakefs_sdk.AuthApi(api).get_current_user()
    # and the cookie signs in
    signed_in = httpx.get(url, headers={"Cookie": f"internal_auth_session={token}"})
    assert signed_in.json()["user"]["id"] == "admin"


# 4: login_config


def test_setup_state_carries_lakefs_login_config(server: Server) -> None:
    state = httpx.get(f"{server.url}/api/v1/setup_lakefs")
    assert state.status_code == 200, state.text
    body = state.json()
    assert body["state"] == "initialized"
    assert body["login_config"] == {
        "RBAC": "internal",
        "login_url": "",
        "login_url_method": "none",
        "login_failed_message": "The credentials don't match.",
        "login_cookie_names": ["internal_auth_session"],
        "logout_url": "",
    }
    with _sdk(server) as api:
        read = lakefs_sdk.InternalApi(api).get_setup_state()
    assert read.state == "initialized"
    assert read.login_config is not None
    assert read.login_config.login_failed_message == "The credentials don't match."


# 5: sign out


def test_login_cookie_is_httponly_strict_and_logout_expires_it(server: Server) -> None:
    signed_in = login(server, server.access_key_id, server.secret_access_key)
    cookie = _set_cookie(signed_in)["internal_auth_session"]
    assert cookie.value == signed_in.json()["token"]
    assert cookie["httponly"] is True
    assert cookie["samesite"].lower() == "strict"
    assert cookie["path"] == "/"

    # no credentials needed: it only clears a cookie
    out = httpx.get(f"{server.url}/logout")
    assert out.status_code == 307
    assert out.headers["location"] == "/auth/login"
    expired = _set_cookie(out)["internal_auth_session"]
    assert expired.value == ""
    assert expired["max-age"] == "0"
    assert expired["path"] == "/"
    assert expired["httponly"] is True
    assert expired["samesite"].lower() == "strict"
    when = datetime.strptime(expired["expires"], "%a, %d %b %Y %H:%M:%S GMT").replace(tzinfo=UTC)
    assert when <= datetime.now(UTC)


def test_a_browser_signs_in_and_out(server: Server) -> None:
    """The UI's round trip: sign in, the cookie signs calls in, /logout, then anonymous."""
    with httpx.Client(base_url=server.url) as browser:
        assert browser.get("/api/v1/user").json()["user"]["id"] == ""
        signed_in = browser.post(
            "/api/v1/auth/login",
            json={
                "access_key_id": server.access_key_id,
                "secret_access_key": server.secret_access_key,
            },
        )
        assert signed_in.status_code == 200
        assert browser.get("/api/v1/user").json()["user"]["id"] == "admin"
        assert browser.get("/api/v1/config").status_code == 200
        out = browser.get("/logout")
        assert out.status_code == 307
        assert "internal_auth_session" not in browser.cookies
        assert browser.get("/api/v1/user").json() == {"user": {"id": "", "creation_date": 0}}
        _assert_signed_out(browser.get("/api/v1/config"), "no credentials (HTTP Basic)")


# 6: the preview's S3 requests, authenticated by the session cookie


@pytest.fixture(scope="module")
def preview_repo(server: Server) -> Iterator[str]:
    """A repository holding ``data/people.csv`` on ``main``."""
    name = unique("preview")
    with httpx.Client(
        base_url=f"{server.url}/api/v1", auth=(server.access_key_id, server.secret_access_key)
    ) as admin:
        made = admin.post(
            "/repositories", json={"name": name, "storage_namespace": server.namespace(name)}
        )
        assert made.status_code == 201, made.text
        put = admin.post(
            f"/repositories/{name}/branches/main/objects",
            params={"path": "data/people.csv"},
            content=CSV,
        )
        assert put.status_code == 201, put.text
        yield name
        assert admin.delete(f"/repositories/{name}").status_code == 204


def test_the_session_cookie_reads_and_lists_through_the_gateway(
    server: Server, preview_repo: str
) -> None:
    cookie = session_cookie(server)
    path = f"/{preview_repo}/main/data/people.csv"

    head = s3_request(server, "HEAD", path, cookie=cookie)
    assert head.status_code == 200, head.headers
    assert head.headers["content-length"] == str(len(CSV))
    got = s3_request(server, "GET", path, cookie=cookie)
    assert got.status_code == 200, got.text
    assert got.content == CSV
    # DuckDB reads ranges
    part = s3_request(server, "GET", path, cookie=cookie, headers={"Range": "bytes=0-7"})
    assert part.status_code == 206
    assert part.content == CSV[:8]

    listed = s3_request(
        server,
        "GET",
        f"/{preview_repo}",
        cookie=cookie,
        params={"list-type": "2", "prefix": "main/data/"},
    )
    assert listed.status_code == 200, listed.text
    keys = [k.text for k in ElementTree.fromstring(listed.content).iter(f"{S3_NS}Key")]
    assert keys == ["main/data/people.csv"]
    buckets = s3_request(server, "GET", "/", cookie=cookie)
    assert buckets.status_code == 200, buckets.text
    names = [n.text for n in ElementTree.fromstring(buckets.content).iter(f"{S3_NS}Name")]
    assert preview_repo in names
    assert s3_request(server, "HEAD", f"/{preview_repo}", cookie=cookie).status_code == 200

    # without the cookie the placeholder key is what it is: unknown
    alone = s3_request(server, "GET", path)
    assert alone.status_code == 403
    assert s3_code(alone) == "InvalidAccessKeyId"


def test_the_cookie_user_policies_apply_on_the_gateway(
    server: Server, preview_repo: str, make_user: MakeUser
) -> None:
    nobody = make_user()
    cookie = session_cookie(server, nobody.access_key_id, nobody.secret_access_key)
    refused = s3_request(server, "GET", f"/{preview_repo}/main/data/people.csv", cookie=cookie)
    assert refused.status_code == 403
    assert s3_code(refused) == "AccessDenied"
    reader = make_user("Readers")
    cookie = session_cookie(server, reader.access_key_id, reader.secret_access_key)
    read = s3_request(server, "GET", f"/{preview_repo}/main/data/people.csv", cookie=cookie)
    assert read.status_code == 200 and read.content == CSV


def test_a_forged_cookie_reads_nothing(server: Server, preview_repo: str) -> None:
    forged = _forged(session_cookie(server))
    for method, path in (
        ("GET", f"/{preview_repo}/main/data/people.csv"),
        ("GET", "/"),
        ("GET", f"/{preview_repo}"),
    ):
        refused = s3_request(server, method, path, cookie=forged)
        assert refused.status_code == 403, refused.text
        assert s3_code(refused) == "AccessDenied"
        assert "invalid token signature" in refused.text
    head = s3_request(server, "HEAD", f"/{preview_repo}/main/data/people.csv", cookie=forged)
    assert head.status_code == 403


def test_the_cookie_never_authenticates_a_write(server: Server, preview_repo: str) -> None:
    cookie = session_cookie(server)
    target = f"/{preview_repo}/main/data/written.csv"
    existing = f"/{preview_repo}/main/data/people.csv"
    writes: list[tuple[str, str, bytes, dict[str, str] | None]] = [
        ("PUT", target, b"x,y\n", None),
        ("DELETE", existing, b"", None),
        ("POST", target, b"", {"uploads": ""}),
        (
            "POST",
            f"/{preview_repo}",
            b"<Delete><Object><Key>main/data/people.csv</Key></Object></Delete>",
            {"delete": ""},
        ),
    ]
    # refused exactly as the same write without the cookie: the placeholder key is unknown,
    # and a real key with a bad signature does not match
    for key, code in ((PLACEHOLDER_KEY, "InvalidAccessKeyId"), (server.access_key_id, None)):
        for method, path, body, params in writes:
            with_cookie = s3_request(
                server, method, path, cookie=cookie, body=body, key=key, params=params
            )
            without = s3_request(server, method, path, body=body, key=key, params=params)
            assert with_cookie.status_code == without.status_code == 403, with_cookie.text
            assert s3_code(with_cookie) == s3_code(without) == (code or "SignatureDoesNotMatch")
    with httpx.Client(
        base_url=f"{server.url}/api/v1", auth=(server.access_key_id, server.secret_access_key)
    ) as admin:
        stat = f"/repositories/{preview_repo}/refs/main/objects/stat"
        assert admin.get(stat, params={"path": "data/written.csv"}).status_code == 404
        assert admin.get(stat, params={"path": "data/people.csv"}).status_code == 200


def test_a_cookie_read_still_has_to_be_an_s3_request(server: Server, preview_repo: str) -> None:
    cookie = session_cookie(server)
    # no signature: the request is the REST API's, which has no such path
    plain = httpx.get(
        f"{server.url}/{preview_repo}/main/data/people.csv",
        headers={"Cookie": f"internal_auth_session={cookie}"},
    )
    assert plain.status_code == 404
    assert CSV not in plain.content
    # a malformed signature is refused before the cookie is looked at
    malformed = httpx.get(
        f"{server.url}/{preview_repo}/main/data/people.csv",
        headers={
            "Cookie": f"internal_auth_session={cookie}",
            "Authorization": "AWS4-HMAC-SHA256 Credential=nothing",
            "x-amz-date": time.strftime("%Y%m%dT%H%M%SZ", time.gmtime()),
            "x-amz-content-sha256": hashlib.sha256(b"").hexdigest(),
        },
    )
    assert malformed.status_code == 400, malformed.text
    assert s3_code(malformed) == "AuthorizationHeaderMalformed"
