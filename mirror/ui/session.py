"""The signed-in person of a UI request: the session cookie, checked by the API, and its CSRF.

The session is lakeFS's: the ``internal_auth_session`` cookie that ``POST /api/v1/auth/login``
sets, holding the login token. The UI keeps nothing else. Each page asks the API who the token
signs in (``GET /api/v1/user``); a missing, expired or refused token sends the browser to the
sign-in page with ``next`` naming the page it wanted, and back there after signing in.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from urllib.parse import quote, urlsplit

from starlette.datastructures import FormData
from starlette.requests import Request

from mirror.auth.tokens import LOGIN_COOKIE
from mirror.httputil.request_log import note_user
from mirror.ui.api import ApiClient
from mirror.ui.csrf import FORM_FIELD, HEADER, CsrfTokens

__all__ = [
    "HOME_PATH",
    "SIGN_IN_PATH",
    "CsrfRefused",
    "Session",
    "SignInRequired",
    "checked_form",
    "current_session",
    "refuse_cross_site",
    "safe_next",
    "sign_in_url",
]

SIGN_IN_PATH = "/ui/login"
HOME_PATH = "/ui/repositories"
"""Where a person lands after signing in when nothing else was asked for (lakeFS's too)."""

_CONTROL = re.compile(r"[\x00-\x1f\x7f\\]")


class SignInRequired(Exception):
    """The request has no session that signs anyone in; ``next`` is where to return to."""

    def __init__(self, next_path: str) -> None:
        super().__init__(next_path)
        self.next_path = next_path


class CsrfRefused(Exception):
    """A state-changing request without the session's CSRF token (or sent from another site)."""


@dataclass(frozen=True, slots=True)
class Session:
    """The signed-in person: their login token, user ID, and the session's CSRF token."""

    token: str
    user_id: str
    csrf: str

    def __repr__(self) -> str:
        return f"Session(<token hidden>, user_id={self.user_id!r})"


def safe_next(value: str | None) -> str:
    """Return ``value`` if it is a path on this origin, else :data:`HOME_PATH`.

    Only a relative reference starting with one ``/`` is kept: no scheme, no host (``//host``),
    no backslash (which browsers read as ``/``) and no control character, so a crafted sign-in
    link cannot send the person to another site.
    """
    if not value or not value.startswith("/") or value.startswith("//"):
        return HOME_PATH
    if _CONTROL.search(value):
        return HOME_PATH
    parts = urlsplit(value)
    if parts.scheme or parts.netloc:
        return HOME_PATH
    return value


def sign_in_url(next_path: str) -> str:
    """Return the sign-in page's URL that returns to ``next_path`` afterwards."""
    return f"{SIGN_IN_PATH}?next={quote(safe_next(next_path), safe='/')}"


def _return_path(request: Request) -> str:
    # a form's page is the same path read with GET; a GET returns with its query too
    path = request.url.path
    query = request.url.query
    return f"{path}?{query}" if query and request.method in ("GET", "HEAD") else path


async def current_session(request: Request, api: ApiClient, csrf: CsrfTokens) -> Session:
    """Return the request's session, as the API sees it (``GET /api/v1/user``).

    Raises:
        SignInRequired: no session cookie, or the API does not accept its token.
    """
    token = request.cookies.get(LOGIN_COOKIE)
    if not token:
        raise SignInRequired(_return_path(request))
    answer = await api.request("GET", "/api/v1/user", token=token)
    user_id = ""
    if answer.status_code == 200:
        user = answer.json().get("user") or {}
        user_id = str(user.get("id") or "")
    if not user_id:
        raise SignInRequired(_return_path(request))
    note_user(user_id)
    return Session(token, user_id, csrf.token_for(token))


def refuse_cross_site(request: Request) -> None:
    """Refuse a form another site made the browser send (``Sec-Fetch-Site: cross-site``).

    Raises:
        CsrfRefused: the browser says the request came from another site.
    """
    if request.headers.get("sec-fetch-site", "").lower() == "cross-site":
        raise CsrfRefused("the request came from another site")


async def checked_form(request: Request, session: Session, csrf: CsrfTokens) -> FormData:
    """Return the request's form once its CSRF token is the session's.

    The token comes in the form field ``csrf_token`` or, for a request a script makes, the
    ``X-CSRF-Token`` header.

    Raises:
        CsrfRefused: the token is missing or not the session's, or another site sent the form.
    """
    refuse_cross_site(request)
    form = await request.form()
    given = form.get(FORM_FIELD)
    if not isinstance(given, str) or not given:
        given = request.headers.get(HEADER)
    if not csrf.check(session.token, given):
        raise CsrfRefused("the form's security token is missing or does not match your session")
    return form
