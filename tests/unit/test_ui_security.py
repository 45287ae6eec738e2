"""The web UI's CSRF tokens, security headers, session cookie and dispatch, in process.

The apps are the real ones (the REST API over an in-memory catalog, the UI calling it through
ASGI), driven with httpx's ASGI transport; the browser flows are in tests/ui/.
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from http.cookies import SimpleCookie
from typing import Any

import httpx
import pytest

from mirror.api.app import create_app
from mirror.auth.secrets import SecretCipher
from mirror.auth.store import AuthStore
from mirror.auth.throttle import SignInThrottle, ThrottleRules
from mirror.auth.tokens import LoginTokens
from mirror.cli.repository_cleanups import register_repository_cleanups
from mirror.core import open_memory
from mirror.ui import CsrfTokens, create_ui_app, with_ui
from mirror.ui.csrf import HEADER
from mirror.ui.dispatch import is_ui_request
from mirror.ui.headers import (
    CONTENT_SECURITY_POLICY,
    SECURITY_HEADERS,
    USER_CONTENT_SECURITY_POLICY,
    SecurityHeadersMiddleware,
)
from mirror.ui.session import HOME_PATH, safe_next

ADMIN = ("AKIAADMIN00000000001", "admin-secret")

# CSRF tokens


def test_a_csrf_token_belongs_to_one_session() -> None:
    csrf = CsrfTokens(b"k" * 32)
    token = csrf.token_for("session-a")
    assert token == csrf.token_for("session-a") and re.fullmatch(r"[A-Za-z0-9_-]{43}", token)
    assert csrf.check("session-a", token)
    assert not csrf.check("session-b", token)
    assert not csrf.check("session-a", token[:-1])
    assert not csrf.check("session-a", None) and not csrf.check("session-a", "")
    assert not csrf.check("", csrf.token_for(""))
    assert not CsrfTokens(b"x" * 32).check("session-a", token)


def test_csrf_keys_come_from_the_installations_login_key() -> None:
    key = b"s" * 32
    one, other = (
        CsrfTokens.from_login_tokens(LoginTokens(key)),
        CsrfTokens.from_login_tokens(LoginTokens(key)),
    )
    assert one.token_for("t") == other.token_for("t")
    elsewhere = CsrfTokens.from_login_tokens(LoginTokens(b"t" * 32))
    assert elsewhere.token_for("t") != one.token_for("t")
    # the CSRF key is not the signing key
    assert CsrfTokens(key).token_for("t") != one.token_for("t")
    assert repr(one) == "CsrfTokens(<key hidden>)"
    with pytest.raises(ValueError):
        CsrfTokens(b"short")
    with pytest.raises(ValueError):
        LoginTokens(key).subkey(b"")


@pytest.mark.parametrize(
    ("given", "kept"),
    [
        ("/ui/repositories/x/branches?prefix=a", True),
        ("/ui/", True),
        (None, False),
        ("", False),
        ("ui/repositories", False),
        ("//evil.example/", False),
        ("/\\evil.example", False),
        ("https://evil.example/", False),
        ("javascript:alert(1)", False),
        ("/ui/\r\nSet-Cookie: x=y", False),
    ],
)
def test_next_stays_on_this_origin(given: str | None, kept: bool) -> None:
    assert safe_next(given) == (given if kept else HOME_PATH)


# headers


async def _inner(scope: object, receive: object, send: object) -> None:
    await send(  # type: ignore[operator]
        {
            "type": "http.response.start",
            "status": 200,
            "headers": [(b"x-frame-options", b"SAMEORIGIN"), (b"content-type", b"text/plain")],
        }
    )
    await send({"type": "http.response.body", "body": b"ok"})  # type: ignore[operator]


pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


async def test_the_headers_replace_what_a_view_set() -> None:
    transport = httpx.ASGITransport(app=SecurityHeadersMiddleware(_inner))
    async with httpx.AsyncClient(transport=transport, base_url="http://ui.test") as client:
        answer = await client.get("/")
    assert answer.headers.get_list("x-frame-options") == ["DENY"]
    assert answer.headers["content-security-policy"] == CONTENT_SECURITY_POLICY
    assert "'unsafe-inline'" not in CONTENT_SECURITY_POLICY
    assert answer.headers["content-type"] == "text/plain"


def _setting_csp(policy: bytes) -> Any:
    async def inner(scope: object, receive: object, send: object) -> None:
        headers = [(b"Content-Security-Policy", policy), (b"content-type", b"image/png")]
        await send({"type": "http.response.start", "status": 200, "headers": headers})  # type: ignore[operator]
        await send({"type": "http.response.body", "body": b"png"})  # type: ignore[operator]

    return inner


async def test_only_the_stricter_user_content_policy_survives_a_view() -> None:
    for given, expected in (
        (USER_CONTENT_SECURITY_POLICY.encode(), USER_CONTENT_SECURITY_POLICY),
        (b"default-src *; script-src 'unsafe-inline'", CONTENT_SECURITY_POLICY),
        (USER_CONTENT_SECURITY_POLICY.encode() + b"; script-src *", CONTENT_SECURITY_POLICY),
    ):
        transport = httpx.ASGITransport(app=SecurityHeadersMiddleware(_setting_csp(given)))
        async with httpx.AsyncClient(transport=transport, base_url="http://ui.test") as client:
            answer = await client.get("/")
        assert answer.headers.get_list("content-security-policy") == [expected]
        assert answer.headers["x-content-type-options"] == "nosniff"
        assert answer.headers["x-frame-options"] == "DENY"
    assert "sandbox" in USER_CONTENT_SECURITY_POLICY.split("; ")
    assert USER_CONTENT_SECURITY_POLICY.startswith("default-src 'none'")


@pytest.fixture
async def app() -> AsyncIterator[httpx.ASGITransport]:
    catalog = open_memory()
    register_repository_cleanups(catalog)
    auth = AuthStore(catalog.kv, cipher=SecretCipher("test key"))
    auth.bootstrap_admin("admin", *ADMIN)
    tokens = LoginTokens(b"L" * 32)
    api = create_app(catalog, auth, namespace_schemes=("mem",), login_tokens=tokens)
    ui = create_ui_app(api, CsrfTokens.from_login_tokens(tokens), api.state.metrics)
    yield httpx.ASGITransport(app=with_ui(api, ui))


@asynccontextmanager
async def _signed_in(transport: httpx.ASGITransport) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(transport=transport, base_url="http://ui.test") as client:
        answer = await client.post(
            "/ui/login", data={"access_key_id": ADMIN[0], "secret_access_key": ADMIN[1]}
        )
        assert answer.status_code == 303, answer.text
        yield client


@pytest.mark.parametrize(
    "path", ["/", "/ui", "/ui/login", "/ui/repositories", "/ui/static/ui.js", "/ui/nothing"]
)
async def test_every_answer_carries_the_headers(app: httpx.ASGITransport, path: str) -> None:
    async with _signed_in(app) as client:
        for signed_in in (True, False):
            if not signed_in:
                client.cookies.clear()
            answer = await client.get(path)
            for name, value in SECURITY_HEADERS.items():
                assert answer.headers[name] == value, (path, name)


@pytest.mark.parametrize("scheme", ["http", "https"])
async def test_the_session_cookie_is_secure_over_tls(app: httpx.ASGITransport, scheme: str) -> None:
    async with httpx.AsyncClient(transport=app, base_url=f"{scheme}://ui.test") as client:
        answer = await client.post(
            "/ui/login", data={"access_key_id": ADMIN[0], "secret_access_key": ADMIN[1]}
        )
        jar: SimpleCookie = SimpleCookie()
        jar.load(answer.headers["set-cookie"])
        cookie = jar["internal_auth_session"]
        assert bool(cookie["secure"]) == (scheme == "https")
        assert cookie["httponly"] and cookie["samesite"] == "strict"
        out = await client.post(
            "/ui/logout", data={"csrf_token": _token(await client.get("/ui/repositories"))}
        )
        jar.load(out.headers["set-cookie"])
        assert bool(jar["internal_auth_session"]["secure"]) == (scheme == "https")


def _token(page: httpx.Response) -> str:
    found = re.search(r'<meta name="csrf-token" content="([^"]+)">', page.text)
    assert found, page.text
    return found.group(1)


async def test_a_change_needs_the_sessions_token_in_the_form_or_the_header(
    app: httpx.ASGITransport,
) -> None:
    async with _signed_in(app) as client:
        token = _token(await client.get("/ui/repositories"))
        form = {"name": "made-here", "storage_namespace": "mem://made-here"}
        refused = await client.post("/ui/repositories", data=form)
        assert refused.status_code == 403 and "security token" in refused.text
        async with _signed_in(app) as other:
            # another session's token does not do
            stolen = _token(await other.get("/ui/repositories"))
            assert stolen != token
            refused = await client.post("/ui/repositories", data=form | {"csrf_token": stolen})
            assert refused.status_code == 403
        made = await client.post("/ui/repositories", data=form | {"csrf_token": token})
        assert (made.status_code, made.headers["location"]) == (303, "/ui/repositories/made-here")
        form["name"] = "made-by-script"
        made = await client.post("/ui/repositories", data=form, headers={HEADER: token})
        assert made.status_code == 303
        listed = await client.get("/api/v1/repositories", auth=ADMIN)
        assert [r["id"] for r in listed.json()["results"]] == ["made-by-script", "made-here"]


@pytest.mark.parametrize(
    ("method", "path", "ui"),
    [
        ("GET", "/", True),
        ("HEAD", "/", True),
        ("POST", "/", False),
        ("GET", "/ui", True),
        ("POST", "/ui/login", True),
        ("GET", "/uix", False),
        ("GET", "/auth/login", True),
        ("GET", "/api/v1/repositories", False),
        ("GET", "/logout", False),
        ("GET", "/healthz", False),
        ("GET", "/my-bucket/main/ui/x", False),
    ],
)
def test_which_requests_are_the_uis(method: str, path: str, ui: bool) -> None:
    assert is_ui_request({"type": "http", "method": method, "path": path}) is ui


@pytest.mark.parametrize(
    ("headers", "query"),
    [
        ([(b"authorization", b"AWS4-HMAC-SHA256 Credential=AKIA/x, Signature=00")], b""),
        ([(b"authorization", b"AWS AKIA:c2ln")], b""),
        ([], b"X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Signature=00"),
        ([], b"AWSAccessKeyId=AKIA&Expires=1&Signature=c2ln"),
    ],
)
def test_an_s3_client_is_never_sent_into_the_ui(
    headers: list[tuple[bytes, bytes]], query: bytes
) -> None:
    scope = {"type": "http", "method": "GET", "path": "/", "headers": headers}
    assert is_ui_request({**scope, "query_string": query}) is False
    # a browser's session reaches the UI
    browser = {"type": "http", "method": "GET", "path": "/", "headers": [(b"cookie", b"x=1")]}
    assert is_ui_request(browser) is True


async def test_ui_sign_ins_count_under_the_browsers_address() -> None:
    """The API sees the browser's address on a page's calls, not the server's own."""
    catalog = open_memory()
    register_repository_cleanups(catalog)
    auth = AuthStore(catalog.kv, cipher=SecretCipher("test key"))
    auth.bootstrap_admin("admin", *ADMIN)
    auth.throttle = SignInThrottle(ThrottleRules(threshold=2, address_threshold=1000))
    tokens = LoginTokens(b"L" * 32)
    api = create_app(catalog, auth, namespace_schemes=("mem",), login_tokens=tokens)
    ui = with_ui(api, create_ui_app(api, CsrfTokens.from_login_tokens(tokens), api.state.metrics))

    async def sign_in(browser: str, secret: str) -> httpx.Response:
        transport = httpx.ASGITransport(app=ui, client=(browser, 40000))
        async with httpx.AsyncClient(transport=transport, base_url="http://ui.test") as client:
            return await client.post(
                "/ui/login", data={"access_key_id": ADMIN[0], "secret_access_key": secret}
            )

    for _ in range(2):
        assert (await sign_in("203.0.113.7", "wrong")).status_code != 303
    # that browser's attempts with the key are refused now, the right secret too
    assert (await sign_in("203.0.113.7", ADMIN[1])).status_code != 303
    assert auth.throttle.check(ADMIN[0], "203.0.113.7") is not None
    # the same key from another browser signs in at once, and the server's own address is clean
    assert (await sign_in("198.51.100.4", ADMIN[1])).status_code == 303
    assert auth.throttle.check(ADMIN[0], "127.0.0.1") is None
