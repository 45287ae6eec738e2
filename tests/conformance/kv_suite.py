"""The conformance suite every KV driver must pass.

A test module plugs drivers in by subclassing :class:`KVConformance` and providing a
``kv_driver`` fixture that returns a :class:`KVDriver`, typically parametrized over drivers::

    @pytest.fixture(params=["memory", "sqlite"])
    def kv_driver(request, tmp_path) -> Iterator[KVDriver]: ...

    class TestKV(KVConformance):
        pass

``KVDriver.open`` returns a new handle onto the one store of the current test (for SQLite: a new
``SqliteKV`` on the same file, as a second process would open it); the fixture closes them all.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import pytest

from mirror.errors import NotFoundError, PreconditionFailedError
from mirror.kv import KV, KeyNotFoundError, KVPreconditionFailedError

__all__ = [
    "KVConformance",
    "KVDriver",
    "cas_increment",
    "cas_increment_worker",
    "read_counter",
]

THREADS = 8
INCREMENTS_PER_THREAD = 40
# more than one page of every driver (MemoryKV: 256, SqliteKV: 500, DynamoDB: 1 MB of items)
MANY = 1300


@dataclass
class KVDriver:
    """A KV driver under test: how to open handles onto one shared, initially empty store."""

    name: str
    open: Callable[[], KV]
    handles: list[KV] = field(default_factory=list)

    def close(self) -> None:
        """Close every handle opened through this driver."""
        for kv in self.handles:
            kv.close()


def read_counter(kv: KV, key: bytes) -> int:
    """Return the integer stored at ``key`` (0 when absent)."""
    try:
        return int(kv.get(key))
    except KeyNotFoundError:
        return 0


def cas_increment(kv: KV, key: bytes) -> int:
    """Add one to the counter at ``key`` by compare-and-swap; return how many tries lost."""
    lost = 0
    try:
        current: bytes | None = kv.get(key)
    except KeyNotFoundError:
        current = None
    while True:
        value = 1 if current is None else int(current) + 1
        try:
            kv.set_if(key, str(value).encode(), current)
        except KVPreconditionFailedError as exc:
            # the error carries the value that won, so the next try needs no read
            lost += 1
            current = exc.found
            continue
        return lost


def cas_increment_worker(open_kv: Callable[[], KV], key: bytes, count: int, start: Any) -> None:
    """Increment ``key`` ``count`` times from a separate process, after ``start`` releases."""
    kv = open_kv()
    try:
        start.wait(60)
        for _ in range(count):
            cas_increment(kv, key)
    finally:
        kv.close()


def _scan(kv: KV, prefix: bytes, start: bytes = b"") -> list[bytes]:
    return [k for k, _ in kv.scan(prefix, start)]


# Keys whose bytewise order differs from naive expectations: NUL and 0xff bytes, keys that are
# byte-prefixes of other keys, and bytes >= 0x80 (which a signed or text comparison misorders).
ORDER_KEYS = [
    b"a",
    b"a\x00",
    b"a\x00\x00",
    b"a\x00b",
    b"a\x01",
    b"a/",
    b"a/b",
    b"a\x7f",
    b"a\x80",
    b"a\xff",
    b"a\xff\x00",
    b"a\xff\xff",
    b"ab",
    b"abc",
    b"b",
    b"\x00",
    b"\x00a",
    b"\xff",
    b"\xff\xff",
    b"\xff\xffz",
]


class KVConformance:
    """Checks of the :class:`~mirror.kv.protocol.KV` contract; needs a ``kv_driver`` fixture."""

    @pytest.fixture
    def kv(self, kv_driver: KVDriver) -> KV:
        return kv_driver.open()

    # get / set

    def test_is_a_kv(self, kv: KV) -> None:
        assert isinstance(kv, KV)

    def test_get_missing_raises_key_not_found(self, kv: KV) -> None:
        with pytest.raises(KeyNotFoundError) as info:
            kv.get(b"no/such\x00key")
        assert isinstance(info.value, NotFoundError)
        assert info.value.key == b"no/such\x00key"
        assert repr(b"no/such\x00key") in str(info.value)

    def test_set_then_get(self, kv: KV) -> None:
        kv.set(b"k", b"v1")
        assert kv.get(b"k") == b"v1"
        kv.set(b"k", b"v2")
        assert kv.get(b"k") == b"v2"

    def test_values_are_arbitrary_bytes(self, kv: KV) -> None:
        every_byte = bytes(range(256))
        kv.set(b"all", every_byte)
        kv.set(b"empty", b"")
        assert kv.get(b"all") == every_byte
        assert kv.get(b"empty") == b""

    def test_set_many(self, kv: KV) -> None:
        kv.set(b"m/0", b"old")
        kv.set_many((f"m/{i}".encode(), f"v{i}".encode()) for i in range(50))
        assert kv.get(b"m/0") == b"v0"
        assert kv.get(b"m/49") == b"v49"
        assert len(_scan(kv, b"m/")) == 50

    def test_set_many_empty(self, kv: KV) -> None:
        kv.set_many([])
        assert _scan(kv, b"") == []

    # compare-and-swap

    def test_set_if_absent_creates(self, kv: KV) -> None:
        kv.set_if(b"k", b"v", None)
        assert kv.get(b"k") == b"v"

    def test_set_if_absent_fails_when_present(self, kv: KV) -> None:
        kv.set(b"k", b"there")
        with pytest.raises(KVPreconditionFailedError) as info:
            kv.set_if(b"k", b"new", None)
        assert isinstance(info.value, PreconditionFailedError)
        assert (info.value.key, info.value.expected, info.value.found) == (b"k", None, b"there")
        assert kv.get(b"k") == b"there"

    def test_set_if_absent_fails_on_empty_value(self, kv: KV) -> None:
        kv.set(b"k", b"")
        with pytest.raises(KVPreconditionFailedError) as info:
            kv.set_if(b"k", b"new", None)
        assert info.value.found == b""
        assert kv.get(b"k") == b""

    def test_set_if_swaps_on_match(self, kv: KV) -> None:
        kv.set(b"k", b"v1")
        kv.set_if(b"k", b"v2", b"v1")
        assert kv.get(b"k") == b"v2"

    def test_set_if_stale_value_carries_expected_and_found(self, kv: KV) -> None:
        kv.set(b"k", b"v1")
        kv.set_if(b"k", b"v2", b"v1")
        with pytest.raises(KVPreconditionFailedError) as info:
            kv.set_if(b"k", b"v3", b"v1")
        assert (info.value.key, info.value.expected, info.value.found) == (b"k", b"v1", b"v2")
        assert repr(b"k") in str(info.value)
        assert kv.get(b"k") == b"v2"

    def test_set_if_expected_value_but_absent(self, kv: KV) -> None:
        with pytest.raises(KVPreconditionFailedError) as info:
            kv.set_if(b"k", b"v", b"v0")
        assert (info.value.expected, info.value.found) == (b"v0", None)
        with pytest.raises(KeyNotFoundError):
            kv.get(b"k")

    def test_set_if_empty_expected_is_not_absent(self, kv: KV) -> None:
        with pytest.raises(KVPreconditionFailedError) as info:
            kv.set_if(b"k", b"v", b"")
        assert (info.value.expected, info.value.found) == (b"", None)
        kv.set(b"k", b"")
        kv.set_if(b"k", b"v", b"")
        assert kv.get(b"k") == b"v"

    # delete

    def test_delete_missing_is_fine(self, kv: KV) -> None:
        kv.delete(b"nothing")
        with pytest.raises(KeyNotFoundError):
            kv.get(b"nothing")

    def test_delete_removes(self, kv: KV) -> None:
        kv.set(b"k", b"v")
        kv.set(b"k2", b"v")
        kv.delete(b"k")
        with pytest.raises(KeyNotFoundError):
            kv.get(b"k")
        assert kv.get(b"k2") == b"v"
        assert _scan(kv, b"") == [b"k2"]

    def test_delete_many(self, kv: KV) -> None:
        kv.set_many((f"d/{i:02d}".encode(), b"v") for i in range(60))
        kv.set(b"e", b"kept")
        # more than a batch of every driver, absent keys and a key named twice
        doomed = [f"d/{i:02d}".encode() for i in range(0, 60, 2)] + [b"d/absent", b"d/00"]
        kv.delete_many(iter(doomed))
        assert _scan(kv, b"") == [f"d/{i:02d}".encode() for i in range(1, 60, 2)] + [b"e"]
        kv.delete_many([])
        kv.delete_many(f"d/{i:02d}".encode() for i in range(60))
        assert _scan(kv, b"") == [b"e"]

    def test_delete_if_missing_fails(self, kv: KV) -> None:
        with pytest.raises(KVPreconditionFailedError) as info:
            kv.delete_if(b"k", b"v")
        assert (info.value.key, info.value.expected, info.value.found) == (b"k", b"v", None)

    def test_delete_if_mismatch_fails_and_keeps(self, kv: KV) -> None:
        kv.set(b"k", b"actual")
        with pytest.raises(KVPreconditionFailedError) as info:
            kv.delete_if(b"k", b"stale")
        assert (info.value.expected, info.value.found) == (b"stale", b"actual")
        assert kv.get(b"k") == b"actual"

    def test_delete_if_match_removes(self, kv: KV) -> None:
        kv.set(b"k", b"v")
        kv.delete_if(b"k", b"v")
        with pytest.raises(KeyNotFoundError):
            kv.get(b"k")
        kv.set_if(b"k", b"again", None)
        assert kv.get(b"k") == b"again"

    # scan

    def test_scan_empty_store(self, kv: KV) -> None:
        assert _scan(kv, b"") == []
        assert _scan(kv, b"x") == []

    def test_scan_bytewise_order(self, kv: KV) -> None:
        kv.set_many((k, k) for k in reversed(ORDER_KEYS))
        assert list(kv.scan(b"")) == [(k, k) for k in sorted(ORDER_KEYS)]

    @pytest.mark.parametrize(
        "prefix",
        [b"a", b"a\x00", b"a\xff", b"a\xff\xff", b"ab", b"\x00", b"\xff", b"\xff\xff", b"z"],
    )
    def test_scan_prefix(self, kv: KV, prefix: bytes) -> None:
        kv.set_many((k, b"v") for k in ORDER_KEYS)
        assert _scan(kv, prefix) == sorted(k for k in ORDER_KEYS if k.startswith(prefix))

    @pytest.mark.parametrize(
        ("prefix", "start"),
        [
            (b"", b"a\x00b"),
            (b"", b"a\x00c"),
            (b"a", b""),
            (b"a", b"0"),
            (b"a", b"a"),
            (b"a", b"a\x00"),
            (b"a", b"a\xff"),
            (b"a", b"a\xff\x01"),
            (b"a", b"b"),
            (b"a\xff", b"a\xff\x00"),
            (b"\xff", b"\xff\x00"),
            (b"b", b"a"),
        ],
    )
    def test_scan_from_start(self, kv: KV, prefix: bytes, start: bytes) -> None:
        kv.set_many((k, b"v") for k in ORDER_KEYS)
        want = sorted(k for k in ORDER_KEYS if k.startswith(prefix) and k >= start)
        assert _scan(kv, prefix, start) == want

    def test_scan_many_pages(self, kv: KV) -> None:
        keys = [b"p/%05d" % i for i in range(MANY)]
        kv.set_many((k, k[::-1]) for k in keys)
        kv.set_many([(b"p", b"x"), (b"p.", b"x"), (b"p0", b"x"), (b"o/1", b"x"), (b"q", b"x")])
        pairs = list(kv.scan(b"p/"))
        assert [k for k, _ in pairs] == keys
        assert all(v == k[::-1] for k, v in pairs)
        assert _scan(kv, b"p/", b"p/00700") == keys[700:]
        assert _scan(kv, b"") == sorted([*keys, b"p", b"p.", b"p0", b"o/1", b"q"])

    def test_scan_continues_across_unrelated_writes(self, kv: KV) -> None:
        keys = [b"s/%04d" % i for i in range(MANY)]
        kv.set_many((k, b"v") for k in keys)
        scan = kv.scan(b"s/")
        first = [next(scan)[0] for _ in range(10)]
        assert first == keys[:10]
        kv.set(b"t", b"outside the prefix")
        assert [k for k, _ in scan] == keys[10:]

    # concurrency

    # increments per thread in the compare-and-swap races; drivers over slow emulators lower it
    race_increments = INCREMENTS_PER_THREAD

    def test_concurrent_set_if_loses_no_update(self, kv: KV) -> None:
        self._race([kv], b"counter", self.race_increments)
        assert read_counter(kv, b"counter") == THREADS * self.race_increments

    def test_concurrent_set_if_across_handles(self, kv_driver: KVDriver) -> None:
        handles = [kv_driver.open(), kv_driver.open()]
        self._race(handles, b"shared", self.race_increments)
        for kv in handles:
            assert read_counter(kv, b"shared") == THREADS * self.race_increments

    @staticmethod
    def _race(handles: list[KV], key: bytes, increments: int = INCREMENTS_PER_THREAD) -> None:
        start = threading.Barrier(THREADS)

        def work(i: int) -> int:
            kv = handles[i % len(handles)]
            start.wait(30)
            return sum(cas_increment(kv, key) for _ in range(increments))

        with ThreadPoolExecutor(THREADS) as pool:
            futures = [pool.submit(work, i) for i in range(THREADS)]
            for future in futures:
                future.result(timeout=60)
