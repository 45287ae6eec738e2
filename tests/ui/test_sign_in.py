"""Signing in and out of the web UI in a real browser, and what guards the session.

Sign-in shows the server's own message for a bad key, lands on the repositories, honours
``next`` (only a path on this origin), signs out with a POST carrying the CSRF token, and an
expired session returns to the sign-in page and, after signing in, back to the page. Over raw
HTTP: the cookie's attributes, the security headers on every kind of answer, a POST without
the CSRF token refused with 403, and the paths the UI shares the listener with still answered
by the API and the gateway.
"""

from __future__ import annotations

import time
from http.cookies import SimpleCookie

import httpx
import pytest
from playwright.sync_api import Page, expect

from mirror.auth.secrets import ENCRYPT_KEY_FILE, load_or_create_key_file
from mirror.auth.tokens import LoginTokens, derive_signing_key
from mirror.ui.headers import SECURITY_HEADERS
from tests.integration.browser import s3_code, s3_request
from tests.integration.harness import Server
from tests.ui.browser import assert_accessible, fits_phone, screenshot, sign_in, sign_in_admin

pytestmark = pytest.mark.ui


def _expired_token(server: Server, user_id: str = "admin") -> str:
    """Return a login token of this installation that expired an hour ago."""
    material = load_or_create_key_file(server.data_dir / ENCRYPT_KEY_FILE)
    tokens = LoginTokens(derive_signing_key(material), 60.0, clock=lambda: time.time() - 3600)
    return tokens.issue(user_id).token


def test_a_bad_key_shows_the_servers_message(page: Page, server: Server) -> None:
    page.goto(server.url + "/ui/login")
    page.get_by_label("Access key ID").fill("AKIANOSUCHKEY0000000")
    page.get_by_label("Secret access key").fill("wrong")
    page.get_by_role("button", name="Sign in").click()
    error = page.get_by_role("alert")
    expect(error).to_contain_text("error authenticating request")
    expect(page).to_have_url(server.url + "/ui/login")
    # the key stays filled in, the secret does not
    expect(page.get_by_label("Access key ID")).to_have_value("AKIANOSUCHKEY0000000")
    expect(page.get_by_label("Secret access key")).to_have_value("")
    assert_accessible(page)
    fits_phone(page)
    screenshot(page, "sign-in")


def test_signing_in_lands_on_the_repositories_and_shows_the_user(
    page: Page, server: Server
) -> None:
    page.goto(server.url + "/")
    expect(page).to_have_url(server.url + "/ui/login?next=/ui/repositories")
    assert_accessible(page)
    sign_in_admin(page, server, "/")
    expect(page).to_have_url(server.url + "/ui/repositories")
    expect(page.locator(".current-user")).to_have_text("admin")
    cookie = next(c for c in page.context.cookies() if c["name"] == "internal_auth_session")
    assert cookie["httpOnly"] and cookie["sameSite"] == "Strict" and not cookie["secure"]


def test_next_is_honoured_and_only_on_this_origin(page: Page, server: Server) -> None:
    page.goto(server.url + "/ui/repositories?search=abc")
    expect(page).to_have_url(server.url + "/ui/login?next=/ui/repositories%3Fsearch%3Dabc")
    sign_in_admin(page, server, "/ui/repositories?search=abc")
    expect(page).to_have_url(server.url + "/ui/repositories?search=abc")
    expect(page.get_by_label("Repositories starting with")).to_have_value("abc")
    for hostile in ("//evil.example/x", "https://evil.example/", "/\\evil.example"):
        page.context.clear_cookies()
        path = "/ui/login?" + str(httpx.QueryParams({"next": hostile}))
        sign_in(page, server, server.access_key_id, server.secret_access_key, path)
        expect(page).to_have_url(server.url + "/ui/repositories")


def test_signing_out_ends_the_session(page: Page, server: Server) -> None:
    sign_in_admin(page, server)
    page.get_by_role("button", name="Sign out").click()
    expect(page).to_have_url(server.url + "/ui/login")
    assert not [c for c in page.context.cookies() if c["name"] == "internal_auth_session"]
    page.goto(server.url + "/ui/repositories")
    expect(page).to_have_url(server.url + "/ui/login?next=/ui/repositories")


def test_an_expired_session_returns_to_sign_in_and_back(page: Page, server: Server) -> None:
    sign_in_admin(page, server)
    page.context.add_cookies(
        [{"name": "internal_auth_session", "value": _expired_token(server), "url": server.url}]
    )
    page.goto(server.url + "/ui/repositories?search=zz")
    expect(page).to_have_url(server.url + "/ui/login?next=/ui/repositories%3Fsearch%3Dzz")
    page.get_by_label("Access key ID").fill(server.access_key_id)
    page.get_by_label("Secret access key").fill(server.secret_access_key)
    page.get_by_role("button", name="Sign in").click()
    expect(page).to_have_url(server.url + "/ui/repositories?search=zz")
    expect(page.locator(".current-user")).to_have_text("admin")


# over raw HTTP


def _sign_in(client: httpx.Client, server: Server) -> None:
    answer = client.post(
        "/ui/login",
        data={"access_key_id": server.access_key_id, "secret_access_key": server.secret_access_key},
    )
    assert answer.status_code == 303, answer.text


def test_the_session_cookie_is_the_apis(server: Server) -> None:
    answer = httpx.post(
        f"{server.url}/ui/login",
        data={"access_key_id": server.access_key_id, "secret_access_key": server.secret_access_key},
    )
    assert answer.status_code == 303 and answer.headers["location"] == "/ui/repositories"
    jar: SimpleCookie = SimpleCookie()
    jar.load(answer.headers["set-cookie"])
    cookie = jar["internal_auth_session"]
    assert cookie["httponly"] and cookie["samesite"] == "strict" and cookie["path"] == "/"
    assert not cookie["secure"]
    # the token is the API's own: it signs in any API call
    me = httpx.get(f"{server.url}/api/v1/user", headers={"Authorization": f"Bearer {cookie.value}"})
    assert me.json()["user"]["id"] == "admin"


def test_a_post_without_the_csrf_token_is_refused(server: Server, page: Page) -> None:
    with httpx.Client(base_url=server.url, timeout=30.0) as client:
        _sign_in(client, server)
        for path in ("/ui/repositories", "/ui/logout"):
            refused = client.post(
                path, data={"name": "csrf-less", "storage_namespace": "local://x"}
            )
            assert refused.status_code == 403, refused.text
            assert "security token is missing" in refused.text
        forged = client.post(
            "/ui/repositories",
            data={"name": "csrf-forged", "storage_namespace": "local://x", "csrf_token": "x" * 43},
        )
        assert forged.status_code == 403
        # a form another site made the browser send is refused before its token is read
        cross = client.post("/ui/repositories", headers={"Sec-Fetch-Site": "cross-site"}, data={})
        assert cross.status_code == 403
        admin = (server.access_key_id, server.secret_access_key)
        assert client.get("/api/v1/repositories/csrf-less", auth=admin).status_code == 404
    # the browser shows why
    sign_in_admin(page, server)
    page.evaluate(
        """() => { const f = document.createElement('form'); f.method = 'post';
        f.action = '/ui/repositories'; document.body.append(f); f.submit(); }"""
    )
    expect(page.get_by_role("alert")).to_contain_text("security token is missing")
    assert_accessible(page)


@pytest.mark.parametrize(
    "path",
    ["/", "/ui/login", "/ui/repositories", "/ui/static/ui.css", "/ui/no-such-page", "/auth/login"],
)
def test_every_ui_answer_carries_the_security_headers(server: Server, path: str) -> None:
    answer = httpx.get(server.url + path)
    for name, value in SECURITY_HEADERS.items():
        assert answer.headers[name] == value, (path, name)


def test_the_listener_still_answers_the_api_and_the_gateway(server: Server) -> None:
    assert httpx.get(f"{server.url}/healthz").status_code == 200
    assert httpx.get(f"{server.url}/openapi.json").status_code == 200
    assert httpx.get(f"{server.url}/api/v1/user").json()["user"]["id"] == ""
    logout = httpx.get(f"{server.url}/logout")
    assert logout.status_code == 307 and logout.headers["location"] == "/auth/login"
    assert "content-security-policy" not in logout.headers
    # lakeFS's sign-in path, where /logout sends the browser, leads to the UI's
    assert httpx.get(f"{server.url}/auth/login").headers["location"] == "/ui/login"
    # a signed GET / is S3's ListBuckets, not the UI
    listing = s3_request(server, "GET", "/")
    assert listing.status_code == 403 and s3_code(listing) == "InvalidAccessKeyId"
    # an unsigned request elsewhere is still the API's
    assert httpx.post(f"{server.url}/").status_code in (404, 405)
