"""Two server processes over one KV, as each sees it: two catalogs and two auth stores.

Each test interleaves one store's steps with another store's whole operation at the exact point
where a second process could act, through :class:`InterleavedKV`, and checks that no in-process
state and no read-then-write leaves a stale or wrong answer behind.
"""

from __future__ import annotations

import io
from collections.abc import Callable, Iterable, Iterator
from typing import TypeVar

import pytest

from mirror.auth import (
    Action,
    AuthenticationError,
    AuthStore,
    Effect,
    NewCredential,
    Permission,
    Statement,
    is_allowed,
)
from mirror.auth.cache import AuthCache
from mirror.auth.permissions import object_arn
from mirror.auth.store import SignedIn
from mirror.block.resolver import BlockResolver
from mirror.cli.server import bootstrap_auth
from mirror.config import AuthSettings
from mirror.core import (
    Catalog,
    CommitNotFoundError,
    ObjectNotFoundError,
    RepositoryNotFoundError,
    TagNotFoundError,
)
from mirror.kv.memory import MemoryKV
from mirror.kv.protocol import KV

Hook = Callable[[], object]
T = TypeVar("T")


class InterleavedKV:
    """A KV that, once armed, runs a hook around the first call matching a condition.

    The hook stands for another process acting between two steps of this one: before the
    call (the call sees what the other process did) or after it (the call's answer predates it).
    """

    def __init__(self, inner: KV) -> None:
        self.inner = inner
        self._when: Callable[[str, bytes], bool] = lambda op, key: False
        self._hook: Hook | None = None
        self._after = False

    def arm(self, when: Callable[[str, bytes], bool], hook: Hook, *, after: bool = False) -> None:
        self._when, self._hook, self._after = when, hook, after

    @property
    def fired(self) -> bool:
        return self._hook is None

    def _around(self, op: str, key: bytes, call: Callable[[], T]) -> T:
        if self._hook is None or not self._when(op, key):
            return call()
        hook, self._hook = self._hook, None
        if not self._after:
            hook()
            return call()
        try:
            return call()
        finally:
            hook()

    def get(self, key: bytes) -> bytes:
        return self._around("get", key, lambda: self.inner.get(key))

    def set(self, key: bytes, value: bytes) -> None:
        self._around("set", key, lambda: self.inner.set(key, value))

    def set_many(self, items: Iterable[tuple[bytes, bytes]]) -> None:
        self.inner.set_many(items)

    def set_if(self, key: bytes, value: bytes, expected: bytes | None) -> None:
        self._around("set_if", key, lambda: self.inner.set_if(key, value, expected))

    def delete(self, key: bytes) -> None:
        self._around("delete", key, lambda: self.inner.delete(key))

    def delete_many(self, keys: Iterable[bytes]) -> None:
        batch = list(keys)
        self._around(
            "delete_many", batch[0] if batch else b"", lambda: self.inner.delete_many(batch)
        )

    def delete_if(self, key: bytes, expected: bytes) -> None:
        self._around("delete_if", key, lambda: self.inner.delete_if(key, expected))

    def scan(self, prefix: bytes, start: bytes = b"") -> Iterator[tuple[bytes, bytes]]:
        return self._around("scan", prefix, lambda: self.inner.scan(prefix, start))

    def close(self) -> None:
        self.inner.close()


def staging_read(op: str, key: bytes) -> bool:
    return op in ("get", "scan") and key.startswith(b"staging/")


@pytest.fixture
def kv() -> MemoryKV:
    return MemoryKV()


@pytest.fixture
def blocks() -> BlockResolver:
    return BlockResolver()


@pytest.fixture
def other(kv: MemoryKV, blocks: BlockResolver) -> Catalog:
    """The catalog of the other process."""
    catalog = Catalog(kv, blocks)
    catalog.create_repository("repo", "mem://repo")
    return catalog


@pytest.fixture
def racing(kv: MemoryKV) -> InterleavedKV:
    """This process's view of the KV, where the other process can be made to act."""
    return InterleavedKV(kv)


@pytest.fixture
def mine(racing: InterleavedKV, blocks: BlockResolver) -> Catalog:
    """The catalog of this process."""
    return Catalog(racing, blocks)


# reads racing a commit of another process


def test_a_read_racing_a_commit_still_sees_a_staged_object(
    racing: InterleavedKV, mine: Catalog, other: Catalog
) -> None:
    other.upload_object("repo", "main", "a.txt", b"staged")
    # this process has read the branch; the other one commits and drops the staging token
    # before this one reads it
    racing.arm(staging_read, lambda: other.commit("repo", "main", "commit a"))
    assert mine.read_object("repo", "main", "a.txt") == b"staged"
    assert racing.fired


def test_a_read_racing_a_commit_never_answers_an_older_value(
    racing: InterleavedKV, mine: Catalog, other: Catalog
) -> None:
    other.upload_object("repo", "main", "a.txt", b"older")
    other.commit("repo", "main", "old")
    other.upload_object("repo", "main", "a.txt", b"new")
    racing.arm(staging_read, lambda: other.commit("repo", "main", "new"))
    assert mine.stat_object("repo", "main", "a.txt").entry.size == 3
    assert racing.fired
    assert mine.read_object("repo", "main", "a.txt") == b"new"


def test_a_listing_racing_a_commit_lists_every_staged_object(
    racing: InterleavedKV, mine: Catalog, other: Catalog
) -> None:
    for i in range(5):
        other.upload_object("repo", "main", f"d/{i}.txt", b"x")
    racing.arm(staging_read, lambda: other.commit("repo", "main", "five"))
    listed = mine.list_objects("repo", "main", "d/")
    assert racing.fired
    assert [o.path for o in listed.objects] == [f"d/{i}.txt" for i in range(5)]

    other.upload_object("repo", "main", "d/x/y.txt", b"y")
    other.upload_object("repo", "main", "d/z/w.txt", b"w")
    racing.arm(staging_read, lambda: other.commit("repo", "main", "nested"))
    listed = mine.list_objects("repo", "main", "d/", delimiter="/")
    assert racing.fired
    assert listed.common_prefixes == ["d/x/", "d/z/"]
    assert len(listed.objects) == 5


def test_a_delete_racing_a_commit_finds_the_staged_object(
    racing: InterleavedKV, mine: Catalog, other: Catalog
) -> None:
    other.upload_object("repo", "main", "a.txt", b"staged")
    racing.arm(staging_read, lambda: other.commit("repo", "main", "commit a"))
    mine.delete_object("repo", "main", "a.txt")
    assert racing.fired
    with pytest.raises(ObjectNotFoundError):
        other.stat_object("repo", "main", "a.txt")


# deletions racing re-creations


def test_deleting_a_repository_never_deletes_its_successor(
    racing: InterleavedKV, mine: Catalog, other: Catalog
) -> None:
    def recreate() -> None:
        other.delete_repository("repo")
        other.create_repository("repo", "mem://successor")

    # this process has read the repository; the other one deletes and re-creates it
    racing.arm(lambda op, key: key == b"repos/repo" and "delete" in op, recreate)
    with pytest.raises(RepositoryNotFoundError):
        mine.delete_repository("repo")
    assert racing.fired
    assert other.get_repository("repo").storage_namespace == "mem://successor"
    assert [c.message for c in other.log("repo", "main")] == ["Repository created"]


def test_deleting_a_tag_never_deletes_its_successor(
    racing: InterleavedKV, mine: Catalog, other: Catalog
) -> None:
    first = other.get_branch("repo", "main").commit_id
    other.create_tag("repo", "v1", "main")
    other.upload_object("repo", "main", "a.txt", b"a")
    second = other.commit("repo", "main", "second").commit.id

    def recreate() -> None:
        other.delete_tag("repo", "v1")
        other.create_tag("repo", "v1", second)

    racing.arm(lambda op, key: key.endswith(b"/tags/v1") and "delete" in op, recreate)
    with pytest.raises(TagNotFoundError):
        mine.delete_tag("repo", "v1")
    assert racing.fired
    assert other.get_tag("repo", "v1") == second != first


# what one process caches, after another deleted and re-created a repository


def test_cached_commits_and_ranges_never_outlive_their_repository(
    mine: Catalog, other: Catalog
) -> None:
    for i in range(20):
        other.upload_object("repo", "main", f"f/{i:02d}", b"old %d" % i)
    old = other.commit("repo", "main", "old").commit
    # this process reads (and caches) the old repository's commit and ranges
    assert mine.get_commit("repo", old.id) == old
    assert mine.read_object("repo", "main", "f/03") == b"old 3"
    other.delete_repository("repo")
    with pytest.raises(RepositoryNotFoundError):
        mine.read_object("repo", old.id, "f/03")
    # the same name and the same namespace, other bytes under the same paths
    other.create_repository("repo", "mem://repo")
    with pytest.raises(CommitNotFoundError):
        mine.get_commit("repo", old.id)
    with pytest.raises(ObjectNotFoundError):
        mine.read_object("repo", "main", "f/03")
    for i in range(20):
        other.upload_object("repo", "main", f"f/{i:02d}", b"new %d" % i)
    other.commit("repo", "main", "new")
    assert mine.read_object("repo", "main", "f/03") == b"new 3"
    assert [o.path for o in mine.iter_objects("repo", "main")] == [f"f/{i:02d}" for i in range(20)]


def test_the_namespace_stores_a_catalog_keeps_are_bounded(blocks: BlockResolver) -> None:
    catalog = Catalog(MemoryKV(), blocks, namespace_cache_size=3)
    for i in range(10):
        catalog.create_repository(f"repo{i}", f"mem://ns{i}")
        catalog.upload_object(f"repo{i}", "main", "a", b"%d" % i)
        catalog.commit(f"repo{i}", "main", "c")
    for i in range(10):
        assert catalog.read_object(f"repo{i}", "main", "a") == b"%d" % i
    assert len(catalog._committed) == 3


# auth


def test_replicas_bootstrapping_the_same_administrator_at_once_both_start(kv: MemoryKV) -> None:
    key, secret = "AKIAJREPLICAS", "the-administrators-secret"
    first = AuthStore(kv)
    wrapped = InterleavedKV(kv)
    wrapped.arm(
        lambda op, k: op == "get" and k == f"auth/credentials/{key}".encode(),
        lambda: first.bootstrap_admin("admin", key, secret),
        after=True,
    )
    second = AuthStore(wrapped)
    # the second process finds no key, then loses the race to create it
    second.bootstrap_admin("admin", key, secret)
    assert wrapped.fired
    for store in (first, second):
        assert store.authenticate(key, secret).id == "admin"
        with pytest.raises(AuthenticationError):
            store.authenticate(key, "wrong")


def test_replicas_generating_the_first_administrator_at_once_both_start(kv: MemoryKV) -> None:
    first, first_out = AuthStore(kv), io.StringIO()
    wrapped = InterleavedKV(kv)
    wrapped.arm(
        lambda op, k: k == b"auth/setup",
        lambda: bootstrap_auth(first, AuthSettings(), first_out),
        after=True,
    )
    second, second_out = AuthStore(wrapped), io.StringIO()
    # the second process finds the installation not set up, then loses the race to set it up
    bootstrap_auth(second, AuthSettings(), second_out)
    assert wrapped.fired
    assert "secret_access_key" in first_out.getvalue()
    assert second_out.getvalue() == ""
    assert second.is_initialized()


class CountingKV(InterleavedKV):
    """A KV that counts the reads made through it."""

    def __init__(self, inner: KV) -> None:
        super().__init__(inner)
        self.reads = 0

    def get(self, key: bytes) -> bytes:
        self.reads += 1
        return super().get(key)

    def scan(self, prefix: bytes, start: bytes = b"") -> Iterator[tuple[bytes, bytes]]:
        self.reads += 1
        return super().scan(prefix, start)


@pytest.fixture
def admin_store(kv: MemoryKV) -> AuthStore:
    """The auth store of the process changes go through."""
    store = AuthStore(kv)
    store.ensure_builtins()
    return store


def test_a_signed_in_request_reads_one_record_and_sees_every_change_at_once(
    kv: MemoryKV, admin_store: AuthStore
) -> None:
    a = admin_store
    counting = CountingKV(kv)
    b = AuthStore(counting)
    a.create_user("rita")
    a.add_member("Readers", "rita")
    first = a.create_credentials("rita")
    second = a.create_credentials("rita")
    read = Permission(Action.READ_OBJECT, object_arn("repo", "a.txt"))
    write = Permission(Action.WRITE_OBJECT, object_arn("repo", "a.txt"))

    def signs_in(cred: NewCredential = first) -> SignedIn:
        return b.sign_in(cred.access_key_id, cred.secret_access_key)

    def allowed(*permissions: Permission) -> bool:
        got = signs_in()
        return is_allowed(got.policies, permissions, got.user.id)

    assert allowed(read) and not allowed(write)
    counting.reads = 0
    assert allowed(read)
    assert counting.reads == 1  # the generation only: key, user and policies come from memory

    a.remove_member("Readers", "rita")
    assert not allowed(read)
    a.add_member("Writers", "rita")
    assert allowed(read, write)
    a.attach_user_policy("rita", "FSReadAll")
    a.remove_member("Writers", "rita")
    assert allowed(read) and not allowed(write)
    a.update_policy("FSReadAll", [Statement(Effect.DENY, ("fs:*",), "*")])
    assert not allowed(read)
    a.detach_user_policy("rita", "FSReadAll")
    a.attach_user_policy("rita", "FSFullAccess")
    assert allowed(read, write)
    a.delete_policy("FSFullAccess")
    assert not allowed(read)
    a.delete_credentials("rita", first.access_key_id)
    with pytest.raises(AuthenticationError):
        signs_in()
    assert signs_in(second).user.id == "rita"
    a.delete_user("rita")
    with pytest.raises(AuthenticationError):
        signs_in(second)
    # a re-created user of the same name starts from nothing
    a.create_user("rita")
    third = a.create_credentials("rita")
    assert signs_in(third).policies == ()


def test_a_rotated_administrator_secret_signs_in_everywhere_at_once(
    kv: MemoryKV, admin_store: AuthStore
) -> None:
    b = AuthStore(kv)
    admin_store.bootstrap_admin("admin", "AKIAJROTATE", "one")
    assert b.authenticate("AKIAJROTATE", "one").id == "admin"
    admin_store.bootstrap_admin("admin", "AKIAJROTATE", "two")
    with pytest.raises(AuthenticationError):
        b.authenticate("AKIAJROTATE", "one")
    assert b.authenticate("AKIAJROTATE", "two").id == "admin"


def test_a_change_that_does_not_renew_the_generation_serves_at_most_the_ttl(
    kv: MemoryKV,
) -> None:
    now = [100.0]
    cache = AuthCache(kv, ttl=20.0, size=10, clock=lambda: now[0])
    loads: list[str] = []

    def load(value: str) -> Callable[[], str]:
        def run() -> str:
            loads.append(value)
            return value

        return run

    generation = cache.generation()
    assert cache.fetch("user", "rita", generation, load("old")) == "old"
    now[0] += 19.9
    assert cache.fetch("user", "rita", generation, load("new")) == "old"
    now[0] += 0.2
    assert cache.fetch("user", "rita", generation, load("new")) == "new"
    cache.renew()
    assert cache.generation() != generation
    assert cache.fetch("user", "rita", cache.generation(), load("newer")) == "newer"
    assert loads == ["old", "new", "newer"]


def test_the_auth_cache_is_bounded(kv: MemoryKV) -> None:
    cache = AuthCache(kv, ttl=20.0, size=3)
    for i in range(10):
        cache.fetch("user", f"u{i}", b"", lambda i=i: i)  # type: ignore[misc]
    assert len(cache._entries) == 3
    assert AuthCache(kv, ttl=0).fetch("user", "u", b"", lambda: 1) == 1
