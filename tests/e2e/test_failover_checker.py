"""The checkers of the failover scenarios catch what they are there to catch.

Against the two regions' real servers: a writer committing to region ``a`` while region ``b``
holds a read-only mirror repository shows one writable region and one chain of commits; the same
repository writable in both regions (a planted split brain) is reported, and so is a writer that
went on in the other region from a head that was not its last acknowledged commit.
"""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest

from tests.e2e.failover import (
    Ack,
    ContinuousWriter,
    Sample,
    WritableRegionChecker,
    ack_violations,
    objects_at,
)
from tests.e2e.regions import TwoRegions, unique, wait_for


@pytest.fixture
def replicator_b(world: TwoRegions) -> Iterator[httpx.Client]:
    key, secret = world.replicator_key
    with httpx.Client(
        base_url=f"{world.b.server.url}/api/v1", auth=(key, secret), timeout=30.0
    ) as client:
        yield client


def _sample(region: str, at: float, state: str, head: str | None = None) -> Sample:
    return Sample(region, at, state, head, None)


def test_overlap_needs_two_readings_that_bracket_the_other_region() -> None:
    checker = WritableRegionChecker(targets=[])
    # a handed over to b: a read-only before b was read writable
    checker.samples = [
        _sample("a", 1, "writable", "c1"),
        _sample("b", 2, "read-only"),
        _sample("a", 3, "read-only", "c1"),
        _sample("b", 4, "writable", "c1"),
        _sample("a", 5, "unreachable"),
        _sample("b", 6, "writable", "c2"),
    ]
    assert checker.violations() == []
    # a still writable after b was read writable: both at once, with different heads
    checker.samples = [
        _sample("a", 1, "writable", "c1"),
        _sample("b", 2, "writable", "x1"),
        _sample("a", 3, "writable", "c2"),
    ]
    found = checker.violations()
    assert len(found) == 2
    assert "regions a and b both writable at 2.000" in found[0]
    assert "writable in a at c1 and in b at x1" in found[1]


def test_acknowledgements_must_form_one_chain() -> None:
    def ack(region: str, commit: str, parent: str) -> Ack:
        return Ack(region, "r", "main", commit, parent, "p", b"", 0.0)

    assert ack_violations([ack("a", "c1", "c0"), ack("a", "c2", "c1"), ack("b", "c3", "c2")]) == []
    forked = ack_violations([ack("a", "c1", "c0"), ack("a", "c2", "c1"), ack("b", "c3", "c1")])
    assert forked == [
        "b acknowledged c3 on c1, not on c2 acknowledged before by a",
        "a and b both acknowledged a commit on c1: c2, c3",
    ]


def test_one_writable_region_and_a_writer_refused_by_the_mirror(
    world: TwoRegions, replicator_b: httpx.Client
) -> None:
    source, _ = world.source_repo("single")
    name = source.id
    created = replicator_b.post(
        "/mirror/repositories",
        json={
            "name": name,
            "storage_namespace": world.b.namespace(name),
            "default_branch": "main",
            "mirror_of": f"a/{name}",
        },
    )
    assert created.status_code == 201, created.text
    targets = [("b", world.b, name), ("a", world.a, name)]
    checker = WritableRegionChecker(targets).start()
    writer = ContinuousWriter(targets, interval=0.02).start()
    try:
        wait_for(lambda: len(writer.acked()) >= 10, 30, "ten acknowledged commits")
        wait_for(lambda: len(checker.readings("b")) >= 10, 30, "readings of both regions")
    finally:
        writer.stop()
        checker.stop()
    # the mirror refused the first write (403) and the writer moved on to a for good
    assert writer.refusals[0].region == "b" and writer.refusals[0].status == 403
    assert {a.region for a in writer.acked()} == {"a"}
    assert checker.violations() == []
    assert checker.writable_regions() == {"a"}
    assert {s.state for s in checker.readings("b")} == {"read-only"}
    assert ack_violations(writer.acked()) == []
    stored = objects_at(world.a, name, writer.acked()[-1].commit)
    assert {a.path: a.data for a in writer.acked()}.items() <= stored.items()


def test_a_planted_split_brain_is_reported(world: TwoRegions) -> None:
    name = unique("split")
    for region in (world.a, world.b):
        created = region.http.post(
            "/repositories", json={"name": name, "storage_namespace": region.namespace(name)}
        )
        assert created.status_code == 201, created.text
    targets = [("a", world.a, name), ("b", world.b, name)]
    checker = WritableRegionChecker(targets).start()
    writer = ContinuousWriter(targets, interval=0.02).start()
    try:
        wait_for(lambda: len(writer.acked("a")) >= 3, 30, "commits in region a")
        wait_for(lambda: len(checker.readings("b")) >= 3, 30, "readings of both regions")
        # region a loses the repository: the writer goes on in b, from b's own head
        assert world.a.http.delete(f"/repositories/{name}").status_code == 204
        wait_for(lambda: len(writer.acked("b")) >= 3, 30, "commits in region b")
    finally:
        writer.stop()
        checker.stop()
    overlaps = checker.violations()
    assert any("both writable" in v for v in overlaps)
    assert any(v.startswith("branch main writable in") for v in overlaps)
    chain = ack_violations(writer.acked())
    first_b = writer.acked("b")[0]
    last_a = writer.acked("a")[-1]
    # (both repositories may even start from the same initial commit: a fork on it too)
    assert chain[0] == (
        f"b acknowledged {first_b.commit[:12]} on {first_b.parent and first_b.parent[:12]}, "
        f"not on {last_a.commit[:12]} acknowledged before by a"
    )
    assert all(" both acknowledged a commit on " in v for v in chain[1:])
