"""Listing through the gateway: ListObjects (v1 and v2) and the bucket root's branches.

Keys are ``<ref>/<path>``. A prefix holding a ``/`` names a ref (a branch, a tag, a commit ID or
any ref expression) and lists that ref's objects one catalog page at a time; a prefix without one
lists the repository's branches as common prefixes ``<branch>/``, as lakeFS does, so that a
client browsing the bucket root sees its branches. Unlike lakeFS, ``encoding-type=url`` is
honoured (keys are encoded as S3 encodes them, and ``EncodingType`` is echoed) and the v2
continuation token is opaque; an empty one (``continuation-token=``) lists from the start and is
echoed, as S3 does.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from typing import TYPE_CHECKING
from urllib.parse import quote_plus
from xml.sax.saxutils import escape

from starlette.responses import Response

from mirror.auth.permissions import Action, repository_arn
from mirror.core.errors import (
    BranchNotFoundError,
    CommitNotFoundError,
    InvalidRefError,
    RefNotFoundError,
    TagNotFoundError,
)
from mirror.core.listing import RangeSpan, span_rows
from mirror.gateway import mapping, xml
from mirror.gateway.errors import S3Code, S3Error
from mirror.httputil.range_rows import EncodedRows, RangeRows

if TYPE_CHECKING:
    from mirror.core.catalog import Catalog
    from mirror.core.model import Entry, ObjectStat, Repository
    from mirror.gateway.context import S3Request

__all__ = ["MAX_KEYS", "list_objects"]

MAX_KEYS = 1000
"""The most keys and common prefixes one answer holds, whatever ``max-keys`` asks."""

_STORAGE_CLASS = "STANDARD"
_BASE = "\x00"
"""Where a kept ``<Contents>`` takes its key's base (the ref and its ``/``)."""
# a continuation token's version, not a secret
_TOKEN_PREFIX = "v1:"  # nosec B105


@dataclass(frozen=True, slots=True)
class _Query:
    """The listing parameters of one request, validated."""

    v2: bool
    prefix: str
    delimiter: str
    after: str
    max_keys: int
    requested_max_keys: int
    encode: bool
    fetch_owner: bool


@dataclass(slots=True)
class _Page:
    """One answer: objects (full keys) and common prefixes, in key order.

    A page of committed objects alone holds them as slices of ranges (``spans``), whose keys
    are under ``base`` (the ref and its ``/``), instead of ``objects``.
    """

    objects: list[tuple[str, ObjectStat]] = field(default_factory=list)
    prefixes: list[str] = field(default_factory=list)
    truncated: bool = False
    last: str = ""
    spans: tuple[RangeSpan, ...] = ()
    base: str = ""

    @property
    def key_count(self) -> int:
        """The number of keys and common prefixes the page holds."""
        spanned = sum(span.hi - span.lo for span in self.spans)
        return len(self.objects) + spanned + len(self.prefixes)


def _bad(message: str, bucket: str | None) -> S3Error:
    return S3Error(
        S3Code.INVALID_ARGUMENT, f"{S3Code.INVALID_ARGUMENT.description}: {message}", bucket=bucket
    )


def encode_token(key: str) -> str:
    """Return the opaque continuation token that resumes a listing after ``key``."""
    raw = (_TOKEN_PREFIX + key).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def decode_token(token: str, bucket: str | None = None) -> str:
    """Return the key a continuation token resumes after.

    Raises:
        S3Error: InvalidArgument for a token this gateway did not issue.
    """
    try:
        raw = base64.urlsafe_b64decode(token + "=" * (-len(token) % 4)).decode()
    except (binascii.Error, UnicodeDecodeError, ValueError):
        raw = ""
    if not raw.startswith(_TOKEN_PREFIX):
        raise _bad("The continuation token provided is incorrect", bucket)
    return raw[len(_TOKEN_PREFIX) :]


def _parse(req: S3Request) -> _Query:
    q = req.query
    list_type = q.get("list-type")
    if list_type not in (None, "1", "2"):
        raise _bad(f"list-type {list_type!r} is not 1 or 2", req.bucket)
    v2 = list_type == "2"
    raw_max = q.get("max-keys", str(MAX_KEYS))
    try:
        requested = int(raw_max)
    except ValueError:
        raise _bad(f"max-keys {raw_max!r} is not an integer", req.bucket) from None
    if requested < 0:
        raise _bad(f"max-keys {requested} is negative", req.bucket)
    encoding = q.get("encoding-type")
    if encoding is not None and encoding.lower() != "url":
        raise _bad("Invalid Encoding Method specified in Request", req.bucket)
    if v2:
        token = q.get("continuation-token")
        if token:
            after = decode_token(token, req.bucket)
        else:
            # an empty token lists from the start (echoed as sent), as S3 answers it
            after = q.get("start-after", "")
    else:
        after = q.get("marker", "")
    return _Query(
        v2=v2,
        prefix=q.get("prefix", ""),
        delimiter=q.get("delimiter", ""),
        after=after,
        max_keys=min(requested, MAX_KEYS),
        requested_max_keys=requested,
        encode=encoding is not None,
        fetch_owner=q.get("fetch-owner", "false").lower() == "true",
    )


def _list_branches(catalog: Catalog, repository: str | Repository, query: _Query) -> _Page:
    """Return the branches under the prefix as common prefixes ``<branch>/``.

    Branch names sort differently from ``<branch>/`` (``main-x`` < ``main/``), so they are put
    in key order before the marker cuts them; a repository's branches are few next to its
    objects.
    """
    keys = sorted(b.id + "/" for b in catalog.list_branches(repository, prefix=query.prefix))
    keys = [k for k in keys if k > query.after]
    page = _Page(prefixes=keys[: query.max_keys], truncated=len(keys) > query.max_keys)
    page.last = page.prefixes[-1] if page.prefixes else ""
    return page


def _list_ref(catalog: Catalog, repository: str | Repository, query: _Query) -> _Page:
    """Return one page of the objects of the ref the prefix names."""
    ref, _, path_prefix = query.prefix.partition("/")
    base = ref + "/"
    if query.after.startswith(base):
        after = query.after[len(base) :]
    elif query.after > base:
        # the marker lies beyond every key of this ref
        return _Page()
    else:
        after = ""
    try:
        listed = catalog.list_objects(
            repository,
            ref,
            path_prefix,
            after=after,
            amount=query.max_keys,
            delimiter=query.delimiter,
        )
    except (
        RefNotFoundError,
        BranchNotFoundError,
        TagNotFoundError,
        CommitNotFoundError,
        InvalidRefError,
    ):
        # S3 lists no keys under a prefix that matches none; s3a and the AWS CLI list a
        # path to learn whether it exists
        return _Page()
    if listed.spans:
        page = _Page(spans=listed.spans, base=base, truncated=listed.has_more)
    else:
        page = _Page(
            objects=[(base + s.path, s) for s in listed.objects],
            prefixes=[base + p for p in listed.common_prefixes],
            truncated=listed.has_more,
        )
    if listed.has_more:
        page.last = base + listed.next_offset
    return page


def _read(catalog: Catalog, repository: str | Repository, query: _Query) -> _Page:
    if query.max_keys == 0:
        return _Page()
    if "/" not in query.prefix:
        return _list_branches(catalog, repository, query)
    return _list_ref(catalog, repository, query)


def _permission(query: _Query) -> str:
    # as lakeFS: browsing the root with "/" lists branches, anything else lists objects
    if query.delimiter == "/" and "/" not in query.prefix:
        return Action.LIST_BRANCHES
    return Action.LIST_OBJECTS


def _element(name: str, value: str | int | bool) -> str:
    if isinstance(value, bool):
        text = "true" if value else "false"
    elif isinstance(value, int):
        text = str(value)
    else:
        text = escape(value)
    return f"<{name}>{text}</{name}>"


def _encoder(encode: bool) -> Callable[[str], str]:
    """Return how keys and prefixes are written: URL-encoded (``encode``) or as they are."""
    if encode:
        return partial(quote_plus, safe="/")
    return str


def _contents(key: str, entry: Entry, owner: str, times: dict[float, str]) -> str:
    """Return the ``<Contents>`` of one object; ``key`` as written (escaped, maybe encoded)."""
    when = times.get(entry.mtime)
    if when is None:
        when = times[entry.mtime] = xml.iso_time(entry.mtime)
    return (
        f"<Contents><Key>{key}</Key>"
        f"<LastModified>{when}</LastModified>"
        f"<ETag>&quot;{escape(entry.checksum)}&quot;</ETag>"
        f"<Size>{entry.size}</Size>{owner}"
        f"<StorageClass>{_STORAGE_CLASS}</StorageClass></Contents>"
    )


class _NotKept(Exception):
    """A range whose ``<Contents>`` cannot be kept apart from its keys' base."""


def _encode_contents(whole: RangeSpan, owner: str, encode: bool) -> EncodedRows:
    """Return the ``<Contents>`` of a range's records, each key's base left as a NUL.

    A key is ``<base><path>``; escaping and URL-encoding act on each character alone, so the
    written key is the written base followed by the written path, and the base is put in
    where the NUL stands. Paths hold no NUL (the core refuses them), which the check keeps so.
    """
    enc = _encoder(encode)
    times: dict[float, str] = {}
    parts: list[bytes] = []
    for path, entry in zip(whole.keys, whole.entries, strict=True):
        if _BASE in path:
            raise _NotKept(path)
        parts.append(_contents(_BASE + escape(enc(path)), entry, owner, times).encode())
    return EncodedRows(parts)


def _spanned_contents(
    rows: RangeRows, page: _Page, owner: str, query: _Query, enc: Callable[[str], str]
) -> bytes:
    """Return the ``<Contents>`` of a page of slices of ranges, from kept encoded ranges."""
    how = ("s3-contents", owner, query.encode)
    encode = partial(_encode_contents, owner=owner, encode=query.encode)
    try:
        joined = b"".join([rows.rows(span, how, encode) for span in page.spans])
    except _NotKept:
        times: dict[float, str] = {}
        objects = span_rows(page.spans, "")
        written = [_contents(escape(enc(page.base + p)), e, owner, times) for p, e, _ in objects]
        return "".join(written).encode()
    return joined.replace(_BASE.encode(), escape(enc(page.base)).encode())


def _render(req: S3Request, query: _Query, page: _Page) -> bytes:
    """Return the ``ListBucketResult`` document.

    Written as text rather than through ElementTree: a page holds up to 1,000 ``<Contents>`` of
    six elements each, and building and serialising those as elements costs ten times the
    catalog's reading of the page. A page of slices of committed ranges is cut from their
    ``<Contents>``, kept encoded per range (:attr:`GatewayState.listing_rows`).
    """
    enc = _encoder(query.encode)
    out = [f'<?xml version="1.0" encoding="UTF-8"?>\n<ListBucketResult xmlns="{xml.S3_NAMESPACE}">']
    out.append(_element("Name", req.bucket or ""))
    out.append(_element("Prefix", enc(query.prefix)))
    if query.v2:
        token = req.query.get("continuation-token")
        if token is not None:
            out.append(_element("ContinuationToken", token))
        start_after = req.query.get("start-after")
        if start_after is not None:
            out.append(_element("StartAfter", enc(start_after)))
        out.append(_element("KeyCount", page.key_count))
    else:
        out.append(_element("Marker", enc(query.after)))
    out.append(_element("MaxKeys", query.requested_max_keys))
    if query.delimiter:
        out.append(_element("Delimiter", enc(query.delimiter)))
    if query.encode:
        out.append(_element("EncodingType", "url"))
    out.append(_element("IsTruncated", page.truncated))
    if page.truncated and query.v2:
        out.append(_element("NextContinuationToken", encode_token(page.last)))
    elif page.truncated and (query.delimiter or not (page.objects or page.spans)):
        # S3 gives NextMarker only with a delimiter; a page of prefixes alone has no last key
        # a client could resume from either
        out.append(_element("NextMarker", enc(page.last)))
    owner = ""
    if not query.v2 or query.fetch_owner:
        # no per-object owner is recorded: every key belongs to the requester's account
        who = escape(req.caller.id)
        owner = f"<Owner><ID>{who}</ID><DisplayName>{who}</DisplayName></Owner>"
    times: dict[float, str] = {}  # objects written together share their second
    for key, stat in page.objects:
        out.append(_contents(escape(enc(key)), stat.entry, owner, times))
    spanned = b""
    if page.spans:
        spanned = _spanned_contents(req.state.listing_rows, page, owner, query, enc)
    for prefix in page.prefixes:
        out.append(f"<CommonPrefixes>{_element('Prefix', enc(prefix))}</CommonPrefixes>")
    tail = "</ListBucketResult>"
    if not spanned:
        out.append(tail)
        return "".join(out).encode()
    # a page of committed objects has no common prefixes: its contents end the document
    return b"".join(("".join(out).encode(), spanned, tail.encode()))


async def list_objects(req: S3Request) -> Response:
    """Answer ListObjects (v1) or ListObjectsV2 (``list-type=2``) on a bucket.

    Raises:
        S3Error: InvalidArgument for a bad ``list-type``, ``max-keys``, ``encoding-type`` or
            continuation token; AccessDenied without ``fs:ListObjects`` (``fs:ListBranches``
            for the bucket root with delimiter ``/``); the catalog's errors as
            :mod:`mirror.gateway.mapping` answers them (NoSuchBucket, SlowDown on a mirror
            whose metadata has not arrived).
    """
    bucket = req.bucket
    if bucket is None:
        raise S3Error(S3Code.NO_SUCH_BUCKET)
    query = _parse(req)
    req.require(_permission(query), repository_arn(bucket))
    # one page: bounded, like the REST API's listing it runs on the event loop where reads are local
    page = await mapping.call(req, _read, req.state.catalog, req.repository(), query, reads=True)
    return Response(_render(req, query, page), media_type=xml.XML_CONTENT_TYPE)
