"""The scenarios of transactional mirroring, each across two regions of real processes.

Region ``a``'s server holds the source repository, region ``b``'s server the mirror; a replicant
process of region ``b`` mirrors; a replication simulator copies files between the regions'
namespaces late and out of order. A safety checker reads the mirror head all along.
"""

from __future__ import annotations

import io
import json
from collections.abc import Iterator

import lakefs
import pytest

from tests.e2e.regions import Replicant, SafetyChecker, TwoRegions, unique, wait_for

pytestmark = pytest.mark.slow


@pytest.fixture
def replicant(world: TwoRegions) -> Iterator[Replicant]:
    with world.replicant("r1") as running:
        yield running


def _objects(region_client: lakefs.Client, repo: str, ref: str) -> dict[str, bytes]:
    r = lakefs.Repository(repo, client=region_client).ref(ref)
    return {o.path: r.object(o.path).reader(mode="rb").read() for o in r.objects()}


def _mirror(
    world: TwoRegions, replicant: Replicant, source: str, source_ns: str, **sim: object
) -> tuple[str, str]:
    name = unique("mirror")
    namespace = f"local://{name}"
    world.simulator(source_ns, namespace, **sim)
    response = world.create_mirror(replicant, source, name, namespace)
    assert response.status_code == 201, response.text
    return name, namespace


def test_basic_flow_commits_appear_whole_and_uncommitted_never(
    world: TwoRegions, replicant: Replicant
) -> None:
    repo, ns = world.source_repo()
    main = repo.branch("main")
    name, _ = _mirror(world, replicant, repo.id, ns, seed=1, delay=(0.0, 0.3))
    checker = SafetyChecker(world.b, name).start()
    try:
        wait_for(
            lambda: world.b.head(name, "main") == main.get_commit().id, 30, "initial sync"
        )
        for i in range(100):
            main.object(f"table/part-{i:03}.csv").upload(f"row,{i}\n".encode() * (i + 1))
        # the data files replicate, but nothing uncommitted may show on the mirror
        sim = world.simulators[-1]
        wait_for(lambda: sim.stats.copied >= 100 and sim.stats.pending == 0, 30, "replication")
        assert _objects(world.b.client, name, "main") == {}
        advances = replicant.metric("lakemirror_head_advances_total", mirror=name)
        commit = main.commit("add 100 objects")
        wait_for(lambda: world.b.head(name, "main") == commit.get_commit().id, 30, "mirror head")
        assert _objects(world.b.client, name, "main") == _objects(
            world.a.client, repo.id, commit.get_commit().id
        )
        status = world.mirror_status(replicant, repo.id, name)
        branch = next(s for s in status["status"] if s["branch"] == "main")
        assert branch["state"] == "synced" and branch["mirror_head"] == commit.get_commit().id
        assert replicant.metric("lakemirror_head_advances_total", mirror=name) == advances + 1
    finally:
        checker.stop()
    assert checker.violations == []
    assert checker.objects_read >= 100


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
