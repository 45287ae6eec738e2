"""Dropping a staging token deletes everything under it, in batches, and nothing else."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from mirror.core import Entry
from mirror.core.staging import StagingStore, StagingToken, Tombstone
from mirror.kv.memory import MemoryKV


class _CountingKV(MemoryKV):
    """A memory KV that counts its scans."""

    def __init__(self) -> None:
        super().__init__()
        self.scans = 0

    def scan(self, prefix: bytes, start: bytes = b"") -> Iterator[tuple[bytes, bytes]]:
        self.scans += 1
        return super().scan(prefix, start)


@pytest.mark.parametrize(("staged", "scans"), [(0, 1), (1, 1), (999, 1), (1000, 2), (2500, 3)])
def test_drop_token_deletes_all_its_keys_in_batches(staged: int, scans: int) -> None:
    kv = _CountingKV()
    store = StagingStore(kv)
    dropped, kept = StagingToken("a" * 32), StagingToken("a" * 31 + "b")
    entry = Entry(address="data/x", size=1, checksum="c", mtime=1)
    store.set_many(
        dropped, ((f"p/{i:05d}", entry if i % 2 else Tombstone()) for i in range(staged))
    )
    store.set_many(kept, ((f"p/{i:05d}", entry) for i in range(3)))
    kv.scans = 0
    store.drop_token(dropped)
    assert kv.scans == scans
    assert store.is_empty(dropped)
    assert [path for path, _ in store.scan(kept)] == ["p/00000", "p/00001", "p/00002"]
