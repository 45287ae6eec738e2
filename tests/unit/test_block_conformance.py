"""The object-store conformance suite against the embedded drivers, and the namespace resolver."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from mirror.block import (
    BlockResolver,
    BlockStore,
    InvalidNamespaceError,
    LocalBlockStore,
    MemoryBlockStore,
    split_namespace,
)
from tests.conformance.block_suite import (
    BlockDriver,
    BlockStoreConformance,
    ProbingStream,
    keys_of,
    md5,
)

DRIVERS: dict[str, Callable[[Path], BlockDriver]] = {
    "memory": lambda tmp: BlockDriver("memory", MemoryBlockStore("mem://test")),
    "local": lambda tmp: BlockDriver("local", LocalBlockStore(tmp / "store"), nested_keys=False),
}


@pytest.fixture(params=sorted(DRIVERS))
def block_driver(request: pytest.FixtureRequest, tmp_path: Path) -> BlockDriver:
    return DRIVERS[request.param](tmp_path)


class TestBlockStore(BlockStoreConformance):
    pass


# LocalBlockStore specifics


@pytest.fixture
def local(tmp_path: Path) -> LocalBlockStore:
    return LocalBlockStore(tmp_path / "store")


def _files_under(root: Path) -> set[str]:
    return {p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file()}


@pytest.mark.parametrize(
    "key",
    ["", "../x", "a/../../x", "/abs", "a//b", "a/", "a/./b", "./a", "..", ".", "a/..", "x\x00y"],
)
def test_local_rejects_invalid_keys(local: LocalBlockStore, key: str) -> None:
    operations: list[Callable[[], object]] = [
        lambda: local.put(key, b"x"),
        lambda: local.put_if_absent(key, b"x"),
        lambda: local.get(key),
        lambda: local.head(key),
        lambda: local.exists(key),
        lambda: local.delete(key),
    ]
    for operation in operations:
        with pytest.raises(InvalidNamespaceError) as info:
            operation()
        assert repr(key) in str(info.value)
    assert not (local.root.parent / "x").exists()
    assert _files_under(local.root.parent) == set()


def test_local_keeps_objects_as_files(local: LocalBlockStore) -> None:
    local.put("data/p/obj", b"bytes")
    assert (local.root / "data" / "p" / "obj").read_bytes() == b"bytes"
    assert local.namespace == f"local://{local.root}"


def test_local_head_without_stored_etag(local: LocalBlockStore) -> None:
    (local.root / "dropped").parent.mkdir(parents=True)
    (local.root / "dropped").write_bytes(b"written by another tool")
    info = local.head("dropped")
    assert (info.size, info.etag) == (23, md5(b"written by another tool"))
    assert keys_of(local) == ["dropped"]


def test_local_temp_area_is_neither_listed_nor_writable(local: LocalBlockStore) -> None:
    during: list[set[str]] = []
    stream = ProbingStream(b"x" * 100, lambda: during.append(_files_under(local.root)))
    local.put("obj", stream)
    [temp_files] = during
    assert len(temp_files) == 1
    temp_dir = next(iter(temp_files)).split("/")[0]
    assert keys_of(local) == ["obj"]
    with pytest.raises(InvalidNamespaceError) as info:
        local.put(f"{temp_dir}/obj", b"hidden")
    assert repr(f"{temp_dir}/obj") in str(info.value)


def test_local_failed_put_leaves_no_file(local: LocalBlockStore) -> None:
    local.put("kept", b"x")
    stream = ProbingStream(b"payload", lambda: None, fail_after_probe=True)
    with pytest.raises(OSError, match="mid-write"):
        local.put("broken", stream)
    assert _files_under(local.root) == {"kept"}


@pytest.mark.parametrize(
    ("first", "second"), [("a/b", "a/b/c"), ("a/b/c", "a/b"), ("a/b/c", "a"), ("a", "a/b/c")]
)
def test_local_key_and_prefix_collision_is_a_typed_error(
    local: LocalBlockStore, first: str, second: str
) -> None:
    local.put(first, b"first")
    for write in (local.put, local.put_if_absent):
        with pytest.raises(InvalidNamespaceError) as info:
            write(second, b"second")
        assert repr(second) in str(info.value)
    assert keys_of(local) == [first]
    assert local.get(first) == b"first"
    assert _files_under(local.root) == {first}


# BlockResolver


def test_resolver_memory_namespaces(tmp_path: Path) -> None:
    resolver = BlockResolver()
    store = resolver.open("mem://bucket/prefix")
    assert isinstance(store, MemoryBlockStore)
    assert store.namespace == "mem://bucket/prefix"
    assert resolver.open("mem://bucket/prefix") is store
    assert resolver.open("mem://bucket/prefix/") is store
    other = resolver.open("mem://bucket/other")
    assert other is not store
    store.put("k", b"v")
    assert not other.exists("k")
    assert resolver.open("mem://bucket/prefix").get("k") == b"v"


def test_resolver_local_relative_under_root(tmp_path: Path) -> None:
    resolver = BlockResolver(tmp_path)
    store = resolver.open("local://repo1/ns")
    assert isinstance(store, LocalBlockStore)
    assert store.root == tmp_path / "repo1" / "ns"
    assert store.namespace == "local://repo1/ns"
    assert resolver.open("local://repo1/ns/") is store
    store.put("k", b"v")
    assert (tmp_path / "repo1" / "ns" / "k").read_bytes() == b"v"


def test_resolver_local_absolute(tmp_path: Path) -> None:
    elsewhere = tmp_path / "abs" / "ns"
    resolver = BlockResolver(tmp_path / "root")
    store = resolver.open(f"local://{elsewhere}")
    assert isinstance(store, LocalBlockStore)
    assert store.root == elsewhere
    assert BlockResolver().open(f"local://{elsewhere}").namespace == f"local://{elsewhere}"
    store.put("k", b"v")
    assert (elsewhere / "k").read_bytes() == b"v"


@pytest.mark.parametrize("namespace", ["local://../outside", "local://a/../../outside"])
def test_resolver_rejects_escaping_the_root(tmp_path: Path, namespace: str) -> None:
    resolver = BlockResolver(tmp_path / "root")
    with pytest.raises(InvalidNamespaceError) as info:
        resolver.open(namespace)
    assert repr(namespace) in str(info.value)
    assert not (tmp_path / "outside").exists()


def test_resolver_relative_local_needs_a_root() -> None:
    with pytest.raises(InvalidNamespaceError) as info:
        BlockResolver().open("local://relative/ns")
    assert repr("local://relative/ns") in str(info.value)


@pytest.mark.parametrize("namespace", ["gs://bucket/prefix", "s3://bucket", "file:///tmp/x"])
def test_resolver_unknown_scheme(tmp_path: Path, namespace: str) -> None:
    with pytest.raises(InvalidNamespaceError) as info:
        BlockResolver(tmp_path).open(namespace)
    assert repr(namespace) in str(info.value)
    assert "local" in str(info.value) and "mem" in str(info.value)


@pytest.mark.parametrize(
    "namespace",
    [
        "",
        "mem",
        "mem:",
        "mem:/x",
        "mem://",
        "mem:///",
        "://x",
        "local:relative",
        "local://[x",
        "mem://[::1",
        "mem://a\x00b",
        "local:///tmp/a\x00b",
    ],
)
def test_resolver_malformed_namespace(tmp_path: Path, namespace: str) -> None:
    resolver = BlockResolver(tmp_path)
    with pytest.raises(InvalidNamespaceError) as info:
        resolver.open(namespace)
    assert repr(namespace) in str(info.value)
    with pytest.raises(InvalidNamespaceError):
        split_namespace(namespace)


def test_resolver_register_scheme() -> None:
    resolver = BlockResolver()
    opened: list[str] = []

    def factory(namespace: str) -> BlockStore:
        opened.append(namespace)
        return MemoryBlockStore(namespace)

    resolver.register("s3", factory)
    store = resolver.open("s3://bucket/prefix/")
    assert store.namespace == "s3://bucket/prefix"
    assert resolver.open("s3://bucket/prefix") is store
    assert opened == ["s3://bucket/prefix"]


def test_split_namespace() -> None:
    assert split_namespace("s3://bucket/prefix//") == ("s3", "bucket/prefix")
    assert split_namespace("local:///abs/dir") == ("local", "/abs/dir")
    assert split_namespace("mem://x") == ("mem", "x")
