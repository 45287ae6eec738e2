"""The committed stores of storage namespaces, kept open with their range caches."""

from __future__ import annotations

import threading
from collections import OrderedDict

from mirror.block.protocol import NamespaceResolver
from mirror.core.committed import CommittedStore

__all__ = ["CommittedStoreCache"]


class CommittedStoreCache:
    """One :class:`CommittedStore` per storage namespace; the least recently used go first.

    Each store keeps decoded ranges, so the stores kept are bounded like the ranges they hold.

    Args:
        blocks: Opens the object store of each storage namespace.
        range_cache_size: Decoded ranges kept per namespace.
        namespace_cache_size: Namespaces whose stores are kept (at least one).
    """

    def __init__(
        self, blocks: NamespaceResolver, range_cache_size: int, namespace_cache_size: int
    ) -> None:
        self.blocks = blocks
        self._range_cache_size = range_cache_size
        self._namespace_cache_size = max(1, namespace_cache_size)
        self._stores: OrderedDict[str, CommittedStore] = OrderedDict()
        self._lock = threading.Lock()

    def __len__(self) -> int:
        with self._lock:
            return len(self._stores)

    def get(self, namespace: str) -> CommittedStore:
        """Return the committed store of ``namespace``, opening it when it is not kept."""
        with self._lock:
            store = self._stores.get(namespace)
            if store is None:
                store = CommittedStore(self.blocks.open(namespace), self._range_cache_size)
                self._stores[namespace] = store
                while len(self._stores) > self._namespace_cache_size:
                    self._stores.popitem(last=False)
            else:
                self._stores.move_to_end(namespace)
            return store
