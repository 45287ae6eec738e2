"""Transactional mirroring between two regions on S3: each region's objects on its own moto server.

Region ``a`` keeps its objects in bucket A of moto server #1, region ``b`` (server and replicant)
in bucket B of moto server #2; each region's KV is its SQLite file (the scenarios of
``test_mirroring.py`` and ``test_mirroring_faults.py`` run with DynamoDB + S3 as well; this one
keeps the mixed combination, S3 with the embedded KV, and checks where the mirror's files land).
The replication simulator copies ``s3://A/<source>/...`` to ``s3://B/<mirror>/...``, the
replicant validates against bucket B. Moto answers one request at a time, so object counts stay
modest and the simulator polls gently.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import lakefs
import pytest

from mirror.block.s3 import make_s3_client
from tests.e2e.regions import (
    RegionBackend,
    Replicant,
    SafetyChecker,
    TwoRegions,
    s3_resolver,
    two_regions,
    unique,
    wait_for,
)
from tests.integration.moto_fixtures import (  # noqa: F401  (fixtures of the moto servers)
    MotoServer,
    aws_backend_env,
    create_bucket,
    moto_log_dir,
    moto_region,
    moto_second_region,
    s3_settings,
    unique_name,
)

pytestmark = [pytest.mark.s3, pytest.mark.slow]

OBJECTS = 50
SIMULATOR_POLL = 0.1
"""Seconds between the simulator's listings of bucket A (each one waits its turn at moto)."""


def s3_region(server: MotoServer) -> RegionBackend:
    """Return a region keeping its objects in a fresh bucket of ``server`` and its KV in SQLite.

    Only the ``LAKEMIRROR_BLOCKSTORE__S3__*`` variables are set, so the region's server and its
    replicants (both run with the region's environment) reach the same bucket.
    """
    settings = s3_settings(server)
    bucket = create_bucket(server, make_s3_client(settings))
    env = {
        key: value
        for key, value in aws_backend_env(server, unique_name("unused")).items()
        if key.startswith("LAKEMIRROR_BLOCKSTORE__")
    }
    return RegionBackend(
        env=env,
        namespace_root=f"s3://{bucket}/",
        resolver=s3_resolver(settings),
    )


@pytest.fixture(scope="module")
def s3_world(
    tmp_path_factory: pytest.TempPathFactory,
    moto_region: MotoServer,  # noqa: F811
    moto_second_region: MotoServer,  # noqa: F811
) -> Iterator[TwoRegions]:
    backend_a = s3_region(moto_region)
    backend_b = s3_region(moto_second_region)
    with two_regions(tmp_path_factory.mktemp("s3-regions"), backend_a, backend_b) as world:
        yield world


@pytest.fixture
def replicant(s3_world: TwoRegions) -> Iterator[Replicant]:
    with s3_world.replicant("s3-r1") as running:
        yield running


def _objects(client: lakefs.Client, repo: str, ref: str) -> dict[str, bytes]:
    r = lakefs.Repository(repo, client=client).ref(ref)
    return {o.path: r.object(o.path).reader(mode="rb").read() for o in r.objects()}


def _keys(client: Any, namespace: str) -> set[str]:
    """Return the keys under an ``s3://bucket/prefix`` namespace, relative to it."""
    bucket, _, prefix = namespace.removeprefix("s3://").partition("/")
    prefix = prefix.rstrip("/") + "/"
    keys: set[str] = set()
    for page in client.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix):
        keys.update(item["Key"].removeprefix(prefix) for item in page.get("Contents", ()))
    return keys


def test_s3_commit_appears_whole_and_uncommitted_never(
    s3_world: TwoRegions,
    replicant: Replicant,
    moto_second_region: MotoServer,  # noqa: F811
) -> None:
    world = s3_world
    repo, ns = world.source_repo()
    assert ns.startswith("s3://") and world.b.namespace("x").startswith("s3://")
    main = repo.branch("main")
    name = unique("mirror")
    mirror_ns = world.b.namespace(name)
    sim = world.simulator(ns, mirror_ns, seed=3, delay=(0.0, 0.5), poll_interval=SIMULATOR_POLL)
    created = world.create_mirror(replicant, repo.id, name, mirror_ns)
    assert created.status_code == 201, created.text
    checker = SafetyChecker(world.b, name).start()
    try:
        wait_for(lambda: world.b.head(name, "main") == main.get_commit().id, 30, "initial sync")
        for i in range(OBJECTS):
            main.object(f"table/part-{i:03}.csv").upload(f"row,{i}\n".encode() * (i + 1))
        # the data files reach bucket B, yet nothing uncommitted may show on the mirror
        wait_for(lambda: sim.stats.copied >= OBJECTS and sim.stats.pending == 0, 30, "replication")
        assert _objects(world.b.client, name, "main") == {}
        commit = main.commit(f"add {OBJECTS} objects").get_commit().id
        wait_for(lambda: world.b.head(name, "main") == commit, 30, "mirror head")
        mirrored = _objects(world.b.client, name, "main")
        assert len(mirrored) == OBJECTS
        assert mirrored == _objects(world.a.client, repo.id, commit)
        status = world.mirror_status(replicant, repo.id, name)
        branch = next(s for s in status["status"] if s["branch"] == "main")
        assert branch["state"] == "synced" and branch["mirror_head"] == commit
        assert branch["missing_objects"] == 0 and branch["last_error"] is None
    finally:
        checker.stop()
    assert checker.violations == []
    assert checker.objects_read >= OBJECTS
    # the mirror's files are in bucket B, under the mirror's own prefix
    in_b = _keys(make_s3_client(s3_settings(moto_second_region)), mirror_ns)
    assert any(k.startswith("_lakefs/") for k in in_b)
    assert sum(k.startswith("data/") for k in in_b) >= OBJECTS
