"""The body's digests and length, checked as it streams: memory stays bounded by one piece.

Mismatches are found at the end of the body (a digest needs every byte) and raised from the
body iterator as :class:`~mirror.gateway.errors.S3Error`; whoever consumes the body must then
keep nothing of it.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

from mirror.gateway.errors import S3Code, S3Error
from mirror.gateway.sig.canonical import WireRequest, same_text
from mirror.gateway.sig.checksums import ALGORITHMS, encoded, new_checksum

__all__ = ["PayloadChecks", "checked_body", "payload_checks"]

_HEX_SHA256_LENGTH = 64
_CHECKSUM_BYTES = {"crc32": 4, "crc32c": 4, "crc64nvme": 8, "sha1": 20, "sha256": 32}


@dataclass(frozen=True)
class PayloadChecks:
    """What the body must match.

    Attributes:
        sha256: The hex SHA-256 of ``x-amz-content-sha256``, when the request states one.
        md5: The ``Content-MD5`` digest.
        checksums: ``x-amz-checksum-<algorithm>`` values (base64) by algorithm.
        length: The length the body must have (``Content-Length``, or the decoded length of an
            ``aws-chunked`` body).
    """

    sha256: str | None = None
    md5: bytes | None = field(default=None, repr=False)
    checksums: dict[str, str] = field(default_factory=dict)
    length: int | None = None


def _decode_digest(value: str, size: int) -> bytes | None:
    try:
        raw = base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError):
        return None
    return raw if len(raw) == size else None


def payload_checks(
    request: WireRequest, payload_hash: str | None, length: int | None
) -> PayloadChecks:
    """Return the checks the headers of ``request`` call for.

    Args:
        request: The request.
        payload_hash: The signed ``x-amz-content-sha256`` value (checked when hex).
        length: The body length to check.

    Raises:
        S3Error: InvalidDigest (a malformed ``Content-MD5``), InvalidRequest (a malformed
            ``x-amz-checksum-*`` value).
    """
    md5 = None
    content_md5 = request.header("content-md5")
    if content_md5 is not None:
        md5 = _decode_digest(content_md5.strip(), 16)
        if md5 is None:
            raise S3Error(S3Code.INVALID_DIGEST)
    checksums = {}
    for algorithm in ALGORITHMS:
        value = request.header(f"x-amz-checksum-{algorithm}")
        if value is None:
            continue
        if _decode_digest(value.strip(), _CHECKSUM_BYTES[algorithm]) is None:
            raise S3Error(
                S3Code.INVALID_REQUEST,
                f"Value for x-amz-checksum-{algorithm} header is invalid.",
            )
        checksums[algorithm] = value.strip()
    sha256 = payload_hash if payload_hash and len(payload_hash) == _HEX_SHA256_LENGTH else None
    return PayloadChecks(sha256, md5, checksums, length)


async def checked_body(source: AsyncIterator[bytes], checks: PayloadChecks) -> AsyncIterator[bytes]:
    """Yield ``source``'s pieces, raising at the end if the body fails ``checks``.

    Raises:
        S3Error: IncompleteBody (fewer or more bytes than the length),
            XAmzContentSHA256Mismatch, BadDigest (``Content-MD5`` or a checksum).
    """
    sha256 = hashlib.sha256() if checks.sha256 is not None else None
    md5 = hashlib.md5(usedforsecurity=False) if checks.md5 is not None else None
    running = {algorithm: new_checksum(algorithm) for algorithm in checks.checksums}
    received = 0
    async for piece in source:
        if not piece:
            continue
        received += len(piece)
        if checks.length is not None and received > checks.length:
            raise S3Error(
                S3Code.INCOMPLETE_BODY,
                f"{S3Code.INCOMPLETE_BODY.description} The body is longer than the "
                f"{checks.length} bytes stated.",
            )
        if sha256 is not None:
            sha256.update(piece)
        if md5 is not None:
            md5.update(piece)
        for checksum in running.values():
            checksum.update(piece)
        yield piece
    if checks.length is not None and received < checks.length:
        raise S3Error(
            S3Code.INCOMPLETE_BODY,
            f"{S3Code.INCOMPLETE_BODY.description} Received {received} of {checks.length} bytes.",
        )
    if sha256 is not None and checks.sha256 is not None:
        if not same_text(checks.sha256.lower(), sha256.hexdigest()):
            raise S3Error(S3Code.XAMZ_CONTENT_SHA256_MISMATCH)
    if md5 is not None and checks.md5 is not None:
        if not hmac.compare_digest(md5.digest(), checks.md5):
            raise S3Error(S3Code.BAD_DIGEST)
    for algorithm, checksum in running.items():
        if encoded(checksum) != checks.checksums[algorithm]:
            raise S3Error(
                S3Code.BAD_DIGEST,
                f"{S3Code.BAD_DIGEST.description} (x-amz-checksum-{algorithm})",
            )
