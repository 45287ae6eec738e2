"""Auth records a process keeps between requests, valid while the KV's auth generation stands.

Every change to the auth records ends by writing a fresh random token to ``auth/generation``
(:meth:`AuthCache.renew`). A request reads that token once (:meth:`AuthCache.generation`, one KV
read) and uses only entries loaded under the same token, so a change acknowledged by any process
sharing the KV applies to every request that starts after the acknowledgement, on every process.
A token is never reused, so an entry loaded before a change can never pass for one loaded after.

``ttl`` bounds how long an entry lives even while the token stands: the bound for a change that
does not renew the token (written by a release that predates it, during a rolling upgrade).
"""

from __future__ import annotations

import secrets
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from typing import TypeVar, cast

from mirror.kv.errors import KeyNotFoundError
from mirror.kv.protocol import KV

__all__ = ["AUTH_CACHE_SIZE", "AUTH_CACHE_TTL_SECONDS", "GENERATION_KEY", "AuthCache"]

GENERATION_KEY = b"auth/generation"
AUTH_CACHE_TTL_SECONDS = 20.0
"""How long an entry may serve while the generation stands (lakeFS's ``auth.cache.ttl``)."""
AUTH_CACHE_SIZE = 10_000
"""How many entries a process keeps (least recently used go first)."""

T = TypeVar("T")


class AuthCache:
    """A bounded map of auth records, each tagged with the generation it was loaded under.

    Args:
        kv: Where the generation token lives (beside the auth records).
        ttl: Seconds an entry serves at most; ``0`` turns caching off.
        size: Entries kept at most.
        clock: A monotonic clock, in seconds.
    """

    def __init__(
        self,
        kv: KV,
        *,
        ttl: float = AUTH_CACHE_TTL_SECONDS,
        size: int = AUTH_CACHE_SIZE,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._kv = kv
        self._ttl = ttl
        self._size = size
        self._clock = clock
        self._entries: OrderedDict[tuple[str, str], tuple[bytes, float, object]] = OrderedDict()
        self._lock = threading.Lock()

    def generation(self) -> bytes:
        """Return the current generation token (empty before the first change is announced)."""
        try:
            return self._kv.get(GENERATION_KEY)
        except KeyNotFoundError:
            return b""

    def renew(self) -> None:
        """Announce a change of the auth records: every entry loaded before it stops serving."""
        self._kv.set(GENERATION_KEY, secrets.token_hex(16).encode())

    def fetch(
        self, kind: str, key: str, generation: bytes, load: Callable[[], T | None]
    ) -> T | None:
        """Return the ``kind`` record ``key`` as of ``generation``, loading it when not cached.

        ``load`` runs after ``generation`` was read, so what it returns is at least as new as
        the token; ``None`` (no such record) is not cached.
        """
        if self._ttl <= 0 or self._size <= 0:
            return load()
        slot = (kind, key)
        now = self._clock()
        with self._lock:
            hit = self._entries.get(slot)
            if hit is not None and hit[0] == generation and now - hit[1] < self._ttl:
                self._entries.move_to_end(slot)
                return cast(T, hit[2])
        value = load()
        if value is not None:
            with self._lock:
                self._entries[slot] = (generation, now, value)
                self._entries.move_to_end(slot)
                while len(self._entries) > self._size:
                    self._entries.popitem(last=False)
        return value
