"""Signature Version 2 (HMAC-SHA1), for old clients: the header and presigned ``Expires`` URLs.

String to sign: method, ``Content-MD5``, ``Content-Type``, the date (``Expires`` for a presigned
URL), the canonicalised ``x-amz-*`` headers, and the canonicalised resource: ``/<bucket>`` for a
virtual-hosted request, then the path as sent, then S3's sub-resources sorted.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
from dataclasses import dataclass, field
from urllib.parse import unquote

from mirror.gateway.errors import S3Code, S3Error
from mirror.gateway.sig.canonical import WireRequest, check_skew, parse_http_date, same_text

__all__ = [
    "SUB_RESOURCES",
    "V2Auth",
    "check_time_v2",
    "parse_v2",
    "string_to_sign_v2",
    "verify_v2",
]

SUB_RESOURCES = frozenset(
    {
        "accelerate",
        "acl",
        "analytics",
        "cors",
        "defaultObjectAcl",
        "delete",
        "inventory",
        "lifecycle",
        "location",
        "logging",
        "metrics",
        "notification",
        "object-lock",
        "partNumber",
        "policy",
        "replication",
        "requestPayment",
        "response-cache-control",
        "response-content-disposition",
        "response-content-encoding",
        "response-content-language",
        "response-content-type",
        "response-expires",
        "restore",
        "select",
        "select-type",
        "storageClass",
        "tagging",
        "torrent",
        "uploadId",
        "uploads",
        "versionId",
        "versioning",
        "versions",
        "website",
    }
)
"""Query parameters that are part of a SigV2 canonicalised resource."""


@dataclass(frozen=True)
class V2Auth:
    """The SigV2 signature a request carries, parsed (not yet verified).

    Attributes:
        access_key_id: The key the request claims.
        signature: The base64 signature.
        expires: The epoch seconds a presigned URL expires at; ``None`` for the header form.
    """

    access_key_id: str
    signature: str = field(repr=False)
    expires: int | None


def parse_v2(request: WireRequest) -> V2Auth | None:
    """Return the SigV2 signature of ``request``, or ``None`` when it carries none.

    Raises:
        S3Error: AuthorizationHeaderMalformed or AuthorizationQueryParametersError.
    """
    authorization = request.header("authorization")
    if authorization is not None and authorization.startswith("AWS "):
        key_id, sep, signature = authorization[4:].strip().rpartition(":")
        if not sep or not key_id or not signature:
            raise S3Error(
                S3Code.AUTHORIZATION_HEADER_MALFORMED,
                f"{S3Code.AUTHORIZATION_HEADER_MALFORMED.description}: expected "
                "'AWS <access key>:<signature>'",
            )
        return V2Auth(key_id, signature, None)
    query_key = request.query_value("AWSAccessKeyId")
    if query_key is None:
        return None
    query_signature = request.query_value("Signature")
    expires = request.query_value("Expires")
    if not query_key or not query_signature or not expires:
        raise S3Error(
            S3Code.AUTHORIZATION_QUERY_PARAMETERS_ERROR,
            f"{S3Code.AUTHORIZATION_QUERY_PARAMETERS_ERROR.description}: AWSAccessKeyId, "
            "Signature and Expires are all required",
        )
    try:
        expires_at = int(expires)
    except ValueError:
        raise S3Error(
            S3Code.AUTHORIZATION_QUERY_PARAMETERS_ERROR,
            f"{S3Code.AUTHORIZATION_QUERY_PARAMETERS_ERROR.description}: Expires must be "
            "epoch seconds",
        ) from None
    return V2Auth(query_key, query_signature, expires_at)


def check_time_v2(request: WireRequest, auth: V2Auth, now: float) -> None:
    """Return if the request is valid at ``now``.

    Raises:
        S3Error: RequestTimeTooSkewed (header form), AccessDenied (no date, or an expired URL).
    """
    if auth.expires is not None:
        if now > auth.expires:
            raise S3Error(S3Code.ACCESS_DENIED, "Request has expired")
        return
    date = request.header("x-amz-date") or request.header("date")
    if date is None:
        raise S3Error(
            S3Code.ACCESS_DENIED,
            f"{S3Code.ACCESS_DENIED.description}: AWS authentication requires a valid Date or "
            "x-amz-date header",
        )
    check_skew(parse_http_date(date), now)


def _amz_headers(request: WireRequest, presigned: bool) -> str:
    merged: dict[str, list[str]] = {}
    for name, value in request.headers:
        if name.startswith("x-amz-"):
            merged.setdefault(name, []).append(value.strip())
    if presigned:
        for name, value in request.query():
            lower = name.lower()
            if lower.startswith("x-amz-") and lower not in merged:
                merged[lower] = [value.strip()]
    return "".join(f"{name}:{','.join(merged[name])}\n" for name in sorted(merged))


def _resource(request: WireRequest, path: str) -> str:
    parts = []
    for part in request.raw_query.split("&"):
        name, sep, value = part.partition("=")
        if name in SUB_RESOURCES:
            parts.append((name, sep + unquote(value)))
    # the values of sub-resources are signed decoded, as S3 and botocore do
    resource = path
    if parts:
        parts.sort(key=lambda p: p[0])
        resource += "?" + "&".join(name + value for name, value in parts)
    return resource


def string_to_sign_v2(request: WireRequest, auth: V2Auth, path: str, date: str) -> str:
    """Return the SigV2 string to sign of ``request`` for resource ``path`` and date ``date``."""
    presigned = auth.expires is not None

    def standard(name: str) -> str:
        value = request.header(name)
        if value is None and presigned:
            value = request.query_value(name)
        return (value or "").strip()

    return (
        f"{request.method}\n{standard('content-md5')}\n{standard('content-type')}\n{date}\n"
        f"{_amz_headers(request, presigned)}{_resource(request, path)}"
    )


def verify_v2(request: WireRequest, auth: V2Auth, secret: str, *, bucket: str | None) -> None:
    """Return if ``auth`` signs ``request``.

    Args:
        request: The request.
        auth: Its parsed signature.
        secret: The access key's secret.
        bucket: The bucket named by the host (virtual-hosted style), else ``None``.

    Raises:
        S3Error: SignatureDoesNotMatch.
    """
    path = (f"/{bucket}" if bucket else "") + request.raw_path
    paths = [path]
    if path.count("/") == 1 and len(path) > 1:
        # a path-style bucket (``/bucket``): clients sign it as ``/bucket/``, as S3 reads it
        paths.append(path + "/")
    if auth.expires is not None:
        dates = [str(auth.expires)]
    else:
        http_date = (request.header("date") or "").strip()
        # with x-amz-date the date line may be empty (S3's rule) or the Date header as sent
        dates = [http_date, ""] if request.header("x-amz-date") is not None else [http_date]
    given = auth.signature.strip()
    for date in dict.fromkeys(dates):
        for candidate in paths:
            text = string_to_sign_v2(request, auth, candidate, date)
            digest = hmac.new(secret.encode(), text.encode(), hashlib.sha1).digest()
            if same_text(given, base64.b64encode(digest).decode()):
                return
    raise S3Error(S3Code.SIGNATURE_DOES_NOT_MATCH)
