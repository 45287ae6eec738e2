"""Read-only asynchronous access to ``s3://`` namespaces (aioboto3), for many concurrent checks.

aioboto3 is imported only here. The store shares namespace parsing, key mapping and error mapping
with :class:`~mirror.block.s3.S3BlockStore`, so both see the same objects and raise the same
errors.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any

import aioboto3
import aiobotocore.session
from aiobotocore.parsers import AioResponseParserFactory, AioRestXMLParser
from botocore.exceptions import BotoCoreError, ClientError

from mirror.block.errors import BlockNotFoundError, InvalidRangeError
from mirror.block.protocol import ObjectInfo
from mirror.block.s3 import (
    S3Settings,
    client_config,
    is_range_error,
    map_s3_error,
    range_header,
    s3_key,
    session_options,
    split_s3_namespace,
    use_fast_timestamps,
)
from mirror.block.s3_listing import FastListingMixin, parse_listings_once, use_fast_listing

if TYPE_CHECKING:
    from types_aiobotocore_s3 import S3Client as AsyncS3Client

__all__ = [
    "AsyncFastListingParser",
    "AsyncFastListingParserFactory",
    "AsyncS3BlockStore",
    "async_s3_client",
]


class AsyncFastListingParser(FastListingMixin, AioRestXMLParser):
    """aiobotocore's rest-xml parser with the dedicated listing walk."""


class AsyncFastListingParserFactory(AioResponseParserFactory):
    """aiobotocore's parser factory handing out :class:`AsyncFastListingParser` for rest-xml."""

    def create_parser(self, protocol_name: str) -> Any:
        """Return the parser of ``protocol_name`` with this factory's defaults."""
        if protocol_name == "rest-xml":
            return AsyncFastListingParser(**vars(self)["_defaults"])
        return super().create_parser(protocol_name)


@asynccontextmanager
async def async_s3_client(settings: S3Settings | None = None) -> AsyncIterator[AsyncS3Client]:
    """Open an aioboto3 S3 client configured by ``settings``; close it on exit."""
    settings = settings or S3Settings()
    session = aioboto3.Session(
        **session_options(settings),
        botocore_session=use_fast_listing(
            use_fast_timestamps(aiobotocore.session.get_session()), AsyncFastListingParserFactory()
        ),
    )
    config = client_config(settings)
    async with session.client("s3", endpoint_url=settings.endpoint_url, config=config) as client:
        parse_listings_once(client.meta.events)
        yield client


class AsyncS3BlockStore:
    """Read objects of ``s3://bucket/prefix`` without blocking the event loop.

    Offers the reading half of :class:`~mirror.block.protocol.BlockStore` as coroutines: ``head``,
    ``exists``, ``get`` and ``list`` (an async iterator). Errors are those of the synchronous store.
    """

    def __init__(
        self, namespace: str, client: AsyncS3Client, settings: S3Settings | None = None
    ) -> None:
        self._namespace, self._bucket, self._base = split_s3_namespace(namespace)
        self._client = client
        self._settings = settings or S3Settings()

    @property
    def namespace(self) -> str:
        """Return the namespace URI of this store."""
        return self._namespace

    def _error(self, exc: Exception, key: str, action: str) -> Exception:
        return map_s3_error(exc, self._bucket, self._base, key, action)

    async def head(self, key: str) -> ObjectInfo:
        """Return size and etag of the object at ``key``.

        Raises:
            BlockNotFoundError: no object at ``key``.
        """
        full = s3_key(self._base, key)
        try:
            response = await self._client.head_object(Bucket=self._bucket, Key=full)
        except (ClientError, BotoCoreError) as exc:
            raise self._error(exc, key, "head") from exc
        return ObjectInfo(key, response["ContentLength"], response["ETag"].strip('"'))

    async def exists(self, key: str) -> bool:
        """Return whether ``key`` holds an object."""
        try:
            await self.head(key)
        except BlockNotFoundError:
            return False
        return True

    async def get(self, key: str, start: int = 0, end: int | None = None) -> bytes:
        """Return bytes ``[start, end)`` of the object at ``key``.

        Raises:
            BlockNotFoundError: no object at ``key``.
            InvalidRangeError: ``start`` is negative or lies beyond the object's end.
        """
        full = s3_key(self._base, key)
        if start < 0:
            raise InvalidRangeError(f"range start {start} is negative for {key!r}")
        if end is not None and end <= start:
            size = (await self.head(key)).size
            if start > size or (start == size and size > 0):
                raise InvalidRangeError(f"range start {start} beyond size {size} of {key!r}")
            return b""
        args: dict[str, Any] = {"Bucket": self._bucket, "Key": full}
        if (byte_range := range_header(start, end)) is not None:
            args["Range"] = byte_range
        try:
            response = await self._client.get_object(**args)
            async with response["Body"] as body:
                data: bytes = await body.read()
        except ClientError as exc:
            if is_range_error(exc):
                if start == 0 and (await self.head(key)).size == 0:
                    return b""
                raise InvalidRangeError(f"range start {start} beyond the end of {key!r}") from exc
            raise self._error(exc, key, "get") from exc
        except BotoCoreError as exc:
            raise self._error(exc, key, "get") from exc
        return data

    async def list(self, prefix: str = "", start_after: str = "") -> AsyncIterator[ObjectInfo]:
        """Yield objects under ``prefix`` after ``start_after`` in key order, page by page."""
        args: dict[str, Any] = {
            "Bucket": self._bucket,
            "Prefix": self._base + prefix,
            "MaxKeys": self._settings.page_size,
        }
        if start_after:
            args["StartAfter"] = self._base + start_after
        cut = len(self._base)
        while True:
            try:
                page = await self._client.list_objects_v2(**args)
            except (ClientError, BotoCoreError) as exc:
                raise self._error(exc, prefix, "list") from exc
            for obj in page.get("Contents", []):
                yield ObjectInfo(obj["Key"][cut:], obj["Size"], obj["ETag"].strip('"'))
            token = page.get("NextContinuationToken")
            if not page.get("IsTruncated") or not token:
                return
            args["ContinuationToken"] = token
