"""Listing through the gateway: ListObjects (v1 and v2) and the bucket root's branches."""

from __future__ import annotations

from typing import TYPE_CHECKING

from mirror.gateway.errors import S3Code, S3Error

if TYPE_CHECKING:
    from starlette.responses import Response

    from mirror.gateway.context import S3Request

__all__ = ["list_objects"]


async def list_objects(req: S3Request) -> Response:
    """Answer ListObjects (v1) or ListObjectsV2 (``list-type=2``) on a bucket."""
    raise S3Error(S3Code.NOT_IMPLEMENTED, bucket=req.bucket)
