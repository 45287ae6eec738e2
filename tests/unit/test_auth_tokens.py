"""Login tokens in process: the JWT's form, every way a token is refused, and the signing key.

The schemes' order and the per-use user check run on the in-process app (httpx's ASGI
transport): Bearer before Basic, Basic before the cookie, no fallback from a bad Bearer token.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import hmac
import json
from pathlib import Path
from typing import Any

import httpx
import pytest
from pydantic import SecretStr

from mirror.api.app import create_app
from mirror.auth.errors import AuthenticationError
from mirror.auth.store import AuthStore
from mirror.auth.tokens import LoginTokens, derive_signing_key
from mirror.config import AuthSettings, ConfigurationError, KVSettings, LakeMirrorConfig
from mirror.core.embedded import open_memory

KEY = ("AKIATOKENS0000000001", "tokens-secret")


class Clock:
    def __init__(self, now: float = 1_800_000_000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _signed(key: bytes, header: dict[str, Any], claims: Any) -> str:
    head = _b64(json.dumps(header).encode())
    body = _b64(json.dumps(claims).encode())
    mac = hmac.new(key, f"{head}.{body}".encode(), hashlib.sha256).digest()
    return f"{head}.{body}.{_b64(mac)}"


def _parts(token: str) -> list[dict[str, Any]]:
    return [
        json.loads(base64.urlsafe_b64decode(p + "=" * (-len(p) % 4))) for p in token.split(".")[:2]
    ]


def test_issued_token_holds_lakefs_claims_and_verifies() -> None:
    clock = Clock()
    tokens = LoginTokens(b"k" * 32, 3600, clock)
    issued = tokens.issue("alice")
    header, claims = _parts(issued.token)
    assert header == {"alg": "HS256", "typ": "JWT"}
    assert claims["iss"] == "auth" and claims["aud"] == "login" and claims["sub"] == "alice"
    assert (
        claims["iat"] == int(clock.now) and claims["exp"] == issued.expires == claims["iat"] + 3600
    )
    assert len(claims["jti"]) == 32
    assert tokens.verify(issued.token) == "alice"
    assert tokens.issue("alice").token != issued.token
    assert issued.token not in repr(issued) and "k" * 32 not in repr(tokens)


def test_refusals() -> None:
    key = b"k" * 32
    clock = Clock()
    tokens = LoginTokens(key, 60, clock)
    good = {"iss": "auth", "aud": "login", "sub": "alice", "iat": clock.now, "exp": clock.now + 60}
    hs256 = {"alg": "HS256", "typ": "JWT"}
    bad = {
        "expired": _signed(key, hs256, good | {"exp": clock.now}),
        "issuer": _signed(key, hs256, good | {"iss": "other"}),
        "audience": _signed(key, hs256, good | {"aud": "api"}),
        "no subject": _signed(key, hs256, good | {"sub": ""}),
        "no expiry": _signed(key, hs256, {k: v for k, v in good.items() if k != "exp"}),
        "other key": _signed(b"o" * 32, hs256, good),
        "alg none": _signed(key, {"alg": "none"}, good)[:-43],
        "alg HS512": _signed(key, {"alg": "HS512"}, good),
        "not an object": _signed(key, hs256, ["alice"]),
        "two parts": "a.b",
        "garbage": "!!!.@@@.###",
    }
    for reason, token in bad.items():
        with pytest.raises(AuthenticationError) as refused:
            tokens.verify(token)
        assert str(refused.value).startswith("error authenticating request"), reason
    # an audience list that names login is lakeFS's too
    assert tokens.verify(_signed(key, hs256, good | {"aud": ["x", "login"]})) == "alice"
    clock.now += 59
    assert tokens.verify(_signed(key, hs256, good)) == "alice"


def test_signing_key_is_derived_from_the_encryption_key(tmp_path: Path) -> None:
    derived = derive_signing_key("material")
    assert derived != b"material" and len(derived) == 32
    assert derive_signing_key("material") == derived != derive_signing_key("other")

    configured = LakeMirrorConfig(
        data_dir=tmp_path, auth=AuthSettings(encrypt_secret_key=SecretStr("material"))
    )
    one, two = LoginTokens.from_config(configured), LoginTokens.from_config(configured)
    assert two.verify(one.issue("bob").token) == "bob"
    assert one.duration == 7 * 86_400

    # the embedded default: the generated key file, shared by every process of the data dir
    embedded = LakeMirrorConfig(data_dir=tmp_path / "d", auth=AuthSettings(login_duration=5))
    first = LoginTokens.from_config(embedded)
    assert LoginTokens.from_config(embedded).verify(first.issue("carol").token) == "carol"
    assert first.duration == 5
    with pytest.raises(AuthenticationError):
        one.verify(first.issue("carol").token)

    with pytest.raises(ConfigurationError):
        LoginTokens.from_config(LakeMirrorConfig(data_dir=tmp_path, kv=KVSettings(type="dynamodb")))


class Api:
    """The in-process app, called through httpx's ASGI transport."""

    def __init__(self, app: Any) -> None:
        self.app = app

    def request(self, method: str, path: str, **options: Any) -> httpx.Response:
        async def send() -> httpx.Response:
            transport = httpx.ASGITransport(app=self.app)
            async with httpx.AsyncClient(transport=transport, base_url="http://t/api/v1") as c:
                return await c.request(method, path, **options)

        return asyncio.run(send())

    def login(self, key: str, secret: str) -> httpx.Response:
        return self.request(
            "POST", "/auth/login", json={"access_key_id": key, "secret_access_key": secret}
        )

    def status(self, headers: list[tuple[str, str]], cookie: str | None = None) -> int:
        if cookie is not None:
            headers = [*headers, ("Cookie", f"internal_auth_session={cookie}")]
        return self.request("GET", "/user", headers=headers).status_code


@pytest.fixture
def api() -> tuple[AuthStore, Api]:
    catalog = open_memory()
    auth = AuthStore(catalog.kv)
    auth.bootstrap_admin("admin", *KEY)
    return auth, Api(create_app(catalog, auth))


def test_schemes_in_lakefs_order(api: tuple[AuthStore, Api]) -> None:
    auth, http = api
    answer = http.login(*KEY)
    assert answer.status_code == 200, answer.text
    token = answer.json()["token"]
    assert answer.cookies["internal_auth_session"] == token
    basic = "Basic " + base64.b64encode(f"{KEY[0]}:{KEY[1]}".encode()).decode()
    wrong_basic = "Basic " + base64.b64encode(f"{KEY[0]}:nope".encode()).decode()
    status = http.status

    assert status([("Authorization", f"Bearer {token}")]) == 200
    assert status([], token) == 200
    # the Bearer token decides, whatever Basic says
    assert status([("Authorization", f"Bearer {token}"), ("Authorization", wrong_basic)]) == 200
    assert status([("Authorization", "Bearer x.y.z"), ("Authorization", basic)]) == 401
    # Basic comes before the cookie
    assert status([("Authorization", basic)], "x.y.z") == 200
    assert status([("Authorization", wrong_basic)], token) == 401
    assert status([], "x.y.z") == 401
    assert status([("Authorization", "Bearer ")]) == 401

    refused = http.login(KEY[0], "no")
    assert refused.status_code == 401
    assert refused.json()["message"].startswith("error authenticating request")
    assert http.request("POST", "/auth/login", json={"access_key_id": KEY[0]}).status_code == 400

    # a user's token stops working with the user's last key, and with the user
    auth.create_user("dave")
    key = auth.create_credentials("dave")
    dave = http.login(key.access_key_id, key.secret_access_key).json()["token"]
    assert status([("Authorization", f"Bearer {dave}")]) == 200
    auth.delete_credentials("dave", key.access_key_id)
    assert status([("Authorization", f"Bearer {dave}")]) == 401
    auth.create_credentials("dave")
    assert status([("Authorization", f"Bearer {dave}")]) == 200
    auth.delete_user("dave")
    assert status([("Authorization", f"Bearer {dave}")]) == 401
