"""What a browser running lakeFS's web UI sends: a sign-in, and S3 requests with the cookie.

The UI's DuckDB-WASM previews reach the S3 gateway on the UI's own origin, signed with a
placeholder key, and the browser adds the ``internal_auth_session`` cookie. :func:`s3_request`
builds such a request by hand (no AWS SDK): a well-formed SigV4 ``Authorization`` header whose
signature does not verify, and the cookie when given.
"""

from __future__ import annotations

import hashlib
from datetime import UTC, datetime
from xml.etree import ElementTree

import httpx

from tests.integration.harness import Server

PLACEHOLDER_KEY = "PLACEHOLDERKEY000000"
"""An access key ID no server knows, as the UI's previews sign with."""


def login(server: Server, key: str, secret: str) -> httpx.Response:
    """Sign in through ``POST /api/v1/auth/login``; return the (successful) answer."""
    answer = httpx.post(
        f"{server.url}/api/v1/auth/login", json={"access_key_id": key, "secret_access_key": secret}
    )
    assert answer.status_code == 200, answer.text
    return answer


def session_cookie(server: Server, key: str = "", secret: str = "") -> str:
    """Sign in (as the administrator by default); return the session cookie's value."""
    answer = login(server, key or server.access_key_id, secret or server.secret_access_key)
    return str(answer.cookies["internal_auth_session"])


def placeholder_signed(body: bytes = b"", key: str = PLACEHOLDER_KEY) -> dict[str, str]:
    """Return the headers of a SigV4 request whose signature no secret verifies."""
    now = datetime.now(UTC)
    scope = f"{now:%Y%m%d}/us-east-1/s3/aws4_request"
    return {
        "x-amz-date": now.strftime("%Y%m%dT%H%M%SZ"),
        "x-amz-content-sha256": hashlib.sha256(body).hexdigest(),
        "Authorization": (
            f"AWS4-HMAC-SHA256 Credential={key}/{scope}, "
            f"SignedHeaders=host;x-amz-content-sha256;x-amz-date, Signature={'0' * 64}"
        ),
    }


def s3_request(
    server: Server,
    method: str,
    path: str,
    *,
    cookie: str | None = None,
    body: bytes = b"",
    key: str = PLACEHOLDER_KEY,
    params: dict[str, str] | None = None,
    headers: dict[str, str] | None = None,
) -> httpx.Response:
    """Send a placeholder-signed S3 request to the server's gateway, with the cookie if given."""
    sent = placeholder_signed(body, key) | (headers or {})
    if cookie is not None:
        sent["Cookie"] = f"internal_auth_session={cookie}"
    return httpx.request(
        method, f"{server.url}{path}", content=body, headers=sent, params=params, timeout=30.0
    )


def s3_code(response: httpx.Response) -> str:
    """Return the ``<Code>`` of an S3 error answer."""
    return str(ElementTree.fromstring(response.content).findtext("Code"))
