"""The encodings of :mod:`mirror.gateway.headers`: header bytes, RFC 2047 words, and the headers
an object's metadata answers.

Q-encoding is pinned to Go's ``mime.QEncoding.Encode("utf-8", …)``, which lakeFS's gateway answers
user metadata with (word length, where words split, which characters are escaped); decoding to
Go's ``mime.WordDecoder.DecodeHeader`` (white space between words dropped, text around kept).
"""

from __future__ import annotations

from email.header import decode_header, make_header

import pytest
from hypothesis import given
from hypothesis import strategies as st

from mirror.core.model import Entry, ObjectStat
from mirror.gateway.headers import (
    CONTENT_HEADERS,
    decode_words,
    object_headers,
    q_encode,
    wire_text,
)


@pytest.mark.parametrize(
    ("value", "encoded"),
    [
        ("plain ascii", "plain ascii"),
        ("a=b?c_d", "a=b?c_d"),  # printable ASCII is never encoded, '=' and '?' included
        ("tab\there", "tab\there"),
        ("café ☃", "=?utf-8?q?caf=C3=A9_=E2=98=83?="),
        ("é=?_", "=?utf-8?q?=C3=A9=3D=3F=5F?="),
        ("line\nbreak", "=?utf-8?q?line=0Abreak?="),
        # 63 characters of content per word; a character is never split across two words
        ("x" * 62 + "é", "=?utf-8?q?" + "x" * 62 + "?= =?utf-8?q?=C3=A9?="),
        ("x" * 57 + "é", "=?utf-8?q?" + "x" * 57 + "=C3=A9?="),
        ("☃" * 8, "=?utf-8?q?" + "=E2=98=83" * 7 + "?= =?utf-8?q?=E2=98=83?="),
    ],
)
def test_q_encode_answers_as_go_does(value: str, encoded: str) -> None:
    assert q_encode(value) == encoded
    assert all(len(word) <= 75 for word in encoded.split(" ") if word.startswith("=?"))


@pytest.mark.parametrize(
    ("header", "text"),
    [
        ("no words", "no words"),
        ("=?UTF-8?B?Y2Fmw6kg4piD?=", "café ☃"),
        ("=?utf-8?q?caf=c3=a9_=E2=98=83?=", "café ☃"),  # lower-case hex is accepted, as Go does
        ("a =?utf-8?q?x?= \t =?utf-8?q?y?= b", "a xy b"),  # only the space between words goes
        ("=?utf-8?q?x?= - =?utf-8?q?y?=", "x - y"),
        ("=?ISO-8859-1?Q?caf=E9?=", "café"),
        ("=?nope?q?x?= kept", "=?nope?q?x?= kept"),
        ("=?utf-8?q?=ZZ?= =?utf-8?q?ok?=", "=?utf-8?q?=ZZ?= ok"),
        ("=?utf-8?b?not base64?=", "=?utf-8?b?not base64?="),
        ("=?utf-8?x?unknown?=", "=?utf-8?x?unknown?="),
    ],
)
def test_decode_words_as_go_does(header: str, text: str) -> None:
    assert decode_words(header) == text


# a printable ASCII value that looks like an encoded word goes out as it is (as with lakeFS and
# S3), so it reads back decoded: such values are left out
@given(st.text().filter(lambda v: "=?" not in v))
def test_what_q_encode_answers_decodes_back(value: str) -> None:
    encoded = q_encode(value)
    # whatever the value, the answer is a valid header value
    assert encoded.isascii() and not any(c in encoded for c in "\r\n\x00")
    assert decode_words(encoded) == value


@given(st.text(min_size=1).filter(lambda v: not v.isascii()))
def test_python_email_reads_the_words_too(value: str) -> None:
    assert str(make_header(decode_header(q_encode(value)))) == value


def test_wire_text_reads_utf8_bytes_and_keeps_latin1() -> None:
    # what ASGI hands over for the UTF-8 bytes of "café ☃"
    assert wire_text("café ☃".encode().decode("latin-1")) == "café ☃"
    # bytes that are not UTF-8 stay as Latin-1 read them (as the signature check reads them)
    assert wire_text("café".encode("latin-1").decode("latin-1")) == "café"
    assert wire_text("ascii") == "ascii"


def _stat(metadata: dict[str, str]) -> ObjectStat:
    entry = Entry(
        address="data/x",
        size=1,
        checksum="0" * 32,
        mtime=1_700_000_000,
        content_type="text/plain",
        metadata=metadata,
    )
    return ObjectStat(path="p", entry=entry, physical_address="local://ns/data/x")


def test_object_headers_answer_content_headers_and_user_metadata_apart() -> None:
    headers = object_headers(
        _stat(
            {
                "X-Amz-Meta-owner": "ops",
                "X-Amz-Meta-note": "café",
                "Cache-Control": "no-cache",
                "Content-Disposition": 'attachment; filename="ü.csv"',
                "cache-control": "not this one: the names are exact",
                "Expires": "bad\nvalue",
                "other": "a REST API key",
            }
        )
    )
    assert headers["x-amz-meta-owner"] == "ops"
    assert headers["x-amz-meta-note"] == "=?utf-8?q?caf=C3=A9?="
    assert headers["cache-control"] == "no-cache"
    # the bytes go out as they came in: UTF-8 (Starlette writes the str as Latin-1)
    assert (
        headers["content-disposition"].encode("latin-1") == 'attachment; filename="ü.csv"'.encode()
    )
    assert "expires" not in headers  # a value no header can carry is left out
    assert not any(h.startswith("x-amz-meta-") and "control" in h for h in headers)
    assert "other" not in headers and "x-amz-meta-other" not in headers
    assert set(CONTENT_HEADERS) == {
        "Cache-Control",
        "Content-Disposition",
        "Content-Encoding",
        "Content-Language",
        "Expires",
    }
