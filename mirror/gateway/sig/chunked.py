"""``aws-chunked`` bodies: the chunk framing, chained chunk signatures and trailers.

``STREAMING-AWS4-HMAC-SHA256-PAYLOAD`` signs every chunk with the previous chunk's signature
(the first with the request's own); the final chunk is empty. The ``-TRAILER`` variants end with
trailing headers (``x-amz-checksum-<algorithm>``, named by ``x-amz-trailer``), signed once more
for ``STREAMING-AWS4-HMAC-SHA256-PAYLOAD-TRAILER``. A chunk's data is passed on as it arrives
and its signature checked at the chunk's end: memory stays bounded whatever size a chunk claims,
and a failure is raised before the body ends, so its consumer keeps nothing.
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import AsyncIterator
from dataclasses import dataclass

from mirror.gateway.errors import S3Code, S3Error
from mirror.gateway.sig.canonical import same_text
from mirror.gateway.sig.checksums import ALGORITHMS, Checksum, encoded, new_checksum
from mirror.gateway.sig.v4 import V4Verified

__all__ = ["ChunkedFormat", "decode_aws_chunked"]

_EMPTY_SHA256 = hashlib.sha256(b"").hexdigest()
_MAX_LINE = 4096
_MAX_TRAILERS = 16


@dataclass(frozen=True)
class ChunkedFormat:
    """How an ``aws-chunked`` body is framed and signed.

    Attributes:
        signed: Chunks carry chained signatures (``STREAMING-AWS4-HMAC-SHA256-PAYLOAD*``).
        trailers: The trailing headers announced by ``x-amz-trailer`` (lower case).
        signed_trailer: The trailers are signed (``…-PAYLOAD-TRAILER``).
    """

    signed: bool
    trailers: tuple[str, ...]
    signed_trailer: bool

    @classmethod
    def of(cls, payload_hash: str, trailer_header: str | None) -> ChunkedFormat:
        """Return the format of a ``STREAMING-*`` ``x-amz-content-sha256`` value.

        Raises:
            S3Error: InvalidRequest, a trailer variant announces no trailer or an unknown one.
        """
        trailing = payload_hash.endswith("-TRAILER")
        names = tuple(n.strip().lower() for n in (trailer_header or "").split(",") if n.strip())
        if trailing and not names:
            raise S3Error(
                S3Code.INVALID_REQUEST, f"{payload_hash} requires an x-amz-trailer header"
            )
        for name in names:
            if not name.startswith("x-amz-checksum-") or name[15:] not in ALGORITHMS:
                raise S3Error(S3Code.INVALID_REQUEST, f"unsupported trailer {name!r}")
        return cls(
            signed=payload_hash.startswith("STREAMING-AWS4-HMAC-SHA256-PAYLOAD"),
            trailers=names if trailing else (),
            signed_trailer=payload_hash == "STREAMING-AWS4-HMAC-SHA256-PAYLOAD-TRAILER",
        )


def _truncated() -> S3Error:
    return S3Error(
        S3Code.INCOMPLETE_BODY,
        f"{S3Code.INCOMPLETE_BODY.description} The aws-chunked body ended early.",
    )


def _malformed(detail: str) -> S3Error:
    return S3Error(S3Code.INVALID_REQUEST, f"malformed aws-chunked body: {detail}")


class _Reader:
    """Reads lines and counted bytes from a stream of pieces, holding one piece at most."""

    def __init__(self, source: AsyncIterator[bytes]) -> None:
        self._source = source
        self._buffer = b""
        self._done = False

    async def _fill(self) -> bool:
        while not self._done:
            try:
                piece = await anext(self._source)
            except StopAsyncIteration:
                self._done = True
                return False
            if piece:
                self._buffer += piece
                return True
        return False

    async def line(self) -> bytes:
        while True:
            end = self._buffer.find(b"\r\n")
            if end >= 0:
                line, self._buffer = self._buffer[:end], self._buffer[end + 2 :]
                return line
            if len(self._buffer) > _MAX_LINE:
                raise _malformed("a line is too long")
            if not await self._fill():
                raise _truncated()

    async def take(self, size: int) -> AsyncIterator[bytes]:
        while size > 0:
            if not self._buffer and not await self._fill():
                raise _truncated()
            piece, self._buffer = self._buffer[:size], self._buffer[size:]
            size -= len(piece)
            yield piece

    async def at_end(self) -> bool:
        return not self._buffer and not await self._fill()


def _sign(key: bytes, text: str) -> str:
    return hmac.new(key, text.encode(), hashlib.sha256).hexdigest()


def _chunk_header(line: bytes, signed: bool) -> tuple[int, str | None]:
    size_text, _, extensions = line.partition(b";")
    try:
        size = int(size_text.strip(), 16)
    except ValueError:
        raise _malformed(f"bad chunk size {size_text[:32]!r}") from None
    if size < 0:
        raise _malformed("negative chunk size")
    signature = None
    for extension in extensions.split(b";") if extensions else ():
        name, _, value = extension.partition(b"=")
        if name.strip() == b"chunk-signature":
            signature = value.strip().decode("ascii", "replace")
    if signed and signature is None:
        raise S3Error(
            S3Code.SIGNATURE_DOES_NOT_MATCH,
            f"{S3Code.SIGNATURE_DOES_NOT_MATCH.description} (a chunk has no signature)",
        )
    return size, signature


async def decode_aws_chunked(
    source: AsyncIterator[bytes], fmt: ChunkedFormat, verified: V4Verified | None
) -> AsyncIterator[bytes]:
    """Yield the decoded data of an ``aws-chunked`` body, verifying it as it goes.

    Args:
        source: The raw body.
        fmt: Its framing.
        verified: The request's verified signature (the chain's seed); needed when signed.

    Raises:
        S3Error: SignatureDoesNotMatch (a chunk or trailer signature), IncompleteBody (the
            stream ends early), InvalidRequest (bad framing, a missing trailer), BadDigest (a
            trailer checksum).
    """
    if fmt.signed and verified is None:
        raise ValueError("signed chunks need the request's verified signature")
    reader = _Reader(source)
    previous = verified.seed_signature if verified is not None else ""
    sums: dict[str, Checksum] = {name: new_checksum(name[15:]) for name in fmt.trailers}
    while True:
        size, signature = _chunk_header(await reader.line(), fmt.signed)
        digest = hashlib.sha256()
        async for piece in reader.take(size):
            if fmt.signed:
                digest.update(piece)
            for checksum in sums.values():
                checksum.update(piece)
            if piece:
                yield piece
        if fmt.signed and verified is not None:
            expected = _sign(
                verified.key,
                f"AWS4-HMAC-SHA256-PAYLOAD\n{verified.amz_date}\n{verified.scope}\n"
                f"{previous}\n{_EMPTY_SHA256}\n{digest.hexdigest()}",
            )
            if signature is None or not same_text(signature.lower(), expected):
                raise S3Error(
                    S3Code.SIGNATURE_DOES_NOT_MATCH,
                    f"{S3Code.SIGNATURE_DOES_NOT_MATCH.description} (chunk signature)",
                )
            previous = expected
        if size == 0:
            break
        if await reader.line() != b"":
            raise _malformed("a chunk's data is longer than its size")
    trailers = await _read_trailers(reader, fmt)
    if fmt.signed_trailer and verified is not None:
        canonical = "".join(f"{name}:{trailers[name]}\n" for name in fmt.trailers)
        expected = _sign(
            verified.key,
            f"AWS4-HMAC-SHA256-TRAILER\n{verified.amz_date}\n{verified.scope}\n{previous}\n"
            f"{hashlib.sha256(canonical.encode()).hexdigest()}",
        )
        given = trailers.get("x-amz-trailer-signature", "")
        if not same_text(given.lower(), expected):
            raise S3Error(
                S3Code.SIGNATURE_DOES_NOT_MATCH,
                f"{S3Code.SIGNATURE_DOES_NOT_MATCH.description} (trailer signature)",
            )
    for name, checksum in sums.items():
        if encoded(checksum) != trailers[name]:
            raise S3Error(S3Code.BAD_DIGEST, f"{S3Code.BAD_DIGEST.description} ({name})")
    if not await reader.at_end():
        raise _malformed("data after the final chunk")


async def _read_trailers(reader: _Reader, fmt: ChunkedFormat) -> dict[str, str]:
    trailers: dict[str, str] = {}
    if not fmt.trailers:
        if await reader.line() != b"":
            raise _malformed("the final chunk is not followed by an empty line")
        return trailers
    for _ in range(_MAX_TRAILERS + 2):
        line = await reader.line()
        if not line:
            break
        name, sep, value = line.decode("utf-8", "replace").partition(":")
        if not sep:
            raise _malformed("a trailer without ':'")
        trailers[name.strip().lower()] = value.strip()
    else:
        raise _malformed("too many trailers")
    missing = [name for name in fmt.trailers if name not in trailers]
    if missing:
        raise S3Error(S3Code.INVALID_REQUEST, f"missing trailer {', '.join(missing)}")
    return trailers
