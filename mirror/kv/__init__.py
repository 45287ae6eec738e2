"""KV stores: the protocol, its errors and the embedded drivers."""

from mirror.kv.errors import KeyNotFoundError, KVPreconditionFailedError, KVUnavailableError
from mirror.kv.memory import MemoryKV
from mirror.kv.protocol import KV, reads_locally
from mirror.kv.sqlite import SqliteKV

__all__ = [
    "KV",
    "KVPreconditionFailedError",
    "KVUnavailableError",
    "KeyNotFoundError",
    "MemoryKV",
    "SqliteKV",
    "reads_locally",
]
