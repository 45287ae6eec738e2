"""Mirroring under injected faults: reordering, delays, drops and stalls of replication, a
replicant killed mid-validation, and a second replica taking over a dead one's mirrors.

Every scenario runs on both backends: the embedded one (SQLite + local directories) and
DynamoDB + S3 (each region on its own dynalite and its own moto server process), since leases,
the validated-range set and the object checks go through the KV and the object store and each
backend answers them differently (conditional writes, listings, eventual absence). The seeded
chaos run takes three seeds in turn on the embedded backend and one on DynamoDB + S3, and the kill
scenario writes 360 objects there instead of 1,500 (still two ranges, the withheld object in the
first): a moto server answers one request at a time, and the point on that backend is that the
same guarantees hold, which one seed and two ranges show.
"""

from __future__ import annotations

import random
from collections.abc import Iterator

import pytest

from tests.e2e.regions import (
    BACKENDS,
    Replicant,
    SafetyChecker,
    TwoRegions,
    backend_world,
    unique,
    wait_for,
)

pytestmark = pytest.mark.slow

CHAOS_SEEDS = {"embedded": (101, 202, 303), "dynamodb-s3": (101,)}
"""Seeds of the chaos run, taken in turn by one test per backend (one module-scoped world each)."""

KILL_ROWS = {"embedded": 1500, "dynamodb-s3": 360}
"""Objects of the kill scenario: ``rows/00000.csv`` onwards split into ranges after rows 334
and 1036 (ranges end where a key's hash says so), so both counts give several ranges, and
``rows/00042.csv`` (withheld) is in the first."""


@pytest.fixture(scope="module", params=BACKENDS)
def world(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[TwoRegions]:
    """Regions ``a`` and ``b`` on the embedded backend, then on DynamoDB + S3."""
    with backend_world(request, tmp_path_factory.mktemp("regions")) as regions:
        yield regions


@pytest.fixture
def replicant(world: TwoRegions) -> Iterator[Replicant]:
    with world.replicant("faults") as running:
        yield running


def test_no_incomplete_commit_is_ever_exposed(world: TwoRegions, replicant: Replicant) -> None:
    for seed in CHAOS_SEEDS[world.backend]:
        chaos_run(world, replicant, seed)


_MIDDLE = 5
"""The step of a chaos run whose head is waited for (checked) before the run goes on."""


def chaos_run(world: TwoRegions, replicant: Replicant, seed: int) -> None:
    """Twelve random commits under delayed, dropped and stalled replication, seeded by ``seed``;
    the safety checker must find every object of every mirror head."""
    rng = random.Random(seed)
    repo, ns = world.source_repo(f"chaos{seed}")
    main = repo.branch("main")
    name = unique("mirror")
    namespace = world.b.namespace(name)
    sim = world.simulator(
        ns,
        namespace,
        seed=seed,
        delay=(0.0, 1.0),
        drop_probability=0.2,
        drop_for=(0.3, 1.5),
        small_first=rng.random() < 0.5,
    )
    assert world.create_mirror(replicant, repo.id, name, namespace).status_code == 201
    checker = SafetyChecker(world.b, name).start()
    live: list[str] = []
    heads = []
    try:
        for step in range(12):
            for _ in range(rng.randint(1, 6)):
                path = f"t/{rng.randint(0, 40):02}/{rng.randint(0, 10**6)}.dat"
                size = rng.choice([10, 1_000, 50_000, 300_000])
                main.object(path).upload(rng.randbytes(size))
                live.append(path)
            if live and rng.random() < 0.4:
                gone = rng.sample(live, k=min(len(live), rng.randint(1, 3)))
                main.delete_objects(gone)
                live = [p for p in live if p not in gone]
            heads.append(main.commit(f"step {step}").get_commit().id)
            if rng.random() < 0.25:
                sim.stall()
            elif sim.stats.stalled:
                sim.resume()
            if step == _MIDDLE:
                # one head half-way is waited for until checked, so that more than one head is
                # checked whatever the run's pace (the checker samples the head as it moves)
                stalled = sim.stats.stalled
                sim.resume()
                wait_for(lambda: heads[-1] in checker.checked, 60, "a head half-way checked")
                if stalled:
                    sim.stall()
        sim.resume()
        wait_for(lambda: world.b.head(name, "main") == heads[-1], 60, "the last head")
        wait_for(lambda: heads[-1] in checker.checked, 60, "the last head checked")
    finally:
        checker.stop()
    assert checker.violations == [], f"seed {seed}"
    assert len(checker.checked) >= 2, f"seed {seed}"
    assert sim.stats.dropped > 0, f"seed {seed}"


def _working(replicant: Replicant) -> list[str]:
    response = replicant.http.get("/healthz")
    if response.status_code != 200:
        return []
    working: list[str] = response.json()["working"]
    return working


def test_kill_during_validation_resumes_without_advancing_or_rereading(
    world: TwoRegions,
) -> None:
    repo, ns = world.source_repo("kill")
    main = repo.branch("main")
    name = unique("mirror")
    namespace = world.b.namespace(name)
    sim = world.simulator(ns, namespace, seed=5)
    sim.stall()
    rows = KILL_ROWS[world.backend]
    for i in range(rows):
        main.object(f"rows/{i:05}.csv").upload(f"{i}\n".encode())
    target = main.commit(f"{rows} rows").get_commit().id
    address = main.object("rows/00042.csv").stat().physical_address
    held = address.rsplit("/", 3)[-3:]
    withheld_key = "/".join(held)
    sim.withhold(lambda key: key == withheld_key)
    sim.resume()
    source, mirror = world.a.store(ns), world.b.store(namespace)

    def only_the_held_one_missing() -> bool:
        missing = {o.key for o in source.list()} - {o.key for o in mirror.list()}
        return missing == {withheld_key}

    # every other file must have arrived first (on S3 the copies take a while), so that the one
    # missing file the first replica waits on is the held object, not a range still on its way
    wait_for(only_the_held_one_missing, 120, "every file but the held one", interval=0.5)

    def waiting_on_one(replicant: Replicant) -> bool:
        status = world.mirror_status(replicant, repo.id, name)["status"]
        return any(s["state"] == "waiting" and s["missing_objects"] == 1 for s in status)

    with world.replicant("victim", lease=2.0) as first:
        assert world.create_mirror(first, repo.id, name, namespace).status_code == 201
        wait_for(lambda: waiting_on_one(first), 60, "validation waiting on the held object")
        first_range_gets = first.metric(
            "lakemirror_validation_requests_total", mirror=name, op="get"
        )
        first.kill()
    before = world.b.head(name, "main")
    assert before != target
    with world.replicant("victim", lease=2.0) as second:

        def resumed() -> bool:
            # the status in the KV is the killed replica's until the new one writes its own: wait
            # for a pass of the new replica's validator, not for the status alone
            passes = second.metric("lakemirror_validations_total", mirror=name, result="incomplete")
            return passes >= 1 and waiting_on_one(second)

        wait_for(resumed, 60, "validation resumed by the second replica")
        assert world.b.head(name, "main") == before
        # ranges found complete before the kill are known from the KV: not read again
        assert second.metric("lakemirror_cache_hits_total", mirror=name, cache="range") >= 1
        second_gets = second.metric("lakemirror_validation_requests_total", mirror=name, op="get")
        assert second_gets < first_range_gets
        sim.release()
        wait_for(lambda: world.b.head(name, "main") == target, 30, "the validated head")


def test_one_replica_works_a_mirror_and_another_takes_over(world: TwoRegions) -> None:
    repo, ns = world.source_repo("replicas")
    main = repo.branch("main")
    name = unique("mirror")
    namespace = world.b.namespace(name)
    world.simulator(ns, namespace, seed=9)
    lease = 2.0
    with world.replicant("p1", lease=lease) as p1, world.replicant("p2", lease=lease) as p2:
        assert world.create_mirror(p1, repo.id, name, namespace).status_code == 201
        wait_for(lambda: (name in _working(p1)) != (name in _working(p2)), 30, "exactly one worker")
        owner, other = (p1, p2) if name in _working(p1) else (p2, p1)
        main.object("a.txt").upload(b"a")
        first = main.commit("a").get_commit().id
        wait_for(lambda: world.b.head(name, "main") == first, 30, "mirroring by the owner")
        assert name not in _working(other)
        owner.kill()
        wait_for(lambda: name in _working(other), lease + 5, "the other replica taking over")
        status = world.mirror_status(other, repo.id, name)
        assert status["worker"] == other.replica_id
        main.object("b.txt").upload(b"b")
        second = main.commit("b").get_commit().id
        wait_for(lambda: world.b.head(name, "main") == second, 30, "mirroring after takeover")
