"""Multipart uploads through the gateway: create, upload (or copy) parts, complete, abort, list.

An upload is a record in the shared KV (:mod:`mirror.gateway.uploads`), of the repository
instance it was started in, and its parts are objects under ``_lakefs/multipart/`` of the
repository's storage namespace. Completing joins the listed parts, in order, into one fresh data
object — inside S3 on an S3 namespace (server-side part
copies), elsewhere streamed a range at a time — which is then staged on the branch with the
checks a PutObject passes; until that last step the branch is unchanged. The
object's checksum is S3's multipart ETag (``<md5 of the parts' MD5s>-<N>``), so HEAD, GET and
listings report the ETag CompleteMultipartUpload answered (lakeFS drops the ``-N``).

Permissions are lakeFS's: ``fs:WriteObject`` to create, upload and complete (plus
``fs:ReadObject`` on a copy's source), ``fs:DeleteObject`` to abort, ``fs:ReadObject`` to list
parts, ``fs:ListObjects`` to list uploads.
"""

from __future__ import annotations

import itertools
import re
import time
import xml.etree.ElementTree as ET
from typing import TYPE_CHECKING, BinaryIO, cast
from urllib.parse import quote

from starlette.responses import Response

from mirror.auth.permissions import Action, object_arn, repository_arn
from mirror.block.errors import BlockNotFoundError
from mirror.core.errors import RepositoryNotFoundError
from mirror.core.model import DEFAULT_CONTENT_TYPE, Entry
from mirror.core.protection import check_staging_write
from mirror.errors import LakeMirrorError
from mirror.gateway import xml
from mirror.gateway.copy import parse_copy_source
from mirror.gateway.errors import S3Code, S3Error
from mirror.gateway.headers import stored_metadata
from mirror.gateway.mapping import WriteTarget, call, resolve_write_target, s3_errors
from mirror.gateway.streaming import BodyReader, ChainReader, multipart_etag
from mirror.gateway.uploads import (
    MAX_PART_NUMBER,
    Completed,
    Part,
    Upload,
    UploadStore,
    new_upload_id,
    part_address,
    parts_digest,
)

if TYPE_CHECKING:
    from mirror.block.protocol import BlockStore
    from mirror.core.model import Repository
    from mirror.gateway.context import S3Request

__all__ = [
    "MAX_PART_SIZE",
    "MIN_PART_SIZE",
    "abort_multipart_upload",
    "complete_multipart_upload",
    "create_multipart_upload",
    "list_multipart_uploads",
    "list_parts",
    "upload_part",
]

MIN_PART_SIZE = 5 << 20
"""S3's smallest part, the last one excepted."""
MAX_PART_SIZE = 5 << 30
"""S3's largest part."""
_MAX_LISTED = 1000
# ASCII digits only (str.isdigit and \d accept "²" or "٣", which int() then refuses or reads),
# at most 18 of them (int() refuses very long digit strings; no size or count comes near)
_NUMBER = re.compile(r"[0-9]{1,18}")
_RANGE = re.compile(r"bytes=([0-9]{1,18})-([0-9]{1,18})")


def _bucket(req: S3Request) -> str:
    if req.bucket is None:
        raise S3Error(S3Code.NO_SUCH_BUCKET)
    return req.bucket


def _store(req: S3Request) -> UploadStore:
    return UploadStore(req.state.catalog.kv)


def _invalid(req: S3Request, code: S3Code, detail: str, key: str | None = None) -> S3Error:
    return S3Error(code, f"{code.description}: {detail}", bucket=req.bucket, key=key)


async def _write_target(req: S3Request) -> WriteTarget:
    """Check the request's key is a writable place (repository, branch, protection)."""
    bucket = _bucket(req)
    ref, path = req.ref_and_path()
    catalog = req.state.catalog

    def check() -> WriteTarget:
        target = resolve_write_target(catalog, bucket, ref, path)
        with s3_errors(bucket, path, catalog=catalog, write=True):
            check_staging_write(catalog.kv, target.repository, target.branch)
        return target

    return await req.run_sync(check)


async def _find_upload(
    req: S3Request, repo: Repository, upload_id: str | None, path: str
) -> Upload | None:
    """Return the upload the request names if it is an upload of ``repo`` and the request's key.

    An upload of another instance of the repository (deleted since) is none.
    """
    ref = req.ref_and_path()[0]
    upload = None
    if upload_id:
        upload = await req.run_sync(_store(req).get, repo, upload_id)
    if upload is None or upload.branch != ref or upload.path != path:
        return None
    return upload


def _no_such_upload(req: S3Request, upload_id: str | None, path: str) -> S3Error:
    return _invalid(req, S3Code.NO_SUCH_UPLOAD, f"upload ID {upload_id!r}", path)


async def _upload(req: S3Request, repo: Repository, upload_id: str | None, path: str) -> Upload:
    """Return the upload the request names, as :func:`_find_upload`.

    Raises:
        S3Error: NoSuchUpload when there is none.
    """
    upload = await _find_upload(req, repo, upload_id, path)
    if upload is None:
        raise _no_such_upload(req, upload_id, path)
    return upload


async def create_multipart_upload(req: S3Request) -> Response:
    """Answer CreateMultipartUpload (``POST <key>?uploads``)."""
    bucket = _bucket(req)
    ref, path = req.ref_and_path()
    req.require(Action.WRITE_OBJECT, object_arn(bucket, path))
    target = await _write_target(req)
    upload = Upload(
        repository=bucket,
        instance_uid=target.repository.instance_uid,
        upload_id=new_upload_id(),
        branch=target.branch,
        path=target.path,
        initiated=time.time(),
        initiator=req.caller.id,
        content_type=req.headers.get("content-type") or None,
        metadata=stored_metadata(req),
    )
    catalog = req.state.catalog
    uploads = _store(req)

    def create() -> None:
        uploads.create(upload)
        try:
            current: Repository | None = catalog.get_repository(bucket)
        except RepositoryNotFoundError:
            current = None
        if current is None or current.instance_uid != upload.instance_uid:
            # deleted meanwhile: its cleanup may have run before these writes, remove them here
            uploads.remove(upload, catalog.block_store(target.repository))
            raise S3Error(S3Code.NO_SUCH_BUCKET, bucket=bucket)

    await call(req, create, key=path, write=True)
    root = xml.document("InitiateMultipartUploadResult")
    xml.add(root, "Bucket", bucket)
    xml.add(root, "Key", f"{ref}/{path}")
    xml.add(root, "UploadId", upload.upload_id)
    return xml.xml_response(root)


def _whole_number(raw: str) -> int | None:
    """Return ``raw`` as a whole number if it is 1 to 18 ASCII digits, else ``None``."""
    return int(raw) if _NUMBER.fullmatch(raw) else None


def _part_number(req: S3Request, path: str) -> int:
    raw = req.query.get("partNumber", "")
    number = _whole_number(raw)
    if number is None or not 1 <= number <= MAX_PART_NUMBER:
        raise _invalid(
            req,
            S3Code.INVALID_ARGUMENT,
            f"part number must be an integer between 1 and {MAX_PART_NUMBER}, not {raw!r}",
            path,
        )
    return number


async def upload_part(req: S3Request) -> Response:
    """Answer UploadPart and UploadPartCopy (``PUT <key>?partNumber=N&uploadId=U``)."""
    bucket = _bucket(req)
    _, path = req.ref_and_path()
    req.require(Action.WRITE_OBJECT, object_arn(bucket, path))
    number = _part_number(req, path)
    catalog = req.state.catalog
    repo = await call(req, catalog.get_repository, bucket, key=path, write=True)
    if repo.read_only:
        await _write_target(req)  # answers the mirror's (or read-only repository's) refusal
    upload = await _upload(req, repo, req.query.get("uploadId"), path)
    store = catalog.block_store(repo)
    address = part_address(upload.upload_id, number)
    source = req.headers.get("x-amz-copy-source")
    # a copy's reads fail as reads of its source (a mirror's missing data: SlowDown)
    errors_of: tuple[str, str] = (bucket, path)
    if source is not None:
        reader: BodyReader | ChainReader
        reader, errors_of = await _copy_source(req, source)
    else:
        if req.content_length is not None and req.content_length > MAX_PART_SIZE:
            raise _invalid(req, S3Code.ENTITY_TOO_LARGE, f"a part holds at most {MAX_PART_SIZE}")
        reader = BodyReader(
            req.body,
            limit=MAX_PART_SIZE,
            too_large=lambda: _invalid(
                req, S3Code.ENTITY_TOO_LARGE, f"a part holds at most {MAX_PART_SIZE}", path
            ),
        )

    def write() -> Part:
        with s3_errors(*errors_of, catalog=catalog, write=source is None):
            store.put(address, cast(BinaryIO, reader))
        if source is None and req.content_length is not None and reader.size != req.content_length:
            store.delete(address)
            raise _invalid(
                req,
                S3Code.INCOMPLETE_BODY,
                f"received {reader.size} of {req.content_length} bytes",
                path,
            )
        return Part(number, reader.md5, reader.size, address, time.time())

    part = await req.run_sync(write)
    if not await call(req, _store(req).put_part, upload, part, key=path, write=True):
        # completed or aborted while the part was uploading: keep nothing of it
        await call(req, store.delete, address, key=path, write=True)
        raise _invalid(req, S3Code.NO_SUCH_UPLOAD, f"upload ID {upload.upload_id!r}", path)
    etag = f'"{part.md5}"'
    if source is None:
        return Response(status_code=200, headers={"ETag": etag})
    root = xml.document("CopyPartResult")
    xml.add(root, "LastModified", xml.iso_time(part.modified))
    xml.add(root, "ETag", etag)
    return xml.xml_response(root)


async def _copy_source(req: S3Request, header: str) -> tuple[ChainReader, tuple[str, str]]:
    """Return a reader over the range of the object ``x-amz-copy-source`` names, and its name.

    The header is parsed as CopyObject parses it (:func:`~mirror.gateway.copy.parse_copy_source`).
    """
    named = parse_copy_source(header, bucket=req.bucket)
    src_bucket, src_ref, src_path = named.bucket, named.ref, named.path
    req.require(Action.READ_OBJECT, object_arn(src_bucket, src_path))
    catalog = req.state.catalog

    def locate() -> tuple[Repository, BlockStore, str, int]:
        with s3_errors(src_bucket, src_path, catalog=catalog):
            repo = catalog.get_repository(src_bucket)
            stat = catalog.stat_object(src_bucket, src_ref, src_path)
            store, key = catalog.open_entry(repo, stat.entry)
        return repo, store, key, stat.entry.size

    _, store, key, size = await req.run_sync(locate)
    start, end = 0, size
    wanted = req.headers.get("x-amz-copy-source-range")
    if wanted is not None:
        m = _RANGE.fullmatch(wanted.strip())
        if m is None or int(m.group(2)) < int(m.group(1)):
            raise _invalid(
                req,
                S3Code.INVALID_ARGUMENT,
                f"x-amz-copy-source-range {wanted!r} must be bytes=<first>-<last>",
            )
        start, end = int(m.group(1)), int(m.group(2)) + 1
        if end > size:
            raise _invalid(
                req,
                S3Code.INVALID_RANGE,
                f"range {wanted!r} exceeds the {size} bytes of the source",
            )
    if end - start > MAX_PART_SIZE:
        raise _invalid(req, S3Code.ENTITY_TOO_LARGE, f"a part holds at most {MAX_PART_SIZE}")
    return ChainReader([(store, key, start, end)]), (src_bucket, src_path)


def _requested_parts(req: S3Request, root: ET.Element, path: str) -> list[tuple[int, str]]:
    """Return the ``(number, etag)`` pairs of a CompleteMultipartUpload document, checked."""
    wanted: list[tuple[int, str]] = []
    for el in xml.children(root, "Part"):
        text, etag = xml.text_of(el, "PartNumber"), xml.text_of(el, "ETag")
        number = None if text is None else _whole_number(text.strip())
        if number is None or etag is None:
            raise _invalid(
                req, S3Code.MALFORMED_XML, "each <Part> needs a <PartNumber> and an <ETag>", path
            )
        wanted.append((number, etag.strip().strip('"')))
    if not wanted:
        raise _invalid(req, S3Code.MALFORMED_XML, "no <Part> listed", path)
    for (before, _), (after, _) in itertools.pairwise(wanted):
        if after <= before:
            raise _invalid(
                req, S3Code.INVALID_PART_ORDER, f"part {after} is listed after part {before}", path
            )
    return wanted


def _chosen_parts(
    req: S3Request, wanted: list[tuple[int, str]], uploaded: dict[int, Part], path: str
) -> list[Part]:
    """Match the listed parts with the uploaded ones; every part but the last ≥ 5 MiB."""
    chosen: list[Part] = []
    for number, etag in wanted:
        part = uploaded.get(number)
        if part is None or part.md5 != etag:
            why = "was not uploaded" if part is None else f"has ETag {part.md5}, not {etag}"
            raise _invalid(req, S3Code.INVALID_PART, f"part {number} {why}", path)
        chosen.append(part)
    for part in chosen[:-1]:
        if part.size < MIN_PART_SIZE:
            raise _invalid(
                req,
                S3Code.ENTITY_TOO_SMALL,
                f"part {part.number} has {part.size} bytes; every part but the last needs "
                f"at least {MIN_PART_SIZE}",
                path,
            )
    return chosen


def _join_parts(store: BlockStore, address: str, parts: list[Part]) -> int:
    """Write the parts' bytes, in order, as one object at ``address``; return its size.

    A store that can concatenate its own objects (S3: a multipart upload of server-side part
    copies) does so without the bytes passing through this process; otherwise they stream
    through, a range at a time.
    """
    size = sum(p.size for p in parts)
    compose = getattr(store, "compose", None)
    if callable(compose):
        info = compose(address, [p.address for p in parts])
    else:
        info = store.put(
            address, cast(BinaryIO, ChainReader((store, p.address, 0, p.size) for p in parts))
        )
    if info.size != size:
        store.delete(address)
        raise LakeMirrorError(f"assembled {info.size} bytes of {size} at {address!r}")
    return size


async def _completed(
    req: S3Request, repo: Repository, upload_id: str | None, path: str
) -> Completed:
    """Return the record of the completed upload the request names, for its key.

    Raises:
        S3Error: NoSuchUpload when there is none (never started, aborted, or forgotten).
    """
    ref = req.ref_and_path()[0]
    done = None
    if upload_id:
        done = await call(req, _store(req).completed, repo, upload_id, key=path)
    if done is None or done.branch != ref or done.path != path:
        raise _no_such_upload(req, upload_id, path)
    return done


def _completion(req: S3Request, location: str, etag: str) -> Response:
    ref, path = req.ref_and_path()
    root = xml.document("CompleteMultipartUploadResult")
    xml.add(root, "Location", location)
    xml.add(root, "Bucket", req.bucket)
    xml.add(root, "Key", f"{ref}/{path}")
    xml.add(root, "ETag", f'"{etag}"')
    return xml.xml_response(root)


async def complete_multipart_upload(req: S3Request) -> Response:
    """Answer CompleteMultipartUpload (``POST <key>?uploadId=U``).

    An upload completed already, repeated with the same parts (an SDK retrying a completion
    whose answer was lost), is answered as it was then; with other parts it is NoSuchUpload, as
    S3 answers both.
    """
    bucket = _bucket(req)
    ref, path = req.ref_and_path()
    req.require(Action.WRITE_OBJECT, object_arn(bucket, path))
    target = await _write_target(req)
    repo = target.repository
    upload_id = req.query.get("uploadId")
    upload = await _find_upload(req, repo, upload_id, path)
    done = await _completed(req, repo, upload_id, path) if upload is None else None
    wanted = _requested_parts(req, await xml.read_xml(req, "CompleteMultipartUpload"), path)
    digest = parts_digest(wanted)
    if upload is None:
        if done is None or done.parts != digest:
            raise _no_such_upload(req, upload_id, path)
        return _completion(req, done.location, done.etag)
    uploads = _store(req)
    catalog = req.state.catalog
    location = f"{req.http.base_url}{bucket}/{quote(f'{ref}/{path}')}"

    def assemble() -> Entry:
        with s3_errors(bucket, path, catalog=catalog):
            uploaded = {p.number: p for p in uploads.parts(upload)}
        chosen = _chosen_parts(req, wanted, uploaded, path)
        store = catalog.block_store(repo)
        address = catalog.paths.new_path()
        with s3_errors(bucket, path, catalog=catalog, write=True):
            try:
                size = _join_parts(store, address, chosen)
            except BlockNotFoundError as exc:
                # a part's bytes are gone from storage (removed by hand): upload it again
                missing = _invalid(req, S3Code.INVALID_PART, f"a part's data is missing: {exc}")
                raise missing from exc
            entry = Entry(
                address=address,
                size=size,
                checksum=multipart_etag(p.md5 for p in chosen),
                mtime=int(time.time()),
                content_type=upload.content_type or DEFAULT_CONTENT_TYPE,
                metadata=dict(upload.metadata),
            )
            try:
                catalog.stage_object(bucket, target.branch, path, entry)
            except LakeMirrorError:
                # the branch is unchanged: the assembled object is unreferenced, remove it
                store.delete(address)
                raise
            # remembered before the upload ends, so that a repeated completion finds one
            uploads.remember(upload, parts=digest, etag=entry.checksum, location=location)
            uploads.remove(upload, store)
        return entry

    try:
        entry = await req.run_sync(assemble)
    except S3Error as exc:
        if exc.code is not S3Code.INVALID_PART:
            raise
        # the same completion, running alongside, ended the upload and removed its parts
        # first (their records: the part is "not uploaded"; their bytes: its data is missing)
        done = await call(req, uploads.completed, repo, upload.upload_id, key=path)
        if done is None or done.parts != digest:
            raise
        return _completion(req, done.location, done.etag)
    return _completion(req, location, entry.checksum)


async def abort_multipart_upload(req: S3Request) -> Response:
    """Answer AbortMultipartUpload (``DELETE <key>?uploadId=U``)."""
    bucket = _bucket(req)
    _, path = req.ref_and_path()
    req.require(Action.DELETE_OBJECT, object_arn(bucket, path))
    catalog = req.state.catalog
    repo = await call(req, catalog.get_repository, bucket, key=path, write=True)
    if repo.read_only:
        await _write_target(req)
    upload = await _upload(req, repo, req.query.get("uploadId"), path)
    store = catalog.block_store(repo)
    if not await call(req, _store(req).remove, upload, store, key=path, write=True):
        raise _invalid(req, S3Code.NO_SUCH_UPLOAD, f"upload ID {upload.upload_id!r}", path)
    return Response(status_code=204)


def _limit(req: S3Request, name: str) -> int:
    raw = req.query.get(name)
    if raw is None:
        return _MAX_LISTED
    number = _whole_number(raw)
    if number is None:
        raise _invalid(req, S3Code.INVALID_ARGUMENT, f"{name} must be a non-negative integer")
    return min(number, _MAX_LISTED)


def _owner(parent: ET.Element, name: str, user: str) -> None:
    el = xml.add(parent, name)
    xml.add(el, "ID", user)
    xml.add(el, "DisplayName", user)


async def list_parts(req: S3Request) -> Response:
    """Answer ListParts (``GET <key>?uploadId=U``)."""
    bucket = _bucket(req)
    ref, path = req.ref_and_path()
    req.require(Action.READ_OBJECT, object_arn(bucket, path))
    repo = await call(req, req.state.catalog.get_repository, bucket, key=path)
    upload = await _upload(req, repo, req.query.get("uploadId"), path)
    raw_marker = req.query.get("part-number-marker", "0") or "0"
    marker = _whole_number(raw_marker)
    if marker is None:
        raise _invalid(req, S3Code.INVALID_ARGUMENT, "part-number-marker must be an integer")
    limit = _limit(req, "max-parts")
    uploads = _store(req)

    def page() -> list[Part]:
        found: list[Part] = []
        for part in uploads.parts(upload, after=marker):
            found.append(part)
            if len(found) > limit:
                break
        return found

    parts = await call(req, page, key=path)
    truncated = len(parts) > limit
    parts = parts[:limit]
    root = xml.document("ListPartsResult")
    xml.add(root, "Bucket", bucket)
    xml.add(root, "Key", f"{ref}/{path}")
    xml.add(root, "UploadId", upload.upload_id)
    _owner(root, "Initiator", upload.initiator)
    _owner(root, "Owner", upload.initiator)
    xml.add(root, "StorageClass", "STANDARD")
    xml.add(root, "PartNumberMarker", marker)
    xml.add(root, "NextPartNumberMarker", parts[-1].number if parts else marker)
    xml.add(root, "MaxParts", limit)
    xml.add(root, "IsTruncated", truncated)
    for part in parts:
        el = xml.add(root, "Part")
        xml.add(el, "PartNumber", part.number)
        xml.add(el, "LastModified", xml.iso_time(part.modified))
        xml.add(el, "ETag", f'"{part.md5}"')
        xml.add(el, "Size", part.size)
    return xml.xml_response(root)


async def list_multipart_uploads(req: S3Request) -> Response:
    """Answer ListMultipartUploads (``GET <bucket>?uploads``)."""
    bucket = _bucket(req)
    req.require(Action.LIST_OBJECTS, repository_arn(bucket))
    repo = await call(req, req.state.catalog.get_repository, bucket)
    if req.query.get("delimiter"):
        raise _invalid(req, S3Code.NOT_IMPLEMENTED, "ListMultipartUploads with a delimiter")
    encoding = req.query.get("encoding-type")
    if encoding not in (None, "url"):
        raise _invalid(req, S3Code.INVALID_ARGUMENT, f"encoding-type {encoding!r}")
    prefix = req.query.get("prefix", "")
    key_marker = req.query.get("key-marker", "")
    id_marker = req.query.get("upload-id-marker", "") if key_marker else ""
    limit = _limit(req, "max-uploads")
    uploads = _store(req)

    def page() -> list[Upload]:
        found: list[Upload] = []
        for upload in uploads.uploads(
            repo, prefix=prefix, key_marker=key_marker, id_marker=id_marker
        ):
            found.append(upload)
            if len(found) > limit:
                break
        return found

    found = await call(req, page)
    truncated = len(found) > limit
    found = found[:limit]

    def enc(value: str) -> str:
        return quote(value, safe="/") if encoding == "url" else value

    root = xml.document("ListMultipartUploadsResult")
    xml.add(root, "Bucket", bucket)
    xml.add(root, "KeyMarker", enc(key_marker))
    xml.add(root, "UploadIdMarker", id_marker)
    xml.add(root, "NextKeyMarker", enc(found[-1].key) if truncated else "")
    xml.add(root, "NextUploadIdMarker", found[-1].upload_id if truncated else "")
    if encoding:
        xml.add(root, "EncodingType", encoding)
    xml.add(root, "Prefix", enc(prefix))
    xml.add(root, "MaxUploads", limit)
    xml.add(root, "IsTruncated", truncated)
    for upload in found:
        el = xml.add(root, "Upload")
        xml.add(el, "Key", enc(upload.key))
        xml.add(el, "UploadId", upload.upload_id)
        _owner(el, "Initiator", upload.initiator)
        _owner(el, "Owner", upload.initiator)
        xml.add(el, "StorageClass", "STANDARD")
        xml.add(el, "Initiated", xml.iso_time(upload.initiated))
    return xml.xml_response(root)
