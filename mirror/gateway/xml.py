"""S3's XML: rendering answers and error bodies, parsing request bodies.

Answers carry S3's namespace and are built with :func:`document` / :func:`add`; a request body is
parsed with :func:`read_xml`, which bounds its size and answers ``MalformedXML`` for anything that
is not the expected, well-formed document (entity declarations included).
"""

from __future__ import annotations

import functools
import time
import xml.etree.ElementTree as ET
from collections.abc import Iterable, Mapping
from email.utils import formatdate
from typing import TYPE_CHECKING

from starlette.responses import Response

from mirror.gateway.errors import S3Code, S3Error

if TYPE_CHECKING:
    from mirror.gateway.context import S3Request

__all__ = [
    "MAX_XML_BODY",
    "S3_NAMESPACE",
    "XML_CONTENT_TYPE",
    "add",
    "children",
    "document",
    "error_body",
    "error_response",
    "http_date",
    "iso_time",
    "parse_xml",
    "read_xml",
    "text_of",
    "to_bytes",
    "xml_response",
]

S3_NAMESPACE = "http://s3.amazonaws.com/doc/2006-03-01/"
XML_CONTENT_TYPE = "application/xml"
MAX_XML_BODY = 4 << 20
"""The largest request document read: 1,000 keys to delete or 10,000 parts to complete fit."""

Value = str | int | bool | None


def document(root: str) -> ET.Element:
    """Return the root element of an S3 answer, in S3's namespace."""
    return ET.Element(root, xmlns=S3_NAMESPACE)


def add(parent: ET.Element, name: str, value: Value = None) -> ET.Element:
    """Append a child element, its text ``value`` (booleans as ``true``/``false``); return it."""
    el = ET.SubElement(parent, name)
    if isinstance(value, bool):
        el.text = "true" if value else "false"
    elif value is not None:
        el.text = str(value)
    return el


def to_bytes(root: ET.Element) -> bytes:
    """Return the document with its XML declaration."""
    body: bytes = ET.tostring(root, encoding="utf-8")
    return b'<?xml version="1.0" encoding="UTF-8"?>\n' + body


def xml_response(
    root: ET.Element, *, status: int = 200, headers: Mapping[str, str] | None = None
) -> Response:
    """Return an XML answer."""
    return Response(
        to_bytes(root), status_code=status, headers=dict(headers or {}), media_type=XML_CONTENT_TYPE
    )


def iso_time(seconds: float) -> str:
    """Return S3's listing timestamp (``2006-02-03T16:45:09.000Z``) for epoch ``seconds``."""
    whole = int(seconds)
    millis = round((seconds - whole) * 1000) % 1000
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(whole)) + f".{millis:03d}Z"


@functools.lru_cache(maxsize=4096)
def http_date(seconds: float) -> str:
    """Return an HTTP date (``Last-Modified``) for epoch ``seconds`` (kept per value)."""
    return formatdate(seconds, usegmt=True)


def error_body(err: S3Error, *, request_id: str, resource: str) -> bytes:
    """Return S3's ``<Error>`` document for ``err``."""
    root = ET.Element("Error")
    add(root, "Code", err.code.code)
    add(root, "Message", err.message)
    if err.bucket is not None:
        add(root, "BucketName", err.bucket)
    if err.key is not None:
        add(root, "Key", err.key)
    add(root, "Resource", resource)
    add(root, "RequestId", request_id)
    add(root, "HostId", request_id)
    return to_bytes(root)


def error_response(err: S3Error, *, request_id: str, resource: str, head: bool = False) -> Response:
    """Return the answer to a refused request (no body for ``HEAD``, as S3 answers)."""
    headers = {"x-amz-request-id": request_id, "x-amz-id-2": request_id, **err.headers}
    body = b"" if head else error_body(err, request_id=request_id, resource=resource)
    return Response(body, status_code=err.status, headers=headers, media_type=XML_CONTENT_TYPE)


def _local(tag: str) -> str:
    return tag.rpartition("}")[2]


def parse_xml(body: bytes, root: str) -> ET.Element:
    """Parse a request document whose root element must be ``root`` (any namespace).

    Raises:
        S3Error: MalformedXML for a body that is not well-formed, declares a DTD or entities,
            or has another root.
    """
    try:
        # decoded first, so that no other encoding (UTF-16, say) hides a declaration
        text = body.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise S3Error(
            S3Code.MALFORMED_XML, f"{S3Code.MALFORMED_XML.description} (not UTF-8)"
        ) from exc
    if "<!DOCTYPE" in text or "<!ENTITY" in text:
        raise S3Error(S3Code.MALFORMED_XML, f"{S3Code.MALFORMED_XML.description} (DTDs refused)")
    try:
        # a client's document, with no DTD and no entity declaration (refused above)
        el = ET.fromstring(text)  # nosec B314
    except ET.ParseError as exc:
        raise S3Error(S3Code.MALFORMED_XML, f"{S3Code.MALFORMED_XML.description} ({exc})") from exc
    if _local(el.tag) != root:
        raise S3Error(
            S3Code.MALFORMED_XML,
            f"{S3Code.MALFORMED_XML.description} (expected <{root}>, got <{_local(el.tag)}>)",
        )
    return el


async def read_xml(req: S3Request, root: str, *, limit: int = MAX_XML_BODY) -> ET.Element:
    """Read the request body (at most ``limit`` bytes) and parse it as :func:`parse_xml` does.

    Raises:
        S3Error: MalformedXML (empty, too large or not the expected document), or the body's
            own verification errors.
    """
    if req.content_length is not None and req.content_length > limit:
        raise S3Error(S3Code.MALFORMED_XML, f"{S3Code.MALFORMED_XML.description} (body too large)")
    parts: list[bytes] = []
    size = 0
    async for chunk in req.body:
        size += len(chunk)
        if size > limit:
            raise S3Error(
                S3Code.MALFORMED_XML, f"{S3Code.MALFORMED_XML.description} (body too large)"
            )
        parts.append(chunk)
    body = b"".join(parts)
    if not body.strip():
        raise S3Error(S3Code.MALFORMED_XML, f"{S3Code.MALFORMED_XML.description} (empty body)")
    return parse_xml(body, root)


def children(el: ET.Element, name: str) -> Iterable[ET.Element]:
    """Yield the direct children named ``name`` (any namespace)."""
    return (c for c in el if _local(c.tag) == name)


def text_of(el: ET.Element, name: str) -> str | None:
    """Return the text of the first direct child named ``name`` (any namespace), or ``None``."""
    for c in children(el, name):
        return c.text or ""
    return None
