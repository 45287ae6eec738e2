"""The scenarios of transactional mirroring, each across two regions of real processes.

Region ``a``'s server holds the source repository, region ``b``'s server the mirror; a replicant
process of region ``b`` mirrors; a replication simulator copies files between the regions'
namespaces late and out of order. A safety checker reads the mirror head all along.

Every scenario runs on both backends: the embedded one (SQLite + local directories) and
DynamoDB + S3, each region on its own dynalite process and its own moto server process, since
what the guarantees rest on (the mirror head's conditional update, the validated-range set,
listings and reads of the mirror's namespace) is a different driver there. On DynamoDB + S3 the
scenarios write a tenth of the objects (:func:`scaled`): a moto server answers one request at a
time, and a tenth still takes every path each scenario is about.
"""

from __future__ import annotations

import io
import json
import threading
import time
from collections.abc import Iterator

import lakefs
import pytest

from tests.e2e.regions import (
    BACKENDS,
    Replicant,
    SafetyChecker,
    TwoRegions,
    backend_world,
    objects_at,
    unique,
    wait_for,
)

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module", params=BACKENDS)
def world(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[TwoRegions]:
    """Regions ``a`` and ``b`` on the embedded backend, then on DynamoDB + S3."""
    with backend_world(request, tmp_path_factory.mktemp("regions")) as regions:
        yield regions


@pytest.fixture
def replicant(world: TwoRegions) -> Iterator[Replicant]:
    with world.replicant("r1") as running:
        yield running


MAX_LAG = {"embedded": 15.0, "dynamodb-s3": 30.0}
"""Seconds the mirror may trail its source during the commit storm: one replication delay plus
one validation, which on DynamoDB + S3 waits its turn at moto behind the writer's uploads and
the simulator's listings."""


def scaled(world: TwoRegions, embedded: int) -> int:
    """Return how many objects a scenario writes: a tenth of ``embedded`` on DynamoDB + S3.

    A moto server answers one request at a time, so the same scenario costs far more there;
    a tenth still takes every branch the scenario is about.
    """
    return embedded if world.backend == "embedded" else max(embedded // 10, 10)


def _mirror(
    world: TwoRegions, replicant: Replicant, source: str, source_ns: str, **sim: object
) -> tuple[str, str]:
    name = unique("mirror")
    namespace = world.b.namespace(name)
    world.simulator(source_ns, namespace, **sim)
    response = world.create_mirror(replicant, source, name, namespace)
    assert response.status_code == 201, response.text
    return name, namespace


def _advances(replicant: Replicant, name: str) -> float:
    """Return how many times ``replicant`` counted an advance of mirror ``name``'s heads."""
    return replicant.metric("lakemirror_head_advances_total", mirror=name)


def test_basic_flow_commits_appear_whole_and_uncommitted_never(
    world: TwoRegions, replicant: Replicant
) -> None:
    count = scaled(world, 100)
    repo, ns = world.source_repo()
    main = repo.branch("main")
    name, _ = _mirror(world, replicant, repo.id, ns, seed=1, delay=(0.0, 0.3))
    checker = SafetyChecker(world.b, name).start()
    try:
        wait_for(lambda: world.b.head(name, "main") == main.get_commit().id, 30, "initial sync")
        for i in range(count):
            main.object(f"table/part-{i:03}.csv").upload(f"row,{i}\n".encode() * (i + 1))
        # the data files replicate, but nothing uncommitted may show on the mirror
        sim = world.simulators[-1]
        wait_for(lambda: sim.stats.copied >= count and sim.stats.pending == 0, 30, "replication")
        assert objects_at(world.b.client, name, "main") == {}
        advances = replicant.metric("lakemirror_head_advances_total", mirror=name)
        commit = main.commit(f"add {count} objects")
        wait_for(lambda: world.b.head(name, "main") == commit.get_commit().id, 30, "mirror head")
        # the replicant counts an advance once the destination has answered the head's move
        wait_for(lambda: _advances(replicant, name) > advances, 30, "the advance counted")
        assert objects_at(world.b.client, name, "main") == objects_at(
            world.a.client, repo.id, commit.get_commit().id
        )
        status = world.mirror_status(replicant, repo.id, name)
        branch = next(s for s in status["status"] if s["branch"] == "main")
        assert branch["state"] == "synced" and branch["mirror_head"] == commit.get_commit().id
        assert _advances(replicant, name) == advances + 1
    finally:
        checker.stop()
    assert checker.violations == []
    assert checker.objects_read >= count


def test_metadata_before_data_is_never_exposed(world: TwoRegions, replicant: Replicant) -> None:
    """An Iceberg-like table whose small metadata files overtake its data files."""
    repo, ns = world.source_repo("iceberg")
    main = repo.branch("main")
    name, _ = _mirror(world, replicant, repo.id, ns, seed=7, delay=(0.0, 1.5), small_first=True)
    checker = SafetyChecker(world.b, name).start()
    try:
        heads = []
        for snapshot in range(1, 6):
            for f in range(4):
                main.object(f"tbl/data/s{snapshot}-{f}.parquet").upload(
                    bytes([snapshot]) * (200_000 + f)
                )
            manifest = {"snapshot": snapshot, "files": [f"s{snapshot}-{f}" for f in range(4)]}
            main.object(f"tbl/metadata/v{snapshot}.metadata.json").upload(
                json.dumps(manifest).encode()
            )
            main.object("tbl/metadata/version-hint.text").upload(str(snapshot).encode())
            heads.append(main.commit(f"snapshot {snapshot}").get_commit().id)
        wait_for(lambda: world.b.head(name, "main") == heads[-1], 60, "the last snapshot")
        hint = lakefs.Repository(name, client=world.b.client).ref("main")
        version = hint.object("tbl/metadata/version-hint.text").reader(mode="rb").read()
        assert version == b"5"
        data = hint.object("tbl/data/s5-3.parquet").reader(mode="rb").read()
        assert io.BytesIO(data).getbuffer().nbytes == 200_003
    finally:
        checker.stop()
    assert checker.violations == []


def test_skipped_commits_only_the_newest_head_is_validated(world: TwoRegions) -> None:
    """1,000 objects added (100 on DynamoDB + S3), all but one deleted, both committed while
    the replicant is down."""
    count = scaled(world, 1000)
    repo, ns = world.source_repo("skip")
    main = repo.branch("main")
    name = unique("mirror")
    namespace = world.b.namespace(name)
    world.simulator(ns, namespace, seed=3, delay=(0.0, 0.5))
    main.object("base.txt").upload(b"base")
    first = main.commit("base").get_commit().id
    with world.replicant("skip-1") as replicant:
        assert world.create_mirror(replicant, repo.id, name, namespace).status_code == 201
        wait_for(lambda: world.b.head(name, "main") == first, 30, "the first commit")
    paths = [f"big/obj-{i:04}.bin" for i in range(count)]
    for i, path in enumerate(paths):
        main.object(path).upload(bytes([i % 251]) * 1024)
    main.commit(f"add {count} objects")
    main.delete_objects(paths[1:])
    last = main.commit(f"delete {count - 1} of them").get_commit().id
    with world.replicant("skip-2") as replicant:
        wait_for(lambda: world.b.head(name, "main") == last, 60, "the newest head")
        wait_for(lambda: _advances(replicant, name) >= 1, 30, "the advance counted")
        assert replicant.metric("lakemirror_commits_skipped_total", mirror=name) == 1
        assert replicant.metric("lakemirror_head_advances_total", mirror=name) == 1
        complete = replicant.metric("lakemirror_validations_total", mirror=name, result="complete")
        assert complete == 1
        # only the one surviving new object needed a check; the deleted ones were never read
        present = replicant.metric(
            "lakemirror_validation_objects_total", mirror=name, result="present"
        )
        assert present == 1
    assert set(objects_at(world.b.client, name, "main")) == {"base.txt", paths[0]}


def test_catching_up_under_a_commit_every_200ms(world: TwoRegions, replicant: Replicant) -> None:
    repo, ns = world.source_repo("storm")
    main = repo.branch("main")
    name, _ = _mirror(world, replicant, repo.id, ns, seed=11, delay=(0.5, 2.0))
    initial = main.get_commit().id
    wait_for(lambda: world.b.head(name, "main") == initial, 30, "initial sync")
    seen_heads: list[str] = []
    lags: list[float] = []
    stop = threading.Event()

    def sample() -> None:
        while not stop.is_set():
            head = world.b.head(name, "main")
            if head and (not seen_heads or seen_heads[-1] != head):
                seen_heads.append(head)
            status = world.mirror_status(replicant, repo.id, name)["status"]
            lags.extend(s["lag_seconds"] for s in status if s["branch"] == "main")
            stop.wait(0.2)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    commits = []
    try:
        for i in range(40):
            started = time.monotonic()
            main.object(f"events/{i:03}.json").upload(json.dumps({"i": i}).encode() * 50)
            commits.append(main.commit(f"event {i}").get_commit().id)
            time.sleep(max(0.0, 0.2 - (time.monotonic() - started)))  # the writer's cadence
        heads_while_writing = len(seen_heads)
        wait_for(lambda: world.b.head(name, "main") == commits[-1], 30, "catching up")
    finally:
        stop.set()
        sampler.join(timeout=30)
    # the head kept advancing during the storm, skipping commits rather than falling behind
    assert heads_while_writing >= 3
    wait_for(
        lambda: replicant.metric("lakemirror_commits_skipped_total", mirror=name) > 0,
        30,
        "a skipped commit counted",
    )
    assert set(seen_heads) <= {initial, *commits}
    assert max(lags) < MAX_LAG[world.backend]
