"""The headers an object carries through the gateway: user metadata and S3's content headers.

**User metadata** (``x-amz-meta-<key>``) is stored as lakeFS's gateway stores it, under
``X-Amz-Meta-<lowercased key>`` in the entry's metadata, so the REST API and lakeFS's clients
see the same entries. Values are stored as text: a value sent as RFC 2047 encoded words is
decoded, and on the way out a value that is not printable ASCII is Q-encoded as lakeFS's gateway
(Go's ``mime.QEncoding`` with charset ``utf-8``) and S3 answer it. Only ``X-Amz-Meta-`` keys
come back as ``x-amz-meta-*`` headers.

Header values reach the app as ASGI hands them over: their bytes decoded as Latin-1. Clients
that send non-ASCII send UTF-8 (botocore once its ASCII check is off, Go's and Java's SDKs), so
a value whose bytes are UTF-8 is read as UTF-8, as the signature check
(:mod:`mirror.gateway.auth`) reads it; other bytes stay Latin-1.

**Content headers**, beyond lakeFS (which drops them): ``Cache-Control``,
``Content-Disposition``, ``Content-Encoding``, ``Content-Language`` and ``Expires`` given on a
write are kept in the same metadata map, under those exact names (:data:`CONTENT_HEADERS`), and
answered on GET and HEAD as S3 answers them. Living in the entry, they are committed, merged and
mirrored with the object; they never come back as ``x-amz-meta-*``, and the REST API's stat
shows them under their header names. A key of one of these names set through the REST API is
answered as that header too. Their values go out as the bytes that came in.
"""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Mapping
from typing import TYPE_CHECKING

from mirror.gateway import xml
from mirror.gateway.errors import S3Code, S3Error

if TYPE_CHECKING:
    from mirror.core.model import ObjectStat
    from mirror.gateway.context import S3Request

__all__ = [
    "CONTENT_HEADERS",
    "MAX_METADATA_BYTES",
    "META_PREFIX",
    "RESPONSE_OVERRIDES",
    "apply_overrides",
    "decode_words",
    "object_headers",
    "q_encode",
    "stored_metadata",
    "wire_text",
]

META_PREFIX = "X-Amz-Meta-"
"""How lakeFS's gateway stores user metadata keys in an entry."""

MAX_METADATA_BYTES = 2048
"""S3's limit on user metadata (keys and values, in UTF-8 bytes)."""

CONTENT_HEADERS = (
    "Cache-Control",
    "Content-Disposition",
    "Content-Encoding",
    "Content-Language",
    "Expires",
)
"""The content headers kept with an object, as they are named in its metadata."""

RESPONSE_OVERRIDES = {
    "response-cache-control": "cache-control",
    "response-content-disposition": "content-disposition",
    "response-content-encoding": "content-encoding",
    "response-content-language": "content-language",
    "response-content-type": "content-type",
    "response-expires": "expires",
}
"""GetObject's query parameters that set a header of the answer (S3's, for signed requests)."""

_HEADER_META = "x-amz-meta-"
_AWS_CHUNKED = "aws-chunked"
# Go's mime package: words of at most 75 characters, "=?utf-8?q?" and "?=" included
_MAX_WORD_CONTENT = 75 - len("=?UTF-8?q?") - len("?=")
_WORD = re.compile(r"=\?([^?]+)\?([QqBb])\?(.*?)\?=")
_HEX = frozenset("0123456789abcdefABCDEF")
_CONTROL = re.compile(r"[\x00-\x08\x0a-\x1f\x7f]")


def wire_text(value: str) -> str:
    """Return a header value as the client meant it: its bytes as UTF-8 when they are UTF-8.

    ``value`` is the value as ASGI gives it (bytes decoded as Latin-1).
    """
    if value.isascii():
        return value
    try:
        return value.encode("latin-1").decode("utf-8")
    except (UnicodeEncodeError, UnicodeDecodeError):
        return value


def _q_decode(text: str) -> bytes:
    """Return the bytes of the Q-encoded ``text``.

    Raises:
        ValueError: A ``=`` not followed by two hexadecimal digits, or a character that is not
            Latin-1.
    """
    out = bytearray()
    i = 0
    while i < len(text):
        c = text[i]
        if c == "=":
            digits = text[i + 1 : i + 3]
            if len(digits) != 2 or not all(d in _HEX for d in digits):
                raise ValueError(f"bad escape in {text!r}")
            out.append(int(digits, 16))
            i += 3
            continue
        out += b" " if c == "_" else c.encode("latin-1")
        i += 1
    return bytes(out)


def _decode_word(charset: str, encoding: str, text: str) -> str | None:
    """Return the text of one encoded word, or ``None`` if it does not decode."""
    try:
        raw = base64.b64decode(text, validate=True) if encoding in "Bb" else _q_decode(text)
        # RFC 2231 allows a language after the charset ("utf-8*en")
        return raw.decode(charset.partition("*")[0])
    except (binascii.Error, ValueError, LookupError):
        return None


def decode_words(value: str) -> str:
    """Return ``value`` with its RFC 2047 encoded words decoded, as Go's ``mime`` decodes them.

    Text around the words is kept; white space between two encoded words is dropped. A word
    that does not decode (bad encoding, unknown charset) stays as it is.
    """
    if "=?" not in value:
        return value
    out: list[str] = []
    pos = 0
    after_word = False
    for match in _WORD.finditer(value):
        decoded = _decode_word(*match.groups())
        if decoded is None:
            # kept as text, and the white space after it too
            after_word = False
            continue
        between = value[pos : match.start()]
        if not (after_word and not between.strip()):
            out.append(between)
        out.append(decoded)
        pos = match.end()
        after_word = True
    out.append(value[pos:])
    return "".join(out)


def q_encode(value: str) -> str:
    """Return ``value`` as Go's ``mime.QEncoding.Encode("utf-8", value)`` returns it.

    Printable ASCII (and tabs) is returned as it is; anything else becomes Q-encoded words of at
    most 75 characters, split between characters, joined by spaces.
    """
    if all(" " <= c <= "~" or c == "\t" for c in value):
        return value
    words: list[str] = []
    word: list[str] = []
    size = 0
    for c in value:
        if " " <= c <= "~" and c not in "=?_":
            piece = "_" if c == " " else c
        else:
            piece = "".join(f"={b:02X}" for b in c.encode("utf-8", "replace"))
        if size + len(piece) > _MAX_WORD_CONTENT:
            words.append("".join(word))
            word, size = [], 0
        word.append(piece)
        size += len(piece)
    words.append("".join(word))
    return " ".join(f"=?utf-8?q?{w}?=" for w in words)


def _content_encoding(value: str) -> str:
    # aws-chunked frames the request body only (S3 drops it from the stored value)
    codings = [c.strip() for c in value.split(",")]
    return ",".join(c for c in codings if c and c.lower() != _AWS_CHUNKED)


def stored_metadata(req: S3Request) -> dict[str, str]:
    """Return the metadata a write stores: its user metadata and its content headers.

    Raises:
        S3Error: MetadataTooLarge when the user metadata exceeds 2 KiB.
    """
    meta: dict[str, str] = {}
    size = 0
    for name, raw in req.headers.items():
        lower = name.lower()
        if not lower.startswith(_HEADER_META) or len(lower) == len(_HEADER_META):
            continue
        suffix = lower[len(_HEADER_META) :]
        value = decode_words(wire_text(raw))
        size += len(suffix.encode()) + len(value.encode(errors="surrogatepass"))
        meta[META_PREFIX + suffix] = value
    if size > MAX_METADATA_BYTES:
        raise S3Error(
            S3Code.METADATA_TOO_LARGE,
            f"{S3Code.METADATA_TOO_LARGE.description}: {size} bytes, at most {MAX_METADATA_BYTES}",
            bucket=req.bucket,
        )
    for header in CONTENT_HEADERS:
        given = req.headers.get(header)
        if given is None:
            continue
        value = wire_text(given).strip()
        if header == "Content-Encoding":
            value = _content_encoding(value)
        if value:
            meta[header] = value
    return meta


def _wire(value: str) -> str:
    """Return ``value`` as a header value whose bytes (Latin-1, as Starlette writes) are UTF-8."""
    return value.encode("utf-8", "replace").decode("latin-1")


def object_headers(stat: ObjectStat) -> dict[str, str]:
    """Return the headers describing an object: validators, type, content headers, metadata."""
    entry = stat.entry
    headers = {
        "etag": f'"{entry.checksum}"',
        "last-modified": xml.http_date(entry.mtime),
        "content-type": entry.content_type,
        "accept-ranges": "bytes",
    }
    metadata: Mapping[str, str] = entry.metadata
    for header in CONTENT_HEADERS:
        value = metadata.get(header)
        if value and not _CONTROL.search(value):
            headers[header.lower()] = _wire(value)
    for name, value in metadata.items():
        if name.lower().startswith(META_PREFIX.lower()) and len(name) > len(META_PREFIX):
            headers[_HEADER_META + name[len(META_PREFIX) :].lower()] = q_encode(value)
    return headers


def apply_overrides(req: S3Request, headers: dict[str, str], *, key: str) -> None:
    """Set the headers GetObject's ``response-*`` query parameters ask for.

    Raises:
        S3Error: InvalidArgument for a value holding a line break or another control character.
    """
    for param, header in RESPONSE_OVERRIDES.items():
        value = req.query.get(param)
        if value is None:
            continue
        if _CONTROL.search(value):
            raise S3Error(
                S3Code.INVALID_ARGUMENT,
                f"{S3Code.INVALID_ARGUMENT.description}: {param} holds a control character",
                bucket=req.bucket,
                key=key,
            )
        headers[header] = _wire(value)
