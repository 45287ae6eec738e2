"""The read half of an object store as coroutines, and adapters that run or count it.

The validator only reads: ``head``, ``get`` and ``list``. :class:`AsyncObjectReader` is that
half of :class:`~mirror.block.protocol.BlockStore` as coroutines, which
:class:`~mirror.block.s3_async.AsyncS3BlockStore` offers as it is. A reader may also list a page
of keys and sizes in one call (:class:`PageReader`): :func:`list_sizes` uses it where it can.
:class:`ThreadedObjectReader` runs any synchronous store (memory, local, S3) in worker threads,
and :class:`CountingReader` reports each request the way S3 would bill it, so request counts
compare across stores.
"""

from __future__ import annotations

import itertools
from collections.abc import AsyncIterator, Callable, Generator, Iterator
from typing import Protocol, runtime_checkable

import anyio.to_thread

from mirror.block.protocol import BlockStore, ObjectInfo

__all__ = [
    "LIST_PAGE_SIZE",
    "AsyncObjectReader",
    "CountingReader",
    "PageReader",
    "ThreadedObjectReader",
    "aclose_listing",
    "list_sizes",
]

LIST_PAGE_SIZE = 1_000
"""Keys one listing request returns, as S3 ``ListObjectsV2`` does by default."""


@runtime_checkable
class AsyncObjectReader(Protocol):
    """Read objects of one storage namespace without blocking the event loop.

    Keys are relative to the namespace. Every method may raise
    :class:`~mirror.block.errors.BlockUnavailableError` on transient backend failures.
    """

    @property
    def namespace(self) -> str:
        """Return the namespace URI this reader serves."""
        ...

    async def head(self, key: str) -> ObjectInfo:
        """Return the info of the object at ``key``.

        Raises:
            BlockNotFoundError: no object at ``key``.
        """
        ...

    async def get(self, key: str) -> bytes:
        """Return the whole object at ``key``.

        Raises:
            BlockNotFoundError: no object at ``key``.
        """
        ...

    def list(self, prefix: str = "", start_after: str = "") -> AsyncIterator[ObjectInfo]:
        """Yield objects under ``prefix`` whose keys sort after ``start_after``, in key order."""
        ...


@runtime_checkable
class PageReader(Protocol):
    """A reader that lists a page of keys and sizes in one call, without an object per key."""

    async def list_sizes(self, prefix: str, start_after: str, limit: int) -> dict[str, int]:
        """Return the sizes of the first ``limit`` objects under ``prefix`` after ``start_after``.

        Keys in key order, as :meth:`AsyncObjectReader.list` yields them.
        """
        ...


async def list_sizes(
    reader: AsyncObjectReader, prefix: str, start_after: str, limit: int
) -> dict[str, int]:
    """Return the sizes of the first ``limit`` objects of ``reader`` under ``prefix``.

    Uses the reader's own :meth:`PageReader.list_sizes` where it has one, else its listing,
    closed after ``limit`` objects.
    """
    if isinstance(reader, PageReader):
        return await reader.list_sizes(prefix, start_after, limit)
    sizes: dict[str, int] = {}
    if limit < 1:
        return sizes
    items = reader.list(prefix, start_after)
    try:
        async for info in items:
            sizes[info.key] = info.size
            if len(sizes) == limit:
                break
    finally:
        await aclose_listing(items)
    return sizes


def _take(it: Iterator[ObjectInfo], count: int) -> list[ObjectInfo]:
    return list(itertools.islice(it, count))


def _take_sizes(store: BlockStore, prefix: str, start_after: str, limit: int) -> dict[str, int]:
    it = store.list(prefix, start_after)
    try:
        return {info.key: info.size for info in itertools.islice(it, limit)}
    finally:
        if isinstance(it, Generator):
            it.close()


class ThreadedObjectReader:
    """Serve a synchronous :class:`~mirror.block.protocol.BlockStore` through worker threads.

    Each ``head`` and ``get`` is one call in a worker thread; a listing pulls ``page_size`` keys
    per worker-thread call from one iterator of the store, and stops pulling when the consumer
    stops.
    """

    def __init__(self, store: BlockStore, page_size: int = LIST_PAGE_SIZE) -> None:
        if page_size < 1:
            raise ValueError(f"page_size must be positive, got {page_size}")
        self._store = store
        self._page_size = page_size

    @property
    def namespace(self) -> str:
        """Return the namespace URI of the wrapped store."""
        return self._store.namespace

    @property
    def store(self) -> BlockStore:
        """Return the wrapped synchronous store."""
        return self._store

    async def head(self, key: str) -> ObjectInfo:
        """Return the info of the object at ``key`` (raises ``BlockNotFoundError``)."""
        return await anyio.to_thread.run_sync(self._store.head, key)

    async def get(self, key: str) -> bytes:
        """Return the object at ``key`` (raises ``BlockNotFoundError``)."""
        return await anyio.to_thread.run_sync(self._store.get, key)

    async def list(self, prefix: str = "", start_after: str = "") -> AsyncIterator[ObjectInfo]:
        """Yield objects under ``prefix`` after ``start_after``, one page per worker call."""
        it = self._store.list(prefix, start_after)
        try:
            while True:
                page = await anyio.to_thread.run_sync(_take, it, self._page_size)
                for info in page:
                    yield info
                if len(page) < self._page_size:
                    return
        finally:
            if isinstance(it, Generator):
                it.close()

    async def list_sizes(self, prefix: str, start_after: str, limit: int) -> dict[str, int]:
        """Return up to ``limit`` keys and sizes under ``prefix``, in one worker-thread call."""
        return await anyio.to_thread.run_sync(_take_sizes, self._store, prefix, start_after, limit)


class CountingReader:
    """Wrap a reader and call ``on_request(op)`` once per request it makes.

    ``op`` is ``"head"``, ``"get"`` or ``"list"``. A listing counts one ``"list"`` per page of up
    to :data:`LIST_PAGE_SIZE` keys it delivers (at least one), the way S3 ``ListObjectsV2``
    would bill it, whatever the wrapped store does underneath.
    """

    def __init__(
        self,
        inner: AsyncObjectReader,
        on_request: Callable[[str], object],
        page_size: int = LIST_PAGE_SIZE,
    ) -> None:
        if page_size < 1:
            raise ValueError(f"page_size must be positive, got {page_size}")
        self._inner = inner
        self._on_request = on_request
        self._page_size = page_size

    @property
    def namespace(self) -> str:
        """Return the namespace URI of the wrapped reader."""
        return self._inner.namespace

    async def head(self, key: str) -> ObjectInfo:
        """Count one ``head`` and return the wrapped reader's answer."""
        self._on_request("head")
        return await self._inner.head(key)

    async def get(self, key: str) -> bytes:
        """Count one ``get`` and return the wrapped reader's answer."""
        self._on_request("get")
        return await self._inner.get(key)

    async def list(self, prefix: str = "", start_after: str = "") -> AsyncIterator[ObjectInfo]:
        """Yield the wrapped listing, counting a ``list`` at the start of every page."""
        self._on_request("list")
        delivered = 0
        items = self._inner.list(prefix, start_after)
        try:
            async for info in items:
                if delivered and delivered % self._page_size == 0:
                    self._on_request("list")
                delivered += 1
                yield info
        finally:
            await aclose_listing(items)

    async def list_sizes(self, prefix: str, start_after: str, limit: int) -> dict[str, int]:
        """Count the pages of up to ``limit`` keys and sizes as :meth:`list` counts them."""
        self._on_request("list")
        sizes = await list_sizes(self._inner, prefix, start_after, limit)
        for _ in range((len(sizes) - 1) // self._page_size):
            self._on_request("list")
        return sizes


async def aclose_listing(items: AsyncIterator[ObjectInfo]) -> None:
    """Close a listing the consumer stopped early, when it can be closed (async generators)."""
    close = getattr(items, "aclose", None)
    if close is not None:
        await close()
