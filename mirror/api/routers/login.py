"""The browser session: ``POST /auth/login`` sets it, ``GET /logout`` ends it (lakeFS's JWT).

The login answers lakeFS's ``AuthenticationToken`` ``{"token", "token_expiration"}`` and the
``internal_auth_session`` cookie holding the same token; both then sign in every API call
(:mod:`mirror.auth.tokens`). Wrong or unknown credentials answer 401
``error authenticating request``. Neither the secret nor the token is ever logged.

``/logout`` lives outside ``/api/v1``, where lakeFS mounts it and its web UI navigates to it: it
expires the cookie and redirects (307) to ``auth.logout_redirect_url``. It needs no credentials,
as it only clears a cookie; the token itself stays valid until it expires (there is no
server-side session to end).
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Literal

from fastapi import APIRouter, Request, Response
from fastapi.responses import RedirectResponse
from pydantic import BaseModel

from mirror.api.deps import StateDep, client_address, door
from mirror.api.routing import LakeFSRoute
from mirror.auth.throttle import sign_in_attempt
from mirror.auth.tokens import LOGIN_COOKIE, LoginTokens
from mirror.httputil.request_log import note_user

__all__ = ["AuthenticationToken", "LoginInformation", "logout_router", "router", "tokens_of"]

router = APIRouter(route_class=LakeFSRoute, tags=["auth"])

_LOGIN = door("login")
"""``POST /auth/login``'s answers to the sign-in throttle."""

logout_router = APIRouter(tags=["auth"])
"""Routes mounted at the server's root, outside ``/api/v1``."""

# the cookie's attributes, which expiring it must repeat: JavaScript cannot read it, and a
# request from another site does not carry it (the S3 gateway accepts it for reads)
_COOKIE_PATH = "/"
_COOKIE_SAMESITE: Literal["strict"] = "strict"


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


def _over_tls(request: Request) -> bool:
    # lakeFS marks the cookie Secure only when it serves TLS itself; behind a proxy that ends
    # TLS, uvicorn's proxy headers make the scheme https
    return request.url.scheme == "https"


def tokens_of(request: Request) -> LoginTokens:
    """Return the login tokens of the app serving ``request``."""
    tokens: LoginTokens = request.app.state.login_tokens
    return tokens


@router.post("/auth/login", response_model=AuthenticationToken)
def login(
    body: LoginInformation, request: Request, response: Response, state: StateDep
) -> AuthenticationToken:
    """Sign in with an access key; answer a token and set the session cookie.

    Repeated failures of a key from one address (or from one address) are refused for a while
    with ``Retry-After`` (:mod:`mirror.auth.throttle`).

    Raises:
        AuthenticationError: 401, unknown key or wrong secret, or too many failures.
    """
    key_id, client = body.access_key_id, client_address(request)
    with sign_in_attempt(state.auth.throttle, key_id, client, _LOGIN) as attempt:
        user = state.auth.authenticate(key_id, body.secret_access_key)
        attempt.succeeded()
    note_user(user.id)
    issued = tokens_of(request).issue(user.id)
    response.set_cookie(
        LOGIN_COOKIE,
        issued.token,
        expires=datetime.fromtimestamp(issued.expires, tz=UTC),
        path=_COOKIE_PATH,
        httponly=True,
        samesite=_COOKIE_SAMESITE,
        secure=_over_tls(request),
    )
    return AuthenticationToken(token=issued.token, token_expiration=issued.expires)


@logout_router.get("/logout", status_code=307, response_class=RedirectResponse)
def logout(request: Request, state: StateDep) -> RedirectResponse:
    """Expire the session cookie and redirect (307) to ``auth.logout_redirect_url``."""
    response = RedirectResponse(state.logout_redirect_url, status_code=307)
    response.delete_cookie(
        LOGIN_COOKIE,
        path=_COOKIE_PATH,
        httponly=True,
        samesite=_COOKIE_SAMESITE,
        secure=_over_tls(request),
    )
    return response
