"""``aws-chunked`` bodies: the framing, chained chunk signatures and trailers.

The input's first line says how the body is framed, as the request's headers would:
``<x-amz-content-sha256> <x-amz-trailer or -> <piece size> <x-amz-decoded-content-length or ->``;
the rest is the body. The body is decoded by :func:`decode_aws_chunked` (chunk signatures
chained from :data:`SEED_SIGNATURE`, under the corpus's key at
:data:`~tests.fuzz.harness.FUZZ_NOW`) and checked against the stated length by
:func:`checked_body`, as the gateway reads it. Documented refusal:
:class:`~mirror.gateway.errors.S3Error`.

:func:`encode` frames data as a client does (AWS's description of the three streaming formats);
decoding what it frames must give the data back.
"""

from __future__ import annotations

import hashlib
import hmac
import time
from collections.abc import AsyncIterator, Sequence

import anyio

from mirror.gateway.errors import S3Error
from mirror.gateway.sig.checksums import encoded, new_checksum
from mirror.gateway.sig.chunked import ChunkedFormat, decode_aws_chunked
from mirror.gateway.sig.payload import PayloadChecks, checked_body
from mirror.gateway.sig.v4 import V4Verified, signing_key
from tests.fuzz.harness import FUZZ_NOW
from tests.fuzz.targets.signed import REGION, SECRET, refusal

__all__ = ["SEED_SIGNATURE", "VERIFIED", "check", "decode", "encode", "frame"]


AMZ_DATE = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime(FUZZ_NOW))
SEED_SIGNATURE = hashlib.sha256(b"the request's own signature").hexdigest()
"""The request signature the chunk signatures chain from."""
VERIFIED = V4Verified(
    key=signing_key(SECRET, AMZ_DATE[:8], REGION, "s3"),
    amz_date=AMZ_DATE,
    scope=f"{AMZ_DATE[:8]}/{REGION}/s3/aws4_request",
    seed_signature=SEED_SIGNATURE,
    payload_hash="STREAMING-AWS4-HMAC-SHA256-PAYLOAD",
)
_EMPTY = hashlib.sha256(b"").hexdigest()
_DEFAULT_HASH = "STREAMING-AWS4-HMAC-SHA256-PAYLOAD"


def _sign(text: str) -> str:
    return hmac.new(VERIFIED.key, text.encode(), hashlib.sha256).hexdigest()


def encode(
    data: bytes,
    payload_hash: str,
    chunk_sizes: Sequence[int],
    trailer: str | None = None,
    *,
    seed: str = SEED_SIGNATURE,
) -> bytes:
    """Frame ``data`` as ``payload_hash`` says, in chunks of ``chunk_sizes`` (cycled, > 0).

    ``trailer`` names the checksum trailer (``x-amz-checksum-crc32c``) of the ``-TRAILER``
    formats; its value is computed from ``data``. Chunk signatures chain from ``seed``.
    """
    signed = payload_hash.startswith("STREAMING-AWS4-HMAC-SHA256-PAYLOAD")
    chunks, pos, i = [], 0, 0
    while pos < len(data):
        size = chunk_sizes[i % len(chunk_sizes)]
        chunks.append(data[pos : pos + size])
        pos, i = pos + size, i + 1
    out = bytearray()
    previous = seed
    for chunk in [*chunks, b""]:
        head = f"{len(chunk):x}"
        if signed:
            previous = _sign(
                f"AWS4-HMAC-SHA256-PAYLOAD\n{AMZ_DATE}\n{VERIFIED.scope}\n{previous}\n{_EMPTY}\n"
                f"{hashlib.sha256(chunk).hexdigest()}"
            )
            head += f";chunk-signature={previous}"
        out += head.encode() + b"\r\n" + chunk
        if chunk:
            out += b"\r\n"
    if not payload_hash.endswith("-TRAILER"):
        return bytes(out + b"\r\n")
    assert trailer is not None
    checksum = new_checksum(trailer.removeprefix("x-amz-checksum-"))
    checksum.update(data)
    line = f"{trailer}:{encoded(checksum)}"
    out += line.encode() + b"\r\n"
    if payload_hash == "STREAMING-AWS4-HMAC-SHA256-PAYLOAD-TRAILER":
        canonical = hashlib.sha256(f"{line}\n".encode()).hexdigest()
        signature = _sign(
            f"AWS4-HMAC-SHA256-TRAILER\n{AMZ_DATE}\n{VERIFIED.scope}\n{previous}\n{canonical}"
        )
        out += f"x-amz-trailer-signature:{signature}\r\n".encode()
    return bytes(out + b"\r\n")


def frame(
    payload_hash: str, trailer: str | None, piece: int, length: int | None, body: bytes
) -> bytes:
    """Return the input for a body framed as ``payload_hash`` says (see the module)."""
    stated = "-" if length is None else str(length)
    return f"{payload_hash} {trailer or '-'} {piece} {stated}\n".encode() + body


def _read_frame(data: bytes) -> tuple[str, str | None, int, int | None, bytes]:
    line, _, body = data.partition(b"\n")
    fields = line.decode("utf-8", "replace").split(" ")
    payload_hash = fields[0] or _DEFAULT_HASH
    trailer = fields[1] if len(fields) > 1 and fields[1] != "-" else None
    piece = _number(fields[2]) if len(fields) > 2 else None
    length = _number(fields[3]) if len(fields) > 3 else None
    return payload_hash, trailer, max(1, min(piece or 4096, 1 << 16)), length, body


def _number(text: str) -> int | None:
    return int(text) if text.isascii() and text.isdigit() and len(text) <= 12 else None


async def _pieces(body: bytes, piece: int) -> AsyncIterator[bytes]:
    for i in range(0, len(body), piece):
        yield body[i : i + piece]


def decode(
    payload_hash: str, trailer: str | None, body: bytes, piece: int, length: int | None = None
) -> bytes:
    """Return the decoded body, read as the gateway reads it.

    Raises:
        S3Error: the body's refusal.
    """
    fmt = ChunkedFormat.of(payload_hash, trailer)
    out = bytearray()

    async def read() -> None:
        decoded = decode_aws_chunked(_pieces(body, piece), fmt, VERIFIED)
        async for chunk in checked_body(decoded, PayloadChecks(length=length)):
            out.extend(chunk)

    anyio.run(read)
    return bytes(out)


def check(data: bytes) -> str | None:
    """Decode the body of ``data`` as its first line frames it."""
    payload_hash, trailer, piece, length, body = _read_frame(data)
    try:
        decode(payload_hash, trailer, body, piece, length)
    except S3Error as err:
        return refusal(err)
    return None
