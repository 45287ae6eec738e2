"""Fresh, never-reused physical addresses for data objects: ``data/<partition>/<unique>``."""

from __future__ import annotations

import os
import threading
import time

__all__ = ["DataPathProvider"]

_ALPHABET = "0123456789abcdefghijklmnopqrstuv"
_YEAR_4000 = 64060588800


def _base32(value: int, width: int) -> str:
    out = []
    for _ in range(width):
        value, digit = divmod(value, 32)
        out.append(_ALPHABET[digit])
    return "".join(reversed(out))


class DataPathProvider:
    """Hand out unique data addresses, grouping those written together under one partition.

    A partition rotates after ``partition_size`` addresses or ``partition_seconds`` seconds.
    Partition names sort newest first, so a listing of ``data/`` meets recent writes early, and
    objects written together share a prefix that one ``LIST`` request can cover.
    """

    def __init__(self, partition_size: int = 50_000, partition_seconds: float = 3600.0) -> None:
        self._size = partition_size
        self._seconds = partition_seconds
        self._lock = threading.Lock()
        self._partition = ""
        self._count = 0
        self._started = 0.0
        self._counter = int.from_bytes(os.urandom(3), "big")
        self._machine = int.from_bytes(os.urandom(5), "big")

    def _unique(self, now: float) -> str:
        self._counter = (self._counter + 1) % (1 << 24)
        return (
            _base32(int(now * 1000), 9)
            + _base32(self._machine, 8)
            + _base32(os.getpid() & 0xFFFFF, 4)
            + _base32(self._counter, 5)
        )

    def new_path(self) -> str:
        """Return a new ``data/<partition>/<unique>`` address."""
        with self._lock:
            now = time.time()
            if (
                not self._partition
                or self._count >= self._size
                or now - self._started >= self._seconds
            ):
                self._partition = _base32(_YEAR_4000 - int(now), 8) + self._unique(now)[9:17]
                self._count = 0
                self._started = now
            self._count += 1
            return f"data/{self._partition}/{self._unique(now)}"

    def new_prefix(self) -> str:
        """Return a fresh ``data/<partition>/<unique>/`` prefix for a batch of files (Spark)."""
        return self.new_path() + "/"
