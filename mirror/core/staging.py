"""Per-branch staging areas: uncommitted entries and tombstones under a staging token."""

from __future__ import annotations

import heapq
import itertools
import json
import uuid
from collections.abc import Iterable, Iterator, Sequence
from typing import Final

from mirror.core.ids import StagingToken
from mirror.core.model import Entry
from mirror.kv.errors import KeyNotFoundError
from mirror.kv.protocol import KV

__all__ = ["TOMBSTONE", "StagingStore", "Tombstone", "merge_staged"]


class Tombstone:
    """The marker of a staged deletion."""

    _instance: Tombstone | None = None

    def __new__(cls) -> Tombstone:
        """Return the single tombstone."""
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "TOMBSTONE"


TOMBSTONE: Final = Tombstone()
Staged = Entry | Tombstone

_PREFIX = b"staging/"
# keys deleted per scan when a token is dropped
_DROP_BATCH = 1000


def _encode(value: Staged) -> bytes:
    if isinstance(value, Tombstone):
        return b'{"tombstone":true}'
    return json.dumps(value.to_dict(), sort_keys=True, separators=(",", ":")).encode()


def _decode(data: bytes) -> Staged:
    record = json.loads(data)
    if record.get("tombstone"):
        return TOMBSTONE
    return Entry.from_dict(record)


class StagingStore:
    """Staged values keyed by ``staging/<token>/<path>`` in the KV."""

    def __init__(self, kv: KV) -> None:
        self._kv = kv

    @staticmethod
    def new_token() -> StagingToken:
        """Return a fresh staging token."""
        return StagingToken(uuid.uuid4().hex)

    @staticmethod
    def _key(token: StagingToken, path: str) -> bytes:
        return _PREFIX + token.encode() + b"/" + path.encode()

    def get(self, token: StagingToken, path: str) -> Staged | None:
        """Return the staged value of ``path`` under ``token``, or ``None`` if nothing is staged."""
        try:
            return _decode(self._kv.get(self._key(token, path)))
        except KeyNotFoundError:
            return None

    def set(self, token: StagingToken, path: str, value: Staged) -> None:
        """Stage ``value`` (an entry or :data:`TOMBSTONE`) at ``path``."""
        self._kv.set(self._key(token, path), _encode(value))

    def set_many(self, token: StagingToken, items: Iterable[tuple[str, Staged]]) -> None:
        """Stage many values at once."""
        self._kv.set_many((self._key(token, p), _encode(v)) for p, v in items)

    def drop(self, token: StagingToken, path: str) -> None:
        """Forget whatever is staged at ``path``."""
        self._kv.delete(self._key(token, path))

    def scan(
        self, token: StagingToken, prefix: str = "", start: str = ""
    ) -> Iterator[tuple[str, Staged]]:
        """Yield ``(path, value)`` staged under ``token``, in path order."""
        base = _PREFIX + token.encode() + b"/"
        cut = len(base)
        for key, value in self._kv.scan(base + prefix.encode(), base + start.encode()):
            yield key[cut:].decode(), _decode(value)

    def is_empty(self, token: StagingToken) -> bool:
        """Return whether nothing is staged under ``token``."""
        return next(self.scan(token), None) is None

    def drop_token(self, token: StagingToken) -> None:
        """Delete everything staged under ``token``."""
        base = _PREFIX + token.encode() + b"/"
        while True:
            keys = [k for k, _ in itertools.islice(self._kv.scan(base), _DROP_BATCH)]
            self._kv.delete_many(keys)
            if len(keys) < _DROP_BATCH:
                return

    def iterate(
        self, tokens: Sequence[StagingToken], prefix: str = "", start: str = ""
    ) -> Iterator[tuple[str, Staged]]:
        """Yield the effective staged value of each path across ``tokens`` (newest first wins)."""
        return merge_staged([self.scan(t, prefix, start) for t in tokens])


def merge_staged(
    sources: Sequence[Iterator[tuple[str, Staged]]],
) -> Iterator[tuple[str, Staged]]:
    """Merge sorted streams by path; on equal paths the earliest stream wins."""
    heap: list[tuple[str, int, Staged]] = []
    for i, it in enumerate(sources):
        first = next(it, None)
        if first is not None:
            heap.append((first[0], i, first[1]))
    heapq.heapify(heap)
    last: str | None = None
    while heap:
        path, i, value = heapq.heappop(heap)
        nxt = next(sources[i], None)
        if nxt is not None:
            heapq.heappush(heap, (nxt[0], i, nxt[1]))
        if path != last:
            last = path
            yield path, value
