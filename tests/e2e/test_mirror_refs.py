"""Branches and tags follow the source: created once their commit's files arrived, then deleted.

A branch or tag of the source shows on the mirror only at a commit whose files have all arrived
in the mirror's namespace: withholding one data file of a commit keeps its tag, and any branch
at it, off the mirror until the file is released. Branches and tags deleted at the source are
deleted on the mirror; a mirror's branch globs choose which branches it mirrors.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import lakefs
import pytest

from tests.e2e.regions import Replicant, SafetyChecker, TwoRegions, unique, wait_for

pytestmark = pytest.mark.slow

LOOKS = 5
"""Validation passes of a withheld commit to wait through before checking what did not move."""


@pytest.fixture(scope="module")
def replicant(world: TwoRegions) -> Iterator[Replicant]:
    with world.replicant("refs") as running:
        yield running


def _branches(world: TwoRegions, repo: str) -> dict[str, str]:
    response = world.b.http.get(f"/repositories/{repo}/branches", params={"amount": 1000})
    response.raise_for_status()
    return {b["id"]: b["commit_id"] for b in response.json()["results"]}


def _tags(world: TwoRegions, repo: str) -> dict[str, str]:
    response = world.b.http.get(f"/repositories/{repo}/tags", params={"amount": 1000})
    response.raise_for_status()
    return {t["id"]: t["commit_id"] for t in response.json()["results"]}


def _objects(client: lakefs.Client, repo: str, ref: str) -> dict[str, bytes]:
    r = lakefs.Repository(repo, client=client).ref(ref)
    return {o.path: r.object(o.path).reader(mode="rb").read() for o in r.objects()}


def _status(
    world: TwoRegions, replicant: Replicant, source: str, name: str, branch: str
) -> dict[str, Any]:
    mirror = world.mirror_status(replicant, source, name)
    return next((s for s in mirror["status"] if s["branch"] == branch), {})


def _mirror(
    world: TwoRegions, replicant: Replicant, source: str, namespace: str, **extra: object
) -> str:
    name = unique("mirror")
    mirror_ns = world.b.namespace(name)
    world.simulator(namespace, mirror_ns, seed=5, delay=(0.0, 0.2))
    created = world.create_mirror(replicant, source, name, mirror_ns, **extra)
    assert created.status_code == 201, created.text
    return name


def test_tags_and_branches_appear_with_their_files_and_go_with_the_source(
    world: TwoRegions, replicant: Replicant
) -> None:
    repo, ns = world.source_repo("refs")
    main = repo.branch("main")
    main.object("base.csv").upload(b"base\n")
    base = main.commit("base").get_commit().id
    name = _mirror(world, replicant, repo.id, ns)
    sim = world.simulators[-1]
    wait_for(lambda: _branches(world, name).get("main") == base, 30, "main mirrored")
    dev = repo.branch("dev").create("main")
    wait_for(lambda: _branches(world, name).get("dev") == base, 30, "dev mirrored at its base")
    # hold back every data file written from now on: the commit on dev cannot validate
    before = {info.key for info in world.a.store(ns).list("data/")}

    def new_data(key: str) -> bool:
        return key.startswith("data/") and key not in before

    sim.withhold(new_data)
    checker = SafetyChecker(world.b, name, "dev").start()
    try:
        for i in range(3):
            dev.object(f"dev/part-{i}.csv").upload(f"dev,{i}\n".encode())
        commit = dev.commit("work on dev").get_commit().id
        repo.tag("v1").create(commit)
        repo.branch("dev-copy").create(commit)
        wait_for(
            lambda: (
                _status(world, replicant, repo.id, name, "dev").get("source_head") == commit
                and _status(world, replicant, repo.id, name, "dev").get("state") == "waiting"
            ),
            30,
            "dev waiting for its files",
        )
        missing = _status(world, replicant, repo.id, name, "dev")["missing_objects"]
        assert missing >= 1
        looked = replicant.metric("lakemirror_validations_total", mirror=name, result="incomplete")
        wait_for(
            lambda: (
                replicant.metric("lakemirror_validations_total", mirror=name, result="incomplete")
                >= looked + LOOKS
            ),
            30,
            "more looks at the withheld commit",
        )
        assert sim.stats.withheld >= 1
        assert _branches(world, name) == {"main": base, "dev": base}
        assert _tags(world, name) == {}
        sim.release(new_data)
        wait_for(lambda: _branches(world, name).get("dev") == commit, 30, "dev at its commit")
        wait_for(lambda: _tags(world, name) == {"v1": commit}, 30, "tag v1 mirrored")
        wait_for(lambda: _branches(world, name).get("dev-copy") == commit, 30, "dev-copy")
        assert _objects(world.b.client, name, "v1") == _objects(world.a.client, repo.id, commit)
        assert _status(world, replicant, repo.id, name, "dev")["missing_objects"] == 0
    finally:
        checker.stop()
    assert checker.violations == []
    assert commit in checker.checked
    # deletions at the source follow
    repo.tag("v1").delete()
    repo.branch("dev").delete()
    repo.branch("dev-copy").delete()
    wait_for(lambda: _tags(world, name) == {}, 30, "tag v1 deleted on the mirror")
    wait_for(lambda: set(_branches(world, name)) == {"main"}, 30, "dev deleted on the mirror")
    assert _branches(world, name) == {"main": base}
    status = world.mirror_status(replicant, repo.id, name)
    assert {s["branch"] for s in status["status"]} == {"main"}


def test_branch_globs_choose_the_mirrored_branches(world: TwoRegions, replicant: Replicant) -> None:
    repo, ns = world.source_repo("globs")
    heads: dict[str, str] = {}
    for branch in ("feature-x", "release", "release-1"):
        created = repo.branch(branch).create("main")
        created.object(f"{branch}.csv").upload(branch.encode())
        heads[branch] = created.commit(f"on {branch}").get_commit().id
    name = _mirror(world, replicant, repo.id, ns, branches=["main", "release-*"])
    main_head = repo.branch("main").get_commit().id
    wanted = {"main": main_head, "release-1": heads["release-1"]}
    wait_for(lambda: _branches(world, name) == wanted, 30, "main and release-1 mirrored")
    # a branch made later is mirrored when it matches, and a later commit follows
    release_2 = repo.branch("release-2").create("release-1")
    repo.branch("hotfix").create("release-1")
    release_2.object("two.csv").upload(b"2")
    wanted["release-2"] = release_2.commit("on release-2").get_commit().id
    wait_for(lambda: _branches(world, name) == wanted, 30, "release-2 mirrored")
    status = world.mirror_status(replicant, repo.id, name)
    assert {s["branch"] for s in status["status"]} == {"main", "release-1", "release-2"}
    assert status["branches"] == ["main", "release-*"]
    # deleting a branch the mirror does not follow changes nothing; a followed one goes
    repo.branch("feature-x").delete()
    repo.branch("release-1").delete()
    del wanted["release-1"]
    wait_for(lambda: _branches(world, name) == wanted, 30, "release-1 deleted on the mirror")
