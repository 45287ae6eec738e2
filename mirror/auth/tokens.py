"""Login tokens: lakeFS's JWT sessions, issued by ``POST /auth/login``.

A token is a JWT signed with HS256 holding lakeFS's claims: ``iss`` ``auth``, ``aud``
``login``, ``sub`` the user ID, a random ``jti``, ``iat`` and ``exp`` (``auth.login_duration``
seconds later, 7 days by default). Clients send it as ``Authorization: Bearer <token>`` or in
the ``internal_auth_session`` cookie that the login sets.

The signing key is derived (HKDF-SHA256, a fixed label) from the ``auth.encrypt_secret_key``
material every server process of an installation shares already, so no setting is added and a
token issued by one process verifies on every other; the raw key itself never signs anything.

Schemes are tried as lakeFS tries them: a Bearer token, then HTTP Basic, then the cookie. A
Bearer token that does not verify is refused (401) with no fallback to the other schemes. Each
use reads the user and its access keys again, so the token of a deleted user, or of a user
whose access keys were all deleted, stops working at once on every process.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
import secrets
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.kdf.hkdf import HKDF

from mirror.auth.errors import AuthenticationError, UserNotFoundError
from mirror.auth.model import User
from mirror.auth.records import record_key
from mirror.auth.secrets import ENCRYPT_KEY_ENV, ENCRYPT_KEY_FILE, load_or_create_key_file

if TYPE_CHECKING:
    from mirror.auth.store import AuthStore
    from mirror.config import LakeMirrorConfig

__all__ = [
    "AUDIENCE",
    "DEFAULT_LOGIN_DURATION",
    "ISSUER",
    "LOGIN_COOKIE",
    "IssuedToken",
    "LoginTokens",
    "carries_token",
    "login_user",
    "session_user",
]

LOGIN_COOKIE = "internal_auth_session"
"""The cookie holding the token (lakeFS's name)."""
ISSUER = "auth"
AUDIENCE = "login"
DEFAULT_LOGIN_DURATION = 7 * 86_400.0
"""Seconds a token lives unless ``auth.login_duration`` says otherwise (lakeFS's 7 days)."""

_LABEL = b"lakemirror/auth/login-tokens/v1"
_HEADER = {"alg": "HS256", "typ": "JWT"}
_REFUSED = "error authenticating request"


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def derive_signing_key(material: str) -> bytes:
    """Return the HS256 key derived from ``auth.encrypt_secret_key`` material (never the key)."""
    if not material:
        raise ValueError("the secret encryption key is empty")
    hkdf = HKDF(algorithm=hashes.SHA256(), length=32, salt=None, info=_LABEL)
    return hkdf.derive(material.encode())


@dataclass(frozen=True, slots=True)
class IssuedToken:
    """A token just issued and when it expires (Unix seconds)."""

    token: str
    expires: int

    def __repr__(self) -> str:
        return f"IssuedToken(<token hidden>, expires={self.expires})"


class LoginTokens:
    """Issue and verify the login tokens of one installation.

    Args:
        key: The HS256 signing key (:func:`derive_signing_key`).
        duration: Seconds a token lives.
        clock: Returns the time in Unix seconds.
    """

    def __init__(
        self,
        key: bytes,
        duration: float = DEFAULT_LOGIN_DURATION,
        clock: Callable[[], float] = time.time,
    ) -> None:
        if len(key) < 32:
            raise ValueError("a login token key needs at least 32 bytes")
        self._key = key
        self.duration = duration
        self._clock = clock

    def __repr__(self) -> str:
        return f"LoginTokens(<key hidden>, duration={self.duration})"

    @classmethod
    def from_config(cls, config: LakeMirrorConfig) -> LoginTokens:
        """Return the tokens of ``config``'s installation (its key material and lifetime).

        The material is ``auth.encrypt_secret_key``, or, unset on SQLite, the key generated into
        the data directory, as :func:`~mirror.auth.secrets.cipher_from_config` finds it.

        Raises:
            ConfigurationError: unset with the DynamoDB KV, or the key file is unusable.
        """
        from mirror.config import ConfigurationError

        configured = config.auth.encrypt_secret_key
        duration = config.auth.login_duration
        if configured is not None:
            value = configured.get_secret_value()
            if not value:
                raise ConfigurationError(f"auth.encrypt_secret_key ({ENCRYPT_KEY_ENV}) is empty")
            return cls(derive_signing_key(value), duration)
        if config.kv.type != "sqlite":
            raise ConfigurationError(
                f"auth.encrypt_secret_key ({ENCRYPT_KEY_ENV}) is required with kv.type "
                f"{config.kv.type!r}: every process sharing the KV needs the same key to sign "
                "and verify login tokens"
            )
        path = config.data_dir / ENCRYPT_KEY_FILE
        try:
            material = load_or_create_key_file(path)
        except (OSError, ValueError) as exc:
            raise ConfigurationError(
                f"auth.encrypt_secret_key is unset and the generated key file {path} cannot be "
                f"used: {exc}"
            ) from exc
        return cls(derive_signing_key(material), duration)

    @classmethod
    def ephemeral(cls, duration: float = DEFAULT_LOGIN_DURATION) -> LoginTokens:
        """Return tokens signed with a random key: for an app that is the only process."""
        return cls(secrets.token_bytes(32), duration)

    def subkey(self, label: bytes) -> bytes:
        """Return a 32-byte key for another use, derived (HKDF-SHA256) from the signing key.

        Every process of an installation derives the same subkey for the same ``label``, and
        no subkey reveals the signing key or another label's subkey.
        """
        if not label or label == _LABEL:
            raise ValueError("a subkey needs a label of its own")
        hkdf = HKDF(algorithm=hashes.SHA256(), length=32, salt=None, info=label)
        return hkdf.derive(self._key)

    def issue(self, user_id: str) -> IssuedToken:
        """Return a new token signing in as ``user_id``."""
        now = int(self._clock())
        expires = int(now + self.duration)
        claims = {
            "iss": ISSUER,
            "aud": AUDIENCE,
            "sub": user_id,
            "jti": secrets.token_hex(16),
            "iat": now,
            "exp": expires,
        }
        head = _b64(json.dumps(_HEADER, separators=(",", ":")).encode())
        body = _b64(json.dumps(claims, separators=(",", ":")).encode())
        signature = self._sign(f"{head}.{body}".encode())
        return IssuedToken(f"{head}.{body}.{_b64(signature)}", expires)

    def _sign(self, data: bytes) -> bytes:
        return hmac.new(self._key, data, hashlib.sha256).digest()

    def verify(self, token: str) -> str:
        """Return the user ID a valid, unexpired token signs in as.

        Raises:
            AuthenticationError: malformed, not signed by this installation, not lakeFS's
                issuer or audience, or expired.
        """
        parts = token.split(".")
        if len(parts) != 3:
            raise AuthenticationError(f"{_REFUSED}: malformed token")
        head, body, signature = parts
        try:
            header = json.loads(_unb64(head))
            given = _unb64(signature)
        except (ValueError, binascii.Error) as exc:
            raise AuthenticationError(f"{_REFUSED}: malformed token") from exc
        if not isinstance(header, dict) or header.get("alg") != "HS256":
            raise AuthenticationError(f"{_REFUSED}: unsupported token algorithm")
        if not hmac.compare_digest(given, self._sign(f"{head}.{body}".encode())):
            raise AuthenticationError(f"{_REFUSED}: invalid token signature")
        try:
            claims = json.loads(_unb64(body))
        except (ValueError, binascii.Error) as exc:
            raise AuthenticationError(f"{_REFUSED}: malformed token") from exc
        return self._subject(claims)

    def _subject(self, claims: Any) -> str:
        if not isinstance(claims, dict):
            raise AuthenticationError(f"{_REFUSED}: malformed token")
        audience = claims.get("aud")
        audiences = audience if isinstance(audience, list) else [audience]
        if claims.get("iss") != ISSUER or AUDIENCE not in audiences:
            raise AuthenticationError(f"{_REFUSED}: token not issued for login")
        expires = claims.get("exp")
        if not isinstance(expires, int | float) or self._clock() >= expires:
            raise AuthenticationError(f"{_REFUSED}: token expired")
        subject = claims.get("sub")
        if not isinstance(subject, str) or not subject:
            raise AuthenticationError(f"{_REFUSED}: token names no user")
        return subject


def _bearer(headers: Any) -> str | None:
    """Return the token of the first ``Authorization: Bearer`` header, if any."""
    values: list[str] = headers.getlist("authorization")
    for value in values:
        scheme, _, token = value.strip().partition(" ")
        if scheme.lower() == "bearer":
            return token.strip()
    return None


def _has_access_key(auth: AuthStore, user_id: str) -> bool:
    """Return whether the user holds an access key: one step of a scan of its key index."""
    scan = auth.kv.scan(record_key("user-credentials", user_id) + b"/")
    try:
        return next(iter(scan), None) is not None
    finally:
        close = getattr(scan, "close", None)
        if close is not None:
            close()


def _signed_in(tokens: LoginTokens, auth: AuthStore, token: str) -> User:
    user_id = tokens.verify(token)
    try:
        user = auth.get_user(user_id)
    except UserNotFoundError as exc:
        raise AuthenticationError(f"{_REFUSED}: the token's user no longer exists") from exc
    if not _has_access_key(auth, user_id):
        raise AuthenticationError(f"{_REFUSED}: the token's user has no access keys any more")
    return user


def carries_token(headers: Any, cookies: Mapping[str, str]) -> bool:
    """Return whether a request presents a login token: a Bearer header or the session cookie."""
    return _bearer(headers) is not None or bool(cookies.get(LOGIN_COOKIE))


def session_user(tokens: LoginTokens, auth: AuthStore, cookies: Mapping[str, str]) -> User | None:
    """Return the user the ``internal_auth_session`` cookie signs in as (``None``: no cookie).

    Raises:
        AuthenticationError: a cookie that does not sign anyone in: bad, expired, or its user or
            the user's last key is gone.
    """
    cookie = cookies.get(LOGIN_COOKIE)
    if not cookie:
        return None
    return _signed_in(tokens, auth, cookie)


def login_user(
    tokens: LoginTokens,
    auth: AuthStore,
    headers: Any,
    cookies: Mapping[str, str],
    *,
    basic: bool,
) -> User | None:
    """Return the user a request's login token signs in as, or ``None`` to try HTTP Basic.

    Args:
        tokens: The installation's login tokens.
        auth: The auth store (the user and its keys are read on each use).
        headers: The request's headers (``getlist`` of Starlette's ``Headers``).
        cookies: The request's cookies.
        basic: The request carries HTTP Basic credentials (they come before the cookie).

    Raises:
        AuthenticationError: a Bearer token (or, without Basic, the cookie) that does not sign
            anyone in: bad, expired, or its user or the user's last key is gone.
    """
    bearer = _bearer(headers)
    if bearer is not None:
        return _signed_in(tokens, auth, bearer)
    if basic:
        return None
    return session_user(tokens, auth, cookies)
