"""CSRF tokens of the web UI: each one an HMAC of the session it belongs to.

A state-changing request that the session cookie authorises must carry the token of that
session, in the form field :data:`FORM_FIELD` or, for a request a script makes, the header
:data:`HEADER`. The token is ``HMAC-SHA256(key, session token)``: another site can neither read
the cookie (``HttpOnly``) nor compute the HMAC (the key never leaves the server), so it cannot
forge a request that passes. No state is kept: any process of the installation derives the same
key (:meth:`CsrfTokens.from_login_tokens`) and checks a token another one issued, and the token
changes with every sign-in.
"""

from __future__ import annotations

import base64
import hashlib
import hmac

from mirror.auth.tokens import LoginTokens

__all__ = ["FORM_FIELD", "HEADER", "CsrfTokens"]

FORM_FIELD = "csrf_token"
"""The hidden form field carrying the token."""
HEADER = "X-CSRF-Token"
"""The request header carrying the token (requests a script makes)."""

_LABEL = b"lakemirror/ui/csrf/v1"


class CsrfTokens:
    """Issue and check the CSRF tokens of one installation.

    Args:
        key: The HMAC key (at least 32 bytes).
    """

    def __init__(self, key: bytes) -> None:
        if len(key) < 32:
            raise ValueError("a CSRF key needs at least 32 bytes")
        self._key = key

    def __repr__(self) -> str:
        return "CsrfTokens(<key hidden>)"

    @classmethod
    def from_login_tokens(cls, tokens: LoginTokens) -> CsrfTokens:
        """Return the tokens keyed from the installation's login-token key (a subkey of it)."""
        return cls(tokens.subkey(_LABEL))

    def subkey(self, label: bytes) -> bytes:
        """Return a 32-byte key for another use of the UI, derived (HMAC-SHA256) from this key.

        Every process of the installation derives the same subkey for the same ``label``; none
        reveals the CSRF key, and a label of its own keeps each use's key apart.
        """
        if not label or label == _LABEL:
            raise ValueError("a subkey needs a label of its own")
        return hmac.new(self._key, b"subkey:" + label, hashlib.sha256).digest()

    def token_for(self, session: str) -> str:
        """Return the CSRF token of the session whose login token is ``session``."""
        digest = hmac.new(self._key, session.encode(), hashlib.sha256).digest()
        return base64.urlsafe_b64encode(digest).rstrip(b"=").decode()

    def check(self, session: str, given: str | None) -> bool:
        """Return whether ``given`` is the CSRF token of ``session`` (never for an empty one)."""
        if not session or not given:
            return False
        return hmac.compare_digest(self.token_for(session).encode(), given.encode())
