"""aws-chunked: what a client frames decodes to its data, whatever the chunks and the pieces.

Frames come from the target's encoder (the three streaming formats, every checksum trailer) and
from botocore's ``AwsChunkedWrapper`` (what boto3 sends); forged chunk headers and trailers only
get S3 errors.
"""

from __future__ import annotations

import io

from botocore.httpchecksum import AwsChunkedWrapper, Crc32Checksum, Sha1Checksum, Sha256Checksum
from hypothesis import given
from hypothesis import strategies as st

from mirror.gateway.errors import S3Error
from mirror.gateway.sig.checksums import ALGORITHMS
from tests.fuzz.strategies import fuzz_settings
from tests.fuzz.targets import aws_chunked

FORMATS = (
    "STREAMING-AWS4-HMAC-SHA256-PAYLOAD",
    "STREAMING-AWS4-HMAC-SHA256-PAYLOAD-TRAILER",
    "STREAMING-UNSIGNED-PAYLOAD-TRAILER",
)


@fuzz_settings(50)
@given(
    st.binary(max_size=3000),
    st.sampled_from(FORMATS),
    st.sampled_from(ALGORITHMS),
    st.lists(st.integers(1, 700), min_size=1, max_size=4),
    st.integers(1, 800),
)
def test_framed_data_decodes_to_itself(
    data: bytes, payload_hash: str, algorithm: str, sizes: list[int], piece: int
) -> None:
    trailer = f"x-amz-checksum-{algorithm}" if payload_hash.endswith("-TRAILER") else None
    body = aws_chunked.encode(data, payload_hash, sizes, trailer)
    assert aws_chunked.decode(payload_hash, trailer, body, piece, len(data)) == data


@fuzz_settings(50)
@given(
    st.binary(max_size=3000),
    st.sampled_from(
        [
            (Crc32Checksum, "x-amz-checksum-crc32"),
            (Sha1Checksum, "x-amz-checksum-sha1"),
            (Sha256Checksum, "x-amz-checksum-sha256"),
        ]
    ),
    st.integers(1, 2000),
    st.integers(1, 800),
)
def test_botocore_frames_decode_to_their_data(
    data: bytes, checksum: tuple[type, str], chunk: int, piece: int
) -> None:
    cls, trailer = checksum
    wrapper = AwsChunkedWrapper(
        io.BytesIO(data), checksum_cls=cls, checksum_name=trailer, chunk_size=chunk
    )
    body = wrapper.read()
    payload_hash = "STREAMING-UNSIGNED-PAYLOAD-TRAILER"
    assert aws_chunked.decode(payload_hash, trailer, body, piece, len(data)) == data


chunk_lines = st.one_of(
    st.binary(max_size=40),
    st.tuples(
        st.one_of(st.integers(0, 2**70).map(lambda n: f"{n:x}"), st.text(max_size=12)),
        st.lists(st.tuples(st.text(max_size=20), st.text(max_size=70)), max_size=3),
    ).map(lambda t: (t[0] + "".join(f";{k}={v}" for k, v in t[1])).encode("utf-8", "replace")),
)


@fuzz_settings(50)
@given(
    st.sampled_from(FORMATS),
    st.lists(st.tuples(chunk_lines, st.binary(max_size=40)), max_size=5),
    st.lists(st.text(max_size=40), max_size=4),
    st.integers(1, 64),
)
def test_forged_frames_get_s3_errors(
    payload_hash: str, chunks: list[tuple[bytes, bytes]], trailers: list[str], piece: int
) -> None:
    body = b"".join(line + b"\r\n" + data + b"\r\n" for line, data in chunks)
    body += "".join(t.replace("\r", "").replace("\n", "") + "\r\n" for t in trailers).encode()
    trailer = "x-amz-checksum-crc32" if payload_hash.endswith("-TRAILER") else None
    try:
        aws_chunked.decode(payload_hash, trailer, body + b"\r\n", piece)
    except S3Error:
        pass
