"""Who sent an S3 request: its AWS signature verified against the auth store, and its body.

:func:`authenticate` accepts SigV4 (``Authorization`` header or presigned URL, every
``x-amz-content-sha256`` form including ``aws-chunked`` bodies) and SigV2 (header or presigned
``Expires`` URL). It reads no byte of the body (clients wait on ``Expect: 100-continue`` for the
verdict); the body it hands back is decoded and verified as it is read, and raises
:class:`~mirror.gateway.errors.S3Error` as soon as it fails a check. The gateway has no
anonymous access, as lakeFS's has none.

A read (GET or HEAD) carrying the web UI's session cookie (``internal_auth_session``) is
authenticated by the cookie, as lakeFS authenticates the UI's DuckDB previews, which sign with
a placeholder key: the cookie is verified as the REST API verifies it, and the signature is only
parsed (the request must still be an S3 request), never checked. A cookie that does not verify
is refused. A write is never authenticated by the cookie: it needs a signature that verifies,
so a page of another site cannot write through a signed-in browser (the cookie is also
``SameSite=Strict``, so such a page's requests do not carry it).

Unknown keys and signatures that do not match count as failed sign-ins of the key from the
client's address (:mod:`mirror.auth.throttle`); past the limit such attempts answer
``AccessDenied`` with ``Retry-After`` before any signature is checked.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING
from urllib.parse import quote

import anyio.to_thread

from mirror.auth.caller import Caller
from mirror.auth.errors import (
    AuthenticationError,
    CredentialsNotFoundError,
    SecretKeyMismatchError,
    SecretNotStoredError,
)
from mirror.auth.model import User
from mirror.auth.throttle import Door, Refusal, sign_in_attempt
from mirror.auth.tokens import LOGIN_COOKIE, session_user
from mirror.gateway.errors import S3Code, S3Error
from mirror.gateway.sig.canonical import WireRequest
from mirror.gateway.sig.chunked import ChunkedFormat, decode_aws_chunked
from mirror.gateway.sig.payload import checked_body, payload_checks
from mirror.gateway.sig.v2 import V2Auth, check_time_v2, parse_v2, verify_v2
from mirror.gateway.sig.v4 import STREAMING_PAYLOADS, V4Auth, check_time, parse_v4, verify_v4
from mirror.httputil.request_log import note_user
from mirror.kv import reads_locally

if TYPE_CHECKING:
    from starlette.requests import Request

    from mirror.auth.credentials import SigningKey
    from mirror.auth.store import AuthStore
    from mirror.auth.tokens import LoginTokens
    from mirror.config import GatewaySettings

__all__ = ["SESSION_METHODS", "Authenticated", "authenticate", "wire_request"]

SESSION_METHODS = frozenset({"GET", "HEAD"})
"""The methods the session cookie authenticates: reads only (objects, listings, buckets)."""


@dataclass(frozen=True)
class Authenticated:
    """An S3 request whose signature is verified.

    Attributes:
        caller: The signing key's user, with the key's effective policies.
        access_key_id: The key that signed the request (unverified with ``by_session``).
        body: The request body, decoded (``aws-chunked``) and verified as it is read; raises
            :class:`~mirror.gateway.errors.S3Error` on a failed check (then keep nothing).
        content_length: The decoded body length when the request states it.
        by_session: The session cookie authenticated this read, not the signature.
    """

    caller: Caller
    access_key_id: str
    body: AsyncIterator[bytes]
    content_length: int | None
    by_session: bool = False

    @property
    def user(self) -> User:
        """Return the signing key's user."""
        return self.caller.user


def _text(raw: bytes) -> str:
    # header values arrive as bytes; clients sign them as UTF-8 text
    try:
        return raw.decode()
    except UnicodeDecodeError:
        return raw.decode("latin-1")


def wire_request(request: Request) -> WireRequest:
    """Return the parts of ``request`` a signature covers, as they came over the wire."""
    scope = request.scope
    raw_path = scope.get("raw_path")
    path = raw_path.decode("latin-1") if raw_path else quote(scope.get("path", "/"), safe="/")
    return WireRequest(
        method=request.method.upper(),
        raw_path=path.partition("?")[0],
        raw_query=scope.get("query_string", b"").decode("latin-1"),
        headers=tuple((k.decode("latin-1").lower(), _text(v)) for k, v in scope["headers"]),
    )


def _host_bucket(request: WireRequest, settings: GatewaySettings) -> str | None:
    host = (request.header("host") or "").split(":", 1)[0].lower().rstrip(".")
    for domain in settings.domain_names:
        if host.endswith("." + domain):
            return host[: -len(domain) - 1]
    return None


def _key_for(auth: AuthStore, access_key_id: str) -> SigningKey:
    try:
        return auth.secret_for_signing(access_key_id)
    except CredentialsNotFoundError as exc:
        raise S3Error(S3Code.INVALID_ACCESS_KEY_ID) from exc
    except (SecretNotStoredError, SecretKeyMismatchError) as exc:
        raise S3Error(S3Code.ACCESS_DENIED, f"{S3Code.ACCESS_DENIED.description}: {exc}") from exc
    except AuthenticationError as exc:
        raise S3Error(S3Code.ACCESS_DENIED, f"{S3Code.ACCESS_DENIED.description}: {exc}") from exc


# what a wrong guess of a key or its secret answers; a malformed or expired request guesses nothing
_GUESSES = frozenset({S3Code.INVALID_ACCESS_KEY_ID, S3Code.SIGNATURE_DOES_NOT_MATCH})


def _delayed(err: S3Error, refusal: Refusal) -> S3Error:
    err.headers["Retry-After"] = str(refusal.seconds)
    return err


_GATEWAY = Door(
    "gateway",
    S3Error,
    refused=lambda refusal: S3Error(
        S3Code.ACCESS_DENIED,
        f"{S3Code.ACCESS_DENIED.description}: {refusal.reason}",
        headers={"Retry-After": str(refusal.seconds)},
    ),
    delayed=_delayed,
    guessed=lambda err: err.code in _GUESSES,
)
"""AccessDenied with ``Retry-After`` for a refused attempt; a refusal's start adds the wait."""


def _length(value: str | None, name: str) -> int | None:
    if value is None:
        return None
    try:
        length = int(value)
    except ValueError:
        length = -1
    if length < 0:
        raise S3Error(S3Code.INVALID_ARGUMENT, f"{S3Code.INVALID_ARGUMENT.description}: {name}")
    return length


def _session_caller(auth: AuthStore, tokens: LoginTokens, cookies: dict[str, str]) -> Caller:
    """Return the caller the session cookie signs in, with its policies (blocking: KV reads)."""
    try:
        user = session_user(tokens, auth, cookies)
    except AuthenticationError as exc:
        raise S3Error(
            S3Code.ACCESS_DENIED,
            f"{S3Code.ACCESS_DENIED.description}: the session cookie {LOGIN_COOKIE} was refused: "
            f"{exc}",
        ) from exc
    assert user is not None  # only asked when the cookie is there
    return Caller(auth, user, auth.effective_policies(user.id))


async def authenticate(
    request: Request,
    auth: AuthStore,
    settings: GatewaySettings,
    *,
    now: Callable[[], float] = time.time,
    tokens: LoginTokens | None = None,
) -> Authenticated:
    """Verify the AWS signature of ``request`` and return who sent it, with its body.

    Args:
        request: The request; its body is not read here.
        auth: The auth store holding the access keys.
        settings: The gateway settings (domain names, for SigV2's virtual-hosted resource).
        now: Returns the current time in epoch seconds.
        tokens: The installation's login tokens: a read carrying the session cookie is then
            authenticated by the cookie (``None``: never).

    Raises:
        S3Error: AccessDenied (no signature, an expired URL, a key whose secret cannot be
            recovered, a session cookie that does not verify), InvalidAccessKeyId,
            SignatureDoesNotMatch, RequestTimeTooSkewed, AuthorizationHeaderMalformed,
            AuthorizationQueryParametersError, InvalidRequest, InvalidDigest, InvalidArgument.
    """
    wire = wire_request(request)
    v4: V4Auth | None = parse_v4(wire)
    v2: V2Auth | None = None if v4 is not None else parse_v2(wire)
    if v4 is not None:
        access_key_id = v4.access_key_id
    elif v2 is not None:
        access_key_id = v2.access_key_id
    else:
        raise S3Error(
            S3Code.ACCESS_DENIED,
            f"{S3Code.ACCESS_DENIED.description}: the request carries no AWS signature",
        )
    if tokens is not None and wire.method in SESSION_METHODS and request.cookies.get(LOGIN_COOKIE):
        # the web UI's previews sign with a placeholder key: the cookie alone decides
        caller = await anyio.to_thread.run_sync(
            _session_caller, auth, tokens, dict(request.cookies)
        )
        note_user(caller.id)
        stated = _length(wire.header("content-length"), "content-length")
        return Authenticated(caller, access_key_id, request.stream(), stated, by_session=True)
    client = request.client.host if request.client else "unknown"
    with sign_in_attempt(auth.throttle, access_key_id, client, _GATEWAY) as attempt:
        if v4 is not None:
            check_time(v4, now())
        else:
            assert v2 is not None
            check_time_v2(wire, v2, now())
        if reads_locally(auth.kv):
            # a few KV reads and a decryption: a worker thread would cost more than the reads
            key = _key_for(auth, access_key_id)
        else:
            key = await anyio.to_thread.run_sync(_key_for, auth, access_key_id)
        if v4 is not None:
            verified = verify_v4(wire, v4, key.secret)
        else:
            assert v2 is not None
            verify_v2(wire, v2, key.secret, bucket=_host_bucket(wire, settings))
        attempt.succeeded()
    body: AsyncIterator[bytes] = request.stream()
    if v4 is not None:
        if v4.payload_hash in STREAMING_PAYLOADS:
            decoded = _length(
                wire.header("x-amz-decoded-content-length"), "x-amz-decoded-content-length"
            )
            if decoded is None:
                raise S3Error(S3Code.MISSING_CONTENT_LENGTH)
            fmt = ChunkedFormat.of(v4.payload_hash, wire.header("x-amz-trailer"))
            checks = payload_checks(wire, None, decoded)
            body = checked_body(decode_aws_chunked(body, fmt, verified), checks)
            content_length: int | None = decoded
        else:
            content_length = _length(wire.header("content-length"), "content-length")
            body = checked_body(body, payload_checks(wire, v4.payload_hash, content_length))
    else:
        content_length = _length(wire.header("content-length"), "content-length")
        body = checked_body(body, payload_checks(wire, None, content_length))
    note_user(key.user.id)
    return Authenticated(Caller(auth, key.user, key.policies), access_key_id, body, content_length)
