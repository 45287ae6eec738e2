"""A fresh mirror shows only source commits: its branches appear with their first validated head.

A mirror repository is created bare (no commit, no branch). Until the replicant validates the
source head, listing the mirror's branches shows nothing and reading its default branch answers
404; then each mirrored branch appears at once at a commit of the source. A watcher polls the
mirror's branch listing from before the mirror exists until after the first advance, so no
moment of the window goes unseen.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field

import httpx
import lakefs
import pytest

from mirror.simulate import ReplicationSimulator
from tests.e2e.regions import (
    Region,
    Replicant,
    SafetyChecker,
    TwoRegions,
    unique,
    wait_for,
)


@pytest.fixture
def replicant(world: TwoRegions) -> Iterator[Replicant]:
    with world.replicant("fresh-r1") as running:
        yield running


@dataclass
class BranchWatcher:
    """Poll a mirror's branch listing and check every commit it shows against the source."""

    mirror: Region
    name: str
    source: Region
    source_repo: str
    known: set[str]
    listings: list[dict[str, str]] = field(default_factory=list)
    statuses: list[int] = field(default_factory=list)
    foreign: list[tuple[str, str]] = field(default_factory=list)
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def start(self) -> BranchWatcher:
        self._thread = threading.Thread(target=self._run, name="branch-watcher", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=60)

    def _run(self) -> None:
        auth_b, auth_a = self.mirror.http.auth, self.source.http.auth
        with (
            httpx.Client(base_url=self.mirror.http.base_url, auth=auth_b, timeout=30) as b,
            httpx.Client(base_url=self.source.http.base_url, auth=auth_a, timeout=30) as a,
        ):
            while not self._stop.is_set():
                got = b.get(f"/repositories/{self.name}/branches", params={"amount": 1000})
                self.statuses.append(got.status_code)
                if got.status_code == 200:
                    heads = {r["id"]: r["commit_id"] for r in got.json()["results"]}
                    self.listings.append(heads)
                    for branch, commit in heads.items():
                        self._check(a, branch, commit)

    def _check(self, source: httpx.Client, branch: str, commit: str) -> None:
        if commit in self.known:
            return
        found = source.get(f"/repositories/{self.source_repo}/commits/{commit}")
        if found.status_code == 200:
            self.known.add(commit)
        else:
            self.foreign.append((branch, commit))


def _history(region: Region, repo: str, ref: str) -> set[str]:
    got = region.http.get(f"/repositories/{repo}/refs/{ref}/commits", params={"amount": 1000})
    got.raise_for_status()
    return {c["id"] for c in got.json()["results"]}


def _validate(region: Region, repo: str, ref: str) -> subprocess.CompletedProcess[str]:
    """Run ``lakemirror validate --commit`` against ``region``'s server, as an operator would."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("LAKECTL_", "LAKEMIRROR_"))}
    env |= {
        "LAKECTL_CREDENTIALS_ACCESS_KEY_ID": region.server.access_key_id,
        "LAKECTL_CREDENTIALS_SECRET_ACCESS_KEY": region.server.secret_access_key,
    }
    command = [sys.executable, "-m", "mirror.cli.main", "validate", "--server", region.server.url]
    command += ["--repository", repo, "--commit", ref, "--data-dir", str(region.server.data_dir)]
    return subprocess.run(command, capture_output=True, text=True, env=env, timeout=60)


def _status(world: TwoRegions, replicant: Replicant, source: str, name: str) -> dict[str, dict]:
    body = world.mirror_status(replicant, source, name)
    return {s["branch"]: s for s in body.get("status", [])}


def test_a_fresh_mirror_shows_only_source_commits_until_and_after_its_first_advance(
    world: TwoRegions, replicant: Replicant
) -> None:
    repo, source_ns = world.source_repo("fresh")
    main = repo.branch("main")
    main.object("a.txt").upload(b"a" * 100)
    main_head = main.commit("add a").get_commit().id
    dev = repo.branch("dev").create("main")
    dev.object("b.txt").upload(b"b" * 50)
    dev_head = dev.commit("add b").get_commit().id
    known = _history(world.a, repo.id, "main") | _history(world.a, repo.id, "dev")
    # A commit made by the mirror itself ("Repository created", no parent, empty tree) would
    # have the same ID as the source's first commit if both were made in the same second:
    # create the mirror in a later second so that such a commit would show as foreign.
    created = int(repo.properties.creation_date)
    wait_for(lambda: time.time() >= created + 1.2, 5, "a later second than the source's")

    name = unique("fresh-mirror")
    namespace = world.b.namespace(name)
    sim = ReplicationSimulator(
        world.a.store(source_ns), world.b.store(namespace), seed=11, poll_interval=0.02
    )
    sim.stall()  # nothing arrives until the window has been looked at
    sim.start()
    world.simulators.append(sim)
    watcher = BranchWatcher(world.b, name, world.a, repo.id, set(known)).start()
    checker = SafetyChecker(world.b, name, source=(world.a, repo.id)).start()
    try:
        wait_for(lambda: watcher.statuses, 10, "the watcher's first look")
        created_mirror = world.create_mirror(replicant, repo.id, name, namespace)
        assert created_mirror.status_code == 201, created_mirror.text

        # the window: the replicant waits for files that cannot arrive
        def waiting() -> bool:
            status = _status(world, replicant, repo.id, name)
            return all(
                status.get(b, {}).get("state") == "waiting"
                and status[b].get("missing_objects", 0) > 0
                for b in ("main", "dev")
            )

        wait_for(waiting, 30, "both branches waiting for replication")
        listed = world.b.http.get(f"/repositories/{name}/branches")
        assert listed.status_code == 200, listed.text
        assert listed.json()["results"] == []
        props = world.b.http.get(f"/repositories/{name}")
        assert props.status_code == 200, props.text
        assert props.json()["default_branch"] == "main"
        assert props.json()["read_only"] is True
        missing = world.b.http.get(f"/repositories/{name}/branches/main")
        assert missing.status_code == 404, missing.text
        assert "branch not found" in missing.json()["message"]
        objects = world.b.http.get(f"/repositories/{name}/refs/main/objects/ls")
        assert objects.status_code == 404, objects.text
        log = world.b.http.get(f"/repositories/{name}/refs/main/commits")
        assert log.status_code == 404, log.text
        with pytest.raises(lakefs.exceptions.NotFoundException):
            lakefs.Repository(name, client=world.b.client).branch("main").get_commit()
        status = _status(world, replicant, repo.id, name)
        assert status["main"]["mirror_head"] is None
        early = _validate(world.b, name, "main")
        assert early.returncode == 4, early.stdout + early.stderr
        assert "not found" in early.stderr and "'main'" in early.stderr
        assert status["main"]["source_head"] == main_head

        sim.resume()
        wait_for(
            lambda: (
                world.b.head(name, "main") == main_head and world.b.head(name, "dev") == dev_head
            ),
            30,
            "both branches at their source heads",
        )
        # keep watching a little past the advance, until the watcher has seen it too
        wait_for(
            lambda: any(listing.get("dev") == dev_head for listing in watcher.listings[-3:]),
            10,
            "the watcher to see the advanced branches",
        )
        done = _validate(world.b, name, "main")
        assert done.returncode == 0, done.stdout + done.stderr
        assert done.stdout.startswith("complete: ")
    finally:
        watcher.stop()
        checker.stop()

    assert watcher.foreign == []
    assert checker.violations == []
    assert 404 in watcher.statuses  # it looked before the mirror existed
    empty = [listing for listing in watcher.listings if not listing]
    assert len(empty) >= 3, "the window before the first advance was watched"
    shown = [listing for listing in watcher.listings if listing]
    # each branch appears at its first validated head, never at anything before it
    assert {c for listing in shown for c in listing.values()} == {main_head, dev_head}
    assert set(checker.checked) == {main_head}
