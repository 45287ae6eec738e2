"""The replicant's logic in one process: two regions' API apps on in-memory catalogs.

The source and mirror regions are real lakeFS-compatible apps (in-memory KV and ``mem://``
stores) reached through httpx's ASGI transport; "replication" is copying files between their
namespaces by hand, so every situation is set up exactly.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass

import httpx
import pytest
from fastapi import FastAPI
from hypothesis import given, settings
from hypothesis import strategies as st

from mirror.block import BlockResolver
from mirror.block.protocol import BlockStore
from mirror.config import RegionSettings
from mirror.core.catalog import Catalog
from mirror.errors import AlreadyExistsError, InvalidValueError, NotFoundError
from mirror.kv import MemoryKV
from mirror.replicant.client import LakeFSClient, RemoteCommit
from mirror.replicant.lag_history import LagSample, read_history
from mirror.replicant.metrics import ReplicantMetrics
from mirror.replicant.readers import NamespaceReaders
from mirror.replicant.service import (
    MirrorRequest,
    ReplicantService,
    ServiceSettings,
    UnknownRegionError,
)
from mirror.replicant.state import MirrorConfig, MirrorExistsError, ReplicantStore
from mirror.replicant.worker import MirrorWorker, WorkerSettings, parents_first
from mirror.validator import (
    KVValidatedRanges,
    MemoryValidatedRanges,
    ThreadedObjectReader,
    Validator,
)
from tests.inprocess import ADMIN, REPLICATOR, app_client, region_app


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@dataclass
class Region:
    name: str
    catalog: Catalog
    resolver: BlockResolver
    app: FastAPI

    def client(self, key: tuple[str, str]) -> LakeFSClient:
        return app_client(self.app, self.name, key)


def _region(name: str) -> Region:
    resolver = BlockResolver()
    catalog, app = region_app(resolver, namespace_schemes=("mem",))
    return Region(name, catalog, resolver, app)


def _copy_all(
    src: BlockStore, dst: BlockStore, skip: Callable[[str], bool] = lambda k: False
) -> int:
    copied = 0
    for info in src.list():
        if not skip(info.key) and not dst.exists(info.key):
            dst.put(info.key, src.get(info.key))
            copied += 1
    return copied


async def _until(condition: Callable[[], bool], what: str, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.01)  # a poll of a deadline-bounded wait


@dataclass
class Pair:
    a: Region
    b: Region
    source_ns: str
    mirror_ns: str
    config: MirrorConfig
    worker: MirrorWorker
    metrics: ReplicantMetrics

    @property
    def src_store(self) -> BlockStore:
        return self.a.resolver.open(self.source_ns)

    @property
    def dst_store(self) -> BlockStore:
        return self.b.resolver.open(self.mirror_ns)


@pytest.fixture
async def pair() -> AsyncIterator[Pair]:
    a, b = _region("a"), _region("b")
    tag = uuid.uuid4().hex[:8]
    source_ns, mirror_ns = f"mem://src-{tag}", f"mem://dst-{tag}"
    a.catalog.create_repository("origin", source_ns)
    dest = b.client(REPLICATOR)
    await dest.create_mirror_repository("origin-mirror", mirror_ns, "main", "a/origin")
    config = MirrorConfig("origin-mirror", "a", "origin", "b", mirror_ns)
    metrics = ReplicantMetrics()
    validator = Validator(
        ThreadedObjectReader(b.resolver.open(mirror_ns)),
        validated=MemoryValidatedRanges(),
        events=metrics.for_validation(config.name),
    )
    worker = MirrorWorker(
        config,
        a.client(ADMIN),
        dest,
        validator,
        ReplicantStore(MemoryKV()),
        metrics,
        WorkerSettings(poll_interval=0.01),
    )
    yield Pair(a, b, source_ns, mirror_ns, config, worker, metrics)
    await worker.source.aclose()
    await dest.aclose()


def _commit(region: Region, files: dict[str, bytes | None], message: str) -> str:
    for path, data in files.items():
        if data is None:
            region.catalog.delete_object("origin", "main", path)
        else:
            region.catalog.upload_object("origin", "main", path, data)
    return str(region.catalog.commit("origin", "main", message).commit.id)


def _value(metrics: ReplicantMetrics, name: str, **labels: str) -> float:
    value = metrics.registry.get_sample_value(name, labels)
    return 0.0 if value is None else value


@pytest.mark.anyio
async def test_the_head_moves_only_once_every_file_arrived(pair: Pair) -> None:
    _commit(pair.a, {"a.csv": b"1", "b.csv": b"2"}, "one")
    head = _commit(pair.a, {"c.csv": b"3" * 5000, "a.csv": None}, "two")
    data_key = pair.a.catalog.stat_object("origin", "main", "c.csv").physical_address
    held = data_key.split("/", 3)[-1]
    _copy_all(pair.src_store, pair.dst_store, skip=lambda k: k == held)
    sync = asyncio.create_task(pair.worker.sync_branch("main"))
    await _until(
        lambda: [(s.state, s.missing_objects) for s in pair.worker.status()] == [("waiting", 1)],
        "waiting on c.csv",
    )
    status = pair.worker.status()[0]
    assert held in status.missing_sample[0]
    labels = {"mirror": "origin-mirror", "branch": "main"}
    assert _value(pair.metrics, "lakemirror_missing_objects", **labels) == 1
    # the mirror is bare: all three source commits ("Repository created", one, two) are ahead
    assert status.lag_commits == 3
    assert not pair.b.catalog.branch_exists("origin-mirror", "main")
    # the commits are there already, and verified against their content
    assert pair.b.catalog.verify_commit("origin-mirror", head)
    assert not sync.done()
    _copy_all(pair.src_store, pair.dst_store)
    assert await asyncio.wait_for(sync, 10) is True
    assert pair.b.catalog.get_branch("origin-mirror", "main").commit_id == head
    assert _value(pair.metrics, "lakemirror_head_advances_total", **labels) == 1
    assert _value(pair.metrics, "lakemirror_commits_skipped_total", **labels) == 2
    assert pair.worker.status()[0].state == "synced"
    assert _value(pair.metrics, "lakemirror_missing_objects", **labels) == 0
    # nothing new: no move
    assert await pair.worker.sync_branch("main") is False


@pytest.mark.anyio
async def test_each_round_of_a_branch_feeds_its_lag_history(pair: Pair) -> None:
    _commit(pair.a, {"a.csv": b"1"}, "one")
    _commit(pair.a, {"b.csv": b"2" * 3000}, "two")
    held = pair.a.catalog.stat_object("origin", "main", "b.csv").physical_address
    _copy_all(pair.src_store, pair.dst_store, skip=lambda k: k == held.split("/", 3)[-1])
    sync = asyncio.create_task(pair.worker.sync_branch("main"))
    await _until(lambda: [s.state for s in pair.worker.status()] == ["waiting"], "waiting")
    _copy_all(pair.src_store, pair.dst_store)
    assert await asyncio.wait_for(sync, 10) is True
    pair.worker.history.flush()
    samples = read_history(pair.worker.store.kv, "origin-mirror", time.time())["main"]
    # the slot (or slots) of this short run keep the worst lag seen: all three commits behind
    assert max(s.lag_commits for s in samples) == 3
    assert all(s.exact for s in samples if s.lag_commits == 3)
    assert all(s.time <= time.time() for s in samples)


@pytest.mark.anyio
async def test_a_concurrent_head_move_is_not_overwritten(pair: Pair) -> None:
    first = _commit(pair.a, {"x": b"x"}, "x")
    _copy_all(pair.src_store, pair.dst_store)
    assert await pair.worker.sync_branch("main") is True
    _commit(pair.a, {"y": b"y"}, "y")
    _copy_all(pair.src_store, pair.dst_store)
    # someone else moves the mirror head back while the worker is not looking
    placeholder = pair.b.catalog.log("origin-mirror", first).__next__().parents[0]
    pair.b.catalog.set_branch_head("origin-mirror", "main", placeholder, first, force=True)
    assert await pair.worker.sync_branch("main") is True
    assert pair.b.catalog.get_branch("origin-mirror", "main").commit_id != placeholder


@pytest.mark.anyio
async def test_tags_and_deleted_branches_follow_the_source(pair: Pair) -> None:
    c1 = _commit(pair.a, {"a": b"a"}, "a")
    pair.a.catalog.create_branch("origin", "dev", "main")
    pair.a.catalog.create_tag("origin", "v1", c1)
    _copy_all(pair.src_store, pair.dst_store)
    await pair.worker.poll_once()
    await _until(lambda: pair.b.catalog.branch_exists("origin-mirror", "dev"), "dev on the mirror")
    assert pair.b.catalog.get_tag("origin-mirror", "v1") == c1
    pair.a.catalog.delete_branch("origin", "dev")
    pair.a.catalog.delete_tag("origin", "v1")
    await pair.worker.poll_once()
    assert not pair.b.catalog.branch_exists("origin-mirror", "dev")
    gauge = {"mirror": "origin-mirror", "branch": "dev"}
    assert pair.metrics.registry.get_sample_value("lakemirror_lag_commits", gauge) is None
    assert list(pair.b.catalog.list_tags("origin-mirror")) == []
    for task in pair.worker._branch_tasks.values():
        task.cancel()
    await asyncio.gather(*pair.worker._branch_tasks.values(), return_exceptions=True)


@pytest.mark.anyio
async def test_unchanged_source_tags_cost_one_listing_a_round(pair: Pair) -> None:
    c1 = _commit(pair.a, {"a": b"a"}, "a")
    pair.a.catalog.create_tag("origin", "v1", c1)
    _copy_all(pair.src_store, pair.dst_store)
    listed: list[str] = []
    list_tags = pair.worker.dest.list_tags

    async def counted(repository: str) -> dict[str, str]:
        listed.append(repository)
        return await list_tags(repository)

    pair.worker.dest.list_tags = counted  # type: ignore[method-assign]
    for _ in range(3):  # tag, then see the mirror's tags equal the source's
        await pair.worker.poll_once()
    assert pair.b.catalog.get_tag("origin-mirror", "v1") == c1
    before = len(listed)
    for _ in range(40):
        await pair.worker.poll_once()
    # the mirror's tags are listed again every 20 rounds only
    assert 1 <= len(listed) - before <= 2
    # a new source tag is mirrored in the next round
    pair.a.catalog.create_tag("origin", "v2", c1)
    await pair.worker.poll_once()
    assert pair.b.catalog.get_tag("origin-mirror", "v2") == c1
    # a mirror tag changed behind the replicant's back is put right within 20 rounds
    await pair.worker.poll_once()
    pair.b.catalog.delete_tag("origin-mirror", "v1", force=True)
    for _ in range(21):
        await pair.worker.poll_once()
    assert pair.b.catalog.get_tag("origin-mirror", "v1") == c1
    for task in pair.worker._branch_tasks.values():
        task.cancel()
    await asyncio.gather(*pair.worker._branch_tasks.values(), return_exceptions=True)


@pytest.mark.anyio
async def test_a_synced_branch_costs_no_request_of_its_own_and_follows_a_new_head(
    pair: Pair,
) -> None:
    first = _commit(pair.a, {"a": b"a"}, "a")
    _copy_all(pair.src_store, pair.dst_store)
    asked: list[str] = []
    read_head = pair.worker.source.get_branch_head

    async def counted(repository: str, branch: str) -> str | None:
        asked.append(branch)
        return await read_head(repository, branch)

    pair.worker.source.get_branch_head = counted  # type: ignore[method-assign]
    read_repository = pair.worker.dest.get_repository

    async def repository_counted(repository: str) -> dict[str, object]:
        asked.append(f"repository {repository}")
        return await read_repository(repository)

    pair.worker.dest.get_repository = repository_counted  # type: ignore[method-assign]
    run = asyncio.create_task(pair.worker.run())
    try:
        await _until(
            lambda: [(s.state, s.mirror_head) for s in pair.worker.status()] == [("synced", first)],
            "main synced",
        )
        recorded: list[LagSample] = []
        record = pair.worker.history.record
        pair.worker.history.record = lambda branch, sample: (  # type: ignore[method-assign]
            recorded.append(sample),
            record(branch, sample),
        )
        rounds, before = pair.worker.rounds, len(asked)
        await _until(lambda: pair.worker.rounds >= rounds + 20, "20 more poll rounds")
        # at most the round in flight when it synced; the mirror repository is read only when
        # a mirror branch is gone from the source
        assert len(asked) - before <= 1
        # the lag history still gets a sample a round, of no lag
        assert len(recorded) >= 15
        assert {(s.lag_seconds, s.lag_commits, s.exact) for s in recorded} == {(0.0, 0, True)}
        second = _commit(pair.a, {"b": b"b"}, "b")
        _copy_all(pair.src_store, pair.dst_store)
        await _until(
            lambda: pair.b.catalog.get_branch("origin-mirror", "main").commit_id == second,
            "the new head mirrored",
        )
        # a mirror head moved by someone else is noticed too, and brought back
        pair.b.catalog.set_branch_head("origin-mirror", "main", first, second, force=True)
        await _until(
            lambda: pair.b.catalog.get_branch("origin-mirror", "main").commit_id == second,
            "the mirror head brought back",
        )
    finally:
        run.cancel()
        await asyncio.gather(run, return_exceptions=True)


@pytest.mark.anyio
async def test_a_branch_deleted_before_the_mirror_had_it_leaves_nothing(pair: Pair) -> None:
    # a short-lived branch (created, committed, deleted) whose files never reached the mirror
    _commit(pair.a, {"a": b"a"}, "a")
    pair.a.catalog.create_branch("origin", "short", "main")
    pair.a.catalog.upload_object("origin", "short", "s.csv", b"s" * 3000)
    pair.a.catalog.commit("origin", "short", "short-lived")
    await pair.worker.poll_once()

    def waiting() -> bool:
        return any(s.branch == "short" and s.state == "waiting" for s in pair.worker.status())

    await _until(waiting, "the short-lived branch waiting for its files")
    # a later round's report of its lag (rounds record one each)
    pair.worker.history.record("short", LagSample(time.time(), 5.0, 1))
    kv = pair.worker.store.kv
    assert "short" in read_history(kv, pair.config.name, time.time())
    pair.a.catalog.delete_branch("origin", "short")
    await pair.worker.poll_once()
    assert not pair.b.catalog.branch_exists("origin-mirror", "short")
    assert "short" not in {s.branch for s in pair.worker.status()}
    assert "short" not in {s.branch for s in pair.worker.store.list_status(pair.config.name)}
    assert "short" not in read_history(kv, pair.config.name, time.time())
    gauge = {"mirror": "origin-mirror", "branch": "short"}
    assert pair.metrics.registry.get_sample_value("lakemirror_lag_commits", gauge) is None
    # main, still waiting, is kept
    assert [s.branch for s in pair.worker.status()] == ["main"]
    for task in pair.worker._branch_tasks.values():
        task.cancel()
    await asyncio.gather(*pair.worker._branch_tasks.values(), return_exceptions=True)


@pytest.mark.anyio
async def test_a_deleted_branch_releases_its_retained_ranges(pair: Pair) -> None:
    validated = KVValidatedRanges(
        MemoryKV(), b"ranges/", retention_prefix=b"retention/", heads_kept=2
    )
    retention = validated.retention
    assert retention is not None
    validator = Validator(ThreadedObjectReader(pair.dst_store), validated=validated)
    worker = MirrorWorker(
        pair.config,
        pair.worker.source,
        pair.worker.dest,
        validator,
        ReplicantStore(MemoryKV()),
        pair.metrics,
        WorkerSettings(poll_interval=0.01, release_interval=0.0, release_idle=0.0),
    )
    _commit(pair.a, {"a": b"a"}, "a")
    pair.a.catalog.create_branch("origin", "dev", "main")
    pair.a.catalog.upload_object("origin", "dev", "d", b"only on dev")
    dev_head = str(pair.a.catalog.commit("origin", "dev", "d").commit.id)
    _copy_all(pair.src_store, pair.dst_store)
    await worker.poll_once()

    def mirrored() -> bool:
        return pair.a.catalog.get_branch("origin", "dev").commit_id == (
            pair.b.catalog.get_branch("origin-mirror", "dev").commit_id
            if pair.b.catalog.branch_exists("origin-mirror", "dev")
            else None
        ) and pair.b.catalog.branch_exists("origin-mirror", "main")

    await _until(mirrored, "main and dev on the mirror")
    validated.drain()
    dev_tree = str(pair.b.catalog.get_commit("origin-mirror", dev_head).metarange_id)
    assert dev_tree in {c.head for c in retention.chains()}
    pair.a.catalog.delete_branch("origin", "dev")
    await worker.poll_once()  # deletes dev on the mirror
    await worker.poll_once()  # no branch or tag sits on dev's tree any more: released
    assert not pair.b.catalog.branch_exists("origin-mirror", "dev")
    main_tree = str(
        pair.b.catalog.get_commit(
            "origin-mirror", pair.b.catalog.get_branch("origin-mirror", "main").commit_id
        ).metarange_id
    )
    assert [c.head for c in retention.chains()] == [main_tree]
    for task in worker._branch_tasks.values():
        task.cancel()
    await asyncio.gather(*worker._branch_tasks.values(), return_exceptions=True)
    validated.close()


@pytest.mark.anyio
async def test_a_newly_seen_source_head_is_never_stored_as_zero_commits_behind(
    pair: Pair,
) -> None:
    c1 = _commit(pair.a, {"a": b"a"}, "a")
    _copy_all(pair.src_store, pair.dst_store)
    assert await pair.worker.sync_branch("main")
    c2 = _commit(pair.a, {"b": b"b"}, "b")
    stored: list[tuple[str | None, str | None, int | None, int | None]] = []

    async def stop_before_copying(head: str) -> int:
        # what a forced promotion would read if it came now
        for s in pair.worker.store.list_status(pair.config.name):
            stored.append((s.mirror_head, s.source_head, s.lag_commits, s.lag_commits_at_least))
        raise NotFoundError("stopped before copying")

    pair.worker.records.copy_chain = stop_before_copying  # type: ignore[method-assign]
    with pytest.raises(NotFoundError):
        await pair.worker.sync_branch("main")
    # at least one commit behind, said as a lower bound: not a count it never made
    assert stored == [(c1, c2, None, 1)]


@pytest.mark.anyio
async def test_a_tag_waits_for_its_files(pair: Pair) -> None:
    c1 = _commit(pair.a, {"a": b"a"}, "a")
    pair.a.catalog.create_tag("origin", "v1", c1)
    await pair.worker.tags.sync(pair.worker.rounds)
    assert list(pair.b.catalog.list_tags("origin-mirror")) == []
    assert pair.worker.pending_tags == {"v1": c1}
    _copy_all(pair.src_store, pair.dst_store)
    await pair.worker.tags.sync(pair.worker.rounds)
    assert pair.b.catalog.get_tag("origin-mirror", "v1") == c1


# the service: configuration errors


@pytest.fixture
async def service() -> AsyncIterator[ReplicantService]:
    a, b, c = _region("a"), _region("b"), _region("c")
    a.catalog.create_repository("origin", "mem://svc-src")
    apps = {"http://a": a.app, "http://b": b.app, "http://c": c.app}
    keys = {"http://a": ADMIN, "http://b": REPLICATOR, "http://c": ADMIN}

    def factory(s: RegionSettings) -> LakeFSClient:
        transport = httpx.ASGITransport(app=apps[s.server_url])  # type: ignore[arg-type]
        return LakeFSClient(s.server_url, *keys[s.server_url], transport=transport)

    regions = {
        "a": RegionSettings(server_url="http://a"),
        "b": RegionSettings(server_url="http://b"),
        "c": RegionSettings(server_url="http://c"),
    }
    svc = ReplicantService(
        ServiceSettings(region="b", regions=regions, replica_id="unit"),
        MemoryKV(),
        NamespaceReaders(b.resolver),
        client_factory=factory,
    )
    yield svc
    await svc.stop()


Call = Callable[[ReplicantService], Awaitable[object]]


def _req(**kw: object) -> MirrorRequest:
    base: dict[str, object] = {
        "name": "origin-mirror",
        "region": "b",
        "storage_namespace": "mem://svc-dst",
    }
    base.update(kw)
    return MirrorRequest(**base)  # type: ignore[arg-type]


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("source", "request_", "error"),
    [
        ("nowhere", _req(), NotFoundError),
        ("origin", _req(region="mars"), UnknownRegionError),
        ("origin", _req(region="a"), UnknownRegionError),
        ("origin", _req(source_region="b"), UnknownRegionError),
        ("origin", _req(storage_namespace="ftp://x"), InvalidValueError),
        ("origin", _req(name="Bad Name"), InvalidValueError),
        ("origin", _req(branches=()), InvalidValueError),
    ],
)
async def test_bad_mirror_requests_are_refused(
    service: ReplicantService, source: str, request_: MirrorRequest, error: type[Exception]
) -> None:
    with pytest.raises(error):
        await service.create_mirror(source, request_)
    assert list(service.store.list_mirrors()) == []


@pytest.mark.anyio
async def test_a_mirror_is_created_once(service: ReplicantService) -> None:
    config = await service.create_mirror("origin", _req())
    assert config.source_region == "a"
    assert service.working() == ["origin-mirror"]
    with pytest.raises(MirrorExistsError):
        await service.create_mirror("origin", _req())
    await service.delete_mirror("origin", "origin-mirror")
    assert service.working() == []
    with pytest.raises(NotFoundError):
        service.get_mirror("origin", "origin-mirror")
    # the mirror repository outlives the mirror: its name stays taken, and nothing is recorded
    with pytest.raises(AlreadyExistsError):
        await service.create_mirror("origin", _req())
    assert list(service.store.list_mirrors()) == []


def test_every_region_needs_a_server_url() -> None:
    regions = {"a": RegionSettings(access_key_id="AKIA"), "b": RegionSettings(server_url="x")}
    with pytest.raises(UnknownRegionError, match="a"):
        ReplicantService(
            ServiceSettings(region="b", regions=regions),
            MemoryKV(),
            NamespaceReaders(BlockResolver()),
        )


# the store: leases


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_a_lease_is_held_until_it_expires() -> None:
    store = ReplicantStore(MemoryKV())
    assert store.try_lease("m", "p1", 10, now=100)
    assert not store.try_lease("m", "p2", 10, now=105)
    assert store.try_lease("m", "p1", 10, now=105)  # renewal
    assert not store.try_lease("m", "p2", 10, now=114)
    assert store.try_lease("m", "p2", 10, now=116)  # p1 stopped renewing at 105 + 10
    assert not store.try_lease("m", "p1", 10, now=117)
    store.release_lease("m", "p1")  # not the holder: nothing happens
    assert store.get_lease("m") is not None and store.get_lease("m").owner == "p2"  # type: ignore[union-attr]
    store.release_lease("m", "p2")
    assert store.get_lease("m") is None


def test_mirror_configs_round_trip() -> None:
    store = ReplicantStore(MemoryKV())
    config = MirrorConfig("m", "a", "origin", "b", "local://m", ("main", "rel-*"), False, 7)
    store.add_mirror(config)
    assert store.get_mirror("m") == config
    assert config.mirrors_branch("rel-1") and not config.mirrors_branch("dev")
    with pytest.raises(MirrorExistsError):
        store.add_mirror(config)
    store.delete_mirror("m")
    assert list(store.list_mirrors()) == []


@settings(max_examples=60, deadline=None)
@given(st.lists(st.lists(st.integers(0, 30), max_size=3), min_size=1, max_size=30))
def test_commits_are_importedparents_first(parent_choices: list[list[int]]) -> None:
    commits: dict[str, RemoteCommit] = {}
    for i, choices in enumerate(parent_choices):
        parents = tuple(sorted({f"c{p % i}" for p in choices})) if i else ()
        commits[f"c{i}"] = RemoteCommit(f"c{i}", parents, "", 0, 0, {})
    ordered = parents_first(commits)
    assert sorted(c.id for c in ordered) == sorted(commits)
    position = {c.id: n for n, c in enumerate(ordered)}
    for c in ordered:
        assert all(position[p] < position[c.id] for p in c.parents)


def _series_of(service: ReplicantService, mirror: str) -> list[str]:
    return [
        f"{sample.name}{sample.labels}"
        for family in service.metrics.registry.collect()
        for sample in family.samples
        if sample.labels.get("mirror") == mirror
    ]


@pytest.mark.anyio
async def test_a_deleted_mirror_leaves_no_series(service: ReplicantService) -> None:
    await service.create_mirror("origin", _req())
    held = {"mirror": "origin-mirror"}
    assert service.metrics.registry.get_sample_value("lakemirror_lease_held", held) == 1
    await service.delete_mirror("origin", "origin-mirror")
    assert _series_of(service, "origin-mirror") == []


@pytest.mark.anyio
async def test_a_mirror_deleted_through_another_replica_leaves_no_series(
    service: ReplicantService,
) -> None:
    await service.create_mirror("origin", _req(name="other-mirror"))
    assert _series_of(service, "other-mirror")
    service.store.delete_mirror("other-mirror")  # as the configuration API of another replica
    await service.rebalance()
    assert service.working() == []
    assert _series_of(service, "other-mirror") == []
