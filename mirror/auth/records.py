"""The auth records' KV layout, their encoding, and the state an auth store keeps per process.

Layout (every ID is free of ``/``):

- ``auth/users/<user>``, ``auth/groups/<group>``, ``auth/policies/<policy>``: the records.
- ``auth/credentials/<key>``: an access key with its owner, the scrypt hash of its secret and
  the secret sealed with the configured key (:mod:`.secrets`).
- ``auth/user-credentials/<user>/<key>``, ``auth/group-members/<group>/<user>``,
  ``auth/user-groups/<user>/<group>``, ``auth/user-policies/<user>/<policy>``,
  ``auth/group-policies/<group>/<policy>``, ``auth/policy-users/<policy>/<user>``,
  ``auth/policy-groups/<policy>/<group>``: empty index records, both directions.
- ``auth/setup``: present once the installation has its first administrator.
- ``auth/generation``: the token every change renews (:mod:`.cache`).
"""

from __future__ import annotations

import contextlib
import email.utils
import functools
import json
import re
import secrets
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any, Concatenate, ParamSpec, TypeVar

from mirror.auth.cache import AUTH_CACHE_SIZE, AUTH_CACHE_TTL_SECONDS, AuthCache
from mirror.auth.errors import InvalidAuthValueError
from mirror.auth.secrets import SecretCipher
from mirror.kv.errors import KeyNotFoundError
from mirror.kv.protocol import KV

__all__ = [
    "ID_PATTERN",
    "KEY_ID_PATTERN",
    "AuthRecords",
    "changes",
    "check_email",
    "check_id",
    "check_key_id",
    "decode",
    "encode",
    "record_key",
]

ID_PATTERN = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.@+=,:-]{0,127}")
KEY_ID_PATTERN = re.compile(r"[A-Za-z0-9_.+=@-]{3,128}")
_ROOT = "auth/"

P = ParamSpec("P")
R = TypeVar("R")
S = TypeVar("S", bound="AuthRecords")


def check_id(kind: str, value: str) -> str:
    """Return ``value`` if it is a well-formed ``kind`` (user, group, policy) ID.

    Raises:
        InvalidAuthValueError: it is not.
    """
    if not isinstance(value, str) or not ID_PATTERN.fullmatch(value):
        raise InvalidAuthValueError(
            f"invalid {kind} ID {value!r}: use 1-128 of letters, digits and _.@+=,:- "
            "starting with a letter, digit or '_'"
        )
    return value


def check_email(value: str) -> str:
    """Return ``value`` if it is one bare e-mail address (``local@domain``, at most 254 characters).

    A quoted local part may hold any printable character, as RFC 5322 allows: pages showing an
    address escape it.

    Raises:
        InvalidAuthValueError: it is not.
    """
    _, address = email.utils.parseaddr(value)
    local, at, domain = address.rpartition("@")
    if address != value or not (local and at and domain) or len(value) > 254:
        raise InvalidAuthValueError(f"invalid email {value!r}: use one address, name@domain")
    return value


def check_key_id(value: str) -> str:
    """Return ``value`` if it is a well-formed access key ID.

    Raises:
        InvalidAuthValueError: it is not.
    """
    if not isinstance(value, str) or not KEY_ID_PATTERN.fullmatch(value):
        raise InvalidAuthValueError(
            f"invalid access key ID {value!r}: use 3-128 of letters, digits and _.+=@-"
        )
    return value


def record_key(*parts: str) -> bytes:
    """Return the KV key of a record: ``auth/`` and ``parts`` joined by ``/``."""
    return (_ROOT + "/".join(parts)).encode()


def encode(record: dict[str, Any]) -> bytes:
    """Return a record as compact JSON with sorted keys."""
    return json.dumps(record, sort_keys=True, separators=(",", ":")).encode()


def decode(data: bytes) -> dict[str, Any]:
    """Return the record ``data`` encodes."""
    record: dict[str, Any] = json.loads(data)
    return record


def changes(method: Callable[Concatenate[S, P], R]) -> Callable[Concatenate[S, P], R]:
    """Renew the auth generation once ``method`` is done writing (once for nested changes)."""

    @functools.wraps(method)
    def change(self: S, /, *args: P.args, **kwargs: P.kwargs) -> R:
        local = self._changing
        depth = getattr(local, "depth", 0)
        local.depth = depth + 1
        try:
            result = method(self, *args, **kwargs)
        except BaseException:
            if depth == 0:
                # part of the change may be written: announce it, keeping the first error
                with contextlib.suppress(Exception):
                    self._cache.renew()
            raise
        finally:
            local.depth = depth
        if depth == 0:
            self._cache.renew()
        return result

    return change


class AuthRecords:
    """What every layer of the auth store shares: the KV, the clock and per-process state.

    Args:
        kv: The store (shared with the versioning core; everything lives under ``auth/``).
        clock: Returns the current time in seconds.
        cache_ttl: Seconds a cached record serves at most while the auth generation stands
            (``0``: no cache).
        cache_size: Records cached at most.
        cipher: Seals the secrets of new keys, and of old ones as they sign in, so that the S3
            gateway can verify signatures; ``None``: secrets are only hashed (the gateway then
            refuses every key).
    """

    def __init__(
        self,
        kv: KV,
        clock: Callable[[], float] = time.time,
        *,
        cache_ttl: float = AUTH_CACHE_TTL_SECONDS,
        cache_size: int = AUTH_CACHE_SIZE,
        cipher: SecretCipher | None = None,
    ) -> None:
        self.kv = kv
        self.cipher = cipher
        self._clock = clock
        self._process_key = secrets.token_bytes(32)
        self._verified: dict[str, tuple[str, bytes]] = {}
        self._lock = threading.Lock()
        self._cache = AuthCache(kv, ttl=cache_ttl, size=cache_size)
        self._changing = threading.local()

    def now(self) -> int:
        """Return the current time in whole seconds, by the store's clock."""
        return int(self._clock())

    # plumbing

    def _get(self, key: bytes) -> dict[str, Any] | None:
        try:
            return decode(self.kv.get(key))
        except KeyNotFoundError:
            return None

    def _exists(self, key: bytes) -> bool:
        try:
            self.kv.get(key)
        except KeyNotFoundError:
            return False
        return True

    def _ids(self, *parts: str, prefix: str = "", after: str = "") -> Iterator[str]:
        base = record_key(*parts) + b"/"
        start = base + after.encode() + b"\x00" if after else b""
        for key, _ in self.kv.scan(base + prefix.encode(), start):
            yield key[len(base) :].decode()

    def _records(self, kind: str, prefix: str, after: str) -> Iterator[dict[str, Any]]:
        base = record_key(kind) + b"/"
        start = base + after.encode() + b"\x00" if after else b""
        for _, value in self.kv.scan(base + prefix.encode(), start):
            yield decode(value)

    def _drop_credentials(self, user_id: str, access_key_id: str) -> None:
        # shared by deleting a key and deleting its user; the key's verification goes with it
        self.kv.delete(record_key("credentials", access_key_id))
        self.kv.delete(record_key("user-credentials", user_id, access_key_id))
        with self._lock:
            self._verified.pop(access_key_id, None)
