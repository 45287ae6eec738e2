"""Promotion and adoption by the replicant service, on two regions' API apps in this process.

Each region is a real lakeFS-compatible app (in-memory KV, ``mem://`` namespaces) reached through
httpx's ASGI transport; each region has its own replicant service with running workers.
Object-store replication is a task copying files between the namespaces, with files held back
on demand; a region can be made unreachable (its calls fail to connect).
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field

import httpx
import pytest

from mirror.config import RegionSettings
from mirror.errors import ConflictError, ReadOnlyError, UnavailableError
from mirror.kv import KV, MemoryKV
from mirror.replicant.adoption import DivergedError, _new_branch
from mirror.replicant.client import LakeFSClient
from mirror.replicant.preservation import CopiedBranch, FilesMissingError
from mirror.replicant.promotion import AlreadyPromotedError, NotSyncedError
from mirror.replicant.readers import NamespaceReaders
from mirror.replicant.service import MirrorRequest, ReplicantService, ServiceSettings
from mirror.replicant.state import BranchStatus, MirrorConfig
from tests.inprocess import REPLICATOR
from tests.unit.test_replicant import Region, _region


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


class _Switchable(httpx.AsyncBaseTransport):
    """An app's ASGI transport that fails to connect while its region is down."""

    def __init__(self, region: Region, down: set[str]) -> None:
        self._inner = httpx.ASGITransport(app=region.app)
        self._name = region.name
        self._down = down

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        if self._name in self._down:
            raise httpx.ConnectError(f"region {self._name} is down", request=request)
        return await self._inner.handle_async_request(request)


async def _until(condition: Callable[[], bool], what: str, timeout: float = 15.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.01)  # a poll of a deadline-bounded wait


@dataclass
class World:
    a: Region
    b: Region
    source_ns: str
    mirror_ns: str
    down: set[str]
    held: set[str] = field(default_factory=set)
    reverse: bool = False
    services: dict[str, ReplicantService] = field(default_factory=dict)

    def replicate_once(self) -> None:
        pairs = [(self.a, self.source_ns, self.b, self.mirror_ns)]
        if self.reverse:
            pairs.append((self.b, self.mirror_ns, self.a, self.source_ns))
        for src_region, src_ns, dst_region, dst_ns in pairs:
            src, dst = src_region.resolver.open(src_ns), dst_region.resolver.open(dst_ns)
            for info in list(src.list()):
                if info.key not in self.held and not dst.exists(info.key):
                    dst.put(info.key, src.get(info.key))

    def service(self, region: str) -> ReplicantService:
        return self.services[region]

    def head(self, region: Region, repo: str, branch: str = "main") -> str | None:
        if not region.catalog.branch_exists(repo, branch):
            return None
        return str(region.catalog.get_branch(repo, branch).commit_id)

    def hold(self, region: Region, repo: str, path: str) -> None:
        address = region.catalog.stat_object(repo, "main", path).physical_address
        self.held.add(address.split("/", 3)[-1])


def _commit(region: Region, repo: str, files: dict[str, bytes], message: str) -> str:
    for path, data in files.items():
        region.catalog.upload_object(repo, "main", path, data)
    return str(region.catalog.commit(repo, "main", message).commit.id)


def _service(world: World, name: str, kv: KV | None = None) -> ReplicantService:
    regions = {"a": world.a, "b": world.b}

    def factory(s: RegionSettings) -> LakeFSClient:
        region = regions[(s.server_url or "").removeprefix("http://")]
        transport = _Switchable(region, world.down)
        return LakeFSClient(s.server_url or "", *REPLICATOR, transport=transport)

    settings = ServiceSettings(
        region=name,
        regions={n: RegionSettings(server_url=f"http://{n}") for n in regions},
        poll_interval=0.02,
        replica_id=f"unit-{name}",
    )
    return ReplicantService(
        settings, kv or MemoryKV(), NamespaceReaders(regions[name].resolver), client_factory=factory
    )


@pytest.fixture
async def world() -> AsyncIterator[World]:
    a, b = _region("a"), _region("b")
    tag = uuid.uuid4().hex[:8]
    w = World(a, b, f"mem://src-{tag}", f"mem://dst-{tag}", set())
    a.catalog.create_repository("origin", w.source_ns)
    w.services = {"a": _service(w, "a"), "b": _service(w, "b")}

    async def replicate() -> None:
        while True:
            w.replicate_once()
            await asyncio.sleep(0.01)

    copier = asyncio.create_task(replicate())
    yield w
    copier.cancel()
    await asyncio.gather(copier, return_exceptions=True)
    for service in w.services.values():
        await service.stop()


async def _mirrored(world: World) -> str:
    """Mirror a/origin into b/origin-mirror and wait for its first commit; return it."""
    c1 = _commit(world.a, "origin", {"x.csv": b"x" * 100}, "one")
    request = MirrorRequest(name="origin-mirror", region="b", storage_namespace=world.mirror_ns)
    await world.service("b").create_mirror("origin", request)
    await _until(lambda: world.head(world.b, "origin-mirror") == c1, "the mirror at c1")
    return c1


def _stalled_commit(world: World) -> str:
    """Commit in a a file replication holds back; return the commit."""
    world.a.catalog.upload_object("origin", "main", "y.csv", b"y" * 2000)
    world.hold(world.a, "origin", "y.csv")
    return str(world.a.catalog.commit("origin", "main", "two").commit.id)


def _metric(service: ReplicantService, name: str, **labels: str) -> float | None:
    return service.metrics.registry.get_sample_value(name, labels)


@pytest.mark.anyio
async def test_a_planned_promotion_waits_until_the_source_head_validates(world: World) -> None:
    await _mirrored(world)
    c2 = _stalled_commit(world)
    b = world.service("b")
    await _until(
        lambda: [s.state for s in b.status("origin-mirror")] == ["waiting"], "waiting on y.csv"
    )
    promoting = asyncio.create_task(b.promote("origin", "origin-mirror", timeout=20))
    await _until(lambda: world.a.catalog.get_repository("origin").read_only, "a demoted")
    with pytest.raises(ReadOnlyError):
        world.a.catalog.upload_object("origin", "main", "late.csv", b"late")
    assert not promoting.done()
    assert world.b.catalog.get_repository("origin-mirror").read_only
    world.held.clear()
    report = await asyncio.wait_for(promoting, 20)
    assert report.heads == {"main": c2} and report.forced is False and report.missing == {}
    assert report.source == "a/origin" and report.writes_refused_seconds is not None
    assert report.writes_refused_seconds > 0
    assert not world.b.catalog.get_repository("origin-mirror").read_only
    assert b.list_mirrors("origin") == []
    assert b.working() == []
    c3 = _commit(world.b, "origin-mirror", {"z.csv": b"z"}, "three, in b")
    assert world.head(world.b, "origin-mirror") == c3
    record = await b.local.get_promotion("origin-mirror")
    assert record is not None and record["from"] == "a/origin" and record["heads"] == {"main": c2}
    assert _metric(b, "lakemirror_promotions_total", mirror="origin-mirror", kind="planned") == 1
    refused = _metric(b, "lakemirror_switchover_writes_refused_seconds", mirror="origin-mirror")
    assert refused == report.writes_refused_seconds
    with pytest.raises(AlreadyPromotedError, match="already promoted at"):
        await b.promote("origin", "origin-mirror")


@pytest.mark.anyio
async def test_a_planned_promotion_that_times_out_leaves_the_source_writable(
    world: World,
) -> None:
    c1 = await _mirrored(world)
    c2 = _stalled_commit(world)
    b = world.service("b")
    with pytest.raises(NotSyncedError, match=r"main: 1 commit\(s\) behind") as refused:
        await b.promote("origin", "origin-mirror", timeout=0.5)
    assert isinstance(refused.value, ConflictError)
    assert c2 in str(refused.value) and "writable again" in str(refused.value)
    assert not world.a.catalog.get_repository("origin").read_only
    _commit(world.a, "origin", {"after.csv": b"a"}, "writes go on in a")
    assert world.b.catalog.get_repository("origin-mirror").read_only
    assert world.head(world.b, "origin-mirror") == c1
    assert [m.name for m in b.list_mirrors("origin")] == ["origin-mirror"]
    assert _metric(b, "lakemirror_promotions_total", mirror="origin-mirror", kind="planned") is None


@pytest.mark.anyio
async def test_an_unreachable_source_needs_force(world: World) -> None:
    await _mirrored(world)
    world.down.add("a")
    with pytest.raises(UnavailableError, match="force"):
        await world.service("b").promote("origin", "origin-mirror", timeout=1)
    assert world.b.catalog.get_repository("origin-mirror").read_only


@pytest.mark.anyio
async def test_a_forced_promotion_records_the_heads_it_may_miss(world: World) -> None:
    c1 = await _mirrored(world)
    c2 = _stalled_commit(world)
    b = world.service("b")
    await _until(
        lambda: [(s.source_head, s.state) for s in b.status("origin-mirror")] == [(c2, "waiting")],
        "b waiting on c2's files",
    )
    world.down.add("a")
    report = await b.promote("origin", "origin-mirror", force=True)
    assert report.forced and report.heads == {"main": c1}
    assert report.missing == {
        "main": {
            "mirror_head": c1,
            "source_head": c2,
            "lag_commits": 1,
            "lag_commits_at_least": None,
        }
    }
    assert report.writes_refused_seconds is None
    assert not world.b.catalog.get_repository("origin-mirror").read_only
    assert not world.a.catalog.get_repository("origin").read_only  # nothing was asked of a
    assert _metric(b, "lakemirror_promotions_total", mirror="origin-mirror", kind="forced") == 1
    with pytest.raises(AlreadyPromotedError, match="forced"):
        await b.promote("origin", "origin-mirror", force=True)


@pytest.mark.anyio
async def test_adopting_the_old_source_after_a_switchover_follows_the_new_one(
    world: World,
) -> None:
    await _mirrored(world)
    await world.service("b").promote("origin", "origin-mirror", timeout=20)
    c3 = _commit(world.b, "origin-mirror", {"z.csv": b"z" * 300}, "three, in b")
    world.reverse = True
    a = world.service("a")
    request = MirrorRequest(name="origin", region="a", storage_namespace="", existing=True)
    config, preserved = await a.adopt("origin-mirror", request)
    assert preserved == [] and config.adopted and config.source_region == "b"
    assert config.storage_namespace == world.source_ns
    await _until(lambda: world.head(world.a, "origin") == c3, "a following b")
    assert world.a.catalog.get_repository("origin").read_only
    assert world.a.catalog.read_object("origin", c3, "z.csv") == b"z" * 300


async def _failed_over(world: World) -> tuple[str, str]:
    """Fail over to b while a holds an unreplicated commit; b and a then commit apart.

    Returns:
        a's first commit that b lacks, and b's new commit.
    """
    await _mirrored(world)
    c2 = _stalled_commit(world)
    b = world.service("b")
    await _until(
        lambda: [(s.source_head, s.state) for s in b.status("origin-mirror")] == [(c2, "waiting")],
        "b waiting on c2's files",
    )
    world.down.add("a")
    await b.promote("origin", "origin-mirror", force=True)
    c3 = _commit(world.b, "origin-mirror", {"b.csv": b"b"}, "in b after the failover")
    world.down.discard("a")
    _commit(world.a, "origin", {"a.csv": b"a" * 10}, "in a, never replicated")
    world.a.catalog.create_branch("origin", "dev", "main")
    return c2, c3


@pytest.mark.anyio
async def test_adopting_a_diverged_repository_is_refused_naming_the_first_commit(
    world: World,
) -> None:
    c2, _ = await _failed_over(world)
    a = world.service("a")
    request = MirrorRequest(name="origin", region="a", storage_namespace="", existing=True)
    with pytest.raises(DivergedError) as refused:
        await a.adopt("origin-mirror", request)
    message = str(refused.value)
    # c2's record reached b (copied, never advanced to): it still counts as lacking there
    assert f"branch 'main' diverged at commit {c2}" in message
    assert "branch 'dev' diverged" in message and "nothing was changed" in message
    assert not world.a.catalog.get_repository("origin").read_only
    assert a.list_mirrors("origin-mirror") == []


@pytest.mark.anyio
async def test_diverged_heads_are_preserved_and_survive_mirroring(world: World) -> None:
    c2, c3 = await _failed_over(world)
    a_head = world.head(world.a, "origin")
    assert a_head is not None
    world.a.catalog.create_tag("origin", "v2", a_head)
    a = world.service("a")
    request = MirrorRequest(
        name="origin", region="a", storage_namespace="", existing=True, preserve_diverged=True
    )
    config, preserved = await a.adopt("origin-mirror", request)
    [tag_copy] = config.preserved_tags
    assert tag_copy.startswith("preserved-v2-")
    assert sorted(p.from_branch for p in preserved) == ["dev", "main"]
    main = next(p for p in preserved if p.from_branch == "main")
    assert main.branch.startswith("preserved-main-") and main.head == a_head
    assert main.commits == [c2, a_head]  # parents first
    assert main.paths == 2  # y.csv and a.csv
    assert set(config.preserved) == {p.branch for p in preserved}
    assert a.store.get_preserved("origin") == [p.to_json() for p in preserved]
    assert _metric(a, "lakemirror_failback_preserved_commits_total", mirror="origin") == 4
    # b's files have not reached a yet: main waits on c3, one commit past the fork (c1)
    await _until(
        lambda: (
            [(s.branch, s.state, s.source_head, s.missing_objects > 0) for s in a.status("origin")]
            == [("main", "waiting", c3, True)]
        ),
        "a waiting on c3's files",
    )
    assert a.status("origin")[0].lag_commits == 1
    world.reverse = True
    await _until(lambda: world.head(world.a, "origin") == c3, "a's main following b")
    # dev is not at b: the worker deletes it, but never a preserved branch
    await _until(lambda: world.head(world.a, "origin", "dev") is None, "dev deleted")
    worker = a._workers["origin"][0]
    await worker.poll_once()
    for p in preserved:
        assert world.head(world.a, "origin", p.branch) == p.head
    # v2 names a commit b lacks: the mirror drops it, and keeps its copy
    assert dict(world.a.catalog.list_tags("origin")) == {tag_copy: a_head}
    assert world.a.catalog.read_object("origin", main.branch, "a.csv") == b"a" * 10
    assert world.a.catalog.read_object("origin", main.branch, "y.csv") == b"y" * 2000
    assert world.a.catalog.get_repository("origin").read_only
    # the second step of fail-back: main's preserved commits are copied to b
    records = [await a.local.get_commit("origin", c) for c in main.commits]
    await world.service("b").local.preserve_branch("origin-mirror", main.branch, main.head, records)
    # the writable role moves back to a; preserved branches and tags are not waited for
    report = await a.promote("origin-mirror", "origin", timeout=20)
    assert report.heads == {"main": c3} and report.tags == {}
    assert world.b.catalog.get_repository("origin-mirror").read_only
    assert not world.a.catalog.get_repository("origin").read_only


@pytest.mark.anyio
async def test_a_forced_promotion_counts_the_commits_copied_but_never_counted(
    world: World,
) -> None:
    c1 = await _mirrored(world)
    b = world.service("b")
    heads = []
    for i in range(3):
        world.a.catalog.upload_object("origin", "main", f"late{i}.csv", b"z" * 500)
        world.hold(world.a, "origin", f"late{i}.csv")
        heads.append(str(world.a.catalog.commit("origin", "main", f"late {i}").commit.id))
    await _until(
        lambda: (
            [(s.source_head, s.state) for s in b.status("origin-mirror")]
            == [(heads[-1], "waiting")]
        ),
        "b waiting on the late files",
    )
    await b.stop()
    # what a replica stopped between copying the records and counting them leaves behind
    seen = BranchStatus("main", "validating", heads[-1], c1, lag_commits=None)
    seen.lag_commits_at_least = 1
    b.store.put_status("origin-mirror", seen)
    world.down.add("a")
    again = _service(world, "b", b.store.kv)
    world.services["b-again"] = again
    report = await again.promote("origin", "origin-mirror", force=True)
    assert report.missing == {
        "main": {
            "mirror_head": c1,
            "source_head": heads[-1],
            "lag_commits": 3,
            "lag_commits_at_least": None,
        }
    }


@pytest.mark.anyio
async def test_a_mirror_made_writable_meanwhile_is_not_promoted(world: World) -> None:
    await _mirrored(world)
    b = world.service("b")
    await b.local.promote_repository("origin-mirror", {"from": "an operator"})
    with pytest.raises(ConflictError) as refused:
        await b.promote("origin", "origin-mirror")
    assert str(refused.value) == "repository 'origin-mirror' is not a mirror"
    assert not world.a.catalog.get_repository("origin").read_only  # the source was left alone


@pytest.mark.anyio
async def test_a_mirror_of_another_repository_is_not_adopted(world: World) -> None:
    await _mirrored(world)
    b = world.service("b")
    await b.delete_mirror("origin", "origin-mirror")  # the repository stays, mirroring a/origin
    world.a.catalog.create_repository("other", f"mem://other-{uuid.uuid4().hex[:8]}")
    request = MirrorRequest(name="origin-mirror", region="b", storage_namespace="", existing=True)
    with pytest.raises(ConflictError, match="is a mirror of a/origin, not of a/other"):
        await b.adopt("other", request)
    assert b.list_mirrors("other") == []


@pytest.mark.anyio
async def test_a_preserved_branch_is_copied_once_its_files_arrived(world: World) -> None:
    c2, _ = await _failed_over(world)
    a = world.service("a")
    request = MirrorRequest(
        name="origin", region="a", storage_namespace="", existing=True, preserve_diverged=True
    )
    _, preserved = await a.adopt("origin-mirror", request)
    main = next(p for p in preserved if p.from_branch == "main")
    b = world.service("b")
    # y.csv (of c2) is still held back on its way from a to b
    with pytest.raises(FilesMissingError, match="1 file") as missing:
        await b.copy_preserved("origin-mirror", "a", "origin", main.branch)
    assert next(iter(world.held)) in str(missing.value)
    assert world.head(world.b, "origin-mirror", main.branch) is None
    world.held.clear()
    copied = await _copy_when_complete(b, main.branch)
    assert copied.head == main.head and copied.commits == [main.head]  # c2's record was there
    assert copied.source == "a/origin"
    assert world.head(world.b, "origin-mirror", main.branch) == main.head
    assert world.b.catalog.read_object("origin-mirror", main.branch, "a.csv") == b"a" * 10
    assert world.b.catalog.read_object("origin-mirror", main.branch, "y.csv") == b"y" * 2000
    again = await b.copy_preserved("origin-mirror", "a", "origin", main.branch)
    assert again.commits == [] and again.head == main.head
    assert c2 in main.commits


async def _copy_when_complete(service: ReplicantService, branch: str) -> CopiedBranch:
    deadline = time.monotonic() + 15
    while True:
        try:
            return await service.copy_preserved("origin-mirror", "a", "origin", branch)
        except FilesMissingError:
            if time.monotonic() > deadline:
                raise
            await asyncio.sleep(0.02)  # replication is a background copier: poll to a deadline


@pytest.mark.anyio
async def test_a_preserved_branch_name_taken_gets_a_suffix(world: World) -> None:
    head = _commit(world.a, "origin", {"x.csv": b"x"}, "one")
    world.a.catalog.create_branch("origin", "preserved-main-20261124T000000", "main")
    config = MirrorConfig("origin", "b", "origin-mirror", "a", world.source_ns)
    name = await _new_branch(world.service("a"), config, "preserved-main-20261124T000000", head)
    assert name == "preserved-main-20261124T000000-2"
    assert world.head(world.a, "origin", name) == head
