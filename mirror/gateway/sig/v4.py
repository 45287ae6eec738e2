"""Signature Version 4: the ``Authorization`` header and presigned URLs, as S3 verifies them.

The canonical request uses the path exactly as it came over the wire (S3 does not normalise or
re-encode it); a client that sent characters unencoded is also tried against the path encoded
once, as AWS's rules would have encoded it.
"""

from __future__ import annotations

import functools
import hashlib
import hmac
import re
import time
from dataclasses import dataclass, field
from urllib.parse import unquote

from mirror.gateway.errors import S3Code, S3Error
from mirror.gateway.sig.canonical import (
    MAX_SKEW_SECONDS,
    WireRequest,
    check_skew,
    parse_amz_date,
    parse_http_date,
    same_text,
    uri_encode,
)

__all__ = [
    "ALGORITHM",
    "MAX_EXPIRES_SECONDS",
    "STREAMING_PAYLOADS",
    "UNSIGNED_PAYLOAD",
    "V4Auth",
    "V4Verified",
    "check_time",
    "parse_v4",
    "signing_key",
    "string_to_sign",
    "verify_v4",
]

ALGORITHM = "AWS4-HMAC-SHA256"
UNSIGNED_PAYLOAD = "UNSIGNED-PAYLOAD"
STREAMING_PAYLOADS = frozenset(
    {
        "STREAMING-AWS4-HMAC-SHA256-PAYLOAD",
        "STREAMING-AWS4-HMAC-SHA256-PAYLOAD-TRAILER",
        "STREAMING-UNSIGNED-PAYLOAD-TRAILER",
    }
)
"""The ``x-amz-content-sha256`` values of ``aws-chunked`` bodies."""
MAX_EXPIRES_SECONDS = 604800
"""The longest ``X-Amz-Expires`` (seven days)."""

_HEX_SHA256 = re.compile(r"[0-9a-f]{64}")
_HEADER_PART = re.compile(r"\s*(Credential|SignedHeaders|Signature)\s*=\s*([^,\s]*)\s*")
_SPACES = re.compile(r"\s+")


def _malformed_header(detail: str) -> S3Error:
    return S3Error(
        S3Code.AUTHORIZATION_HEADER_MALFORMED,
        f"{S3Code.AUTHORIZATION_HEADER_MALFORMED.description}: {detail}",
    )


def _malformed_query(detail: str) -> S3Error:
    return S3Error(
        S3Code.AUTHORIZATION_QUERY_PARAMETERS_ERROR,
        f"{S3Code.AUTHORIZATION_QUERY_PARAMETERS_ERROR.description}: {detail}",
    )


@dataclass(frozen=True)
class V4Auth:
    """The signature a SigV4 request carries, parsed (not yet verified).

    Attributes:
        access_key_id: The key the request claims.
        date: The scope's date (``YYYYMMDD``).
        region: The scope's region (any is accepted).
        service: The scope's service (``s3``).
        signed_headers: The signed header names, lower case, in the order signed.
        signature: The hex signature.
        amz_date: The request time as signed (``YYYYMMDDTHHMMSSZ``).
        request_time: The request time in epoch seconds.
        expires: ``X-Amz-Expires`` of a presigned URL; ``None`` for a header-signed request.
        payload_hash: The payload hash the canonical request carries.
    """

    access_key_id: str
    date: str
    region: str
    service: str
    signed_headers: tuple[str, ...]
    signature: str = field(repr=False)
    amz_date: str
    request_time: float
    expires: int | None
    payload_hash: str

    @property
    def presigned(self) -> bool:
        """Return whether the signature came in the query (a presigned URL)."""
        return self.expires is not None

    @property
    def scope(self) -> str:
        """Return the credential scope ``date/region/service/aws4_request``."""
        return f"{self.date}/{self.region}/{self.service}/aws4_request"


@dataclass(frozen=True)
class V4Verified:
    """A verified SigV4 request: what chained chunk signatures are computed from.

    Attributes:
        key: The signing key of the request's scope.
        amz_date: The request time as signed.
        scope: The credential scope.
        seed_signature: The request's own signature (the first chunk's previous signature).
        payload_hash: The ``x-amz-content-sha256`` value.
    """

    key: bytes = field(repr=False)
    amz_date: str
    scope: str
    seed_signature: str
    payload_hash: str


def _credential(value: str) -> tuple[str, str, str, str, str]:
    # the scope is the last four parts; whatever comes before them is the key ID
    parts = value.rsplit("/", 4)
    if len(parts) != 5 or not all(parts):
        raise ValueError(value)
    return parts[0], parts[1], parts[2], parts[3], parts[4]


def _check_scope(date: str, service: str, terminator: str, amz_date: str) -> str | None:
    if terminator != "aws4_request":
        return "the credential scope must end with aws4_request"
    if service != "s3":
        return f"the credential scope names service {service!r}, expected 's3'"
    if not amz_date.startswith(date):
        return f"the credential scope's date {date} is not the request's date {amz_date[:8]}"
    return None


def parse_v4(request: WireRequest) -> V4Auth | None:
    """Return the SigV4 signature of ``request``, or ``None`` when it carries none.

    Raises:
        S3Error: AuthorizationHeaderMalformed or AuthorizationQueryParametersError (malformed
            parts), InvalidRequest (no ``x-amz-content-sha256`` on a header-signed request),
            AccessDenied (no request time, or an invalid one).
    """
    authorization = request.header("authorization")
    if authorization is not None and authorization.startswith(ALGORITHM + " "):
        return _parse_header(request, authorization[len(ALGORITHM) + 1 :])
    if request.query_value("X-Amz-Algorithm") is not None:
        return _parse_query(request)
    return None


def _parse_header(request: WireRequest, rest: str) -> V4Auth:
    fields: dict[str, str] = {}
    for part in rest.split(","):
        match = _HEADER_PART.fullmatch(part)
        if match is None:
            raise _malformed_header(f"unexpected part {part.strip()!r}")
        fields[match.group(1)] = match.group(2)
    missing = [k for k in ("Credential", "SignedHeaders", "Signature") if not fields.get(k)]
    if missing:
        raise _malformed_header(f"missing {', '.join(missing)}")
    try:
        key_id, date, region, service, terminator = _credential(fields["Credential"])
    except ValueError:
        raise _malformed_header(
            "the Credential must be <key>/<date>/<region>/<service>/aws4_request"
        ) from None
    amz_date = request.header("x-amz-date")
    if amz_date is not None:
        request_time = parse_amz_date(amz_date)
    else:
        http_date = request.header("date")
        if http_date is None:
            raise S3Error(
                S3Code.ACCESS_DENIED,
                f"{S3Code.ACCESS_DENIED.description}: AWS authentication requires a valid "
                "Date or x-amz-date header",
            )
        request_time = parse_http_date(http_date)
        amz_date = _amz_date(request_time)
    problem = _check_scope(date, service, terminator, amz_date)
    if problem is not None:
        raise _malformed_header(problem)
    payload_hash = request.header("x-amz-content-sha256")
    if payload_hash is None:
        raise S3Error(
            S3Code.INVALID_REQUEST,
            "Missing required header for this request: x-amz-content-sha256",
        )
    if (
        payload_hash != UNSIGNED_PAYLOAD
        and payload_hash not in STREAMING_PAYLOADS
        and not _HEX_SHA256.fullmatch(payload_hash)
    ):
        raise S3Error(
            S3Code.INVALID_ARGUMENT,
            f"{S3Code.INVALID_ARGUMENT.description}: x-amz-content-sha256 must be "
            "UNSIGNED-PAYLOAD, STREAMING-* or a hex-encoded SHA-256",
        )
    signed = tuple(fields["SignedHeaders"].split(";"))
    if "host" not in signed:
        raise _malformed_header("SignedHeaders must include host")
    return V4Auth(
        key_id,
        date,
        region,
        service,
        signed,
        fields["Signature"],
        amz_date,
        request_time,
        None,
        payload_hash,
    )


def _parse_query(request: WireRequest) -> V4Auth:
    values = {k: v for k, v in reversed(request.query())}
    if values.get("X-Amz-Algorithm") != ALGORITHM:
        raise _malformed_query(f"X-Amz-Algorithm only supports {ALGORITHM}")
    missing = [
        k
        for k in (
            "X-Amz-Credential",
            "X-Amz-Date",
            "X-Amz-Expires",
            "X-Amz-SignedHeaders",
            "X-Amz-Signature",
        )
        if not values.get(k)
    ]
    if missing:
        raise _malformed_query(f"missing {', '.join(missing)}")
    try:
        key_id, date, region, service, terminator = _credential(values["X-Amz-Credential"])
    except ValueError:
        raise _malformed_query(
            "X-Amz-Credential must be <key>/<date>/<region>/<service>/aws4_request"
        ) from None
    amz_date = values["X-Amz-Date"]
    request_time = parse_amz_date(amz_date)
    try:
        expires = int(values["X-Amz-Expires"])
    except ValueError:
        raise _malformed_query("X-Amz-Expires must be a whole number of seconds") from None
    if expires < 0:
        raise _malformed_query("X-Amz-Expires must be non-negative")
    if expires > MAX_EXPIRES_SECONDS:
        raise _malformed_query(
            f"X-Amz-Expires must be less than a week (in seconds) that is {MAX_EXPIRES_SECONDS}"
        )
    problem = _check_scope(date, service, terminator, amz_date)
    if problem is not None:
        raise _malformed_query(problem)
    signed = tuple(values["X-Amz-SignedHeaders"].split(";"))
    if "host" not in signed:
        raise _malformed_query("X-Amz-SignedHeaders must include host")
    payload_hash = values.get("X-Amz-Content-Sha256") or request.header("x-amz-content-sha256")
    return V4Auth(
        key_id,
        date,
        region,
        service,
        signed,
        values["X-Amz-Signature"],
        amz_date,
        request_time,
        expires,
        payload_hash or UNSIGNED_PAYLOAD,
    )


def _amz_date(epoch: float) -> str:
    return time.strftime("%Y%m%dT%H%M%SZ", time.gmtime(epoch))


def check_time(auth: V4Auth, now: float) -> None:
    """Return if the request is valid at ``now``.

    Header-signed requests must be within the allowed skew; presigned URLs until they expire.

    Raises:
        S3Error: RequestTimeTooSkewed, or AccessDenied for an expired or not yet valid URL.
    """
    if auth.expires is None:
        check_skew(auth.request_time, now)
        return
    if now > auth.request_time + auth.expires:
        raise S3Error(S3Code.ACCESS_DENIED, "Request has expired")
    if auth.request_time - now > MAX_SKEW_SECONDS:
        raise S3Error(S3Code.ACCESS_DENIED, "Request is not yet valid")


def _hmac(key: bytes, text: str) -> bytes:
    return hmac.new(key, text.encode(), hashlib.sha256).digest()


def signing_key(secret: str, date: str, region: str, service: str) -> bytes:
    """Return the SigV4 signing key of a secret and a scope."""
    if max(len(date), len(region), len(service)) <= _KEPT_SCOPE_PART:
        # kept per secret and scope: a key signs every request of its day with the same one
        return _signing_key_kept(secret, date, region, service)
    return _signing_key(secret, date, region, service)


_KEPT_SCOPE_PART = 64
"""The longest date, region or service whose signing key is kept (a scope is unverified)."""


@functools.lru_cache(maxsize=1024)
def _signing_key_kept(secret: str, date: str, region: str, service: str) -> bytes:
    return _signing_key(secret, date, region, service)


def _signing_key(secret: str, date: str, region: str, service: str) -> bytes:
    key = _hmac(("AWS4" + secret).encode(), date)
    key = _hmac(key, region)
    key = _hmac(key, service)
    return _hmac(key, "aws4_request")


def _canonical_query(request: WireRequest, presigned: bool) -> str:
    pairs = [
        (uri_encode(k), uri_encode(v))
        for k, v in request.query()
        if not (presigned and k == "X-Amz-Signature")
    ]
    return "&".join(f"{k}={v}" for k, v in sorted(pairs))


def _canonical_headers(request: WireRequest, names: tuple[str, ...]) -> str:
    lines = []
    for name in names:
        values = [_SPACES.sub(" ", v.strip()) for k, v in request.headers if k == name]
        lines.append(f"{name}:{','.join(values)}\n")
    return "".join(lines)


def _uris(raw_path: str) -> list[str]:
    once = uri_encode(unquote(raw_path), keep_slash=True)
    return [raw_path] if once == raw_path else [raw_path, once]


def string_to_sign(request: WireRequest, auth: V4Auth, uri: str) -> str:
    """Return the string to sign of ``request`` with canonical URI ``uri``."""
    canonical = "\n".join(
        (
            request.method,
            uri or "/",
            _canonical_query(request, auth.presigned),
            _canonical_headers(request, auth.signed_headers),
            ";".join(auth.signed_headers),
            auth.payload_hash,
        )
    )
    digest = hashlib.sha256(canonical.encode()).hexdigest()
    return f"{ALGORITHM}\n{auth.amz_date}\n{auth.scope}\n{digest}"


def verify_v4(request: WireRequest, auth: V4Auth, secret: str) -> V4Verified:
    """Return the verified signature's chaining state if ``auth`` signs ``request``.

    Raises:
        S3Error: SignatureDoesNotMatch.
    """
    key = signing_key(secret, auth.date, auth.region, auth.service)
    for uri in _uris(request.raw_path):
        expected = hmac.new(key, string_to_sign(request, auth, uri).encode(), hashlib.sha256)
        if same_text(auth.signature.lower(), expected.hexdigest()):
            return V4Verified(key, auth.amz_date, auth.scope, auth.signature, auth.payload_hash)
    raise S3Error(S3Code.SIGNATURE_DOES_NOT_MATCH)
