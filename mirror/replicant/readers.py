"""Open the validator's readers of namespaces: ``s3://`` asynchronously, others in threads."""

from __future__ import annotations

from contextlib import AsyncExitStack
from typing import TYPE_CHECKING, Any

from mirror.block import BlockResolver
from mirror.block.protocol import BlockStore
from mirror.block.resolver import split_namespace
from mirror.validator import AsyncObjectReader, ThreadedObjectReader

if TYPE_CHECKING:
    from mirror.block.s3 import S3Settings

__all__ = ["NamespaceReaders"]


class NamespaceReaders:
    """Hand out one reader per namespace, sharing one aioboto3 client for every ``s3://`` one.

    Args:
        resolver: Opens ``local://`` (and ``mem://``) namespaces; also the fallback for ``s3://``
            when aioboto3 is not installed.
        s3: The S3 settings of this region, or ``None`` to read ``s3://`` through ``resolver``.
    """

    def __init__(self, resolver: BlockResolver, s3: S3Settings | None = None) -> None:
        self._resolver = resolver
        self._s3 = s3
        self._stack = AsyncExitStack()
        self._s3_client: Any = None
        self._readers: dict[str, AsyncObjectReader] = {}

    async def open(self, namespace: str) -> AsyncObjectReader:
        """Return the reader of ``namespace``.

        Raises:
            InvalidNamespaceError: the URI is malformed or its scheme is not served.
        """
        namespace = namespace.rstrip("/")
        found = self._readers.get(namespace)
        if found is not None:
            return found
        scheme, _ = split_namespace(namespace)
        reader: AsyncObjectReader
        if scheme == "s3" and self._s3 is not None:
            from mirror.block.s3_async import AsyncS3BlockStore, async_s3_client

            if self._s3_client is None:
                self._s3_client = await self._stack.enter_async_context(async_s3_client(self._s3))
            reader = AsyncS3BlockStore(namespace, self._s3_client, self._s3)
        else:
            reader = ThreadedObjectReader(self._resolver.open(namespace))
        self._readers[namespace] = reader
        return reader

    def store(self, namespace: str) -> BlockStore:
        """Return the synchronous store of ``namespace`` (for jobs that list it in bulk)."""
        return self._resolver.open(namespace.rstrip("/"))

    def open_now(self, namespace: str) -> AsyncObjectReader:
        """Return a reader of ``namespace`` without awaiting (for objects outside a mirror).

        An ``s3://`` namespace gets an asynchronous reader once the shared client is open, a
        threaded one before.
        """
        namespace = namespace.rstrip("/")
        found = self._readers.get(namespace)
        if found is not None:
            return found
        scheme, _ = split_namespace(namespace)
        if scheme == "s3" and self._s3_client is not None:
            from mirror.block.s3_async import AsyncS3BlockStore

            reader: AsyncObjectReader = AsyncS3BlockStore(namespace, self._s3_client, self._s3)
        else:
            reader = ThreadedObjectReader(self._resolver.open(namespace))
        self._readers[namespace] = reader
        return reader

    async def aclose(self) -> None:
        """Close the S3 client, if one was opened."""
        self._readers.clear()
        self._s3_client = None
        await self._stack.aclose()
