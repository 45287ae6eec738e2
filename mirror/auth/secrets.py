"""Secret access keys stored encrypted, so that a signature can be recomputed from them.

A SigV4 or SigV2 signature is an HMAC keyed by the secret itself: the S3 gateway must recover
the plain secret, which a hash cannot give back. Each credential record therefore keeps, next to
the scrypt hash the REST API signs in with, the secret sealed with AES-256-GCM under a key
derived from ``auth.encrypt_secret_key`` (scrypt, a fixed domain-separating salt). The access key
ID is the associated data: a sealed secret copied onto another key's record does not open.

Sealed form: ``aesgcm1$<base64 of 12-byte nonce + ciphertext + tag>``.

The embedded default (SQLite) needs no setting: a random key is generated once into
``<data_dir>/encrypt_secret_key`` (mode 0600); workers starting together agree on one file, the
first to publish it wins. Several processes on DynamoDB must share the key, so there the setting
is required.
"""

from __future__ import annotations

import base64
import binascii
import os
import secrets
from pathlib import Path
from typing import TYPE_CHECKING

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from cryptography.hazmat.primitives.kdf.scrypt import Scrypt

from mirror.auth.errors import SecretKeyMismatchError

if TYPE_CHECKING:
    from mirror.config import LakeMirrorConfig

__all__ = [
    "ENCRYPT_KEY_ENV",
    "ENCRYPT_KEY_FILE",
    "SecretCipher",
    "cipher_from_config",
    "load_or_create_key_file",
    "optional_cipher",
]

ENCRYPT_KEY_ENV = "LAKEMIRROR_AUTH__ENCRYPT_SECRET_KEY"
ENCRYPT_KEY_FILE = "encrypt_secret_key"
"""The generated key's file name in the data directory (embedded SQLite installations)."""

_SCHEME = "aesgcm1"
_NONCE_BYTES = 12
_KDF_SALT = b"lakemirror/auth/secret-access-keys/v1"
# The key is configured once per process: a slow KDF costs nothing per request and makes a
# low-entropy passphrase expensive to guess from a stolen KV.
_KDF_N, _KDF_R, _KDF_P = 1 << 14, 8, 1
_GENERATED_KEY_BYTES = 32
_OPENED_MAX = 4096
"""Opened secrets kept per cipher (one per access key in use); all are dropped when full."""


class SecretCipher:
    """Seals and opens secret access keys with one configured key.

    Args:
        key: The configured ``auth.encrypt_secret_key`` (any non-empty text).

    Raises:
        ValueError: the key is empty.
    """

    def __init__(self, key: str) -> None:
        if not key:
            raise ValueError("the secret encryption key is empty")
        kdf = Scrypt(salt=_KDF_SALT, length=32, n=_KDF_N, r=_KDF_R, p=_KDF_P)
        self._aead = AESGCM(kdf.derive(key.encode()))
        # (access key ID, sealed form) -> plain secret: a signed request opens its key's
        # secret each time, and a seal opens to the same secret for as long as this key is used
        self._opened: dict[tuple[str, str], str] = {}

    def __repr__(self) -> str:
        return "SecretCipher(<key hidden>)"

    def seal(self, access_key_id: str, secret: str) -> str:
        """Return ``secret`` encrypted for the record of ``access_key_id``."""
        nonce = secrets.token_bytes(_NONCE_BYTES)
        sealed = self._aead.encrypt(nonce, secret.encode(), access_key_id.encode())
        return f"{_SCHEME}${base64.b64encode(nonce + sealed).decode()}"

    def open(self, access_key_id: str, sealed: str) -> str:
        """Return the plain secret of ``access_key_id`` from its sealed form.

        Raises:
            SecretKeyMismatchError: the secret was sealed with another key (or for another
                access key), or the stored form is damaged.
        """
        found = self._opened.get((access_key_id, sealed))
        if found is not None:
            return found
        scheme, _, payload = sealed.partition("$")
        try:
            if scheme != _SCHEME:
                raise ValueError(scheme)
            raw = base64.b64decode(payload, validate=True)
            plain = self._aead.decrypt(
                raw[:_NONCE_BYTES], raw[_NONCE_BYTES:], access_key_id.encode()
            ).decode()
        except (InvalidTag, ValueError, binascii.Error, UnicodeDecodeError) as exc:
            raise SecretKeyMismatchError(
                f"the secret of access key {access_key_id!r} was encrypted with another "
                "auth.encrypt_secret_key: configure the key it was stored with, or rotate the "
                "access key"
            ) from exc
        if len(self._opened) >= _OPENED_MAX:
            self._opened.clear()
        self._opened[(access_key_id, sealed)] = plain
        return plain


def load_or_create_key_file(path: Path) -> str:
    """Return the key stored in ``path``, generating it (mode 0600) when absent.

    The key is written in full to a private temporary file, then published with a hard link,
    which fails if the name exists: processes racing on a fresh data directory all end up
    reading the one file that won, never a partly written one.

    Raises:
        OSError: the directory is not writable or the file unreadable.
        ValueError: the file exists but is empty.
    """
    try:
        return _read_key(path)
    except FileNotFoundError:
        pass
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_name(f".{path.name}.{secrets.token_hex(8)}")
    fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        with os.fdopen(fd, "w") as out:
            out.write(secrets.token_urlsafe(_GENERATED_KEY_BYTES) + "\n")
            out.flush()
            os.fsync(out.fileno())
        try:
            os.link(temporary, path)
        except FileExistsError:
            pass
    finally:
        temporary.unlink(missing_ok=True)
    return _read_key(path)


def _read_key(path: Path) -> str:
    key = path.read_text().strip()
    if not key:
        raise ValueError(f"the secret encryption key file {path} is empty")
    return key


def cipher_from_config(config: LakeMirrorConfig) -> SecretCipher:
    """Return the cipher of ``config``'s ``auth.encrypt_secret_key``.

    Unset, an embedded (SQLite) installation uses the key generated into its data directory.

    Raises:
        ConfigurationError: unset with the DynamoDB KV (processes would not agree on a key),
            or the key file cannot be read or written.
    """
    from mirror.config import ConfigurationError

    configured = config.auth.encrypt_secret_key
    if configured is not None:
        value = configured.get_secret_value()
        if not value:
            raise ConfigurationError(f"auth.encrypt_secret_key ({ENCRYPT_KEY_ENV}) is empty")
        return SecretCipher(value)
    if config.kv.type != "sqlite":
        raise ConfigurationError(
            f"auth.encrypt_secret_key ({ENCRYPT_KEY_ENV}) is required with kv.type "
            f"{config.kv.type!r}: every process sharing the KV needs the same key to encrypt "
            "and decrypt secret access keys"
        )
    path = config.data_dir / ENCRYPT_KEY_FILE
    try:
        return SecretCipher(load_or_create_key_file(path))
    except (OSError, ValueError) as exc:
        raise ConfigurationError(
            f"auth.encrypt_secret_key is unset and the generated key file {path} cannot be "
            f"used: {exc}"
        ) from exc


def optional_cipher(config: LakeMirrorConfig) -> SecretCipher | None:
    """Return the cipher of ``config``, or ``None`` where it has none to give.

    For processes that sign users in but verify no S3 signature (the replicant): with the
    DynamoDB KV and no ``auth.encrypt_secret_key``, secrets are then only hashed there.

    Raises:
        ConfigurationError: the key is configured but empty, or the key file is unusable.
    """
    if config.auth.encrypt_secret_key is None and config.kv.type != "sqlite":
        return None
    return cipher_from_config(config)
