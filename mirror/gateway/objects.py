"""Object operations of the gateway: GetObject, HeadObject, PutObject, DeleteObject, tagging.

A key is ``<ref>/<path>``: reads take any ref (branch, tag, commit, expression), writes only a
branch (:func:`~mirror.gateway.mapping.resolve_write_target`, checked before the body is read:
clients send ``Expect: 100-continue``). Bodies stream both ways with bounded memory: a read goes
out one block-store range at a time, a write reaches the block store through a file-like bridge
(:class:`BodyReader`) fed by the request body one chunk at a time from a worker thread.

What an object carries besides its bytes — user metadata, content type, the content headers
kept beyond lakeFS — goes in and out as :mod:`mirror.gateway.headers` says.
"""

from __future__ import annotations

import email.utils
import io
import itertools
from collections import deque
from collections.abc import AsyncIterator, Iterator, Mapping
from typing import TYPE_CHECKING

import anyio.from_thread
from starlette.responses import Response, StreamingResponse

from mirror.auth.permissions import Action, object_arn
from mirror.block.errors import InvalidRangeError
from mirror.core.errors import ObjectNotFoundError
from mirror.gateway import xml
from mirror.gateway.errors import S3Code, S3Error
from mirror.gateway.headers import apply_overrides, object_headers, stored_metadata
from mirror.gateway.mapping import call, check_path, mirror_write_error, resolve_write_target
from mirror.httputil.streams import CHUNK, iter_block, parse_range

if TYPE_CHECKING:
    from mirror.core.catalog import Catalog
    from mirror.core.model import ObjectStat, Repository
    from mirror.gateway.context import S3Request

__all__ = [
    "MAX_OBJECT_BYTES",
    "BodyReader",
    "delete_object",
    "get_object",
    "get_object_tagging",
    "head_object",
    "put_object",
]

MAX_OBJECT_BYTES = 5 << 30
"""S3's largest single PutObject (larger objects are multipart uploads)."""


def _split(req: S3Request) -> tuple[str, str, str]:
    bucket = req.bucket
    if bucket is None:
        raise S3Error(S3Code.NO_SUCH_BUCKET)
    ref, path = req.ref_and_path()
    return bucket, ref, path


def _etag_matches(header: str, etag: str) -> bool:
    for candidate in header.split(","):
        c = candidate.strip()
        if c.startswith("W/"):
            c = c[2:]
        if c == "*" or c.strip('"') == etag:
            return True
    return False


def _date(header: str | None) -> float | None:
    if not header:
        return None
    try:
        parsed = email.utils.parsedate_to_datetime(header)
    except (TypeError, ValueError):
        return None
    return parsed.timestamp()


def _check_conditions(req: S3Request, stat: ObjectStat, headers: Mapping[str, str]) -> None:
    """Apply S3's conditional read rules (RFC 9110 precedence).

    Raises:
        S3Error: PreconditionFailed (412); ``_NotModified`` for 304.
    """
    etag = stat.entry.checksum
    mtime = stat.entry.mtime
    if_match = req.headers.get("if-match")
    if_none_match = req.headers.get("if-none-match")
    if if_match is not None and not _etag_matches(if_match, etag):
        raise S3Error(S3Code.PRECONDITION_FAILED, bucket=req.bucket, key=stat.path)
    unmodified_since = _date(req.headers.get("if-unmodified-since"))
    if if_match is None and unmodified_since is not None and mtime > unmodified_since:
        raise S3Error(S3Code.PRECONDITION_FAILED, bucket=req.bucket, key=stat.path)
    if if_none_match is not None:
        if _etag_matches(if_none_match, etag):
            raise _NotModified(headers)
        return
    modified_since = _date(req.headers.get("if-modified-since"))
    if modified_since is not None and mtime <= modified_since:
        raise _NotModified(headers)


# what a 304 carries (RFC 9110 §15.4.5): the validators and the caching headers
_NOT_MODIFIED_HEADERS = ("etag", "last-modified", "cache-control", "expires")


class _NotModified(Exception):
    """A conditional read whose object did not change: 304, with the validators."""

    def __init__(self, headers: Mapping[str, str]) -> None:
        super().__init__("not modified")
        self.headers = {k: v for k, v in headers.items() if k in _NOT_MODIFIED_HEADERS}


async def _stat(req: S3Request) -> tuple[str, str, ObjectStat]:
    bucket, ref, path = _split(req)
    req.require(Action.READ_OBJECT, object_arn(bucket, path))
    if not path:
        raise S3Error(
            S3Code.NO_SUCH_KEY,
            f"{S3Code.NO_SUCH_KEY.description}: a key is <ref>/<path>",
            bucket=bucket,
            key=req.key,
        )
    stat = await call(
        req, req.state.catalog.stat_object, req.repository(), ref, path, key=path, reads=True
    )
    return bucket, ref, stat


def _open(
    catalog: Catalog, repository: str | Repository, stat: ObjectStat, start: int, end: int
) -> tuple[list[bytes], Iterator[bytes]]:
    """Open the object's bytes ``[start, end)`` and read the first chunk (blocking).

    The first chunk is read before answering, so that missing data (a file not yet replicated)
    is an error status rather than a cut stream.
    """
    store, key = catalog.open_entry(catalog.get_repository(repository), stat.entry)
    chunks = iter_block(store, key, start, end)
    return list(itertools.islice(chunks, 1)), chunks


async def _read(req: S3Request, *, head: bool) -> Response:
    bucket, _, stat = await _stat(req)
    headers = object_headers(stat)
    apply_overrides(req, headers, key=stat.path)
    try:
        _check_conditions(req, stat, headers)
    except _NotModified as nm:
        return Response(status_code=304, headers=nm.headers)
    size = stat.entry.size
    try:
        span = parse_range(req.headers.get("range"), size)
    except InvalidRangeError as exc:
        raise S3Error(
            S3Code.INVALID_RANGE,
            f"{S3Code.INVALID_RANGE.description}: {exc}",
            bucket=bucket,
            key=stat.path,
            headers={"Content-Range": f"bytes */{size}"},
        ) from exc
    start, end = span or (0, size)
    status = 206 if span else 200
    if span:
        headers["content-range"] = f"bytes {start}-{end - 1}/{size}"
    headers["content-length"] = str(end - start)
    if head:
        return Response(status_code=status, headers=headers)
    catalog = req.state.catalog
    # the first chunk only (the rest streams from a worker thread)
    first, rest = await call(
        req, _open, catalog, req.repository(), stat, start, end, key=stat.path, reads=True
    )
    if end - start <= CHUNK:
        return Response(b"".join(first), status_code=status, headers=headers)
    # a sync iterator: Starlette reads each chunk in a worker thread, one at a time
    return StreamingResponse(itertools.chain(first, rest), status_code=status, headers=headers)


async def get_object(req: S3Request) -> Response:
    """Answer GetObject: the bytes (or one ``Range``: 206), with S3's conditional rules."""
    return await _read(req, head=False)


async def head_object(req: S3Request) -> Response:
    """Answer HeadObject: GetObject's status and headers, no body."""
    return await _read(req, head=True)


async def get_object_tagging(req: S3Request) -> Response:
    """Answer GetObjectTagging: an empty tag set (as lakeFS; tags are not stored)."""
    await _stat(req)
    root = xml.document("Tagging")
    xml.add(root, "TagSet")
    return xml.xml_response(root)


class BodyReader(io.RawIOBase):
    """A blocking file over an async request body, for a worker thread to read.

    Each read fetches the next chunk from the event loop (``anyio.from_thread``), so memory
    holds one chunk whatever the body's size; :meth:`read_ahead` takes the first chunks on the
    loop before the thread starts (a small body then needs no hand-back). The body's own
    verification errors (payload hash, chunk signatures) surface from ``read``, which aborts the
    write before anything is staged.

    Args:
        body: The request body.
        expected: The length the request states; a body that ends short is ``IncompleteBody``.
        limit: The most bytes taken (a body of no stated length, chunked, is cut off past it
            with ``EntityTooLarge``); ``None``: no bound.
    """

    def __init__(
        self, body: AsyncIterator[bytes], expected: int | None, *, limit: int | None = None
    ) -> None:
        super().__init__()
        self._body = body
        self._expected = expected
        self._limit = limit
        self._pending = memoryview(b"")
        self._read = 0
        self._done = False
        self._ahead: deque[bytes | None] = deque()

    def readable(self) -> bool:
        """Return ``True``: this file reads."""
        return True

    async def _next(self) -> bytes | None:
        try:
            return await self._body.__anext__()
        except StopAsyncIteration:
            return None

    async def read_ahead(self, most: int) -> None:
        """Take the body's chunks on the event loop until its end or past ``most`` bytes.

        ``read`` answers from them first, checking them as it checks any chunk; the body's own
        errors raised meanwhile are raised here.
        """
        taken = 0
        while taken <= most:
            chunk = await self._next()
            self._ahead.append(chunk)
            if chunk is None:
                return
            taken += len(chunk)

    def readinto(self, buffer: memoryview | bytearray) -> int:  # type: ignore[override]
        """Fill ``buffer`` with the next bytes of the body; return how many (0 at the end)."""
        while not self._pending and not self._done:
            chunk = self._ahead.popleft() if self._ahead else anyio.from_thread.run(self._next)
            if chunk is None:
                # the end: an empty chunk is not (bodies may yield one before more data)
                self._done = True
                if self._expected is not None and self._read != self._expected:
                    raise S3Error(
                        S3Code.INCOMPLETE_BODY,
                        f"{S3Code.INCOMPLETE_BODY.description} ({self._read} of "
                        f"{self._expected} bytes)",
                    )
                break
            self._pending = memoryview(chunk)
            self._read += len(chunk)
            if self._limit is not None and self._read > self._limit:
                raise S3Error(
                    S3Code.ENTITY_TOO_LARGE,
                    f"{S3Code.ENTITY_TOO_LARGE.description} (more than {self._limit} bytes in "
                    "one PutObject; use a multipart upload)",
                )
        n = min(len(buffer), len(self._pending))
        buffer[:n] = self._pending[:n]
        self._pending = self._pending[n:]
        return n


def _exists(catalog: Catalog, repository: str | Repository, branch: str, path: str) -> bool:
    try:
        catalog.stat_object(repository, branch, path)
    except ObjectNotFoundError:
        return False
    return True


async def put_object(req: S3Request) -> Response:
    """Answer PutObject: store the body on the branch; ETag = its MD5.

    ``If-None-Match: *`` refuses to replace an existing object (412); ``If-Match`` is not
    supported (501, as lakeFS).
    """
    bucket, ref, path = _split(req)
    req.require(Action.WRITE_OBJECT, object_arn(bucket, path))
    if req.headers.get("if-match") is not None:
        raise S3Error(
            S3Code.NOT_IMPLEMENTED,
            f"{S3Code.NOT_IMPLEMENTED.description}: If-Match on PutObject",
            bucket=bucket,
            key=path,
        )
    if req.content_length is not None and req.content_length > MAX_OBJECT_BYTES:
        raise S3Error(
            S3Code.ENTITY_TOO_LARGE,
            f"{S3Code.ENTITY_TOO_LARGE.description} ({req.content_length} bytes, at most "
            f"{MAX_OBJECT_BYTES} in one PutObject; use a multipart upload)",
            bucket=bucket,
            key=path,
        )
    catalog = req.state.catalog
    if not path and req.content_length == 0:
        # a directory marker of the branch root (pyarrow's create_dir writes one): the root
        # always exists, so nothing is stored once the branch is known to be writable
        await call(
            req, _writable_branch, catalog, req.repository(), ref, key=path, write=True, reads=True
        )
        return Response(status_code=200, headers={"etag": f'"{_EMPTY_MD5}"'})
    target = await call(
        req, resolve_write_target, catalog, req.repository(), ref, path, key=path, reads=True
    )
    metadata = stored_metadata(req)
    if (req.headers.get("if-none-match") or "").strip() == "*" and await call(
        req, _exists, catalog, target.repository, ref, path, key=path, reads=True
    ):
        raise S3Error(S3Code.PRECONDITION_FAILED, bucket=bucket, key=path)
    content_type = req.headers.get("content-type") or None
    body = BodyReader(req.body, req.content_length, limit=MAX_OBJECT_BYTES)
    # up to one chunk on the event loop: a body that small is then written without hand-backs
    await body.read_ahead(CHUNK)
    reader = io.BufferedReader(body, CHUNK)
    stat = await call(
        req,
        _upload,
        catalog,
        target.repository.id,
        target.branch,
        path,
        reader,
        content_type,
        metadata,
        key=path,
        write=True,
    )
    return Response(status_code=200, headers={"etag": f'"{stat.entry.checksum}"'})


_EMPTY_MD5 = "d41d8cd98f00b204e9800998ecf8427e"


def _writable_branch(catalog: Catalog, repository: str | Repository, ref: str) -> None:
    repo = catalog.get_repository(repository)
    if repo.read_only:
        raise mirror_write_error(repo)
    catalog.get_branch(repo, ref)


def _upload(
    catalog: Catalog,
    bucket: str,
    branch: str,
    path: str,
    reader: io.BufferedReader,
    content_type: str | None,
    metadata: dict[str, str],
) -> ObjectStat:
    return catalog.upload_object(
        bucket, branch, path, reader, content_type=content_type, metadata=metadata
    )


def _delete(catalog: Catalog, bucket: str, ref: str, path: str) -> None:
    """Delete ``path`` on branch ``ref``; a missing key or a ref that is no branch deletes nothing.

    As S3 and lakeFS, deleting what is not there succeeds; a read-only repository refuses even
    that (as lakeFS).
    """
    repo = catalog.get_repository(bucket)
    if repo.read_only:
        raise mirror_write_error(repo, key=path)
    if not path:
        return
    check_path(ref, path, bucket=bucket)
    if not catalog.branch_exists(bucket, ref):
        return
    try:
        catalog.delete_object(bucket, ref, path)
    except ObjectNotFoundError:
        return


async def delete_object(req: S3Request) -> Response:
    """Answer DeleteObject: 204, also when the key is absent."""
    bucket, ref, path = _split(req)
    req.require(Action.DELETE_OBJECT, object_arn(bucket, path))
    await call(req, _delete, req.state.catalog, bucket, ref, path, key=path, write=True)
    return Response(status_code=204)
