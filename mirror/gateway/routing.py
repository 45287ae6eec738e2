"""Which S3 operation a request is: from its method, bucket, key and sub-resources.

Every request the gateway serves resolves to an :class:`Operation` with a name (S3's, the
``route`` label of the HTTP metrics) and a handler. Unsupported operations and sub-resources
(``acl``, ``policy``, ``lifecycle``, ``cors``, ``website``, …) answer S3's ``NotImplemented``
(501) rather than falling through to another operation; where lakeFS gives an answer of its own
(``?versioning``, object ``?tagging``, deleting a bucket) the gateway gives the same.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from mirror.gateway import buckets, bulk, copy, listing, multipart, objects
from mirror.gateway.errors import S3Code, S3Error

if TYPE_CHECKING:
    from starlette.responses import Response

    from mirror.gateway.context import Handler, S3Request

__all__ = ["UNSUPPORTED_SUBRESOURCES", "Operation", "route"]

UNSUPPORTED_SUBRESOURCES = frozenset(
    {
        "accelerate",
        "acl",
        "analytics",
        "attributes",
        "cors",
        "encryption",
        "intelligent-tiering",
        "inventory",
        "legal-hold",
        "lifecycle",
        "logging",
        "metrics",
        "notification",
        "object-lock",
        "ownershipControls",
        "policy",
        "policyStatus",
        "publicAccessBlock",
        "replication",
        "requestPayment",
        "restore",
        "retention",
        "select",
        "torrent",
        "versions",
        "website",
    }
)
"""Sub-resources S3 has and the gateway does not serve: answered ``NotImplemented``."""


@dataclass(frozen=True)
class Operation:
    """An S3 operation: its name (``s3:GetObject``) and its handler."""

    name: str
    handler: Handler


def _refuse(code: S3Code, detail: str) -> Handler:
    async def refuse(req: S3Request) -> Response:
        path = req.key.partition("/")[2] if req.key else None
        raise S3Error(code, f"{code.description}: {detail}", bucket=req.bucket, key=path or None)

    return refuse


def _not_implemented(what: str) -> Operation:
    return Operation(f"s3:{what}", _refuse(S3Code.NOT_IMPLEMENTED, f"{what} is not supported"))


def _method_not_allowed(method: str, where: str) -> Operation:
    return Operation(
        "s3:MethodNotAllowed",
        _refuse(S3Code.METHOD_NOT_ALLOWED, f"{method} is not allowed on {where}"),
    )


def _unsupported(query: Mapping[str, str]) -> str | None:
    for name in query:
        if name in UNSUPPORTED_SUBRESOURCES:
            return name
    return None


def _service(method: str) -> Operation:
    if method in ("GET", "HEAD"):
        return Operation("s3:ListBuckets", buckets.list_buckets)
    return _method_not_allowed(method, "the service")


def _bucket(method: str, query: Mapping[str, str]) -> Operation:
    if (sub := _unsupported(query)) is not None:
        return _not_implemented(f"bucket ?{sub}")
    if method == "GET":
        if "location" in query:
            return Operation("s3:GetBucketLocation", buckets.get_bucket_location)
        if "versioning" in query:
            return Operation("s3:GetBucketVersioning", buckets.get_bucket_versioning)
        if "uploads" in query:
            return Operation("s3:ListMultipartUploads", multipart.list_multipart_uploads)
        if "tagging" in query:
            return _not_implemented("GetBucketTagging")
        if query.get("list-type") == "2":
            return Operation("s3:ListObjectsV2", listing.list_objects)
        return Operation("s3:ListObjects", listing.list_objects)
    if method == "HEAD":
        return Operation("s3:HeadBucket", buckets.head_bucket)
    if method == "POST":
        if "delete" in query:
            return Operation("s3:DeleteObjects", bulk.delete_objects)
        return _not_implemented("PostObject")
    if method == "PUT":
        return _not_implemented("CreateBucket" if not query else "PutBucket sub-resources")
    if method == "DELETE":
        # lakeFS: deleting a bucket (a repository) is not an S3 operation it supports
        return Operation(
            "s3:DeleteBucket",
            _refuse(S3Code.NOT_SUPPORTED, "a repository is deleted through the API"),
        )
    return _method_not_allowed(method, "a bucket")


def _object(method: str, query: Mapping[str, str], copy_source: bool) -> Operation:
    if (sub := _unsupported(query)) is not None:
        return _not_implemented(f"object ?{sub}")
    version = query.get("versionId")
    if version is not None and version != "null":
        return _not_implemented("versionId (objects have no versions; read a commit's key)")
    if method in ("GET", "HEAD") and "partNumber" in query:
        return _not_implemented("partNumber on reads")
    if method == "GET":
        if "uploadId" in query:
            return Operation("s3:ListParts", multipart.list_parts)
        if "tagging" in query:
            return Operation("s3:GetObjectTagging", objects.get_object_tagging)
        return Operation("s3:GetObject", objects.get_object)
    if method == "HEAD":
        return Operation("s3:HeadObject", objects.head_object)
    if method == "PUT":
        if "tagging" in query:
            return Operation(
                "s3:PutObjectTagging",
                _refuse(S3Code.NOT_SUPPORTED, "object tags are not stored"),
            )
        if "uploadId" in query or "partNumber" in query:
            if "uploadId" not in query or "partNumber" not in query:
                return Operation(
                    "s3:UploadPart",
                    _refuse(S3Code.INVALID_ARGUMENT, "a part upload needs partNumber and uploadId"),
                )
            name = "s3:UploadPartCopy" if copy_source else "s3:UploadPart"
            return Operation(name, multipart.upload_part)
        if copy_source:
            return Operation("s3:CopyObject", copy.copy_object)
        return Operation("s3:PutObject", objects.put_object)
    if method == "POST":
        if "uploads" in query:
            return Operation("s3:CreateMultipartUpload", multipart.create_multipart_upload)
        if "uploadId" in query:
            return Operation("s3:CompleteMultipartUpload", multipart.complete_multipart_upload)
        return _not_implemented("POST on an object")
    if method == "DELETE":
        if "uploadId" in query:
            return Operation("s3:AbortMultipartUpload", multipart.abort_multipart_upload)
        if "tagging" in query:
            return _not_implemented("DeleteObjectTagging")
        return Operation("s3:DeleteObject", objects.delete_object)
    return _method_not_allowed(method, "an object")


def route(
    method: str,
    bucket: str | None,
    key: str | None,
    query: Mapping[str, str],
    headers: Mapping[str, str],
) -> Operation:
    """Return the operation a request asks for.

    Args:
        method: The HTTP method.
        bucket: The addressed bucket, ``None`` at the service level.
        key: The addressed key (``<ref>/<path>``), ``None`` at the bucket level.
        query: The query parameters (sub-resources are parameter names).
        headers: The request headers (``x-amz-copy-source`` makes a PUT a copy).
    """
    if bucket is None:
        return _service(method)
    if key is None:
        return _bucket(method, query)
    return _object(method, query, "x-amz-copy-source" in headers)
