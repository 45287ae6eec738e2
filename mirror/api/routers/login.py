"""``POST /auth/login``: trade an access key for a login token (lakeFS's JWT session).

The answer is lakeFS's ``AuthenticationToken`` ``{"token", "token_expiration"}`` and the
``internal_auth_session`` cookie holding the same token; both then sign in every API call
(:mod:`mirror.api.auth.tokens`). Wrong or unknown credentials answer 401
``error authenticating request``. Neither the secret nor the token is ever logged.
"""

from __future__ import annotations

from datetime import UTC, datetime

from fastapi import APIRouter, Request, Response
from pydantic import BaseModel

from mirror.api.auth.tokens import LOGIN_COOKIE, LoginTokens
from mirror.api.deps import StateDep
from mirror.api.routing import LakeFSRoute
from mirror.logging import note_user

__all__ = ["AuthenticationToken", "LoginInformation", "router", "tokens_of"]

router = APIRouter(route_class=LakeFSRoute, tags=["auth"])


class LoginInformation(BaseModel):
    """An access key and its secret."""

    access_key_id: str
    secret_access_key: str

    def __repr__(self) -> str:
        return f"LoginInformation(access_key_id={self.access_key_id!r}, <secret hidden>)"


class AuthenticationToken(BaseModel):
    """A login token and when it expires (Unix seconds)."""

    token: str
    token_expiration: int


def tokens_of(request: Request) -> LoginTokens:
    """Return the login tokens of the app serving ``request``."""
    tokens: LoginTokens = request.app.state.login_tokens
    return tokens


@router.post("/auth/login", response_model=AuthenticationToken)
def login(
    body: LoginInformation, request: Request, response: Response, state: StateDep
) -> AuthenticationToken:
    """Sign in with an access key; answer a token and set the session cookie.

    Raises:
        AuthenticationError: 401, unknown key or wrong secret.
    """
    user = state.auth.authenticate(body.access_key_id, body.secret_access_key)
    note_user(user.id)
    issued = tokens_of(request).issue(user.id)
    response.set_cookie(
        LOGIN_COOKIE,
        issued.token,
        expires=datetime.fromtimestamp(issued.expires, tz=UTC),
        path="/",
        httponly=True,
        samesite="strict",
    )
    return AuthenticationToken(token=issued.token, token_expiration=issued.expires)
