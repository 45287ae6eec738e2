"""Keys stored before secrets were encrypted: REST sign-in keeps working and seals the secret
(compare-and-swap), the gateway refuses an unsealed key with a message saying what to do, and
neither path ever logs the secret."""

from __future__ import annotations

import io
import logging
import sys
from pathlib import Path
from typing import Any

import httpx
import pytest

from mirror.api.app import create_app
from mirror.auth.records import decode, record_key
from mirror.auth.secrets import SecretCipher
from mirror.auth.store import AuthStore
from mirror.block import BlockResolver
from mirror.core.catalog import Catalog
from mirror.gateway.auth import authenticate
from mirror.gateway.errors import S3Code, S3Error
from mirror.kv import MemoryKV
from mirror.logging import configure_logging
from tests.unit.gateway_signing import (
    CIPHER,
    KEY_ID,
    SECRET,
    SETTINGS,
    USER,
    asgi_request,
    drain,
    sign_v4,
)

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def old_installation() -> MemoryKV:
    """Return a KV whose key was stored by a release that kept only the hash."""
    kv = MemoryKV()
    old = AuthStore(kv)
    old.ensure_builtins()
    old.create_user(USER)
    old.add_member("Writers", USER)
    old.create_credentials(USER, KEY_ID, SECRET)
    record = decode(kv.get(record_key("credentials", KEY_ID)))
    assert sorted(record) == ["access_key_id", "creation_date", "secret_hash", "user_id"]
    return kv


async def rest_sign_in(auth: AuthStore, tmp_path: Path) -> int:
    app = create_app(Catalog(auth.kv, BlockResolver(tmp_path)), auth)
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://lakemirror") as client:
        response = await client.get("/api/v1/user", auth=(KEY_ID, SECRET))
    return response.status_code


async def gateway(auth: AuthStore, body: bytes = b"") -> Any:
    url, headers = sign_v4("PUT", "http://127.0.0.1:8000/repo/main/a", body=body)
    result = await authenticate(asgi_request("PUT", url, headers, [body]), auth, SETTINGS)
    assert await drain(result.body) == body
    return result


async def test_old_key_signs_in_over_rest_then_verifies_on_the_gateway(tmp_path: Path) -> None:
    kv = old_installation()
    auth = AuthStore(kv, cipher=CIPHER)
    with pytest.raises(S3Error) as caught:
        await gateway(auth)
    assert caught.value.code is S3Code.ACCESS_DENIED
    assert caught.value.message.startswith("Access Denied: ")
    assert "predates encrypted secrets" in caught.value.message
    assert "rotate it" in caught.value.message
    assert SECRET not in caught.value.message

    assert await rest_sign_in(auth, tmp_path) == 200
    record = decode(kv.get(record_key("credentials", KEY_ID)))
    assert "encrypted_secret" in record
    assert SECRET not in kv.get(record_key("credentials", KEY_ID)).decode()
    assert (await gateway(auth, b"now it verifies")).caller.user.id == USER
    # another process sharing the KV and the key sees the migration at once
    assert (await gateway(AuthStore(kv, cipher=CIPHER))).caller.user.id == USER


async def test_another_encryption_key_is_a_clear_refusal_then_resealed(tmp_path: Path) -> None:
    kv = MemoryKV()
    first = AuthStore(kv, cipher=CIPHER)
    first.create_user(USER)
    first.create_credentials(USER, KEY_ID, SECRET)
    other = AuthStore(kv, cipher=SecretCipher("a key configured later"))
    with pytest.raises(S3Error) as caught:
        await gateway(other)
    assert caught.value.code is S3Code.ACCESS_DENIED
    assert "auth.encrypt_secret_key" in caught.value.message
    assert await rest_sign_in(other, tmp_path) == 200
    assert (await gateway(other)).caller.user.id == USER


class RacingKV(MemoryKV):
    """Runs ``before_swap`` once, just before the first compare-and-swap of a key record."""

    def __init__(self) -> None:
        super().__init__()
        self.before_swap: Any = None

    def set_if(self, key: bytes, value: bytes, expected: bytes | None) -> None:
        hook, self.before_swap = self.before_swap, None
        if hook is not None and key == record_key("credentials", KEY_ID):
            hook()
        super().set_if(key, value, expected)


def _setup_racing() -> RacingKV:
    kv = RacingKV()
    old = AuthStore(kv)
    old.create_user(USER)
    old.create_credentials(USER, KEY_ID, SECRET)
    return kv


def test_a_concurrent_migration_wins_and_nothing_is_lost() -> None:
    kv = _setup_racing()
    winner: dict[str, Any] = {}

    def other_process_migrates() -> None:
        AuthStore(kv, cipher=CIPHER).sign_in(KEY_ID, SECRET)
        winner.update(decode(kv.get(record_key("credentials", KEY_ID))))

    kv.before_swap = other_process_migrates
    auth = AuthStore(kv, cipher=CIPHER)
    assert auth.sign_in(KEY_ID, SECRET).user.id == USER
    assert "encrypted_secret" in winner
    assert decode(kv.get(record_key("credentials", KEY_ID))) == winner
    assert auth.secret_for_signing(KEY_ID).secret == SECRET


def test_a_concurrent_rotation_is_not_overwritten() -> None:
    kv = _setup_racing()
    rotated: dict[str, Any] = {}

    def administrator_replaces_the_key() -> None:
        AuthStore(kv, cipher=CIPHER).bootstrap_admin(USER, KEY_ID, "a newer secret")
        rotated.update(decode(kv.get(record_key("credentials", KEY_ID))))

    kv.before_swap = administrator_replaces_the_key
    auth = AuthStore(kv, cipher=CIPHER)
    auth.sign_in(KEY_ID, SECRET)
    assert decode(kv.get(record_key("credentials", KEY_ID))) == rotated
    assert auth.secret_for_signing(KEY_ID).secret == "a newer secret"


async def test_sign_in_and_gateway_requests_never_log_the_secret(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    stream = io.StringIO()
    configure_logging("json", "debug", stream=stream)
    caplog.set_level(logging.DEBUG)
    try:
        kv = old_installation()
        auth = AuthStore(kv, cipher=CIPHER)
        with pytest.raises(S3Error):
            await gateway(auth)
        assert await rest_sign_in(auth, tmp_path) == 200
        await gateway(auth, b"body")
        url, headers = sign_v4("GET", "http://127.0.0.1:8000/repo/main/a", secret="wrong")
        with pytest.raises(S3Error):
            await authenticate(asgi_request("GET", url, headers), auth, SETTINGS)
        logging.getLogger("mirror.test").debug("request done")
    finally:
        configure_logging("json", "info", stream=sys.stderr)
    logged = stream.getvalue() + caplog.text
    assert "request done" in logged
    assert SECRET not in logged
