"""Requests signed by botocore's own signers, as Starlette requests the gateway authenticates.

The request is built from an ASGI scope, as uvicorn would hand it over: the raw path and query
as sent, the ``Host`` header from the URL, and a body delivered in pieces. ``Recorder.read``
tells whether anything asked for the body.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import unquote, urlsplit

from botocore.auth import HmacV1Auth, HmacV1QueryAuth, S3SigV4Auth, S3SigV4QueryAuth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials
from starlette.requests import Request

from mirror.auth.secrets import SecretCipher
from mirror.auth.store import AuthStore
from mirror.config import GatewaySettings
from mirror.kv import MemoryKV

KEY_ID = "AKIAGATEWAYTEST00001"
SECRET = "gateway/Secret+Key/0123456789abcdefghijk"
USER = "alice"
CIPHER = SecretCipher("unit-test encryption key")
SETTINGS = GatewaySettings()


@dataclass
class Recorder:
    """Whether the body was asked for."""

    read: bool = False
    pieces: list[bytes] = field(default_factory=list)


def store(cipher: SecretCipher | None = CIPHER) -> AuthStore:
    """Return an auth store holding user :data:`USER` (a Writer) with key :data:`KEY_ID`."""
    auth = AuthStore(MemoryKV(), cipher=cipher)
    auth.ensure_builtins()
    auth.create_user(USER)
    auth.add_member("Writers", USER)
    auth.create_credentials(USER, KEY_ID, SECRET)
    return auth


def asgi_request(
    method: str,
    url: str,
    headers: Mapping[str, str] | Iterable[tuple[str, str]],
    pieces: Iterable[bytes] = (),
    recorder: Recorder | None = None,
) -> Request:
    """Return a Starlette request for ``url`` with ``headers`` and a body sent in ``pieces``."""
    split = urlsplit(url)
    items = list(headers.items()) if isinstance(headers, Mapping) else list(headers)
    if not any(k.lower() == "host" for k, _ in items):
        items.insert(0, ("host", split.netloc))
    scope: dict[str, Any] = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": method,
        "scheme": "http",
        "path": unquote(split.path),
        "raw_path": split.path.encode(),
        "query_string": split.query.encode(),
        "root_path": "",
        "headers": [(k.lower().encode(), v.encode()) for k, v in items],
        "client": ("127.0.0.1", 50000),
        "server": ("127.0.0.1", 8000),
    }
    rec = recorder if recorder is not None else Recorder()
    rec.pieces = list(pieces)
    remaining = list(rec.pieces)

    async def receive() -> dict[str, Any]:
        rec.read = True
        if remaining:
            piece = remaining.pop(0)
            return {"type": "http.request", "body": piece, "more_body": bool(remaining)}
        return {"type": "http.request", "body": b"", "more_body": False}

    return Request(scope, receive)


def credentials(key_id: str = KEY_ID, secret: str = SECRET) -> Credentials:
    """Return botocore credentials."""
    return Credentials(key_id, secret)


def sign_v4(
    method: str,
    url: str,
    *,
    body: bytes = b"",
    headers: Mapping[str, str] | None = None,
    key_id: str = KEY_ID,
    secret: str = SECRET,
    region: str = "us-east-1",
    payload: str | None = None,
) -> tuple[str, list[tuple[str, str]]]:
    """Return the URL and headers of a request signed with S3SigV4Auth (header form).

    ``payload`` replaces the body's SHA-256 as ``x-amz-content-sha256`` (``UNSIGNED-PAYLOAD``,
    ``STREAMING-…``), as botocore sends it for such bodies.
    """
    request = AWSRequest(method=method, url=url, data=body, headers=dict(headers or {}))
    signer = S3SigV4Auth if payload is None else _fixed_payload(payload)
    signer(credentials(key_id, secret), "s3", region).add_auth(request)
    prepared = request.prepare()
    return prepared.url, list(prepared.headers.items())


def _fixed_payload(value: str) -> type[S3SigV4Auth]:
    class FixedPayload(S3SigV4Auth):
        def payload(self, request: AWSRequest) -> str:
            return value

    return FixedPayload


def presign_v4(
    method: str, url: str, *, expires: int = 3600, key_id: str = KEY_ID, secret: str = SECRET
) -> str:
    """Return a URL presigned with S3SigV4QueryAuth."""
    request = AWSRequest(method=method, url=url)
    S3SigV4QueryAuth(credentials(key_id, secret), "s3", "eu-west-3", expires=expires).add_auth(
        request
    )
    return str(request.prepare().url)


def sign_v2(
    method: str,
    url: str,
    *,
    body: bytes = b"",
    headers: Mapping[str, str] | None = None,
    auth_path: str | None = None,
) -> tuple[str, list[tuple[str, str]]]:
    """Return the URL and headers of a request signed with HmacV1Auth (SigV2 header form)."""
    request = AWSRequest(method=method, url=url, data=body, headers=dict(headers or {}))
    if auth_path is not None:
        request.auth_path = auth_path
    HmacV1Auth(credentials()).add_auth(request)
    prepared = request.prepare()
    return prepared.url, list(prepared.headers.items())


def presign_v2(method: str, url: str, *, expires: int = 3600) -> str:
    """Return a URL presigned with HmacV1QueryAuth (SigV2 ``Expires``)."""
    request = AWSRequest(method=method, url=url)
    HmacV1QueryAuth(credentials(), expires=expires).add_auth(request)
    return str(request.prepare().url)


async def drain(body: Any) -> bytes:
    """Return everything the body iterator yields."""
    out = bytearray()
    async for piece in body:
        out += piece
    return bytes(out)
