"""Signing in and out: the sign-in form, and sign-out as a POST carrying the CSRF token.

Signing in posts the access key and secret to ``POST /api/v1/auth/login`` (in process) and
hands the browser the session cookie exactly as the API set it (``HttpOnly``,
``SameSite=Strict``, ``Secure`` over TLS). A refusal shows the API's own message. Signing out
asks the API's ``GET /logout`` for the expired cookie, and returns to the sign-in page; it is a
POST with the session's CSRF token, so no other site can sign a person out.
"""

from __future__ import annotations

import httpx
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import BaseRoute, Route

from mirror.auth.tokens import LOGIN_COOKIE
from mirror.ui.api import error_text
from mirror.ui.csrf import FORM_FIELD
from mirror.ui.page import render_page, ui_state
from mirror.ui.session import (
    HOME_PATH,
    SIGN_IN_PATH,
    CsrfRefused,
    refuse_cross_site,
    safe_next,
)

__all__ = ["routes"]


def _with_cookies(response: Response, answer: httpx.Response) -> Response:
    """Give the browser the cookies the API set (the session, or its expiry), untouched."""
    for value in answer.headers.get_list("set-cookie"):
        response.headers.append("set-cookie", value)
    return response


def _text(value: object) -> str:
    return value if isinstance(value, str) else ""


async def sign_in_form(request: Request) -> Response:
    """Show the sign-in form."""
    return render_page(
        request,
        "login.html",
        next=safe_next(request.query_params.get("next")),
        access_key_id="",
        error="",
    )


async def sign_in(request: Request) -> Response:
    """Sign in with an access key and secret; return to ``next``, or show the API's refusal."""
    refuse_cross_site(request)
    form = await request.form()
    key = _text(form.get("access_key_id")).strip()
    secret = _text(form.get("secret_access_key"))
    next_path = safe_next(_text(form.get("next")))
    answer = await ui_state(request).api.request(
        "POST",
        "/api/v1/auth/login",
        json={"access_key_id": key, "secret_access_key": secret},
        scheme=request.url.scheme,
    )
    if answer.status_code == 200:
        return _with_cookies(RedirectResponse(next_path, status_code=303), answer)
    return render_page(
        request,
        "login.html",
        answer.status_code,
        next=next_path,
        access_key_id=key,
        error=error_text(answer),
    )


async def sign_out(request: Request) -> Response:
    """Expire the session cookie (the API's ``/logout``) and show the sign-in page."""
    ui = ui_state(request)
    token = request.cookies.get(LOGIN_COOKIE)
    if token:
        refuse_cross_site(request)
        form = await request.form()
        given = form.get(FORM_FIELD)
        if not ui.csrf.check(token, given if isinstance(given, str) else None):
            raise CsrfRefused("the form's security token is missing or does not match your session")
    answer = await ui.api.request("GET", "/logout", scheme=request.url.scheme)
    return _with_cookies(RedirectResponse(SIGN_IN_PATH, status_code=303), answer)


async def home(request: Request) -> Response:
    """Send a browser at ``/`` or ``/ui/`` to the repositories."""
    return RedirectResponse(HOME_PATH, status_code=302)


async def lakefs_sign_in(request: Request) -> Response:
    """Send lakeFS's sign-in path (where ``GET /logout`` redirects) to the UI's sign-in page."""
    query = request.url.query
    return RedirectResponse(f"{SIGN_IN_PATH}?{query}" if query else SIGN_IN_PATH, status_code=302)


routes: list[BaseRoute] = [
    Route("/", home, methods=["GET"]),
    Route("/ui", home, methods=["GET"]),
    Route("/ui/", home, methods=["GET"]),
    Route("/auth/login", lakefs_sign_in, methods=["GET"]),
    Route(SIGN_IN_PATH, sign_in_form, methods=["GET"]),
    Route(SIGN_IN_PATH, sign_in, methods=["POST"]),
    Route("/ui/logout", sign_out, methods=["POST"]),
]
