"""CopyObject through the gateway: ``PUT <key>`` with ``x-amz-copy-source: /<bucket>/<ref>/<path>``.

The source is read at any ref of any repository (a branch, a tag, a commit, an expression), the
destination is a branch. The data is copied to a fresh address of the destination (so garbage
collection of one never removes the other's bytes) and keeps its checksum, so the ETag is the
source's, as lakeFS keeps it. ``x-amz-metadata-directive: REPLACE`` takes the request's metadata
and content type instead of the source's; the ``x-amz-copy-source-if-*`` conditions answer 412.
"""

from __future__ import annotations

import io
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING
from urllib.parse import unquote_plus

from mirror.auth.permissions import Action, object_arn
from mirror.core.model import Entry
from mirror.gateway import xml
from mirror.gateway.errors import S3Code, S3Error
from mirror.gateway.headers import stored_metadata
from mirror.gateway.mapping import call, resolve_write_target, s3_errors
from mirror.gateway.objects import _date, _etag_matches
from mirror.httputil.streams import CHUNK, BlockReader

if TYPE_CHECKING:
    from starlette.responses import Response

    from mirror.core.catalog import Catalog
    from mirror.core.model import ObjectStat
    from mirror.gateway.context import S3Request

__all__ = ["CopySource", "copy_object", "parse_copy_source"]


@dataclass(frozen=True)
class CopySource:
    """The object a copy reads: a repository, a ref and a path."""

    bucket: str
    ref: str
    path: str


def parse_copy_source(header: str, *, bucket: str | None) -> CopySource:
    """Parse ``x-amz-copy-source``: ``[/]<bucket>/<ref>/<path>``, URL-encoded.

    A ``?versionId=null`` suffix is accepted (objects have one version at a ref).

    Raises:
        S3Error: InvalidArgument for a source that names no object, or another version.
    """
    raw, _, query = header.partition("?")
    if query and query not in ("versionId=null", ""):
        raise S3Error(
            S3Code.INVALID_ARGUMENT,
            f"{S3Code.INVALID_ARGUMENT.description}: copy source versions are not supported; "
            "name the version's ref instead",
            bucket=bucket,
        )
    decoded = unquote_plus(raw).lstrip("/")
    src_bucket, _, rest = decoded.partition("/")
    ref, _, path = rest.partition("/")
    if not src_bucket or not ref or not path:
        raise S3Error(
            S3Code.INVALID_ARGUMENT,
            f"{S3Code.INVALID_ARGUMENT.description}: x-amz-copy-source {header!r} is not "
            "<bucket>/<ref>/<path>",
            bucket=bucket,
        )
    return CopySource(src_bucket, ref, path)


def _check_source_conditions(req: S3Request, stat: ObjectStat) -> None:
    etag = stat.entry.checksum
    mtime = stat.entry.mtime
    failed = False
    if_match = req.headers.get("x-amz-copy-source-if-match")
    if_none_match = req.headers.get("x-amz-copy-source-if-none-match")
    unmodified = _date(req.headers.get("x-amz-copy-source-if-unmodified-since"))
    modified = _date(req.headers.get("x-amz-copy-source-if-modified-since"))
    if if_match is not None:
        failed |= not _etag_matches(if_match, etag)
    elif unmodified is not None:
        failed |= mtime > unmodified
    if if_none_match is not None:
        failed |= _etag_matches(if_none_match, etag)
    elif modified is not None:
        failed |= mtime <= modified
    if failed:
        raise S3Error(S3Code.PRECONDITION_FAILED, bucket=req.bucket, key=stat.path)


def _copy(
    catalog: Catalog,
    req: S3Request,
    source: CopySource,
    dest: tuple[str, str, str],
    replace: tuple[str | None, dict[str, str]] | None,
) -> Entry:
    bucket, branch, path = dest
    with s3_errors(source.bucket, source.path, catalog=catalog):
        stat = catalog.stat_object(source.bucket, source.ref, source.path)
        _check_source_conditions(req, stat)
        src_repo = catalog.get_repository(source.bucket)
        store, key = catalog.open_entry(src_repo, stat.entry)
        reader = io.BufferedReader(BlockReader(store, key, stat.entry.size), CHUNK)
        dest_repo = catalog.get_repository(bucket)
        address = catalog.paths.new_path()
        info = catalog.block_store(dest_repo).put(address, reader)
    if info.size != stat.entry.size:
        raise S3Error(
            S3Code.INTERNAL_ERROR, bucket=bucket, key=path
        )  # the source changed under the copy
    if replace is None:
        content_type, metadata = stat.entry.content_type, dict(stat.entry.metadata)
    else:
        content_type = replace[0] or stat.entry.content_type
        metadata = replace[1]
    entry = Entry(
        address=address,
        size=info.size,
        checksum=stat.entry.checksum,
        mtime=int(time.time()),
        content_type=content_type,
        metadata=metadata,
    )
    with s3_errors(bucket, path, catalog=catalog, write=True):
        return catalog.stage_object(bucket, branch, path, entry).entry


async def copy_object(req: S3Request) -> Response:
    """Answer CopyObject: ``CopyObjectResult`` with the copy's ETag and time."""
    bucket = req.bucket
    if bucket is None:
        raise S3Error(S3Code.NO_SUCH_BUCKET)
    ref, path = req.ref_and_path()
    source = parse_copy_source(req.headers["x-amz-copy-source"], bucket=bucket)
    req.require(Action.WRITE_OBJECT, object_arn(bucket, path))
    req.require(Action.READ_OBJECT, object_arn(source.bucket, source.path))
    directive = req.headers.get("x-amz-metadata-directive", "COPY").upper()
    if directive not in ("COPY", "REPLACE"):
        raise S3Error(
            S3Code.INVALID_ARGUMENT,
            f"{S3Code.INVALID_ARGUMENT.description}: Unknown metadata directive {directive!r}",
            bucket=bucket,
            key=path,
        )
    replace = None
    if directive == "REPLACE":
        replace = (req.headers.get("content-type") or None, stored_metadata(req))
    if (source.bucket, source.ref, source.path) == (bucket, ref, path) and replace is None:
        raise S3Error(
            S3Code.INVALID_REQUEST,
            f"{S3Code.INVALID_REQUEST.description}: This copy request is illegal because it is "
            "trying to copy an object to itself without changing the object's metadata",
            bucket=bucket,
            key=path,
        )
    catalog = req.state.catalog
    await call(req, resolve_write_target, catalog, bucket, ref, path, key=path)
    entry = await call(req, _copy, catalog, req, source, (bucket, ref, path), replace, key=path)
    root = xml.document("CopyObjectResult")
    xml.add(root, "LastModified", xml.iso_time(entry.mtime))
    xml.add(root, "ETag", f'"{entry.checksum}"')
    return xml.xml_response(root)
