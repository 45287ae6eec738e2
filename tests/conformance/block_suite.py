"""The conformance suite every object-store driver must pass.

A test module plugs drivers in by subclassing :class:`BlockStoreConformance` and providing a
``block_driver`` fixture that returns a :class:`BlockDriver` holding a fresh, empty store,
typically parametrized over drivers.
"""

from __future__ import annotations

import hashlib
import io
import random
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import pytest

from mirror.block import (
    BlockNotFoundError,
    BlockStore,
    InvalidNamespaceError,
    InvalidRangeError,
    ObjectInfo,
)
from mirror.errors import InvalidValueError, NotFoundError

__all__ = ["ORDER_KEYS", "BlockDriver", "BlockStoreConformance", "ProbingStream"]


@dataclass
class BlockDriver:
    """A driver under test and what it can do.

    Attributes:
        name: Shown in test IDs and skip reasons.
        store: A fresh, empty store.
        nested_keys: Whether a key can hold an object while other keys extend it as a prefix
            (``a/b`` and ``a/b/c``): true of S3, false of a directory tree.
    """

    name: str
    store: BlockStore
    nested_keys: bool = True


class ProbingStream(io.RawIOBase):
    """A readable stream that runs ``probe`` once, on the first read, while a put is under way."""

    def __init__(self, data: bytes, probe: Callable[[], None], fail_after_probe: bool = False):
        super().__init__()
        self._data = io.BytesIO(data)
        self._probe: Callable[[], None] | None = probe
        self._fail = fail_after_probe
        self.probed = False

    def readable(self) -> bool:
        return True

    def read(self, size: int | None = -1) -> bytes:
        if self._probe is not None:
            probe, self._probe = self._probe, None
            probe()
            self.probed = True
            if self._fail:
                raise OSError("stream broke mid-write")
        return self._data.read(size)


def md5(data: bytes) -> str:
    return hashlib.md5(data).hexdigest()


def keys_of(store: BlockStore, prefix: str = "", start_after: str = "") -> list[str]:
    return [info.key for info in store.list(prefix, start_after)]


# Keys whose order is easy to get wrong: '-' (0x2d) < '.' (0x2e) < '/' (0x2f) < '0' (0x30), so a
# tree walk that lists a directory's files before its subdirectories, or sorts "a/" after "a-c",
# returns them out of order. None of them is a prefix of another followed by '/', so a directory
# tree can hold them all.
ORDER_KEYS = [
    "a-c",
    "a.x",
    "a/b",
    "a/c-d",
    "a/c.d",
    "a/c/d",
    "a/c/d.e",
    "a/c/dd",
    "a/B",
    "a/z",
    "a/\u00e9",
    "a0",
    "ab",
    "abc/d",
    "b",
    "dir with space/x=1;y.txt",
]


class BlockStoreConformance:
    """Checks of the :class:`~mirror.block.protocol.BlockStore` contract.

    Needs a ``block_driver`` fixture.
    """

    @pytest.fixture
    def store(self, block_driver: BlockDriver) -> BlockStore:
        return block_driver.store

    def test_is_a_block_store(self, store: BlockStore) -> None:
        assert isinstance(store, BlockStore)
        assert "://" in store.namespace

    # put, get, head

    def test_put_get_head(self, store: BlockStore) -> None:
        data = b"hello, lake"
        info = store.put("data/p1/obj", data)
        assert info == ObjectInfo("data/p1/obj", len(data), md5(data))
        assert store.get("data/p1/obj") == data
        assert store.head("data/p1/obj") == info

    def test_put_replaces(self, store: BlockStore) -> None:
        store.put("k", b"first version")
        info = store.put("k", b"second")
        assert info == ObjectInfo("k", 6, md5(b"second"))
        assert store.get("k") == b"second"
        assert store.head("k") == info
        assert keys_of(store) == ["k"]

    def test_put_binary(self, store: BlockStore) -> None:
        data = bytes(range(256)) * 3
        store.put("bin", data)
        assert store.get("bin") == data

    def test_put_stream_larger_than_a_chunk(self, store: BlockStore) -> None:
        data = random.Random(7).randbytes((3 << 19) + 123)
        info = store.put("big", io.BytesIO(data))
        assert info == ObjectInfo("big", len(data), md5(data))
        assert store.head("big") == info
        assert store.get("big") == data
        boundary = 1 << 20
        assert store.get("big", boundary - 5, boundary + 5) == data[boundary - 5 : boundary + 5]

    def test_empty_object(self, store: BlockStore) -> None:
        info = store.put("empty", b"")
        assert info == ObjectInfo("empty", 0, md5(b""))
        assert store.head("empty") == info
        assert store.get("empty") == b""
        assert store.get("empty", 0) == b""
        with pytest.raises(InvalidRangeError):
            store.get("empty", 1)
        assert [(o.key, o.size) for o in store.list()] == [("empty", 0)]

    @pytest.mark.parametrize(
        ("start", "end", "want"),
        [
            (0, None, b"0123456789"),
            (0, 10, b"0123456789"),
            (2, 5, b"234"),
            (5, None, b"56789"),
            (9, None, b"9"),
            (9, 10, b"9"),
            (3, 100, b"3456789"),
            (4, 4, b""),
        ],
    )
    def test_ranged_get(self, store: BlockStore, start: int, end: int | None, want: bytes) -> None:
        store.put("r", b"0123456789")
        assert store.get("r", start, end) == want

    @pytest.mark.parametrize("start", [10, 11, 1 << 40, -1])
    def test_ranged_get_outside_object(self, store: BlockStore, start: int) -> None:
        store.put("r", b"0123456789")
        with pytest.raises(InvalidRangeError) as info:
            store.get("r", start)
        assert isinstance(info.value, InvalidValueError)
        assert str(start) in str(info.value)

    def test_missing_object(self, store: BlockStore) -> None:
        store.put("there", b"x")
        with pytest.raises(BlockNotFoundError) as info:
            store.get("not-there")
        assert isinstance(info.value, NotFoundError)
        assert info.value.key == "not-there"
        assert "'not-there'" in str(info.value)
        with pytest.raises(BlockNotFoundError):
            store.get("not-there", 0, 1)
        with pytest.raises(BlockNotFoundError) as info:
            store.head("not-there")
        assert info.value.key == "not-there"
        assert not store.exists("not-there")

    def test_prefix_of_keys_is_not_an_object(self, store: BlockStore) -> None:
        store.put("p/q/r", b"x")
        for key in ("p", "p/q"):
            assert not store.exists(key)
            with pytest.raises(BlockNotFoundError):
                store.get(key)
            with pytest.raises(BlockNotFoundError):
                store.head(key)
            store.delete(key)
        assert store.get("p/q/r") == b"x"

    def test_path_through_an_object_is_not_an_object(self, store: BlockStore) -> None:
        store.put("file", b"x")
        assert not store.exists("file/inside")
        with pytest.raises(BlockNotFoundError):
            store.get("file/inside")
        with pytest.raises(BlockNotFoundError):
            store.head("file/inside")
        store.delete("file/inside")
        assert store.get("file") == b"x"

    # write-if-absent

    def test_put_if_absent(self, store: BlockStore) -> None:
        assert store.put_if_absent("_lakefs/r1", b"original") is True
        assert store.put_if_absent("_lakefs/r1", b"other bytes") is False
        assert store.get("_lakefs/r1") == b"original"
        assert store.head("_lakefs/r1") == ObjectInfo("_lakefs/r1", 8, md5(b"original"))
        assert keys_of(store) == ["_lakefs/r1"]

    def test_put_if_absent_after_put(self, store: BlockStore) -> None:
        store.put("k", b"put")
        assert store.put_if_absent("k", b"new") is False
        assert store.get("k") == b"put"

    def test_put_if_absent_race_has_one_winner(self, store: BlockStore) -> None:
        threads = 8
        start = threading.Barrier(threads)

        def attempt(i: int) -> bool:
            start.wait(30)
            return store.put_if_absent("contested", b"writer %d" % i)

        with ThreadPoolExecutor(threads) as pool:
            won = list(pool.map(attempt, range(threads), timeout=60))
        assert won.count(True) == 1
        assert store.get("contested") == b"writer %d" % won.index(True)

    # exists, delete

    def test_exists_and_delete(self, store: BlockStore) -> None:
        assert not store.exists("k")
        store.put("k", b"v")
        store.put("k2", b"v")
        assert store.exists("k")
        store.delete("k")
        assert not store.exists("k")
        with pytest.raises(BlockNotFoundError):
            store.get("k")
        assert keys_of(store) == ["k2"]

    def test_delete_missing_is_fine(self, store: BlockStore) -> None:
        store.delete("never/was")
        store.put("k", b"v")
        store.delete("k")
        store.delete("k")
        assert keys_of(store) == []

    # list

    def test_list_empty(self, store: BlockStore) -> None:
        assert keys_of(store) == []
        assert keys_of(store, "a/") == []

    def test_list_global_key_order(self, store: BlockStore) -> None:
        for key in reversed(ORDER_KEYS):
            store.put(key, key.encode())
        listed = list(store.list())
        assert [o.key for o in listed] == sorted(ORDER_KEYS)
        assert all(o.size == len(o.key.encode()) for o in listed)

    @pytest.mark.parametrize(
        "prefix", ["", "a", "a/", "a/c", "a/c/", "a/c/d", "a-", "a.", "ab", "abc/", "zzz", "dir "]
    )
    def test_list_prefix_and_start_after(self, store: BlockStore, prefix: str) -> None:
        for key in ORDER_KEYS:
            store.put(key, b"x")
        afters = ["", "0", "a", "a-c", "a/", "a/c", "a/c-d", "a/c/", "a/c/d", "a0", "ab", "zz"]
        for after in afters + ORDER_KEYS:
            want = sorted(k for k in ORDER_KEYS if k.startswith(prefix) and k > after)
            assert keys_of(store, prefix, after) == want, (prefix, after)

    def test_list_key_that_is_a_prefix_of_keys(self, block_driver: BlockDriver) -> None:
        store = block_driver.store
        if not block_driver.nested_keys:
            # a directory tree cannot hold both 'a/b' and 'a/b/c': the store must refuse clearly
            store.put("a/b/c", b"x")
            with pytest.raises(InvalidNamespaceError, match="a/b"):
                store.put("a/b", b"x")
            assert keys_of(store) == ["a/b/c"]
            return
        keys = ["a/b/c", "ab", "a/b", "a-c", "a", "a/b/c/d"]
        for key in keys:
            store.put(key, b"x")
        assert keys_of(store) == sorted(keys)
        assert keys_of(store, "a/b") == ["a/b", "a/b/c", "a/b/c/d"]
        assert keys_of(store, "a/b", "a/b") == ["a/b/c", "a/b/c/d"]
        assert keys_of(store, "", "a/b") == ["a/b/c", "a/b/c/d", "ab"]

    def test_list_never_shows_a_put_in_progress(self, store: BlockStore) -> None:
        store.put("before", b"x")
        seen: list[list[str]] = []
        stream = ProbingStream(b"payload" * 1000, lambda: seen.append(keys_of(store)))
        store.put("after", stream)
        assert stream.probed
        assert seen == [["before"]]
        assert keys_of(store) == ["after", "before"]

    def test_failed_put_leaves_nothing(self, store: BlockStore) -> None:
        store.put("kept", b"x")
        stream = ProbingStream(b"payload", lambda: None, fail_after_probe=True)
        with pytest.raises(OSError, match="mid-write"):
            store.put("broken", stream)
        assert not store.exists("broken")
        assert keys_of(store) == ["kept"]
