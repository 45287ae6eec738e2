"""The gateway's bucket operations: ListBuckets, HeadBucket, GetBucketLocation, versioning.

A bucket is a repository. The permissions are lakeFS's: ``fs:ListRepositories`` to list them
(each repository listed only if the caller may list it), ``fs:ReadRepository`` for HeadBucket and
``fs:ListObjects`` for the bucket's ``GET`` sub-resources.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from starlette.responses import Response

from mirror.auth.errors import PermissionDeniedError
from mirror.auth.permissions import Action, Permission, repository_arn
from mirror.gateway import xml
from mirror.gateway.errors import S3Code, S3Error
from mirror.gateway.mapping import call

if TYPE_CHECKING:
    from mirror.core.catalog import Catalog
    from mirror.core.model import Repository
    from mirror.gateway.context import S3Request

__all__ = [
    "bucket_of",
    "get_bucket_location",
    "get_bucket_versioning",
    "head_bucket",
    "list_buckets",
]

_MAX_BUCKETS = 10_000
"""The most buckets one ListBuckets answers (S3 has no pagination for it, nor does lakeFS)."""


def bucket_of(req: S3Request) -> str:
    """Return the request's bucket.

    Raises:
        S3Error: NoSuchBucket for a service-level request.
    """
    if req.bucket is None:
        raise S3Error(S3Code.NO_SUCH_BUCKET)
    return req.bucket


async def _repository(req: S3Request) -> Repository:
    bucket_of(req)  # NoSuchBucket for a service-level call
    return await call(req, req.state.catalog.get_repository, req.repository(), reads=True)


def _listable(catalog: Catalog, req: S3Request, prefix: str) -> list[Repository]:
    listed: list[Repository] = []
    for repo in catalog.list_repositories(prefix):
        try:
            req.caller.require(Permission(Action.LIST_REPOSITORIES, repository_arn(repo.id)))
        except PermissionDeniedError:
            continue
        listed.append(repo)
        if len(listed) >= _MAX_BUCKETS:
            break
    return listed


async def list_buckets(req: S3Request) -> Response:
    """Answer ListBuckets: the repositories the caller may list, by name (``?prefix`` honoured)."""
    prefix = req.query.get("prefix", "")
    repos = await call(req, _listable, req.state.catalog, req, prefix)
    root = xml.document("ListAllMyBucketsResult")
    owner = xml.add(root, "Owner")
    xml.add(owner, "ID", req.caller.id)
    xml.add(owner, "DisplayName", req.caller.id)
    listed = xml.add(root, "Buckets")
    for repo in repos:
        bucket = xml.add(listed, "Bucket")
        xml.add(bucket, "Name", repo.id)
        xml.add(bucket, "CreationDate", xml.iso_time(repo.creation_date))
    if prefix:
        xml.add(root, "Prefix", prefix)
    return xml.xml_response(root)


async def head_bucket(req: S3Request) -> Response:
    """Answer HeadBucket: 200 with the region when the repository exists and may be read."""
    bucket = bucket_of(req)
    req.require(Action.READ_REPOSITORY, repository_arn(bucket))
    await _repository(req)
    return Response(status_code=200, headers={"x-amz-bucket-region": req.state.settings.region})


async def get_bucket_location(req: S3Request) -> Response:
    """Answer GetBucketLocation: ``gateway.region`` (empty for ``us-east-1``, as S3 answers)."""
    bucket = bucket_of(req)
    req.require(Action.LIST_OBJECTS, repository_arn(bucket))
    await _repository(req)
    region = req.state.settings.region
    root = xml.document("LocationConstraint")
    if region != "us-east-1":
        root.text = region
    return xml.xml_response(root)


async def get_bucket_versioning(req: S3Request) -> Response:
    """Answer GetBucketVersioning: never enabled (versions are commits, read at their refs)."""
    bucket = bucket_of(req)
    req.require(Action.LIST_OBJECTS, repository_arn(bucket))
    await _repository(req)
    return xml.xml_response(xml.document("VersioningConfiguration"))
