"""A new access key's secret, carried once from the form that created it to the page showing it.

The API answers a key's secret once, in the answer to ``POST …/credentials``, and never again.
The UI answers that form with a redirect (so reloading the page does not create another key),
and the secret travels to the page it redirects to in a cookie the UI seals for it:

- AES-256-GCM under a key derived from the installation's CSRF key
  (:meth:`~mirror.ui.csrf.CsrfTokens.subkey`), so every server process can open it and nothing
  else can read or forge it; bound to the session, the user and the key ID (its associated data),
  so it opens only for the person who created the key, on that key's page.
- ``Path`` is that page, ``HttpOnly``, ``SameSite=Strict``, ``Secure`` over TLS, and it lives
  :data:`LIFETIME` seconds at most. The page that shows the secret expires it in the same
  answer, which is never cached (``Cache-Control: no-store``): reloading the page, or coming
  back to it, finds no cookie and says the secret is not shown again.

No state is kept on the server, so any process of the installation can show the page.
"""

from __future__ import annotations

import base64
import binascii
import json
import secrets
from dataclasses import dataclass

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from starlette.requests import Request
from starlette.responses import Response

from mirror.ui.csrf import CsrfTokens
from mirror.ui.session import Session

__all__ = ["COOKIE", "LIFETIME", "NewKey", "clear", "opened", "seal"]

COOKIE = "lakemirror_new_key"
LIFETIME = 300
"""Seconds the sealed secret may wait for its page (the redirect follows at once)."""

_LABEL = b"lakemirror/ui/new-access-key/v1"
_NONCE = 12


@dataclass(frozen=True, slots=True)
class NewKey:
    """A key just created: its ID and its secret (shown once)."""

    access_key_id: str
    secret_access_key: str

    def __repr__(self) -> str:
        return f"NewKey({self.access_key_id!r}, <secret hidden>)"


def _aead(csrf: CsrfTokens) -> AESGCM:
    return AESGCM(csrf.subkey(_LABEL))


def _bound(session: Session, user_id: str, key_id: str) -> bytes:
    # the session's CSRF token stands for the session: it changes with every sign-in
    return json.dumps([session.csrf, user_id, key_id]).encode()


def seal(
    response: Response,
    request: Request,
    csrf: CsrfTokens,
    session: Session,
    user_id: str,
    key: NewKey,
    page_path: str,
) -> None:
    """Set the cookie carrying ``key``'s secret to ``page_path`` (its page) on ``response``."""
    nonce = secrets.token_bytes(_NONCE)
    sealed = _aead(csrf).encrypt(
        nonce, key.secret_access_key.encode(), _bound(session, user_id, key.access_key_id)
    )
    response.set_cookie(
        COOKIE,
        base64.urlsafe_b64encode(nonce + sealed).decode(),
        max_age=LIFETIME,
        path=page_path,
        secure=request.url.scheme == "https",
        httponly=True,
        samesite="strict",
    )


def opened(
    request: Request, csrf: CsrfTokens, session: Session, user_id: str, key_id: str
) -> NewKey | None:
    """Return the key whose secret the request's cookie carries, or ``None``.

    ``None`` when there is no cookie, or it was sealed for another session, user or key, or
    was tampered with.
    """
    value = request.cookies.get(COOKIE)
    if not value:
        return None
    try:
        raw = base64.urlsafe_b64decode(value.encode())
        secret = _aead(csrf).decrypt(raw[:_NONCE], raw[_NONCE:], _bound(session, user_id, key_id))
    except (binascii.Error, InvalidTag, ValueError):
        return None
    return NewKey(key_id, secret.decode())


def clear(response: Response, request: Request, page_path: str) -> None:
    """Expire the cookie on ``response``: the secret is not shown again."""
    response.delete_cookie(
        COOKIE,
        path=page_path,
        secure=request.url.scheme == "https",
        httponly=True,
        samesite="strict",
    )
