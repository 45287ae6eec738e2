"""A new access key's secret sealed in a cookie: it opens for its session, user and key only."""

from __future__ import annotations

from http.cookies import SimpleCookie

from starlette.requests import Request
from starlette.responses import Response

from mirror.ui import new_key
from mirror.ui.csrf import CsrfTokens
from mirror.ui.session import Session

CSRF = CsrfTokens(b"k" * 32)
SESSION = Session("login-token-a", "admin", CSRF.token_for("login-token-a"))
KEY = new_key.NewKey("AKIAJNEWKEY000000001", "s3cr3t/Secret+Access/Key0123456789abcdefgh")
PAGE = "/ui/auth/users/jane/credentials/AKIAJNEWKEY000000001"


def _request(cookie: str = "", scheme: str = "http") -> Request:
    headers = [(b"cookie", cookie.encode())] if cookie else []
    return Request(
        {
            "type": "http",
            "method": "GET",
            "path": PAGE,
            "headers": headers,
            "scheme": scheme,
            "server": ("lakemirror.example", 443),
        }
    )


def _sealed(scheme: str = "http") -> tuple[str, SimpleCookie]:
    response = Response()
    new_key.seal(response, _request(scheme=scheme), CSRF, SESSION, "jane", KEY, PAGE)
    jar: SimpleCookie = SimpleCookie()
    jar.load(response.headers["set-cookie"])
    return f"{new_key.COOKIE}={jar[new_key.COOKIE].value}", jar


def test_the_secret_opens_on_its_page_for_its_session() -> None:
    cookie, jar = _sealed()
    morsel = jar[new_key.COOKIE]
    assert morsel["path"] == PAGE and morsel["httponly"] and morsel["samesite"] == "strict"
    assert morsel["max-age"] == str(new_key.LIFETIME) and not morsel["secure"]
    assert KEY.secret_access_key not in cookie
    assert new_key.opened(_request(cookie), CSRF, SESSION, "jane", KEY.access_key_id) == KEY
    assert "<secret hidden>" in repr(KEY) and KEY.secret_access_key not in repr(KEY)


def test_the_secret_opens_for_nothing_else() -> None:
    cookie, _ = _sealed()
    other_session = Session("login-token-b", "admin", CSRF.token_for("login-token-b"))
    assert new_key.opened(_request(cookie), CSRF, other_session, "jane", KEY.access_key_id) is None
    assert new_key.opened(_request(cookie), CSRF, SESSION, "joe", KEY.access_key_id) is None
    assert new_key.opened(_request(cookie), CSRF, SESSION, "jane", "AKIAJOTHER0000000001") is None
    other_installation = CsrfTokens(b"x" * 32)
    assert (
        new_key.opened(_request(cookie), other_installation, SESSION, "jane", KEY.access_key_id)
        is None
    )
    tampered = cookie[:-6] + ("A" if cookie[-6] != "A" else "B") + cookie[-5:]
    assert new_key.opened(_request(tampered), CSRF, SESSION, "jane", KEY.access_key_id) is None
    for garbage in (f"{new_key.COOKIE}=!!!", f"{new_key.COOKIE}=abc", ""):
        assert new_key.opened(_request(garbage), CSRF, SESSION, "jane", KEY.access_key_id) is None


def test_over_tls_the_cookie_is_secure_and_is_expired_on_its_page() -> None:
    _, jar = _sealed("https")
    assert jar[new_key.COOKIE]["secure"]
    response = Response()
    new_key.clear(response, _request(scheme="https"), PAGE)
    expired: SimpleCookie = SimpleCookie()
    expired.load(response.headers["set-cookie"])
    morsel = expired[new_key.COOKIE]
    assert morsel.value == "" and morsel["max-age"] == "0" and morsel["path"] == PAGE
    assert morsel["secure"] and morsel["httponly"]


def test_a_subkey_is_its_labels_own() -> None:
    assert CSRF.subkey(b"a") != CSRF.subkey(b"b") and len(CSRF.subkey(b"a")) == 32
    assert CSRF.subkey(b"a") == CsrfTokens(b"k" * 32).subkey(b"a")
    assert CsrfTokens(b"x" * 32).subkey(b"a") != CSRF.subkey(b"a")
