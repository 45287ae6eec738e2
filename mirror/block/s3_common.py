"""What the two S3 stores do alike, without I/O: namespaces, keys, requests, answers, errors.

:class:`~mirror.block.s3.S3BlockStore` (boto3) and :class:`~mirror.block.s3_async.AsyncS3BlockStore`
(aioboto3) both derive from :class:`S3Namespace`: they build their requests and read S3's
answers here and only send the requests themselves, so both see the same objects and raise the
same errors.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from mirror.block.errors import (
    BlockNotFoundError,
    BlockUnavailableError,
    InvalidNamespaceError,
    InvalidRangeError,
)
from mirror.block.local import ListedObject
from mirror.block.protocol import ObjectInfo
from mirror.block.resolver import split_namespace
from mirror.block.s3_config import S3Settings

__all__ = [
    "S3Namespace",
    "bare_etag",
    "error_code",
    "is_range_error",
    "map_s3_error",
    "range_header",
    "s3_key",
    "split_s3_namespace",
]

_NOT_FOUND = frozenset({"NoSuchKey", "NotFound", "404"})


def error_code(exc: ClientError) -> tuple[str, int]:
    """Return the error code and the HTTP status of a refusal S3 answered."""
    error: Any = exc.response.get("Error", {})
    meta: Any = exc.response.get("ResponseMetadata", {})
    return str(error.get("Code", "")), int(meta.get("HTTPStatusCode", 0))


def map_s3_error(exc: Exception, bucket: str, base: str, key: str, action: str) -> Exception:
    """Map a botocore error on ``base + key`` in ``bucket`` to the block error tree."""
    where = f"s3://{bucket}/{base}{key}"
    if isinstance(exc, ClientError):
        code, status = error_code(exc)
        if code in _NOT_FOUND:
            return BlockNotFoundError(key)
        if code == "NoSuchBucket":
            return BlockUnavailableError(f"{action} {where}: bucket {bucket!r} is missing")
        return BlockUnavailableError(f"{action} {where}: {code or status}: {exc}")
    return BlockUnavailableError(f"{action} {where}: {exc}")


def is_range_error(exc: Exception) -> bool:
    """Return whether S3 refused a ranged GET as unsatisfiable."""
    if not isinstance(exc, ClientError):
        return False
    code, status = error_code(exc)
    return status == 416 or code == "InvalidRange"


def split_s3_namespace(namespace: str) -> tuple[str, str, str]:
    """Return ``(namespace, bucket, key base)`` of ``s3://bucket/prefix``; the base ends in ``/``.

    Raises:
        InvalidNamespaceError: not an ``s3://`` URI, or no bucket.
    """
    scheme, rest = split_namespace(namespace)
    if scheme != "s3":
        raise InvalidNamespaceError(f"storage namespace {namespace!r} is not s3://")
    bucket, _, prefix = rest.partition("/")
    if not bucket:
        raise InvalidNamespaceError(f"storage namespace {namespace!r} names no bucket")
    prefix = prefix.strip("/")
    return f"s3://{rest}", bucket, f"{prefix}/" if prefix else ""


def s3_key(base: str, key: str) -> str:
    """Return the bucket key of store key ``key`` under ``base``.

    Raises:
        InvalidNamespaceError: ``key`` is empty, absolute or holds NUL.
    """
    if not key or key.startswith("/") or "\x00" in key:
        raise InvalidNamespaceError(f"invalid object key {key!r}")
    return base + key


def range_header(start: int, end: int | None) -> str | None:
    """Return the HTTP ``Range`` of bytes ``[start, end)``, ``None`` for the whole object."""
    if start == 0 and end is None:
        return None
    return f"bytes={start}-{'' if end is None else end - 1}"


def bare_etag(answer: Mapping[str, Any]) -> str:
    """Return the ETag of one of S3's answers without the quotes S3 puts around it."""
    etag: str = answer["ETag"]
    return etag.strip('"')


class S3Namespace:
    """The objects of one ``s3://bucket/prefix`` namespace, and the requests that reach them.

    Store keys map to ``prefix/key`` in the bucket. Subclasses hold a client and send the
    requests built here; every botocore error they meet becomes one of the block error tree
    (:meth:`_errors`), naming the object and what was done to it.
    """

    def __init__(self, namespace: str, settings: S3Settings | None = None) -> None:
        self._namespace, self._bucket, self._base = split_s3_namespace(namespace)
        self._settings = settings or S3Settings()

    @property
    def namespace(self) -> str:
        """Return the namespace URI of this store."""
        return self._namespace

    @property
    def bucket(self) -> str:
        """Return the bucket holding the objects."""
        return self._bucket

    @property
    def base(self) -> str:
        """Return the key prefix of the namespace inside the bucket (``""`` or ending in ``/``)."""
        return self._base

    def _key(self, key: str) -> str:
        return s3_key(self._base, key)

    def _object(self, key: str) -> dict[str, Any]:
        """Return the ``Bucket`` and ``Key`` arguments naming the object at ``key``."""
        return {"Bucket": self._bucket, "Key": self._key(key)}

    def _error(self, exc: Exception, key: str, action: str) -> Exception:
        return map_s3_error(exc, self._bucket, self._base, key, action)

    @contextmanager
    def _errors(self, key: str, action: str) -> Iterator[None]:
        """Raise a botocore error of the block as the block error :meth:`_error` maps it to."""
        try:
            yield
        except (ClientError, BotoCoreError) as exc:
            raise self._error(exc, key, action) from exc

    def _info(self, key: str, head: Mapping[str, Any]) -> ObjectInfo:
        """Return what ``HeadObject``'s answer ``head`` tells of the object at ``key``."""
        return ObjectInfo(key, head["ContentLength"], bare_etag(head))

    def _read_args(self, key: str, start: int, end: int | None) -> dict[str, Any] | None:
        """Return ``GetObject``'s arguments for bytes ``[start, end)``; ``None`` if none are asked.

        Without bytes to read, the object's size decides (:meth:`_empty_read`).

        Raises:
            InvalidNamespaceError: an invalid key.
            InvalidRangeError: ``start`` is negative.
        """
        args = self._object(key)
        if start < 0:
            raise InvalidRangeError(f"range start {start} is negative for {key!r}")
        if end is not None and end <= start:
            return None
        if (byte_range := range_header(start, end)) is not None:
            args["Range"] = byte_range
        return args

    @staticmethod
    def _empty_read(key: str, start: int, size: int) -> bytes:
        """Return the read of no bytes at ``start`` of an object of ``size`` bytes.

        Raises:
            InvalidRangeError: ``start`` lies beyond the object's end.
        """
        if start > size or (start == size and size > 0):
            raise InvalidRangeError(f"range start {start} beyond size {size} of {key!r}")
        return b""

    def _read_error(self, exc: Exception, key: str, start: int) -> Exception:
        """Map an error of a ``GetObject`` from ``start``: a refused range is beyond the end."""
        if is_range_error(exc):
            return InvalidRangeError(f"range start {start} beyond the end of {key!r}")
        return self._error(exc, key, "get")

    def _list_args(self, prefix: str, start_after: str = "") -> dict[str, Any]:
        """Return the first ``ListObjectsV2`` request's arguments (:meth:`_next_page` moves on)."""
        args: dict[str, Any] = {
            "Bucket": self._bucket,
            "Prefix": self._base + prefix,
            "MaxKeys": self._settings.page_size,
        }
        if start_after:
            args["StartAfter"] = self._base + start_after
        return args

    @staticmethod
    def _next_page(args: dict[str, Any], page: Mapping[str, Any]) -> bool:
        """Point ``args`` at the page after ``page``; return whether there is one."""
        token = page.get("NextContinuationToken")
        if not page.get("IsTruncated") or not token:
            return False
        args["ContinuationToken"] = token
        return True

    def _listed(self, page: Mapping[str, Any]) -> Iterator[ObjectInfo]:
        """Yield the objects of a ``ListObjectsV2`` page."""
        cut = len(self._base)
        for obj in page.get("Contents", []):
            yield ObjectInfo(obj["Key"][cut:], obj["Size"], bare_etag(obj))

    def _listed_detailed(self, page: Mapping[str, Any]) -> Iterator[ListedObject]:
        """Yield the objects of a ``ListObjectsV2`` page with their modification times."""
        cut = len(self._base)
        for obj in page.get("Contents", []):
            yield ListedObject(
                obj["Key"][cut:], obj["Size"], bare_etag(obj), int(obj["LastModified"].timestamp())
            )
