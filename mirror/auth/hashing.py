"""Access keys and their secrets: generation, salted hashing and verification."""

from __future__ import annotations

import base64
import hashlib
import hmac
import secrets
import string

__all__ = [
    "hash_secret",
    "new_access_key_id",
    "new_secret_access_key",
    "verify_secret",
]

# scrypt with N=2**14, r=8, p=1 costs ~16 MiB and some tens of milliseconds per hash: cheap
# enough to verify once per key and process (results are cached), slow enough to hinder guessing.
_N, _R, _P = 1 << 14, 8, 1
_SALT_BYTES = 16
_KEY_ALPHABET = string.ascii_uppercase + string.digits
_SECRET_ALPHABET = string.ascii_letters + string.digits + "+/"


def new_access_key_id() -> str:
    """Return a fresh access key ID in lakeFS's shape (``AKIAJ`` + 15 characters)."""
    return "AKIAJ" + "".join(secrets.choice(_KEY_ALPHABET) for _ in range(15))


def new_secret_access_key() -> str:
    """Return a fresh 40-character secret access key."""
    return "".join(secrets.choice(_SECRET_ALPHABET) for _ in range(40))


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def _scrypt(secret: str, salt: bytes, n: int, r: int, p: int) -> bytes:
    return hashlib.scrypt(secret.encode(), salt=salt, n=n, r=r, p=p, maxmem=64 << 20, dklen=32)


def hash_secret(secret: str) -> str:
    """Return ``scrypt$N$r$p$salt$hash`` for ``secret`` with a fresh random salt."""
    salt = secrets.token_bytes(_SALT_BYTES)
    digest = _scrypt(secret, salt, _N, _R, _P)
    return f"scrypt${_N}${_R}${_P}${_b64(salt)}${_b64(digest)}"


def verify_secret(secret: str, encoded: str) -> bool:
    """Return whether ``secret`` hashes to ``encoded`` (constant-time comparison)."""
    try:
        scheme, n, r, p, salt, digest = encoded.split("$")
        if scheme != "scrypt":
            return False
        want = base64.b64decode(digest)
        got = _scrypt(secret, base64.b64decode(salt), int(n), int(r), int(p))
    except (ValueError, TypeError):
        return False
    return hmac.compare_digest(got, want)
