"""The KV conformance suite against the embedded drivers, plus driver-agreement properties."""

from __future__ import annotations

import functools
import multiprocessing
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mirror.kv import KV, KeyNotFoundError, KVPreconditionFailedError, MemoryKV, SqliteKV
from tests.conformance.kv_suite import (
    KVConformance,
    KVDriver,
    cas_increment_worker,
    read_counter,
)


def _memory_driver(tmp_path: Path) -> KVDriver:
    store = MemoryKV()
    return KVDriver("memory", lambda: store)


def _sqlite_driver(tmp_path: Path) -> KVDriver:
    handles: list[KV] = []

    def open_handle() -> KV:
        handles.append(SqliteKV(tmp_path / "kv.sqlite"))
        return handles[-1]

    return KVDriver("sqlite", open_handle, handles)


DRIVERS = {"memory": _memory_driver, "sqlite": _sqlite_driver}


@pytest.fixture(params=sorted(DRIVERS))
def kv_driver(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[KVDriver]:
    driver = DRIVERS[request.param](tmp_path)
    yield driver
    driver.close()


class TestKV(KVConformance):
    pass


# SqliteKV specifics


def test_sqlite_persists_across_reopen(tmp_path: Path) -> None:
    kv = SqliteKV(tmp_path / "sub" / "kv.sqlite")
    kv.set(b"k", b"v")
    kv.close()
    again = SqliteKV(tmp_path / "sub" / "kv.sqlite")
    try:
        assert again.get(b"k") == b"v"
    finally:
        again.close()


def test_sqlite_close_after_use_from_other_threads(tmp_path: Path) -> None:
    kv = SqliteKV(tmp_path / "kv.sqlite")
    TestKV._race([kv], b"n")
    kv.close()
    reopened = SqliteKV(tmp_path / "kv.sqlite")
    try:
        assert read_counter(reopened, b"n") > 0
    finally:
        reopened.close()


def test_sqlite_cas_is_atomic_across_processes(tmp_path: Path) -> None:
    path = tmp_path / "kv.sqlite"
    SqliteKV(path).close()
    ctx = multiprocessing.get_context("spawn")
    start = ctx.Barrier(2)
    per_process = 100
    procs = [
        ctx.Process(
            target=cas_increment_worker,
            args=(functools.partial(SqliteKV, path), b"counter", per_process, start),
        )
        for _ in range(2)
    ]
    for p in procs:
        p.start()
    for p in procs:
        p.join(timeout=60)
    try:
        assert [p.exitcode for p in procs] == [0, 0]
    finally:
        for p in procs:
            if p.is_alive():
                p.kill()
    kv = SqliteKV(path)
    try:
        assert read_counter(kv, b"counter") == 2 * per_process
    finally:
        kv.close()


# MemoryKV and SqliteKV agree with a dictionary on any sequence of operations

_KEYS = st.lists(st.sampled_from([0x00, 0x01, 0x61, 0x62, 0xFF]), min_size=1, max_size=3).map(bytes)
_PREFIXES = st.lists(st.sampled_from([0x00, 0x61, 0xFF]), max_size=2).map(bytes)
_VALUES = st.sampled_from([b"", b"0", b"1", b"\xff"])
_OPS = st.one_of(
    st.tuples(st.just("get"), _KEYS),
    st.tuples(st.just("set"), _KEYS, _VALUES),
    st.tuples(st.just("set_many"), st.lists(st.tuples(_KEYS, _VALUES), max_size=4)),
    st.tuples(st.just("set_if"), _KEYS, _VALUES, st.none() | _VALUES),
    st.tuples(st.just("delete"), _KEYS),
    st.tuples(st.just("delete_many"), st.lists(_KEYS, max_size=4)),
    st.tuples(st.just("delete_if"), _KEYS, _VALUES),
    st.tuples(st.just("scan"), _PREFIXES, _PREFIXES),
)


def _apply(kv: KV, op: tuple[Any, ...]) -> object:
    name, *args = op
    try:
        if name == "scan":
            return list(kv.scan(*args))
        return getattr(kv, name)(*args)
    except KeyNotFoundError as exc:
        return ("not found", exc.key)
    except KVPreconditionFailedError as exc:
        return ("precondition", exc.key, exc.expected, exc.found)


def _model(data: dict[bytes, bytes], op: tuple[Any, ...]) -> object:
    name, *args = op
    if name == "get":
        return data[args[0]] if args[0] in data else ("not found", args[0])
    if name == "set":
        data[args[0]] = args[1]
    elif name == "set_many":
        data.update(args[0])
    elif name in ("set_if", "delete_if"):
        key, value = args[0], args[1]
        expected = args[2] if name == "set_if" else value
        if data.get(key) != expected:
            return ("precondition", key, expected, data.get(key))
        if name == "set_if":
            data[key] = value
        else:
            del data[key]
    elif name == "delete":
        data.pop(args[0], None)
    elif name == "delete_many":
        for key in args[0]:
            data.pop(key, None)
    else:
        prefix, start = args
        return sorted((k, v) for k, v in data.items() if k.startswith(prefix) and k >= start)
    return None


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(_OPS, max_size=30))
def test_drivers_agree_with_a_dict(ops: list[tuple[Any, ...]]) -> None:
    memory, sqlite = MemoryKV(), SqliteKV(":memory:")
    model: dict[bytes, bytes] = {}
    try:
        for op in ops:
            want = _model(model, op)
            assert _apply(memory, op) == want, op
            assert _apply(sqlite, op) == want, op
        assert list(memory.scan(b"")) == list(sqlite.scan(b"")) == sorted(model.items())
    finally:
        sqlite.close()
