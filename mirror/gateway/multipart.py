"""Multipart uploads through the gateway: create, upload (or copy) parts, complete, abort, list."""

from __future__ import annotations

from typing import TYPE_CHECKING

from mirror.gateway.errors import S3Code, S3Error

if TYPE_CHECKING:
    from starlette.responses import Response

    from mirror.gateway.context import S3Request

__all__ = [
    "abort_multipart_upload",
    "complete_multipart_upload",
    "create_multipart_upload",
    "list_multipart_uploads",
    "list_parts",
    "upload_part",
]


def _not_implemented(req: S3Request) -> S3Error:
    return S3Error(S3Code.NOT_IMPLEMENTED, bucket=req.bucket, key=req.key)


async def create_multipart_upload(req: S3Request) -> Response:
    """Answer CreateMultipartUpload (``POST <key>?uploads``)."""
    raise _not_implemented(req)


async def upload_part(req: S3Request) -> Response:
    """Answer UploadPart and UploadPartCopy (``PUT <key>?partNumber=N&uploadId=U``)."""
    raise _not_implemented(req)


async def complete_multipart_upload(req: S3Request) -> Response:
    """Answer CompleteMultipartUpload (``POST <key>?uploadId=U``)."""
    raise _not_implemented(req)


async def abort_multipart_upload(req: S3Request) -> Response:
    """Answer AbortMultipartUpload (``DELETE <key>?uploadId=U``)."""
    raise _not_implemented(req)


async def list_parts(req: S3Request) -> Response:
    """Answer ListParts (``GET <key>?uploadId=U``)."""
    raise _not_implemented(req)


async def list_multipart_uploads(req: S3Request) -> Response:
    """Answer ListMultipartUploads (``GET <bucket>?uploads``)."""
    raise _not_implemented(req)
