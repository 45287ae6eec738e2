"""The narrow object-store interface: one namespace, relative keys."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import BinaryIO, Protocol, runtime_checkable

__all__ = ["BlockStore", "NamespaceResolver", "ObjectInfo"]


@dataclass(frozen=True, slots=True)
class ObjectInfo:
    """What the store knows of one object."""

    key: str
    size: int
    etag: str


@runtime_checkable
class BlockStore(Protocol):
    """Objects under one storage namespace, addressed by keys relative to it.

    Keys use ``/`` as separator and never start with it. Every method may raise
    :class:`~mirror.block.errors.BlockUnavailableError` on transient backend failures.
    """

    @property
    def namespace(self) -> str:
        """Return the namespace URI this store serves (``local://…``, ``s3://…``, ``mem://…``)."""
        ...

    def put(self, key: str, data: bytes | BinaryIO) -> ObjectInfo:
        """Write ``data`` at ``key``, replacing any object there; return its info."""
        ...

    def put_if_absent(self, key: str, data: bytes) -> bool:
        """Write ``data`` at ``key`` only if nothing is there.

        Returns:
            ``True`` if written, ``False`` if an object already existed (left untouched).
        """
        ...

    def get(self, key: str, start: int = 0, end: int | None = None) -> bytes:
        """Return bytes ``[start, end)`` of the object (``end=None``: to the end).

        Raises:
            BlockNotFoundError: no object at ``key``.
            InvalidRangeError: ``start`` is negative or lies beyond the object's end.
        """
        ...

    def head(self, key: str) -> ObjectInfo:
        """Return the info of the object at ``key``.

        Raises:
            BlockNotFoundError: no object at ``key``.
        """
        ...

    def exists(self, key: str) -> bool:
        """Return whether an object exists at ``key``."""
        ...

    def list(self, prefix: str = "", start_after: str = "") -> Iterator[ObjectInfo]:
        """Yield objects under ``prefix`` whose keys sort after ``start_after``, in key order."""
        ...

    def delete(self, key: str) -> None:
        """Remove the object at ``key``; removing a missing object is not an error."""
        ...


class NamespaceResolver(Protocol):
    """Open the :class:`BlockStore` of a namespace URI."""

    def open(self, namespace: str) -> BlockStore:
        """Return the store serving ``namespace``.

        Raises:
            InvalidNamespaceError: the URI is malformed or its scheme is not served.
        """
        ...
