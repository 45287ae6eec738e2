"""The S3 gateway app, and the dispatch between it and the REST API on one listener.

As lakeFS does, one listener serves both: a request goes to the gateway when its ``Host`` is one
of ``gateway.domain_names`` (path style) or ends in one (virtual host: the leading labels are the
bucket), or when it carries an AWS signature (``Authorization: AWS4-HMAC-SHA256 …`` or
``AWS …``, or a presigned query) outside ``/api/``. Everything else reaches the API unchanged,
and health checks and ``/metrics`` always do.

Under load, the process's admission (:mod:`mirror.httputil.admission`) refuses what it cannot
take on: :meth:`GatewayDispatch.refusal` answers the gateway's requests with S3's ``503
SlowDown`` and the API's with lakeFS's JSON, both with ``Retry-After``.

The gateway authenticates the request, works out the operation from the method, the bucket, the
key and the sub-resources (:mod:`mirror.gateway.routing`) and answers S3's XML; every answer
carries ``x-amz-request-id``. An error outside LakeMirror's tree is logged with the request ID and
answered ``InternalError``, never with a stack trace.
"""

from __future__ import annotations

import logging
import uuid
from dataclasses import dataclass
from typing import TYPE_CHECKING
from urllib.parse import unquote

from starlette.requests import ClientDisconnect, Request
from starlette.responses import Response

from mirror.gateway import xml
from mirror.gateway.auth import authenticate
from mirror.gateway.context import GatewayState, S3Request
from mirror.gateway.errors import S3Code, S3Error
from mirror.gateway.routing import route
from mirror.httputil.admission import overloaded_json
from mirror.httputil.errors import client_gone
from mirror.httputil.metrics import HttpMetrics, MetricsMiddleware

if TYPE_CHECKING:
    from starlette.types import ASGIApp, Message, Receive, Scope, Send

    from mirror.config import GatewaySettings

__all__ = [
    "API_PATHS",
    "GatewayApp",
    "GatewayDispatch",
    "create_gateway_app",
    "is_signed",
    "parse_address",
    "slow_down",
    "with_gateway",
]

log = logging.getLogger("mirror.gateway")

API_PATHS = ("/healthz", "/readyz", "/metrics")
"""Paths that always reach the API (probes and scrapes carry no signature and any Host)."""

_REQUEST_ID = b"x-amz-request-id"


@dataclass(frozen=True)
class _Route:
    """What the metrics middleware reads as the route of a gateway request: the S3 operation."""

    path: str


def _host(scope: Scope) -> str:
    for name, value in scope.get("headers", ()):
        if name == b"host":
            host = str(value.decode("latin-1")).strip().lower()
            if host.startswith("["):
                return host.partition("]")[0] + "]"
            return host.rsplit(":", 1)[0] if ":" in host else host
    return ""


def _header(scope: Scope, wanted: bytes) -> str:
    for name, value in scope.get("headers", ()):
        if name == wanted:
            return str(value.decode("latin-1"))
    return ""


def _has_body(scope: Scope) -> bool:
    length = _header(scope, b"content-length")
    if length:
        return length.strip() != "0"
    return bool(_header(scope, b"transfer-encoding"))


def is_signed(scope: Scope) -> bool:
    """Return whether a request carries an AWS signature (header or presigned query)."""
    authorization = _header(scope, b"authorization")
    if authorization.startswith(("AWS4-HMAC-SHA256 ", "AWS ")):
        return True
    query = bytes(scope.get("query_string", b"")).decode("latin-1")
    names = {part.partition("=")[0] for part in query.split("&")}
    return bool(names & {"X-Amz-Algorithm", "X-Amz-Credential", "AWSAccessKeyId"})


def _virtual_bucket(host: str, domains: tuple[str, ...]) -> str | None:
    """Return the bucket of a virtual-host name, ``""`` for a gateway name, ``None`` otherwise."""
    for domain in domains:
        if host == domain:
            return ""
        if host.endswith("." + domain):
            return host[: -len(domain) - 1]
    return None


def parse_address(scope: Scope, domains: tuple[str, ...]) -> tuple[str | None, str | None]:
    """Return the bucket and the key a request addresses (``None`` when absent).

    The key is the raw path after the bucket, percent-decoded once, so a key keeps its spaces,
    ``+``, ``%2F`` (a ``/``) and Unicode exactly as the client sent them.
    """
    raw = scope.get("raw_path")
    path = raw.decode("latin-1") if raw else scope.get("path", "/")
    path = path.partition("?")[0]
    virtual = _virtual_bucket(_host(scope), domains)
    rest = path[1:] if path.startswith("/") else path
    if virtual:
        bucket = virtual
    else:
        raw_bucket, slash, rest = rest.partition("/")
        if not raw_bucket:
            return None, None
        bucket = unquote(raw_bucket, errors="surrogateescape")
        if not slash:
            return bucket, None
    if not rest:
        return bucket, None
    return bucket, unquote(rest, errors="surrogateescape")


class GatewayApp:
    """The gateway's ASGI app: authenticate, route, answer S3's XML."""

    def __init__(self, state: GatewayState) -> None:
        self.state = state

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Serve one HTTP request."""
        request_id = _request_id()
        header = (_REQUEST_ID, request_id.encode())
        body_read = not _has_body(scope)

        async def receive_tracked() -> Message:
            nonlocal body_read
            message = await receive()
            if message["type"] == "http.disconnect" or not message.get("more_body", False):
                body_read = True
            return message

        async def send_with_id(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = [h for h in message.get("headers", ()) if h[0].lower() != _REQUEST_ID]
                headers += [header, (b"x-amz-id-2", request_id.encode())]
                if not body_read:
                    # refused before its body was read (clients wait on Expect: 100-continue):
                    # the unread bytes must not be taken for the next request on the connection
                    headers.append((b"connection", b"close"))
                message["headers"] = headers
            await send(message)

        request = Request(scope, receive_tracked)
        head = request.method == "HEAD"
        resource = request.url.path
        try:
            bucket, key = parse_address(scope, self.state.settings.domain_names)
        except UnicodeError:
            bucket, key = None, None
        operation = "s3:Unknown"
        try:
            op = route(request.method, bucket, key, request.query_params, request.headers)
            operation = op.name
            scope["route"] = _Route(operation)
            authenticated = await authenticate(
                request, self.state.auth, self.state.settings, tokens=self.state.login_tokens
            )
            req = S3Request(
                http=request,
                state=self.state,
                request_id=request_id,
                bucket=bucket,
                key=key,
                caller=authenticated.caller,
                body=authenticated.body,
                content_length=authenticated.content_length,
            )
            response = await op.handler(req)
        except S3Error as err:
            if err.code is S3Code.INTERNAL_ERROR:
                log.error("request %s (%s) failed: %s", request_id, operation, err.message)
            response = xml.error_response(err, request_id=request_id, resource=resource, head=head)
        except ClientDisconnect:
            response = client_gone(request.method, resource)
        except Exception:
            log.exception("request %s (%s) failed", request_id, operation)
            response = xml.error_response(
                S3Error(S3Code.INTERNAL_ERROR, bucket=bucket, key=_path_of(key)),
                request_id=request_id,
                resource=resource,
                head=head,
            )
        scope.setdefault("route", _Route(operation))
        await response(scope, receive_tracked, send_with_id)


def _request_id() -> str:
    return uuid.uuid4().hex[:16].upper()


def slow_down(scope: Scope, retry_after: int) -> Response:
    """Return the gateway's answer to a request refused for load: ``503 SlowDown``.

    S3's own answer when a client sends faster than it can take; every S3 SDK backs off and
    retries it (botocore counts it against its retry quota).
    """
    request_id = _request_id()
    return xml.error_response(
        S3Error(S3Code.SLOW_DOWN, headers={"Retry-After": str(retry_after)}),
        request_id=request_id,
        resource=str(scope.get("path", "/")),
        head=scope.get("method") == "HEAD",
    )


def _path_of(key: str | None) -> str | None:
    """Return the object path of a key (S3's ``<Key>`` in errors: without the ref)."""
    if key is None:
        return None
    return key.partition("/")[2] or None


def create_gateway_app(state: GatewayState) -> ASGIApp:
    """Return the gateway's ASGI app over ``state``."""
    return GatewayApp(state)


class GatewayDispatch:
    """One listener for the API and the gateway: each HTTP request goes to one of them.

    Args:
        api_app: The REST API (it also receives lifespan events).
        gateway_app: The gateway.
        settings: The ``gateway`` section (its domain names).
    """

    def __init__(self, api_app: ASGIApp, gateway_app: ASGIApp, settings: GatewaySettings) -> None:
        self.api_app = api_app
        self.gateway_app = gateway_app
        self.settings = settings

    def is_gateway(self, scope: Scope) -> bool:
        """Return whether an HTTP request is the gateway's."""
        path: str = scope.get("path", "")
        if path in API_PATHS:
            return False
        if _virtual_bucket(_host(scope), self.settings.domain_names) is not None:
            return True
        return not (path == "/api" or path.startswith("/api/")) and is_signed(scope)

    def refusal(self, scope: Scope, retry_after: int) -> Response:
        """Return the 503 for load of the front door a request is for (S3's or lakeFS's)."""
        if self.is_gateway(scope):
            return slow_down(scope, retry_after)
        return overloaded_json(scope, retry_after)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Serve one ASGI connection."""
        if scope["type"] == "http" and self.is_gateway(scope):
            await self.gateway_app(scope, receive, send)
        else:
            await self.api_app(scope, receive, send)


def with_gateway(api_app: ASGIApp, state: GatewayState, metrics: HttpMetrics) -> GatewayDispatch:
    """Return ``api_app`` and the gateway on one listener, the gateway counted in ``metrics``.

    Gateway requests count in the API's HTTP metrics with the S3 operation as their route label
    (``s3:GetObject``), so the label set stays bounded whatever the keys.
    """
    gateway = MetricsMiddleware(create_gateway_app(state), metrics)
    return GatewayDispatch(api_app, gateway, state.settings)
