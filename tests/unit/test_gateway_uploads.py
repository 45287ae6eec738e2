"""The KV records of multipart uploads: keyed by repository instance, removed with it.

An :class:`UploadStore` over a :class:`MemoryKV`: the exact key layout, that another instance of
a repository (deleted and created again under the name) sees none of the uploads, that records
an earlier version kept under the bare repository name are never read (and go when the
repository is deleted), that deleting an instance's uploads leaves every other repository's, and
that completed uploads are remembered until they expire (with a settable clock), then removed.
"""

from __future__ import annotations

import pytest

from mirror.block.memory import MemoryBlockStore
from mirror.core.ids import BranchID, RepositoryID
from mirror.core.model import Repository
from mirror.gateway.uploads import (
    COMPLETED_KEPT_SECONDS,
    Completed,
    Part,
    Upload,
    UploadStore,
    new_upload_id,
    part_address,
    parts_digest,
)
from mirror.kv.memory import MemoryKV


def repository(name: str = "repo", uid: str = "uid-1") -> Repository:
    return Repository(RepositoryID(name), f"local://{name}", BranchID("main"), 0, uid)


def upload(repo: Repository, path: str = "big.bin", upload_id: str | None = None) -> Upload:
    return Upload(
        repository=repo.id,
        instance_uid=repo.instance_uid,
        upload_id=upload_id or new_upload_id(),
        branch="main",
        path=path,
        initiated=1.0,
        initiator="admin",
    )


def part(up: Upload, number: int = 1) -> Part:
    return Part(number, "0" * 32, 10, part_address(up.upload_id, number), 2.0)


@pytest.fixture
def kv() -> MemoryKV:
    return MemoryKV()


@pytest.fixture
def store(kv: MemoryKV) -> UploadStore:
    return UploadStore(kv)


def keys(kv: MemoryKV) -> list[bytes]:
    return [k for k, _ in kv.scan(b"")]


def test_records_are_keyed_by_repository_instance(kv: MemoryKV, store: UploadStore) -> None:
    repo = repository()
    up = upload(repo)
    store.create(up)
    assert store.put_part(up, part(up, 7))
    scope = b"gateway/multipart/repo:uid-1/"
    uid = up.upload_id.encode()
    assert keys(kv) == [
        scope + b"id/" + uid,
        scope + b"key/main/big.bin\x00" + uid,
        scope + b"part/" + uid + b"/00007",
    ]
    assert store.get(repo, up.upload_id) == up
    assert Upload.decode(up.encode()) == up


def test_another_instance_of_the_name_sees_no_upload(store: UploadStore) -> None:
    old, new = repository(uid="uid-1"), repository(uid="uid-2")
    up = upload(old)
    store.create(up)
    assert store.get(new, up.upload_id) is None
    assert list(store.uploads(new)) == []
    assert [u.upload_id for u in store.uploads(old)] == [up.upload_id]
    # an upload record of the new instance with the old one's ID is still the old one's alone
    stale = upload(new, upload_id=up.upload_id)
    assert not store.put_part(stale, part(stale))
    assert list(store.parts(stale)) == []


def test_records_of_earlier_versions_are_never_read(kv: MemoryKV, store: UploadStore) -> None:
    repo = repository()
    up = upload(repo)
    legacy = b"gateway/multipart/repo/"
    uid = up.upload_id.encode()
    kv.set(legacy + b"id/" + uid, up.encode())
    kv.set(legacy + b"key/main/big.bin\x00" + uid, uid)
    kv.set(legacy + b"part/" + uid + b"/00001", part(up).encode())
    assert store.get(repo, up.upload_id) is None
    assert list(store.uploads(repo)) == []
    assert list(store.uploads(repo, prefix="main/", key_marker="main/a")) == []


def test_delete_repository_removes_its_instance_and_legacy_records_only(
    kv: MemoryKV, store: UploadStore
) -> None:
    gone = repository("repo", "uid-1")
    # other instances and names, one sharing the deleted name as a prefix
    kept = [repository("repo", "uid-2"), repository("repo-2", "uid-1"), repository("rep", "x")]
    for repo in [gone, *kept]:
        up = upload(repo)
        store.create(up)
        assert store.put_part(up, part(up))
    legacy_kept = b"gateway/multipart/repo-2/id/" + new_upload_id().encode()
    kv.set(b"gateway/multipart/repo/id/" + new_upload_id().encode(), b"{}")
    kv.set(legacy_kept, b"{}")
    before = keys(kv)

    store.delete_repository(gone)
    store.delete_repository(gone)  # idempotent

    assert not [k for k in keys(kv) if k.startswith(b"gateway/multipart/repo:uid-1/")]
    assert not [k for k in keys(kv) if k.startswith(b"gateway/multipart/repo/")]
    assert keys(kv) == [
        k
        for k in before
        if not k.startswith((b"gateway/multipart/repo:uid-1/", b"gateway/multipart/repo/"))
    ]
    assert legacy_kept in keys(kv)
    for repo in kept:
        assert len(list(store.uploads(repo))) == 1


def test_remove_ends_the_upload_of_its_instance(kv: MemoryKV, store: UploadStore) -> None:
    repo = repository()
    up = upload(repo)
    blocks = MemoryBlockStore()
    store.create(up)
    assert store.put_part(up, part(up))
    assert store.remove(up, blocks)
    assert not store.remove(up, blocks)
    assert keys(kv) == []


class Clock:
    """A settable time, epoch seconds."""

    def __init__(self, now: float = 1_000_000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def test_a_completed_upload_is_remembered_until_it_expires(kv: MemoryKV) -> None:
    clock = Clock()
    store = UploadStore(kv, clock=clock)
    repo = repository()
    up = upload(repo)
    store.create(up)
    digest = parts_digest([(1, "a" * 32), (2, "b" * 32)])
    assert digest != parts_digest([(1, "a" * 32)]) != parts_digest([(1, "b" * 32)])
    done = store.remember(up, parts=digest, etag="e-2", location="http://x/repo/main/big.bin")
    store.remove(up, MemoryBlockStore())
    assert store.get(repo, up.upload_id) is None
    assert store.completed(repo, up.upload_id) == done
    assert done.expires == clock.now + COMPLETED_KEPT_SECONDS
    assert Completed.decode(done.encode()) == done
    scope = b"gateway/multipart/repo:uid-1/"
    uid = up.upload_id.encode()
    stamp = f"{int(done.expires * 1_000_000):016x}".encode()
    assert keys(kv) == [scope + b"done/" + uid, scope + b"expiry/" + stamp + b"/" + uid]
    # another instance of the name, and an ID that is none, know nothing of it
    assert store.completed(repository(uid="uid-2"), up.upload_id) is None
    assert store.completed(repo, "not-an-upload-id") is None

    clock.now = done.expires - 1
    assert store.completed(repo, up.upload_id) == done
    clock.now = done.expires
    assert store.completed(repo, up.upload_id) is None
    # the next completion of the instance removes the expired records
    later = upload(repo, "later.bin")
    store.create(later)
    kept = store.remember(later, parts=digest, etag="e-1", location="l")
    assert [k for k in keys(kv) if uid in k] == []
    assert store.completed(repo, later.upload_id) == kept


def test_expired_records_are_removed_oldest_first_and_only_those(kv: MemoryKV) -> None:
    clock = Clock()
    store = UploadStore(kv, clock=clock)
    repo, other = repository(), repository("other")
    ups = [upload(repo, f"f{i}") for i in range(3)]
    for i, up in enumerate(ups):
        clock.now = 1_000_000.0 + i * 10
        store.remember(up, parts="d", etag="e", location="l")
    theirs = upload(other)
    store.remember(theirs, parts="d", etag="e", location="l")
    # the first two have expired: the next completion removes them, not the third's nor
    # another repository's
    clock.now = 1_000_000.0 + COMPLETED_KEPT_SECONDS + 15
    store.remember(upload(repo, "new"), parts="d", etag="e", location="l")
    assert store.completed(repo, ups[0].upload_id) is None
    assert not [k for k in keys(kv) if ups[0].upload_id.encode() in k]
    assert not [k for k in keys(kv) if ups[1].upload_id.encode() in k]
    assert store.completed(repo, ups[2].upload_id) is not None
    assert len([k for k in keys(kv) if theirs.upload_id.encode() in k]) == 2


def test_completed_twice_the_later_time_decides(kv: MemoryKV) -> None:
    clock = Clock()
    store = UploadStore(kv, clock=clock)
    repo = repository()
    up = upload(repo)
    store.remember(up, parts="d", etag="e", location="l")
    clock.now += 100
    second = store.remember(up, parts="d", etag="e", location="l")
    clock.now += COMPLETED_KEPT_SECONDS - 50  # past the first time, not the second
    store.remember(upload(repo, "x"), parts="d", etag="e", location="l")
    assert store.completed(repo, up.upload_id) == second


def test_delete_repository_removes_completed_uploads(kv: MemoryKV) -> None:
    store = UploadStore(kv)
    gone, kept = repository(), repository(uid="uid-2")
    for repo in (gone, kept):
        store.remember(upload(repo), parts="d", etag="e", location="l")
    store.delete_repository(gone)
    assert [k for k in keys(kv) if k.startswith(b"gateway/multipart/repo:uid-1/")] == []
    assert len([k for k in keys(kv) if k.startswith(b"gateway/multipart/repo:uid-2/")]) == 2
