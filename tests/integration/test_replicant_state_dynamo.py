"""The replicant's records on DynamoDB (moto server): configurations, leases raced by two
replicas with clients of their own, and validated ranges that survive a restart."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from mirror.kv.dynamodb import DynamoKV, create_table
from mirror.replicant.state import BranchStatus, MirrorConfig, MirrorExistsError, ReplicantStore
from mirror.validator import KVValidatedRanges
from tests.integration.moto_fixtures import MotoServer, dynamo_settings, unique_name

pytestmark = pytest.mark.s3


@pytest.fixture
def table(moto_region: MotoServer, dynamodb_client: Any) -> str:
    name = unique_name("replicant")
    assert create_table(dynamo_settings(moto_region, name), dynamodb_client) is True
    return name


def _replica(moto: MotoServer, table: str) -> ReplicantStore:
    """A replica's view of the region's KV, through a DynamoDB client of its own."""
    return ReplicantStore(DynamoKV(dynamo_settings(moto, table)))


def test_configurations_and_status_round_trip(moto_region: MotoServer, table: str) -> None:
    one, two = _replica(moto_region, table), _replica(moto_region, table)
    config = MirrorConfig("m", "a", "origin", "b", "s3://bucket/m", ("main",), True, 5)
    one.add_mirror(config)
    with pytest.raises(MirrorExistsError):
        two.add_mirror(config)
    assert [m.name for m in two.list_mirrors()] == ["m"]
    one.put_status("m", BranchStatus("main", "waiting", "h2", "h1", 1.5, 2, 3, ["data/x"]))
    assert two.list_status("m")[0].missing_sample == ["data/x"]
    two.delete_mirror("m")
    assert list(one.list_mirrors()) == [] and one.list_status("m") == []


def _race(replicas: list[ReplicantStore], name: str) -> list[str]:
    """Let every replica try to take the free lease ``name`` at the same moment."""
    barrier = threading.Barrier(len(replicas))
    won: list[str] = []

    def take(store: ReplicantStore, owner: str) -> None:
        barrier.wait()
        if store.try_lease(name, owner, 30.0, now=1000.0):
            won.append(owner)

    threads = [
        threading.Thread(target=take, args=(store, f"p{i}")) for i, store in enumerate(replicas)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    return won


def test_exactly_one_replica_takes_a_free_lease(moto_region: MotoServer, table: str) -> None:
    replicas = [_replica(moto_region, table) for _ in range(2)]
    for round_ in range(8):
        name = f"mirror-{round_}"
        won = _race(replicas, name)
        assert len(won) == 1
        lease = replicas[0].get_lease(name)
        assert lease is not None and lease.owner == won[0]
        # the loser takes it over only once it has expired
        loser = 1 - int(won[0][1])
        assert not replicas[loser].try_lease(name, f"p{loser}", 30.0, now=1020.0)
        assert replicas[loser].try_lease(name, f"p{loser}", 30.0, now=1031.0)


def test_validated_ranges_survive_a_restart(moto_region: MotoServer, table: str) -> None:
    store = _replica(moto_region, table)
    first = KVValidatedRanges(store.kv, store.ranges_prefix("m"))
    first.add_many([f"range-{i:03}" for i in range(150)])
    restarted = KVValidatedRanges(_replica(moto_region, table).kv, store.ranges_prefix("m"))
    assert restarted.contains("range-000") and restarted.contains("range-149")
    assert not restarted.contains("range-150")
    # deleting the mirror deletes its validated ranges too
    store.add_mirror(MirrorConfig("m", "a", "origin", "b", "s3://bucket/m"))
    store.delete_mirror("m")
    fresh = KVValidatedRanges(_replica(moto_region, table).kv, store.ranges_prefix("m"))
    assert not fresh.contains("range-000")
