"""A planned switchover and back, while a writer commits all along.

Region ``a`` holds the source repository and region ``b`` its mirror (same name in both). A writer
commits a new object every 50 ms to whichever region accepts it; a checker reads both regions'
``read_only`` flags and heads all along. The mirror in ``b`` is promoted (the replicant demotes
``a`` first and waits for ``b`` to show ``a``'s last commit), ``a`` adopts the role of mirror of
``b``, and then the same happens the other way round.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest

from tests.e2e.failover import (
    ContinuousWriter,
    Failover,
    WritableRegionChecker,
    ack_violations,
    objects_at,
    repository,
)
from tests.e2e.regions import Replicant, TwoRegions, wait_for

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def failover(world: TwoRegions) -> Iterator[Failover]:
    both = Failover(world)
    try:
        yield both
    finally:
        both.close()


def _promoted(failover: Failover, replicant: Replicant, name: str) -> dict[str, Any]:
    response = failover.promote(replicant, name, name, timeout=60)
    assert response.status_code == 200, response.text
    report: dict[str, Any] = response.json()
    assert report["forced"] is False and report["missing"] == {}
    assert report["writes_refused_seconds"] is not None and report["writes_refused_seconds"] >= 0
    return report


def _adopted(failover: Failover, replicant: Replicant, name: str) -> None:
    response = failover.mirror(replicant, name, name, existing=True)
    assert response.status_code == 201, response.text
    assert response.json().get("preserved", []) == []


def test_planned_switchover_and_back_loses_nothing(failover: Failover) -> None:
    a, b = failover.regions["a"], failover.regions["b"]
    source, ns_a = failover.world.source_repo("planned")
    name = source.id
    ns_b = b.namespace(name)
    targets = [("a", a, name), ("b", b, name)]
    to_b = failover.replicate("a", ns_a, "b", ns_b, seed=5, delay=(0.0, 0.3))
    with failover.replicant("b") as in_b, failover.replicant("a") as in_a:
        assert failover.mirror(in_b, name, name).status_code == 201
        wait_for(lambda: failover.synced(in_b, name, name, "main"), 30, "the mirror in b")
        checker = WritableRegionChecker(targets).start()
        writer = ContinuousWriter(targets, interval=0.05).start()
        try:
            wait_for(lambda: len(writer.acked("a")) >= 10, 30, "commits in a")
            side = a.http.post(
                f"/repositories/{name}/branches", json={"name": "side", "source": "main"}
            )
            assert side.status_code == 201, side.text
            staged = a.http.post(
                f"/repositories/{name}/branches/side/objects",
                params={"path": "staged/never-committed.txt"},
                content=b"uncommitted when a was demoted",
            )
            assert staged.status_code == 201, staged.text
            # a → b
            switched = time.monotonic()
            report = _promoted(failover, in_b, name)
            acked_in_a = writer.acked("a")
            assert report["heads"]["main"] == acked_in_a[-1].commit
            assert report["source"] == f"a/{name}"
            wait_for(lambda: writer.first_ack_after("b", switched), 30, "a commit in b")
            assert repository(a, name) is not None
            assert (repository(a, name) or {})["read_only"] is True
            # the demotion dropped a's uncommitted changes: a mirror branch shows commits only
            uncommitted = a.http.get(f"/repositories/{name}/branches/side/diff")
            assert uncommitted.status_code == 200 and uncommitted.json()["results"] == []
            # every commit a acknowledged is in b, byte for byte
            in_b_now = objects_at(b, name, "main")
            for ack in acked_in_a:
                assert in_b_now[ack.path] == ack.data
            # replication and mirroring reversed: a follows b from the commits it has
            failover.stop_replication(to_b)
            to_a = failover.replicate("b", ns_b, "a", ns_a, seed=6, delay=(0.0, 0.3))
            _adopted(failover, in_a, name)
            wait_for(lambda: len(writer.acked("b")) >= 10, 30, "commits in b")
            # a's mirror follows b's newest head, which moves on while it syncs: any commit
            # acknowledged in b by the time a's head is read will do
            wait_for(
                lambda: a.head(name, "main") in {ack.commit for ack in writer.acked("b")},
                30,
                "a following b",
            )
            # b → a
            back = time.monotonic()
            report_back = _promoted(failover, in_a, name)
            assert report_back["heads"]["main"] == writer.acked("b")[-1].commit
            assert report_back["source"] == f"b/{name}"
            wait_for(lambda: writer.first_ack_after("a", back), 30, "a commit in a again")
            failover.stop_replication(to_a)
            failover.replicate("a", ns_a, "b", ns_b, seed=7, delay=(0.0, 0.3))
            _adopted(failover, in_b, name)
            wait_for(lambda: len(writer.acked("a")) >= len(acked_in_a) + 5, 30, "commits in a")
        finally:
            writer.stop()
            checker.stop()
        last = writer.acked()[-1]
        assert last.region == "a"
        wait_for(lambda: b.head(name, "main") == last.commit, 30, "b mirroring a again")
        for region, replicant in (("b", in_b), ("a", in_a)):
            kind = {"mirror": name, "kind": "planned"}
            assert replicant.metric("lakemirror_promotions_total", **kind) == 1, region
            refused = replicant.metric("lakemirror_switchover_writes_refused_seconds", mirror=name)
            assert refused > 0, region
    # at most one writable region at every moment, and one chain of acknowledged commits
    assert checker.violations() == []
    assert checker.writable_regions() == {"a", "b"}
    assert ack_violations(writer.acked()) == []
    assert {ack.region for ack in writer.acked()} == {"a", "b"}
    # the end is where it started: a writable, b its mirror, nothing lost in either
    assert (repository(a, name) or {})["read_only"] is False
    mirror = repository(b, name) or {}
    assert mirror["read_only"] is True
    expected = {ack.path: ack.data for ack in writer.acked()}
    for either in (a, b):
        assert objects_at(either, name, last.commit) == expected
