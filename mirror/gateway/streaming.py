"""Bounded-memory streams for multipart uploads: request bodies, byte ranges and part chains.

A block store writes from a blocking file object in a worker thread; :class:`BodyReader` lets it
read an asynchronous request body directly, chunk by chunk, so a part is never held whole in
memory nor spooled twice. :class:`ChainReader` reads stored parts one range at a time to assemble
the final object. Each reader hashes what it hands out (MD5), which is a part's ETag.
"""

from __future__ import annotations

import hashlib
import io
from collections.abc import AsyncIterator, Callable, Iterable

import anyio.from_thread

from mirror.block.protocol import BlockStore

__all__ = ["READ_CHUNK", "BodyReader", "ChainReader", "multipart_etag"]

READ_CHUNK = 8 << 20
"""Bytes fetched from a block store per ranged read (few requests on S3, bounded memory)."""


def multipart_etag(md5s: Iterable[str]) -> str:
    """Return S3's ETag of a multipart object (unquoted): MD5 of the parts' binary MD5s, ``-N``."""
    digests = [bytes.fromhex(m) for m in md5s]
    return f"{hashlib.md5(b''.join(digests), usedforsecurity=False).hexdigest()}-{len(digests)}"


class _HashingReader(io.RawIOBase):
    """A read-only stream that hashes and counts every byte it returns."""

    def __init__(self) -> None:
        super().__init__()
        self._md5 = hashlib.md5(usedforsecurity=False)
        self.size = 0
        self._pending = memoryview(b"")

    def readable(self) -> bool:
        """Return ``True``: this stream reads."""
        return True

    def _fill(self) -> bytes:
        """Return the next piece of data, ``b""`` at the end."""
        raise NotImplementedError

    def readinto(self, buffer: memoryview | bytearray) -> int:  # type: ignore[override]
        """Fill ``buffer`` with the next bytes; return how many (0 at the end)."""
        while not self._pending:
            data = self._fill()
            if not data:
                return 0
            self._pending = memoryview(data)
        n = min(len(buffer), len(self._pending))
        piece = self._pending[:n]
        buffer[:n] = piece
        self._md5.update(piece)
        self.size += n
        self._pending = self._pending[n:]
        return n

    @property
    def md5(self) -> str:
        """Return the hexadecimal MD5 of the bytes read so far."""
        return self._md5.hexdigest()


class BodyReader(_HashingReader):
    """A blocking stream over an asynchronous body, for a worker thread started by anyio.

    Args:
        body: The request body; its verification errors (``S3Error``) surface from ``read``.
        limit: The most bytes accepted; more raises ``too_large()``.
        too_large: Builds the error raised when the body exceeds ``limit``.
    """

    def __init__(
        self, body: AsyncIterator[bytes], *, limit: int, too_large: Callable[[], Exception]
    ) -> None:
        super().__init__()
        self._body = body
        self._limit = limit
        self._too_large = too_large
        self._seen = 0

    async def _next(self) -> bytes:
        # an empty chunk is not the end of the body: only the iterator's end is
        async for chunk in self._body:
            if chunk:
                return chunk
        return b""

    def _fill(self) -> bytes:
        data = anyio.from_thread.run(self._next)
        self._seen += len(data)
        if self._seen > self._limit:
            raise self._too_large()
        return data


class ChainReader(_HashingReader):
    """A blocking stream over byte ranges of stored objects, read in order by ranged reads.

    Args:
        pieces: ``(store, key, start, end)`` for each range, ``end`` exclusive.
        chunk: Bytes fetched per read.
    """

    def __init__(
        self, pieces: Iterable[tuple[BlockStore, str, int, int]], *, chunk: int = READ_CHUNK
    ) -> None:
        super().__init__()
        self._pieces = iter(pieces)
        self._chunk = chunk
        self._current: tuple[BlockStore, str, int, int] | None = None

    def _fill(self) -> bytes:
        while True:
            if self._current is None:
                self._current = next(self._pieces, None)
                if self._current is None:
                    return b""
            store, key, pos, end = self._current
            if pos >= end:
                self._current = None
                continue
            data = store.get(key, pos, min(end, pos + self._chunk))
            if not data:
                raise EOFError(f"stored object {key!r} ended at {pos}, before {end}")
            self._current = (store, key, pos + len(data), end)
            return data
