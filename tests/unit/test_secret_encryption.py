"""Secret access keys stored encrypted: the cipher, the generated key file, the configuration,
and what the auth store keeps (never the secret in the clear)."""

from __future__ import annotations

import stat
import threading
from pathlib import Path

import pytest
from pydantic import SecretStr

from mirror.auth.errors import (
    AuthenticationError,
    CredentialsNotFoundError,
    SecretKeyMismatchError,
    SecretNotStoredError,
)
from mirror.auth.secrets import (
    ENCRYPT_KEY_FILE,
    SecretCipher,
    cipher_from_config,
    load_or_create_key_file,
    optional_cipher,
)
from mirror.auth.store import AuthStore
from mirror.config import AuthSettings, ConfigurationError, KVSettings, LakeMirrorConfig
from mirror.kv import MemoryKV
from tests.unit.gateway_signing import CIPHER, KEY_ID, SECRET, USER, store


def test_seal_and_open() -> None:
    sealed = CIPHER.seal(KEY_ID, SECRET)
    assert SECRET not in sealed
    assert sealed.startswith("aesgcm1$")
    assert CIPHER.open(KEY_ID, sealed) == SECRET
    assert CIPHER.seal(KEY_ID, SECRET) != sealed  # a fresh nonce each time


def test_another_key_or_another_record_does_not_open() -> None:
    sealed = CIPHER.seal(KEY_ID, SECRET)
    with pytest.raises(SecretKeyMismatchError, match=r"auth\.encrypt_secret_key"):
        SecretCipher("another key").open(KEY_ID, sealed)
    with pytest.raises(SecretKeyMismatchError):
        CIPHER.open("AKIAOTHERKEY00000001", sealed)
    with pytest.raises(SecretKeyMismatchError):
        CIPHER.open(KEY_ID, sealed[:-4] + "AAAA")
    with pytest.raises(SecretKeyMismatchError):
        CIPHER.open(KEY_ID, "rot13$" + sealed.partition("$")[2])


def test_the_key_is_never_shown() -> None:
    assert "unit-test" not in repr(CIPHER)
    with pytest.raises(ValueError):
        SecretCipher("")


def test_key_file_is_generated_once_with_mode_0600(tmp_path: Path) -> None:
    path = tmp_path / "data" / ENCRYPT_KEY_FILE
    first = load_or_create_key_file(path)
    assert len(first) >= 32
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert load_or_create_key_file(path) == first
    assert sorted(p.name for p in path.parent.iterdir()) == [ENCRYPT_KEY_FILE]


def test_racing_processes_agree_on_one_key(tmp_path: Path) -> None:
    path = tmp_path / ENCRYPT_KEY_FILE
    keys: list[str] = []
    start = threading.Barrier(8)

    def race() -> None:
        start.wait()
        keys.append(load_or_create_key_file(path))

    threads = [threading.Thread(target=race) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(keys) == 8
    assert set(keys) == {path.read_text().strip()}


def test_an_empty_key_file_is_refused(tmp_path: Path) -> None:
    path = tmp_path / ENCRYPT_KEY_FILE
    path.write_text("")
    config = LakeMirrorConfig(data_dir=tmp_path)
    with pytest.raises(ConfigurationError, match="key file"):
        cipher_from_config(config)


def test_config_sqlite_generates_dynamodb_requires(tmp_path: Path) -> None:
    embedded = LakeMirrorConfig(data_dir=tmp_path)
    sealed = cipher_from_config(embedded).seal(KEY_ID, SECRET)
    assert (tmp_path / ENCRYPT_KEY_FILE).exists()
    assert cipher_from_config(embedded).open(KEY_ID, sealed) == SECRET

    dynamo = LakeMirrorConfig(data_dir=tmp_path, kv=KVSettings(type="dynamodb"))
    with pytest.raises(ConfigurationError) as caught:
        cipher_from_config(dynamo)
    assert "auth.encrypt_secret_key" in str(caught.value)
    assert "LAKEMIRROR_AUTH__ENCRYPT_SECRET_KEY" in str(caught.value)
    assert optional_cipher(dynamo) is None

    configured = LakeMirrorConfig(
        data_dir=tmp_path / "other",
        kv=KVSettings(type="dynamodb"),
        auth=AuthSettings(encrypt_secret_key=SecretStr("shared by every process")),
    )
    again = SecretCipher("shared by every process")
    assert again.open(KEY_ID, cipher_from_config(configured).seal(KEY_ID, SECRET)) == SECRET
    assert optional_cipher(configured) is not None
    assert not (tmp_path / "other").exists()


def test_the_setting_comes_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LAKEMIRROR_AUTH__ENCRYPT_SECRET_KEY", "from the environment")
    config = LakeMirrorConfig()
    assert config.auth.encrypt_secret_key is not None
    assert config.auth.encrypt_secret_key.get_secret_value() == "from the environment"
    assert "from the environment" not in repr(config)


def _raw_values(kv: MemoryKV) -> bytes:
    return b"\n".join(value for _, value in kv.scan(b"auth/", b""))


def test_store_keeps_hash_and_sealed_secret_never_the_secret() -> None:
    auth = store()
    assert isinstance(auth.kv, MemoryKV)
    assert SECRET.encode() not in _raw_values(auth.kv)
    cred = auth.get_credentials(USER, KEY_ID)
    assert cred.encrypted_secret is not None
    assert SECRET not in repr(cred)
    signing = auth.secret_for_signing(KEY_ID)
    assert signing.secret == SECRET
    assert SECRET not in repr(signing)
    signed_in = auth.sign_in(KEY_ID, SECRET)
    assert signing.user == signed_in.user
    assert signing.policies == signed_in.policies


def test_generated_keys_and_setup_are_sealed() -> None:
    auth = AuthStore(MemoryKV(), cipher=CIPHER)
    admin = auth.setup("admin")
    assert auth.secret_for_signing(admin.access_key_id).secret == admin.secret_access_key
    auth.create_user("bob")
    new = auth.create_credentials("bob")
    assert auth.secret_for_signing(new.access_key_id).secret == new.secret_access_key


def test_secret_for_signing_errors() -> None:
    auth = store()
    with pytest.raises(CredentialsNotFoundError):
        auth.secret_for_signing("AKIAUNKNOWN000000001")
    with pytest.raises(CredentialsNotFoundError):
        auth.secret_for_signing("x")
    hashed_only = store(cipher=None)
    with pytest.raises(SecretNotStoredError, match="encrypt_secret_key"):
        hashed_only.secret_for_signing(KEY_ID)
    other = AuthStore(auth.kv, cipher=SecretCipher("a different key"))
    with pytest.raises(SecretKeyMismatchError):
        other.secret_for_signing(KEY_ID)
    auth.delete_user(USER)
    with pytest.raises((CredentialsNotFoundError, AuthenticationError)):
        auth.secret_for_signing(KEY_ID)


def test_rest_sign_in_still_works_with_hash_only_and_with_another_key() -> None:
    auth = store(cipher=None)
    assert auth.sign_in(KEY_ID, SECRET).user.id == USER
    assert auth.get_credentials(USER, KEY_ID).encrypted_secret is None
    other = AuthStore(store().kv, cipher=SecretCipher("a different key"))
    assert other.sign_in(KEY_ID, SECRET).user.id == USER


def test_bootstrap_admin_seals_and_reseals() -> None:
    kv = MemoryKV()
    AuthStore(kv).bootstrap_admin("admin", "AKIAADMIN00000000001", "first-secret")
    auth = AuthStore(kv, cipher=CIPHER)
    with pytest.raises(SecretNotStoredError):
        auth.secret_for_signing("AKIAADMIN00000000001")
    assert auth.bootstrap_admin("admin", "AKIAADMIN00000000001", "first-secret")
    assert auth.secret_for_signing("AKIAADMIN00000000001").secret == "first-secret"
    assert not auth.bootstrap_admin("admin", "AKIAADMIN00000000001", "first-secret")
    assert auth.bootstrap_admin("admin", "AKIAADMIN00000000001", "second-secret")
    assert auth.secret_for_signing("AKIAADMIN00000000001").secret == "second-secret"
