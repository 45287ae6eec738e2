"""Object stores: the protocol, its errors, the embedded drivers and the namespace resolver."""

from mirror.block.errors import (
    BlockNotFoundError,
    BlockObjectExistsError,
    BlockUnavailableError,
    InvalidNamespaceError,
    InvalidRangeError,
)
from mirror.block.local import LocalBlockStore
from mirror.block.memory import MemoryBlockStore
from mirror.block.protocol import BlockStore, NamespaceResolver, ObjectInfo
from mirror.block.resolver import BlockResolver, split_namespace

__all__ = [
    "BlockNotFoundError",
    "BlockObjectExistsError",
    "BlockResolver",
    "BlockStore",
    "BlockUnavailableError",
    "InvalidNamespaceError",
    "InvalidRangeError",
    "LocalBlockStore",
    "MemoryBlockStore",
    "NamespaceResolver",
    "ObjectInfo",
    "split_namespace",
]
