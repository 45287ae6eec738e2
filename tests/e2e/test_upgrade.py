"""A region written by an earlier release, served by this one: it reads, commits, collects, mirrors.

Region ``a``'s data directory is unpacked from ``data/upgrade-<revision>.tar.gz``, written by
``lakemirror server`` of that revision (:mod:`tests.e2e.upgrade_fixture` says how; its
``manifest.json`` names what it wrote). This release's server opens it as it stands: every ref
and object of the earlier release reads with the same commit IDs and bytes, the staged change is
still staged, new commits and a merge land on top, ``lakemirror gc --sweep`` (the PySpark job)
collects the one file nothing references and nothing else, and a mirror in region ``b`` follows
the repository to its new head.
"""

from __future__ import annotations

import json
import math
import tarfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import lakefs
import pytest

from tests.e2e.regions import (
    TwoRegions,
    objects_at,
    sweep,
    two_regions,
    unique,
    wait_for,
)
from tests.e2e.upgrade_fixture import ADMIN, MANIFEST

pytestmark = [pytest.mark.slow, pytest.mark.spark]

FIXTURE = Path(__file__).parent / "data" / "upgrade-0e6ab68.tar.gz"


@pytest.fixture(scope="module")
def manifest(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Any]]:
    root = tmp_path_factory.mktemp("upgrade")
    with tarfile.open(FIXTURE) as tar:
        tar.extractall(root, filter="data")
    (root / "data").rename(root / "a")
    return root, json.loads((root / MANIFEST).read_text())


@pytest.fixture(scope="module")
def world(manifest: tuple[Path, dict[str, Any]]) -> Iterator[TwoRegions]:
    root, _ = manifest
    with two_regions(root, secret_a=ADMIN[1]) as regions:
        yield regions


def _text(objects: dict[str, bytes]) -> dict[str, str]:
    return {path: data.decode() for path, data in objects.items()}


def test_an_earlier_releases_region_reads_commits_collects_and_mirrors(
    world: TwoRegions, manifest: tuple[Path, dict[str, Any]]
) -> None:
    _, expected = manifest
    name, commits, objects = expected["repository"], expected["commits"], expected["objects"]
    client = world.a.client
    repo = lakefs.Repository(name, client=client)

    # everything the earlier release wrote reads as it was, with the same commit IDs
    assert _text(objects_at(client, name, "v1")) == objects["v1"]
    assert _text(objects_at(client, name, commits["second"])) == objects["main"]
    assert _text(objects_at(client, name, "dev")) == {**objects["main"], **objects["dev"]}
    log = [c.id for c in repo.ref("main").log()]
    assert log[:2] == [commits["second"], commits["first"]] and len(log) == 3  # and the root
    assert repo.tag("v1").get_commit().id == commits["first"]
    assert repo.branch("dev").get_commit().id == commits["dev"]
    first = repo.commit(commits["first"]).get_commit()
    assert (first.message, first.metadata) == ("first", {"step": "1"})
    stat = repo.ref("v1").object("README.md").stat()
    assert stat.metadata == {"written-by": "fixture"}
    main = repo.branch("main")
    assert [(c.path, c.type) for c in main.uncommitted()] == [("staged.txt", "added")]

    # new history on top: the staged change, a new object, a merge of dev
    main.commit("staged before the upgrade")
    main.object("after/new.txt").upload(b"written after the upgrade")
    after = main.commit("after the upgrade").get_commit().id
    repo.branch("dev").merge_into(main)
    head = main.get_commit().id
    assert head != after
    now = {
        **objects["main"],
        **objects["dev"],
        **objects["staged"],
        "after/new.txt": "written after the upgrade",
    }
    assert _text(objects_at(client, name, "main")) == now
    assert set(commits.values()) | set(log) <= {c.id for c in repo.ref("main").log()}

    # GC: the first write of scratch.txt, replaced while staged, is the one file nothing holds.
    # The rules the earlier release stored read as it wrote them; their 1 day of retention is
    # raised past the fixture's age, so that what its second commit replaced stays retained
    # whatever the date the test runs on (else those files expire with the calendar)
    rules_url = f"{world.a.server.url}/api/v1/repositories/{name}/settings/gc_rules"
    stored = httpx.get(rules_url, auth=ADMIN, timeout=30)
    assert stored.status_code == 200, stored.text
    assert stored.json() == {"default_retention_days": 1, "branches": []}
    age_days = math.ceil((time.time() - first.creation_date) / 86400)
    raised = {"default_retention_days": age_days + 2, "branches": []}
    assert httpx.put(rules_url, json=raised, auth=ADMIN, timeout=30).status_code == 204
    run = sweep(world.a, name, 0)
    assert run["swept"] is True and run["has_rules"] is True
    assert run["marked"] == run["deleted"] == 1
    for ref, wanted in (
        ("main", now),
        ("v1", objects["v1"]),
        ("dev", {**objects["main"], **objects["dev"]}),
    ):
        assert _text(objects_at(client, name, ref)) == wanted, ref

    # a mirror in region b follows the upgraded repository to its head
    with world.replicant("upgrade") as replicant:
        mirror = unique("legacy-mirror")
        namespace = world.b.namespace(mirror)
        world.simulator(f"local://{name}", namespace, seed=5, delay=(0.0, 0.2))
        created = world.create_mirror(replicant, name, mirror, namespace)
        assert created.status_code == 201, created.text
        wait_for(lambda: world.b.head(mirror, "main") == head, 60, "the mirror at the new head")
        assert _text(objects_at(world.b.client, mirror, "main")) == now
