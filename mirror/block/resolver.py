"""Map storage-namespace URIs to object stores."""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path
from urllib.parse import urlsplit

from mirror.block.errors import InvalidNamespaceError
from mirror.block.local import LocalBlockStore
from mirror.block.memory import MemoryBlockStore
from mirror.block.protocol import BlockStore

__all__ = ["LOCAL_SCHEME", "BlockResolver", "is_local_namespace", "split_namespace"]

StoreFactory = Callable[[str], BlockStore]

LOCAL_SCHEME = "local://"
"""The prefix of a namespace (or full address) on this machine's disk."""


def is_local_namespace(namespace: str) -> bool:
    """Return whether ``namespace`` (or a full address) is a directory of this machine."""
    return namespace.startswith(LOCAL_SCHEME)


def split_namespace(namespace: str) -> tuple[str, str]:
    """Split a namespace URI into ``(scheme, rest)``, normalising trailing slashes.

    Raises:
        InvalidNamespaceError: the URI has no scheme or nothing after it.
    """
    try:
        parts = urlsplit(namespace)
    except (TypeError, ValueError) as exc:
        raise InvalidNamespaceError(f"storage namespace {namespace!r} is malformed: {exc}") from exc
    if "\x00" in namespace:
        raise InvalidNamespaceError(f"storage namespace {namespace!r} contains NUL")
    if not parts.scheme or "://" not in namespace:
        raise InvalidNamespaceError(f"storage namespace {namespace!r} is not a URI (scheme://...)")
    rest = namespace.split("://", 1)[1].rstrip("/")
    if not rest:
        raise InvalidNamespaceError(f"storage namespace {namespace!r} names no location")
    return parts.scheme, rest


class BlockResolver:
    """Open stores by namespace URI, caching one store per namespace.

    Serves ``mem://name`` (process-wide memory stores) and ``local://path`` (relative paths are
    taken under ``local_root``). Other schemes, such as ``s3``, are added with :meth:`register`.
    """

    def __init__(self, local_root: str | Path | None = None) -> None:
        self._local_root = Path(local_root).resolve() if local_root is not None else None
        self._factories: dict[str, StoreFactory] = {
            "mem": self._open_memory,
            "local": self._open_local,
        }
        self._stores: dict[str, BlockStore] = {}
        self._lock = threading.Lock()

    def register(self, scheme: str, factory: StoreFactory) -> None:
        """Serve namespaces of ``scheme`` with stores made by ``factory(namespace)``."""
        self._factories[scheme] = factory

    def open(self, namespace: str) -> BlockStore:
        """Return the store of ``namespace``."""
        scheme, rest = split_namespace(namespace)
        key = f"{scheme}://{rest}"
        with self._lock:
            store = self._stores.get(key)
            if store is None:
                factory = self._factories.get(scheme)
                if factory is None:
                    raise InvalidNamespaceError(
                        f"storage namespace {namespace!r}: unsupported scheme {scheme!r} "
                        f"(supported: {', '.join(sorted(self._factories))})"
                    )
                store = factory(key)
                self._stores[key] = store
            return store

    def _open_memory(self, namespace: str) -> BlockStore:
        return MemoryBlockStore(namespace)

    def _open_local(self, namespace: str) -> BlockStore:
        rest = namespace.split("://", 1)[1]
        path = Path(rest)
        if not path.is_absolute():
            if self._local_root is None:
                raise InvalidNamespaceError(
                    f"storage namespace {namespace!r} is relative and no local root is set"
                )
            path = self._local_root / path
            if not path.resolve().is_relative_to(self._local_root):
                raise InvalidNamespaceError(f"storage namespace {namespace!r} escapes the root")
        return LocalBlockStore(path, namespace)
