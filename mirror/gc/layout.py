"""Where a garbage collection run keeps its files in the storage namespace, and its run IDs.

Everything lives under ``_lakefs/retention/gc/`` of the repository's namespace, as in lakeFS:

- ``commits/run_id=<run>/commits.csv``: the commits a run retains (``prepare_commits``);
- ``uncommitted/<run>/uncommitted/<part>``: staged addresses, Parquet (``prepare_uncommited``);
- ``unified/<run>/``: a run's report (``summary.json``, the marked addresses in ``deleted/``).

Run IDs are reverse-time xids: 20 characters of base32hex (``0-9a-v``) that sort newest first
(seconds until the year 4000, a machine and process part, a counter).
"""

from __future__ import annotations

import os
import threading
import time

__all__ = [
    "ADDRESSES_PREFIX",
    "DATA_PREFIX",
    "GC_PREFIX",
    "commits_key",
    "is_run_id",
    "new_run_id",
    "part_id",
    "uncommitted_prefix",
    "unified_prefix",
]

GC_PREFIX = "_lakefs/retention/gc/"
ADDRESSES_PREFIX = GC_PREFIX + "addresses/"
"""lakeFS's legacy location for expired addresses, reported by ``prepare_commits``."""
DATA_PREFIX = "data/"
"""Where the data objects of a namespace live; garbage collection looks nowhere else."""

_ALPHABET = "0123456789abcdefghijklmnopqrstuv"
_YEAR_4000 = 64_060_588_800
_lock = threading.Lock()
_counter = int.from_bytes(os.urandom(3), "big")
_machine = os.urandom(2)


def _base32hex(data: bytes) -> str:
    value = int.from_bytes(data, "big")
    width = (len(data) * 8 + 4) // 5
    out = []
    for _ in range(width):
        value, digit = divmod(value, 32)
        out.append(_ALPHABET[digit])
    return "".join(reversed(out))


def new_run_id(now: float | None = None) -> str:
    """Return a fresh run ID: a reverse-time xid (later runs sort first)."""
    global _counter
    seconds = int(time.time() if now is None else now)
    with _lock:
        _counter = (_counter + 1) % (1 << 24)
        counter = _counter
    raw = (
        (_YEAR_4000 - seconds).to_bytes(5, "big")
        + _machine
        + (os.getpid() & 0xFFFF).to_bytes(2, "big")
        + counter.to_bytes(3, "big")
    )
    return _base32hex(raw)[:20]


def part_id(now: float | None = None) -> str:
    """Return a fresh name for one file of a run (an xid as well)."""
    return new_run_id(now)


def is_run_id(value: str) -> bool:
    """Return whether ``value`` looks like a run ID (safe to put in a key)."""
    return 1 <= len(value) <= 64 and all(c in _ALPHABET for c in value)


def commits_key(run_id: str) -> str:
    """Return the key of a run's retained-commits CSV, relative to the namespace."""
    return f"{GC_PREFIX}commits/run_id={run_id}/commits.csv"


def uncommitted_prefix(run_id: str) -> str:
    """Return the prefix of a run's uncommitted-address files, relative to the namespace."""
    return f"{GC_PREFIX}uncommitted/{run_id}/uncommitted/"


def unified_prefix(run_id: str) -> str:
    """Return the prefix of a run's report, relative to the namespace."""
    return f"{GC_PREFIX}unified/{run_id}/"
