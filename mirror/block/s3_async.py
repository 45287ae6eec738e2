"""Read-only asynchronous access to ``s3://`` namespaces (aioboto3), for many concurrent checks.

aioboto3 is imported only here. The store builds its requests, reads the answers and maps the
errors as :class:`~mirror.block.s3.S3BlockStore` does (both are
:class:`~mirror.block.s3_common.S3Namespace`), so both see the same objects and raise the same
errors.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any
from weakref import WeakKeyDictionary

import aioboto3
import aiobotocore.session
from aiobotocore.parsers import AioResponseParserFactory, AioRestXMLParser
from botocore.exceptions import BotoCoreError, ClientError

from mirror.block.errors import BlockNotFoundError
from mirror.block.protocol import ObjectInfo
from mirror.block.s3_common import S3Namespace, is_range_error
from mirror.block.s3_config import (
    S3Settings,
    client_config,
    parse_timestamp,
    session_options,
    use_fast_timestamps,
)
from mirror.block.s3_direct import DirectGets
from mirror.block.s3_listing import (
    FastListingMixin,
    listed_keys,
    parse_listings_once,
    read_key_page,
    use_fast_listing,
)

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


_DIRECT: WeakKeyDictionary[Any, DirectGets] = WeakKeyDictionary()
"""The direct GET path of each client :func:`async_s3_client` opened, while it is open."""


@asynccontextmanager
async def async_s3_client(settings: S3Settings | None = None) -> AsyncIterator[AsyncS3Client]:
    """Open an aioboto3 S3 client configured by ``settings``; close it on exit.

    Its listings hold each object's key, size and ETag only
    (:mod:`mirror.block.s3_listing`'s key lists): what :class:`AsyncS3BlockStore` reads. The
    stores over it send their reads of whole pages and objects by
    :class:`~mirror.block.s3_direct.DirectGets` first.
    """
    settings = settings or S3Settings()
    session = aioboto3.Session(
        **session_options(settings),
        botocore_session=use_fast_listing(
            use_fast_timestamps(aiobotocore.session.get_session()), AsyncFastListingParserFactory()
        ),
    )
    config = client_config(settings)
    async with session.client("s3", endpoint_url=settings.endpoint_url, config=config) as client:
        # the store lists keys, sizes and ETags only (AsyncS3BlockStore.list)
        parse_listings_once(client.meta.events, keys_only=True)
        direct = _DIRECT[client] = DirectGets(client, settings)
        try:
            yield client
        finally:
            await direct.close()


class AsyncS3BlockStore(S3Namespace):
    """Read objects of ``s3://bucket/prefix`` without blocking the event loop.

    Offers the reading half of :class:`~mirror.block.protocol.BlockStore` as coroutines: ``head``,
    ``exists``, ``get`` and ``list`` (an async iterator), and ``list_sizes`` (a page of keys and
    sizes, as the validator reads them). Errors are those of the synchronous store.
    """

    def __init__(
        self, namespace: str, client: AsyncS3Client, settings: S3Settings | None = None
    ) -> None:
        super().__init__(namespace, settings)
        self._client = client
        self._direct = _DIRECT.get(client)

    async def head(self, key: str) -> ObjectInfo:
        """Return size and etag of the object at ``key``.

        Raises:
            BlockNotFoundError: no object at ``key``.
        """
        with self._errors(key, "head"):
            response = await self._client.head_object(**self._object(key))
        return self._info(key, response)

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
        args = self._read_args(key, start, end)
        if args is None:
            return self._empty_read(key, start, (await self.head(key)).size)
        if self._direct is not None:
            ranged = {"Range": args["Range"]} if "Range" in args else None
            found = await self._direct.get("GetObject", self._bucket, args["Key"], headers=ranged)
            if found is not None:
                return found
        try:
            response = await self._client.get_object(**args)
            async with response["Body"] as body:
                data: bytes = await body.read()
        except (ClientError, BotoCoreError) as exc:
            # S3 refuses every range of an empty object, even one that starts at 0
            if is_range_error(exc) and start == 0 and (await self.head(key)).size == 0:
                return b""
            raise self._read_error(exc, key, start) from exc
        return data

    async def list(self, prefix: str = "", start_after: str = "") -> AsyncIterator[ObjectInfo]:
        """Yield objects under ``prefix`` after ``start_after`` in key order, page by page."""
        args = self._list_args(prefix, start_after)
        while True:
            with self._errors(prefix, "list"):
                page = await self._client.list_objects_v2(**args)
            for info in self._listed(page):
                yield info
            if not self._next_page(args, page):
                return

    async def list_sizes(self, prefix: str, start_after: str, limit: int) -> dict[str, int]:
        """Return the sizes of the first ``limit`` objects under ``prefix`` after ``start_after``.

        One ``ListObjectsV2`` request when ``limit`` is at most the page size. The keys (relative
        to the namespace, in key order) are read as columns, without an entry per object.
        """
        args = self._list_args(prefix, start_after)
        args["EncodingType"] = "url"  # asked here, so decoded here: all keys at once
        cut = len(self._base)
        sizes: dict[str, int] = {}
        while len(sizes) < limit:
            args["MaxKeys"] = min(self._settings.page_size, limit - len(sizes))
            page = await self._list_page(args)
            sizes.update(zip(*listed_keys(page, cut), strict=True))
            if not self._next_page(args, page):
                break
        return sizes

    async def _list_page(self, args: dict[str, Any]) -> Any:
        """Return one ``ListObjectsV2`` page of ``args``, sent directly where it can be."""
        if self._direct is not None:
            query = {
                "list-type": "2",
                "prefix": args["Prefix"],
                "max-keys": str(args["MaxKeys"]),
                "encoding-type": args["EncodingType"],
            }
            if "StartAfter" in args:
                query["start-after"] = args["StartAfter"]
            if "ContinuationToken" in args:
                query["continuation-token"] = args["ContinuationToken"]
            body = await self._direct.get("ListObjectsV2", self._bucket, query=query)
            if body is not None:
                model = self._client.meta.service_model.operation_model("ListObjectsV2")
                page = read_key_page(body, model.output_shape, parse_timestamp)
                if page is not None:
                    return page
        with self._errors(args["Prefix"], "list"):
            return await self._client.list_objects_v2(**args)
