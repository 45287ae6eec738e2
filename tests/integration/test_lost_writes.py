"""A lost conditional write surfaces as a precondition error, never as a silent overwrite.

Three levels. The commit flow over SqliteKV and over DynamoKV and S3 (moto server): a
:class:`CompetingKV` wrapped around the real store lets a second catalog (another server replica)
move the branch through the real store exactly between the commit's read of the branch and its
final compare-and-swap. Two DynamoKV clients racing ``set_if`` from threads. And the mirror
endpoint's compare-and-swap of a branch head over HTTP, on both server backends.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import lakefs
import pytest

from mirror.block.resolver import BlockResolver
from mirror.block.s3 import s3_store_factory
from mirror.core import Catalog, CommitID, NoChangesError, TooManyTriesError
from mirror.core.ids import BranchID
from mirror.core.model import Branch, Entry
from mirror.kv.dynamodb import DynamoKV, create_table
from mirror.kv.errors import KVPreconditionFailedError
from mirror.kv.protocol import KV
from mirror.kv.sqlite import SqliteKV
from tests.integration.harness import Server, unique
from tests.integration.moto_fixtures import (
    MotoServer,
    create_bucket,
    dynamo_settings,
    s3_settings,
    unique_name,
)

REPO = "lost-writes"
NOW = 1_700_000_000


class CompetingKV:
    """A KV that, once armed, lets a competitor write through the real store mid-``set_if``.

    The armed ``set_if`` is the first one that moves the head of the chosen branch (a seal only
    changes staging tokens and passes). ``compete`` runs first, against the wrapped store
    directly, then the ``set_if`` goes on with the expected value its caller read before.
    """

    def __init__(self, inner: KV) -> None:
        self.inner = inner
        self.fired = 0
        self._armed: tuple[str, Callable[[], None]] | None = None

    def arm(self, branch: str, compete: Callable[[], None]) -> None:
        """Run ``compete`` just before the next ``set_if`` moving the head of ``branch``."""
        self._armed = (branch, compete)

    def _moves_head(self, branch: str, key: bytes, value: bytes, expected: bytes | None) -> bool:
        if not key.endswith(b"/branches/" + branch.encode()) or expected is None:
            return False
        bid = BranchID(branch)
        return Branch.decode(bid, value).commit_id != Branch.decode(bid, expected).commit_id

    def set_if(self, key: bytes, value: bytes, expected: bytes | None) -> None:
        armed = self._armed
        if armed is not None and self._moves_head(armed[0], key, value, expected):
            self._armed = None
            armed[1]()
            self.fired += 1
        self.inner.set_if(key, value, expected)

    def get(self, key: bytes) -> bytes:
        return self.inner.get(key)

    def set(self, key: bytes, value: bytes) -> None:
        self.inner.set(key, value)

    def set_many(self, items: Iterable[tuple[bytes, bytes]]) -> None:
        self.inner.set_many(items)

    def delete(self, key: bytes) -> None:
        self.inner.delete(key)

    def delete_many(self, keys: Iterable[bytes]) -> None:
        self.inner.delete_many(keys)

    def delete_if(self, key: bytes, expected: bytes) -> None:
        self.inner.delete_if(key, expected)

    def scan(self, prefix: bytes, start: bytes = b"") -> Iterator[tuple[bytes, bytes]]:
        return self.inner.scan(prefix, start)

    def close(self) -> None:
        self.inner.close()


@dataclass
class Rig:
    """The real store, the competing wrapper around it, and where objects go."""

    store: KV
    kv: CompetingKV
    blocks: BlockResolver
    namespace: str

    def catalog(self, max_tries: int = 10) -> Catalog:
        """Return the catalog under test: it sees the store through the competing wrapper."""
        return Catalog(self.kv, self.blocks, clock=lambda: NOW, max_tries=max_tries)

    def replica(self) -> Catalog:
        """Return another replica's catalog over the real store."""
        return Catalog(self.store, self.blocks, clock=lambda: NOW + 1)


@pytest.fixture(params=["sqlite", pytest.param("dynamodb", marks=pytest.mark.s3)])
def rig(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Rig]:
    store: KV
    if request.param == "sqlite":
        store = SqliteKV(tmp_path / "kv.sqlite")
        blocks = BlockResolver(tmp_path)
        namespace = "local://repo"
    else:
        moto: MotoServer = request.getfixturevalue("moto_region")
        s3: Any = request.getfixturevalue("s3_client")
        settings = dynamo_settings(moto, unique_name("lost"))
        create_table(settings)
        store = DynamoKV(settings)
        blocks = BlockResolver()
        blocks.register("s3", s3_store_factory(s3_settings(moto)))
        namespace = f"s3://{create_bucket(moto, s3)}/repo"
    yield Rig(store, CompetingKV(store), blocks, namespace)
    store.close()


def seed(catalog: Catalog, namespace: str) -> CommitID:
    """Create the repository with one commit and stage ``ours.txt`` on main; return the head."""
    catalog.create_repository(REPO, namespace)
    catalog.upload_object(REPO, "main", "base.txt", b"base")
    head = catalog.commit(REPO, "main", "base").commit.id
    catalog.upload_object(REPO, "main", "ours.txt", b"ours")
    return head


def commit_straight(replica: Catalog, competitors: list[CommitID]) -> Callable[[], None]:
    """Return a competitor committing ``theirs.txt`` straight onto main, bypassing staging."""

    def compete() -> None:
        repo = replica.get_repository(REPO)
        address = replica.paths.new_path()
        info = replica.block_store(repo).put(address, b"theirs")
        entry = Entry(address, info.size, info.etag, NOW)
        result = replica.commit_tree(REPO, "main", [("theirs.txt", entry)], "theirs")
        competitors.append(result.commit.id)

    return compete


def tree(catalog: Catalog, ref: str) -> dict[str, bytes]:
    return {s.path: catalog.read_object(REPO, ref, s.path) for s in catalog.iter_objects(REPO, ref)}


def test_a_commit_losing_its_final_cas_commits_again_on_the_competitors_head(rig: Rig) -> None:
    ours, replica = rig.catalog(), rig.replica()
    base = seed(ours, rig.namespace)
    theirs: list[CommitID] = []
    rig.kv.arm("main", commit_straight(replica, theirs))

    mine = ours.commit(REPO, "main", "ours").commit

    assert rig.kv.fired == 1 and len(theirs) == 1
    assert replica.get_commit(REPO, theirs[0]).parents == (base,)
    assert mine.parents == (theirs[0],)
    head = replica.get_branch(REPO, "main")
    assert head.commit_id == mine.id
    assert head.sealed_tokens == ()
    history = [c.id for c in replica.log(REPO, "main")]
    assert history[:3] == [mine.id, theirs[0], base]
    assert tree(replica, "main") == {
        "base.txt": b"base",
        "ours.txt": b"ours",
        "theirs.txt": b"theirs",
    }
    assert tree(replica, theirs[0]) == {"base.txt": b"base", "theirs.txt": b"theirs"}
    assert list(replica.diff_uncommitted(REPO, "main")) == []


def test_with_no_retries_left_the_lost_cas_fails_and_keeps_the_competitors_head(rig: Rig) -> None:
    ours, replica = rig.catalog(max_tries=1), rig.replica()
    base = seed(ours, rig.namespace)
    theirs: list[CommitID] = []
    rig.kv.arm("main", commit_straight(replica, theirs))

    with pytest.raises(TooManyTriesError, match=r"gave up|kept changing"):
        ours.commit(REPO, "main", "ours")

    assert rig.kv.fired == 1 and len(theirs) == 1
    assert replica.get_branch(REPO, "main").commit_id == theirs[0]
    assert [c.id for c in replica.log(REPO, "main")][:2] == [theirs[0], base]
    assert tree(replica, theirs[0]) == {"base.txt": b"base", "theirs.txt": b"theirs"}
    # our change was neither written over theirs nor dropped: it is still staged on the branch
    assert [d.path for d in replica.diff_uncommitted(REPO, "main")] == ["ours.txt"]
    assert replica.read_object(REPO, "main", "ours.txt") == b"ours"
    again = ours.commit(REPO, "main", "ours, again").commit
    assert again.parents == (theirs[0],)
    assert tree(replica, "main") == {
        "base.txt": b"base",
        "ours.txt": b"ours",
        "theirs.txt": b"theirs",
    }


def test_a_competing_staged_commit_takes_our_sealed_change_along_and_ours_reports_it(
    rig: Rig,
) -> None:
    ours, replica = rig.catalog(), rig.replica()
    base = seed(ours, rig.namespace)
    theirs: list[CommitID] = []

    def compete() -> None:
        replica.upload_object(REPO, "main", "theirs.txt", b"theirs")
        theirs.append(replica.commit(REPO, "main", "theirs").commit.id)

    rig.kv.arm("main", compete)

    # the competitor's commit holds every token sealed when it started, ours included, so ours
    # has nothing left to commit: it says so instead of committing twice or succeeding silently
    with pytest.raises(NoChangesError):
        ours.commit(REPO, "main", "ours")

    assert rig.kv.fired == 1 and len(theirs) == 1
    head = replica.get_branch(REPO, "main")
    assert head.commit_id == theirs[0] and head.sealed_tokens == ()
    assert replica.get_commit(REPO, theirs[0]).parents == (base,)
    assert tree(replica, "main") == {
        "base.txt": b"base",
        "ours.txt": b"ours",
        "theirs.txt": b"theirs",
    }
    assert list(replica.diff_uncommitted(REPO, "main")) == []


# two DynamoKV clients, as two server replicas, racing on one key of a moto server

ROUNDS = 20
INCREMENTS = 25


@pytest.fixture
def two_replicas(moto_region: MotoServer) -> Iterator[tuple[DynamoKV, DynamoKV]]:
    settings = dynamo_settings(moto_region, unique_name("race"))
    create_table(settings)
    # each store makes its own boto3 client: two processes' worth of connections
    first, second = DynamoKV(settings), DynamoKV(settings)
    yield first, second
    first.close()
    second.close()


@pytest.mark.s3
def test_two_dynamo_replicas_racing_set_if_one_wins_each_round(
    two_replicas: tuple[DynamoKV, DynamoKV],
) -> None:
    key = b"refs/race"
    two_replicas[0].set(key, b"start")
    barrier = threading.Barrier(2, timeout=30)
    # per replica, per round: (value written, None) on a win, (None, value found) on a loss
    outcomes: list[list[tuple[bytes | None, bytes | None]]] = [[], []]

    def lockstep(index: int) -> None:
        kv = two_replicas[index]
        for r in range(ROUNDS):
            barrier.wait()  # both finished the previous round before either reads
            seen = kv.get(key)
            barrier.wait()  # both read the same value before either writes
            value = b"round %d by %d" % (r, index)
            try:
                kv.set_if(key, value, seen)
            except KVPreconditionFailedError as exc:
                assert exc.expected == seen
                outcomes[index].append((None, exc.found))
            else:
                outcomes[index].append((value, None))

    with ThreadPoolExecutor(2) as pool:
        for future in [pool.submit(lockstep, i) for i in (0, 1)]:
            future.result()

    last = b""
    for r, (one, two) in enumerate(zip(*outcomes, strict=True)):
        won = [w for w, _ in (one, two) if w is not None]
        assert len(won) == 1, f"round {r}: {one} / {two}"
        found = one[1] if one[0] is None else two[1]
        assert found == won[0], f"round {r}: the loser found {found!r}, not the winner's value"
        last = won[0]
    assert two_replicas[0].get(key) == two_replicas[1].get(key) == last


@pytest.mark.s3
def test_two_dynamo_replicas_incrementing_by_cas_lose_no_update(
    two_replicas: tuple[DynamoKV, DynamoKV],
) -> None:
    key = b"refs/counter"
    two_replicas[0].set(key, b"0")
    barrier = threading.Barrier(2, timeout=30)
    lost = [0, 0]

    def increment(index: int) -> None:
        kv = two_replicas[index]
        barrier.wait()
        for _ in range(INCREMENTS):
            current = kv.get(key)
            while True:
                try:
                    kv.set_if(key, b"%d" % (int(current) + 1), current)
                    break
                except KVPreconditionFailedError as exc:
                    assert exc.found is not None
                    current = exc.found
                    lost[index] += 1

    with ThreadPoolExecutor(2) as pool:
        for future in [pool.submit(increment, i) for i in (0, 1)]:
            future.result()

    assert int(two_replicas[0].get(key)) == 2 * INCREMENTS
    assert int(two_replicas[1].get(key)) == 2 * INCREMENTS


# the mirror endpoint's compare-and-swap over HTTP, on the embedded and the S3 + DynamoDB server


def _history(http: httpx.Client, repo: str) -> list[dict[str, Any]]:
    """Return the commits of main, oldest first (parents before children)."""
    log = http.get(f"/repositories/{repo}/refs/main/commits", params={"amount": 1000})
    assert log.status_code == 200, log.text
    return list(reversed(log.json()["results"]))


@dataclass
class MirrorRepo:
    name: str
    commits: list[str]


@pytest.fixture
def mirror_repo(server: Server, client: lakefs.Client, http: httpx.Client) -> Iterator[MirrorRepo]:
    """A mirror of a source with three commits on main, imported; the mirror has no branch yet."""
    source = unique("cas-source")
    repo = lakefs.Repository(source, client=client).create(server.namespace(source))
    main = repo.branch("main")
    for i in range(3):
        main.object(f"f{i}.txt").upload(b"%d" % i)
        main.commit(f"write f{i}.txt")
    name = unique("cas-mirror")
    created = http.post(
        "/mirror/repositories",
        json={
            "name": name,
            "storage_namespace": server.namespace(name),
            "mirror_of": f"us-east-1/{source}",
        },
    )
    assert created.status_code == 201, created.text
    commits = _history(http, source)
    for commit in commits:
        imported = http.post(f"/repositories/{name}/mirror/commits", json=commit)
        assert imported.status_code == 201, imported.text
    yield MirrorRepo(name, [c["id"] for c in commits])
    http.delete(f"/repositories/{name}", params={"force": "true"})
    repo.delete()


def _head(http: httpx.Client, repo: str) -> str:
    got = http.get(f"/repositories/{repo}/branches/main")
    assert got.status_code == 200, got.text
    head: str = got.json()["commit_id"]
    return head


def _move(http: httpx.Client, repo: str, commit: str, expected: str | None) -> httpx.Response:
    return http.put(
        f"/repositories/{repo}/mirror/branches/main",
        json={"commit_id": commit, "expected": expected},
    )


@pytest.mark.both_backends
def test_mirror_branch_cas_with_a_stale_expected_is_412_and_keeps_the_head(
    http: httpx.Client, mirror_repo: MirrorRepo
) -> None:
    name, (c1, c2, c3) = mirror_repo.name, mirror_repo.commits[-3:]
    # the mirror is bare: its main is created by a compare-and-swap from "absent"
    assert http.get(f"/repositories/{name}/branches/main").status_code == 404
    moved = _move(http, name, c1, None)
    assert moved.status_code == 200, moved.text
    assert moved.json()["commit_id"] == c1

    # another replica moves the head on; a writer still holding c1 must not overwrite it
    assert _move(http, name, c2, c1).status_code == 200
    stale = _move(http, name, c3, c1)
    assert stale.status_code == 412, stale.text
    assert c1 in stale.json()["message"] and c2 in stale.json()["message"]
    assert _head(http, name) == c2

    # "create if absent" on an existing branch is stale too
    absent = _move(http, name, c3, None)
    assert absent.status_code == 412, absent.text
    assert _head(http, name) == c2


@pytest.mark.both_backends
@pytest.mark.parametrize("start", ["absent", "moving"])
def test_mirror_branch_cas_racing_replicas_one_wins_the_other_gets_412(
    server: Server, http: httpx.Client, mirror_repo: MirrorRepo, start: str
) -> None:
    name, (c1, c2, c3) = mirror_repo.name, mirror_repo.commits[-3:]
    expected: str | None = None
    if start == "moving":
        assert _move(http, name, c1, None).status_code == 200
        expected = c1
    barrier = threading.Barrier(2, timeout=30)

    def race(target: str) -> httpx.Response:
        with httpx.Client(
            base_url=f"{server.url}/api/v1",
            auth=(server.access_key_id, server.secret_access_key),
            timeout=30.0,
        ) as replica:
            barrier.wait()
            return _move(replica, name, target, expected)

    with ThreadPoolExecutor(2) as pool:
        answers = dict(zip((c2, c3), pool.map(race, (c2, c3)), strict=True))

    statuses = sorted(a.status_code for a in answers.values())
    assert statuses == [200, 412], {t: (a.status_code, a.text) for t, a in answers.items()}
    winner = next(t for t, a in answers.items() if a.status_code == 200)
    assert _head(http, name) == winner
