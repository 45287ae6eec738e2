"""``aws-chunked`` bodies through :func:`mirror.gateway.auth.authenticate`.

The signed-chunk vector is AWS's documented example ("Signature Version 4 — Transferring
payload in multiple chunks"): 66560 bytes of ``a`` in a 64 KiB chunk, a 1 KiB chunk and the
final empty one, with its seed and chunk signatures. Trailer bodies come from botocore's own
``AwsChunkedWrapper``, or are framed here with the signature formulas AWS documents.
"""

from __future__ import annotations

import calendar
import hashlib
import hmac
import io
import time
from typing import Any

import pytest
from botocore.httpchecksum import AwsChunkedWrapper, Crc32Checksum, Sha256Checksum

from mirror.auth.store import AuthStore
from mirror.gateway.auth import authenticate
from mirror.gateway.errors import S3Code, S3Error
from mirror.gateway.sig.checksums import encoded, new_checksum
from mirror.kv import MemoryKV
from tests.unit.gateway_signing import (
    CIPHER,
    SECRET,
    SETTINGS,
    asgi_request,
    drain,
    sign_v4,
    store,
)

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


# AWS's example
EXAMPLE_KEY = "AKIAIOSFODNN7EXAMPLE"
EXAMPLE_SECRET = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"
EXAMPLE_TIME = float(calendar.timegm((2013, 5, 24, 0, 0, 0, 0, 0, 0)))
SEED = "4f232c4386841ef735655705268965c44a0e4690baa4adea153f7db9fa80a0a9"
CHUNKS = (
    (65536, "ad80c730a21e5b8d04586a2213dd63b9a0e99e0e2307b0ade35a65485a288648"),
    (1024, "0055627c9e194cb4542bae2aa5492e3c1575bbb81b612b7d234b86a503ef5497"),
    (0, "b6c6ea8a5354eaf15b3cb7646744f4275b71ea724fed81ceb9323e279d449df9"),
)
EXAMPLE_HEADERS = [
    ("Host", "s3.amazonaws.com"),
    ("x-amz-date", "20130524T000000Z"),
    ("x-amz-storage-class", "REDUCED_REDUNDANCY"),
    (
        "Authorization",
        "AWS4-HMAC-SHA256 Credential=AKIAIOSFODNN7EXAMPLE/20130524/us-east-1/s3/aws4_request,"
        "SignedHeaders=content-encoding;content-length;host;x-amz-content-sha256;x-amz-date;"
        f"x-amz-decoded-content-length;x-amz-storage-class,Signature={SEED}",
    ),
    ("x-amz-content-sha256", "STREAMING-AWS4-HMAC-SHA256-PAYLOAD"),
    ("Content-Encoding", "aws-chunked"),
    ("x-amz-decoded-content-length", "66560"),
    ("Content-Length", "66824"),
]
EXAMPLE_URL = "http://s3.amazonaws.com/examplebucket/chunkObject.txt"


def example_store() -> AuthStore:
    auth = AuthStore(MemoryKV(), cipher=CIPHER)
    auth.ensure_builtins()
    auth.create_user("example")
    auth.create_credentials("example", EXAMPLE_KEY, EXAMPLE_SECRET)
    return auth


def example_body(*, corrupt: bool = False) -> bytes:
    body = bytearray()
    for size, signature in CHUNKS:
        data = bytearray(b"a" * size)
        if corrupt and size == 1024:
            data[10] = ord("b")
        body += f"{size:x};chunk-signature={signature}\r\n".encode() + data + b"\r\n"
    return bytes(body)


def pieces(data: bytes, size: int) -> list[bytes]:
    return [data[i : i + size] for i in range(0, len(data), size)]


async def open_example(body: bytes, piece: int = 1000, headers: Any = None) -> Any:
    request = asgi_request("PUT", EXAMPLE_URL, headers or EXAMPLE_HEADERS, pieces(body, piece))
    return await authenticate(request, example_store(), SETTINGS, now=lambda: EXAMPLE_TIME)


@pytest.mark.parametrize("piece", [1, 997, 65536, 70000])
async def test_aws_example_decodes_whatever_the_pieces(piece: int) -> None:
    body = example_body()
    assert len(body) == 66824
    if piece == 1:
        body_pieces = body[:200], *pieces(body[200:65700], 4096), body[65700:]
        request = asgi_request("PUT", EXAMPLE_URL, EXAMPLE_HEADERS, list(body_pieces))
        result = await authenticate(request, example_store(), SETTINGS, now=lambda: EXAMPLE_TIME)
    else:
        result = await open_example(body, piece)
    assert result.content_length == 66560
    assert await drain(result.body) == b"a" * 66560


async def test_aws_example_tampered_chunk() -> None:
    result = await open_example(example_body(corrupt=True))
    with pytest.raises(S3Error) as caught:
        await drain(result.body)
    assert caught.value.code is S3Code.SIGNATURE_DOES_NOT_MATCH


async def test_aws_example_swapped_signature_breaks_the_chain() -> None:
    body = example_body().replace(CHUNKS[1][1].encode(), CHUNKS[2][1].encode(), 1)
    result = await open_example(body)
    with pytest.raises(S3Error) as caught:
        await drain(result.body)
    assert caught.value.code is S3Code.SIGNATURE_DOES_NOT_MATCH


@pytest.mark.parametrize("cut", [10, 65600, 66700, 66822])
async def test_aws_example_truncated(cut: int) -> None:
    result = await open_example(example_body()[:cut])
    with pytest.raises(S3Error) as caught:
        await drain(result.body)
    assert caught.value.code is S3Code.INCOMPLETE_BODY


async def test_aws_example_tampered_header_and_skew() -> None:
    headers = [(k, "STANDARD" if k == "x-amz-storage-class" else v) for k, v in EXAMPLE_HEADERS]
    with pytest.raises(S3Error) as caught:
        await open_example(example_body(), headers=headers)
    assert caught.value.code is S3Code.SIGNATURE_DOES_NOT_MATCH
    request = asgi_request("PUT", EXAMPLE_URL, EXAMPLE_HEADERS, [example_body()])
    with pytest.raises(S3Error) as caught:
        await authenticate(request, example_store(), SETTINGS, now=time.time)
    assert caught.value.code is S3Code.REQUEST_TIME_TOO_SKEWED


async def test_data_after_the_final_chunk() -> None:
    result = await open_example(example_body() + b"junk")
    with pytest.raises(S3Error) as caught:
        await drain(result.body)
    assert caught.value.code is S3Code.INVALID_REQUEST


# trailers


def botocore_trailer_body(data: bytes, checksum_cls: Any, name: str) -> bytes:
    wrapper = AwsChunkedWrapper(
        io.BytesIO(data), checksum_cls=checksum_cls, checksum_name=name, chunk_size=16384
    )
    return wrapper.read()


async def open_unsigned_trailer(
    data: bytes, body: bytes, trailer: str, decoded: int | None = None
) -> Any:
    headers_in = {
        "Content-Encoding": "aws-chunked",
        "X-Amz-Trailer": trailer,
        "X-Amz-Decoded-Content-Length": str(len(data) if decoded is None else decoded),
    }
    url, headers = sign_v4(
        "PUT",
        "http://127.0.0.1:8000/repo/main/t.bin",
        body=body,
        headers=headers_in,
        payload="STREAMING-UNSIGNED-PAYLOAD-TRAILER",
    )
    request = asgi_request("PUT", url, headers, pieces(body, 5000))
    return await authenticate(request, store(), SETTINGS)


@pytest.mark.parametrize(
    ("checksum_cls", "name"),
    [(Crc32Checksum, "x-amz-checksum-crc32"), (Sha256Checksum, "x-amz-checksum-sha256")],
)
async def test_unsigned_trailer_from_botocore(checksum_cls: Any, name: str) -> None:
    data = bytes(range(256)) * 200
    body = botocore_trailer_body(data, checksum_cls, name)
    result = await open_unsigned_trailer(data, body, name)
    assert result.content_length == len(data)
    assert await drain(result.body) == data


async def test_unsigned_trailer_wrong_checksum() -> None:
    data = b"z" * 40000
    body = botocore_trailer_body(data, Crc32Checksum, "x-amz-checksum-crc32")
    head, _, _ = body.rpartition(b"x-amz-checksum-crc32:")
    wrong = new_checksum("crc32")
    wrong.update(b"something else")
    body = head + b"x-amz-checksum-crc32:" + encoded(wrong).encode() + b"\r\n\r\n"
    result = await open_unsigned_trailer(data, body, "x-amz-checksum-crc32")
    with pytest.raises(S3Error) as caught:
        await drain(result.body)
    assert caught.value.code is S3Code.BAD_DIGEST


async def test_unsigned_trailer_missing_trailer() -> None:
    data = b"q" * 100
    body = b"64\r\n" + data + b"\r\n0\r\n\r\n"
    result = await open_unsigned_trailer(data, body, "x-amz-checksum-crc32")
    with pytest.raises(S3Error) as caught:
        await drain(result.body)
    assert caught.value.code is S3Code.INVALID_REQUEST


@pytest.mark.parametrize("decoded", [99, 101])
async def test_decoded_length_must_match(decoded: int) -> None:
    data = b"q" * 100
    body = botocore_trailer_body(data, Crc32Checksum, "x-amz-checksum-crc32")
    result = await open_unsigned_trailer(data, body, "x-amz-checksum-crc32", decoded)
    with pytest.raises(S3Error) as caught:
        await drain(result.body)
    assert caught.value.code is S3Code.INCOMPLETE_BODY


async def test_streaming_needs_the_decoded_length() -> None:
    url, headers = sign_v4(
        "PUT",
        "http://127.0.0.1:8000/repo/main/t.bin",
        payload="STREAMING-UNSIGNED-PAYLOAD-TRAILER",
    )
    with pytest.raises(S3Error) as caught:
        await authenticate(asgi_request("PUT", url, headers), store(), SETTINGS)
    assert caught.value.code is S3Code.MISSING_CONTENT_LENGTH


def _hmac_hex(key: bytes, text: str) -> str:
    return hmac.new(key, text.encode(), hashlib.sha256).hexdigest()


def _signing_key(date: str) -> bytes:
    key = ("AWS4" + SECRET).encode()
    for part in (date, "us-east-1", "s3", "aws4_request"):
        key = hmac.new(key, part.encode(), hashlib.sha256).digest()
    return key


def signed_trailer_body(
    seed: str, amz_date: str, data: bytes, trailer: tuple[str, str], chunk: int = 8192
) -> bytes:
    """Frame ``data`` as STREAMING-AWS4-HMAC-SHA256-PAYLOAD-TRAILER, as AWS documents it."""
    key = _signing_key(amz_date[:8])
    scope = f"{amz_date[:8]}/us-east-1/s3/aws4_request"
    empty = hashlib.sha256(b"").hexdigest()
    previous = seed
    out = bytearray()
    for part in [*pieces(data, chunk), b""]:
        previous = _hmac_hex(
            key,
            f"AWS4-HMAC-SHA256-PAYLOAD\n{amz_date}\n{scope}\n{previous}\n{empty}\n"
            f"{hashlib.sha256(part).hexdigest()}",
        )
        out += f"{len(part):x};chunk-signature={previous}\r\n".encode() + part
        if part:
            out += b"\r\n"
    canonical = f"{trailer[0]}:{trailer[1]}\n"
    trailer_signature = _hmac_hex(
        key,
        f"AWS4-HMAC-SHA256-TRAILER\n{amz_date}\n{scope}\n{previous}\n"
        f"{hashlib.sha256(canonical.encode()).hexdigest()}",
    )
    out += (
        f"{trailer[0]}:{trailer[1]}\r\nx-amz-trailer-signature:{trailer_signature}\r\n\r\n".encode()
    )
    return bytes(out)


async def open_signed_trailer(data: bytes, tamper: Any = None) -> Any:
    checksum = new_checksum("crc32c")
    checksum.update(data)
    headers_in = {
        "Content-Encoding": "aws-chunked",
        "X-Amz-Trailer": "x-amz-checksum-crc32c",
        "X-Amz-Decoded-Content-Length": str(len(data)),
    }
    url, headers = sign_v4(
        "PUT",
        "http://127.0.0.1:8000/repo/main/s.bin",
        headers=headers_in,
        payload="STREAMING-AWS4-HMAC-SHA256-PAYLOAD-TRAILER",
    )
    values = dict(headers)
    seed = values["Authorization"].rpartition("Signature=")[2]
    body = signed_trailer_body(
        seed, values["X-Amz-Date"], data, ("x-amz-checksum-crc32c", encoded(checksum))
    )
    if tamper is not None:
        body = tamper(body)
    request = asgi_request("PUT", url, headers, pieces(body, 3000))
    return await authenticate(request, store(), SETTINGS)


async def test_signed_trailer() -> None:
    data = b"signed trailer data " * 1000
    result = await open_signed_trailer(data)
    assert await drain(result.body) == data


async def test_signed_trailer_tampered_signature() -> None:
    def tamper(body: bytes) -> bytes:
        head, sep, tail = body.rpartition(b"x-amz-trailer-signature:")
        flipped = (b"0" if tail[:1] != b"0" else b"1") + tail[1:]
        return head + sep + flipped

    result = await open_signed_trailer(b"x" * 10000, tamper)
    with pytest.raises(S3Error) as caught:
        await drain(result.body)
    assert caught.value.code is S3Code.SIGNATURE_DOES_NOT_MATCH


async def test_signed_trailer_tampered_checksum() -> None:
    def tamper(body: bytes) -> bytes:
        head, sep, tail = body.rpartition(b"x-amz-checksum-crc32c:")
        return head + sep + b"AAAAAA==" + tail[8:]

    result = await open_signed_trailer(b"x" * 10000, tamper)
    with pytest.raises(S3Error) as caught:
        await drain(result.body)
    assert caught.value.code is S3Code.SIGNATURE_DOES_NOT_MATCH


async def test_memory_stays_bounded_by_the_pieces_received() -> None:
    """A chunk claiming 8 MiB is passed on piece by piece, never gathered before its check."""
    data = bytes(range(251)) * (8 * 1024 * 1024 // 251)
    checksum = new_checksum("crc32")
    checksum.update(data)
    body = (
        f"{len(data):x}\r\n".encode()
        + data
        + f"\r\n0\r\nx-amz-checksum-crc32:{encoded(checksum)}\r\n\r\n".encode()
    )
    headers_in = {
        "Content-Encoding": "aws-chunked",
        "X-Amz-Trailer": "x-amz-checksum-crc32",
        "X-Amz-Decoded-Content-Length": str(len(data)),
    }
    url, headers = sign_v4(
        "PUT",
        "http://127.0.0.1:8000/repo/main/big.bin",
        headers=headers_in,
        payload="STREAMING-UNSIGNED-PAYLOAD-TRAILER",
    )
    piece = 64 * 1024
    request = asgi_request("PUT", url, headers, pieces(body, piece))
    result = await authenticate(request, store(), SETTINGS)
    largest = received = 0
    digest = hashlib.sha256()
    async for out in result.body:
        largest = max(largest, len(out))
        received += len(out)
        digest.update(out)
    assert received == len(data)
    assert digest.digest() == hashlib.sha256(data).digest()
    assert largest <= piece
