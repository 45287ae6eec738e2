"""GC on the source while a mirror follows it: deletions replicate, mirror heads stay whole.

Region ``a`` holds the source repository, region ``b`` its mirror; replication copies files
late and out of order and replicates deletions (S3's delete-marker replication). The source has
a history made days ago (commits created with old dates through the commit API's ``date``) and a
writer committing now, while ``lakemirror gc --sweep`` (the PySpark job) collects the source
with a retention of one day. The mirror's ``main`` keeps advancing during the run; its ``slow``
branch lags behind the source on purpose, at a commit that stopped being the source head half a
day ago (in commit time): less than the retention, so GC keeps it. Safety checkers read every
new mirror head whole and re-read the current ones every half second; the swept files disappear
from the mirror's namespace too. (With the slow branch's source head two days old instead, its
mirror head is swept from under it and the checker reports it: retention shorter than a mirror's
lag is what this setup rules out.)
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field

import httpx
import pytest

from tests.e2e.regions import (
    Region,
    Replicant,
    SafetyChecker,
    TwoRegions,
    run_lakemirror,
    sweep,
    unique,
    wait_for,
)

pytestmark = [pytest.mark.slow, pytest.mark.spark]

DAY = 86_400
GRACE = 6
"""Seconds a file must be old for the sweep: the old history is, the writer's files are not."""


@pytest.fixture
def replicant(world: TwoRegions) -> Iterator[Replicant]:
    with world.replicant("gc-r1") as running:
        yield running


@dataclass
class Source:
    """Writes to the source repository over its API, in region ``a``."""

    http: httpx.Client
    repo: str
    last_write: float = 0.0

    def upload(self, branch: str, path: str, data: bytes) -> str:
        """Upload an object; return its address relative to the namespace."""
        answer = self.http.post(
            f"/repositories/{self.repo}/branches/{branch}/objects",
            params={"path": path},
            content=data,
        )
        assert answer.status_code == 201, answer.text
        self.last_write = time.time()
        physical = str(answer.json()["physical_address"])
        prefix = f"local://{self.repo}/"
        assert physical.startswith(prefix), physical
        return physical.removeprefix(prefix)

    def delete(self, branch: str, path: str) -> None:
        answer = self.http.delete(
            f"/repositories/{self.repo}/branches/{branch}/objects", params={"path": path}
        )
        assert answer.status_code == 204, answer.text

    def commit(self, branch: str, message: str, days_ago: float | None = None) -> str:
        body: dict[str, object] = {"message": message}
        if days_ago is not None:
            body["date"] = int(time.time() - days_ago * DAY)
        answer = self.http.post(f"/repositories/{self.repo}/branches/{branch}/commits", json=body)
        assert answer.status_code == 201, answer.text
        return str(answer.json()["id"])

    def branch(self, name: str, source: str) -> None:
        answer = self.http.post(
            f"/repositories/{self.repo}/branches", json={"name": name, "source": source}
        )
        assert answer.status_code == 201, answer.text

    def addresses(self, ref: str) -> set[str]:
        """Return the addresses of every object at ``ref``."""
        found: set[str] = set()
        after = ""
        while True:
            page = self.http.get(
                f"/repositories/{self.repo}/refs/{ref}/objects/ls",
                params={"after": after, "amount": 1000},
            )
            assert page.status_code == 200, page.text
            body = page.json()
            prefix = f"local://{self.repo}/"
            found |= {str(o["physical_address"]).removeprefix(prefix) for o in body["results"]}
            if not body["pagination"]["has_more"]:
                return found
            after = body["pagination"]["next_offset"]


@dataclass
class Writer:
    """Commit on the source's ``main`` now, again and again, until stopped."""

    region: Region
    repo: str
    commits: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def start(self) -> Writer:
        self._thread = threading.Thread(target=self._run, name="gc-writer", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=60)

    def _run(self) -> None:
        http = self.region.http
        with httpx.Client(base_url=http.base_url, auth=http.auth, timeout=60) as client:
            source = Source(client, self.repo)
            number = 0
            while not self._stop.is_set():
                try:
                    # replace a file: the replaced versions stay, retained by these commits
                    source.upload("main", f"live/part-{number % 3}.csv", b"%d\n" % number * 50)
                    self.commits.append(source.commit("main", f"live {number}"))
                except AssertionError as exc:
                    self.errors.append(str(exc))
                    return
                number += 1
                self._stop.wait(0.3)


def test_gc_on_the_source_reaches_the_mirror_and_never_breaks_a_mirror_head(
    world: TwoRegions, replicant: Replicant
) -> None:
    repo, source_ns = world.source_repo("gc-source")
    source = Source(world.a.http, repo.id)
    name = unique("gc-mirror")
    mirror_ns = world.b.namespace(name)
    sim = world.simulator(source_ns, mirror_ns, seed=21, delay=(0.0, 0.4), replicate_deletes=True)
    created = world.create_mirror(replicant, repo.id, name, mirror_ns)
    assert created.status_code == 201, created.text
    checkers = {
        branch: SafetyChecker(world.b, name, branch, source=(world.a, repo.id), recheck=0.5)
        for branch in ("main", "slow")
    }
    for checker in checkers.values():
        checker.start()
    writer = Writer(world.a, repo.id)
    try:
        # history made days ago: each commit replaces files of the one before
        for path in ("table/part-0", "table/part-1", "table/part-2", "table/part-3"):
            source.upload("main", path, b"v1 " + path.encode() * 20)
        source.upload("main", "tmp/a", b"scratch a")
        m1 = source.commit("main", "v1", days_ago=6)
        for path in ("table/part-0", "table/part-1", "table/part-2", "table/part-3"):
            source.upload("main", path, b"v2 " + path.encode() * 30)
        source.delete("main", "tmp/a")
        source.upload("main", "tmp/b", b"scratch b")
        m2 = source.commit("main", "v2", days_ago=5)
        for path in ("table/part-0", "table/part-1"):
            source.upload("main", path, b"v3 " + path.encode() * 40)
        source.delete("main", "tmp/b")
        m3 = source.commit("main", "v3", days_ago=4)
        source.branch("slow", m3)
        for version, days_ago in (("s0", 3.5), ("s1", 3.0)):
            for path in ("slow/x0", "slow/x1"):
                source.upload("slow", path, f"{version} {path}".encode() * 25)
            source.commit("slow", version, days_ago=days_ago)
        s1 = world.a.head(repo.id, "slow")
        s0 = source.http.get(f"/repositories/{repo.id}/commits/{s1}").json()["parents"][0]
        wait_for(
            lambda: world.b.head(name, "main") == m3 and world.b.head(name, "slow") == s1,
            60,
            "the mirror to show the old history's heads",
        )

        # the mirror's slow lags from here on: the files of s2 do not replicate until released
        store_b = world.b.store(mirror_ns)
        copied = {info.key for info in store_b.list("data/")}

        def not_copied(key: str) -> bool:
            return key.startswith("data/") and key not in copied

        sim.withhold(not_copied)
        s2_files = {
            source.upload("slow", path, f"s2 {path}".encode() * 25)
            for path in ("slow/x0", "slow/x1")
        }
        s2 = source.commit("slow", "s2", days_ago=0.5)

        def is_s2(key: str) -> bool:
            return key in s2_files

        sim.withhold(is_s2)
        sim.release(not_copied)
        old_history_written = source.last_write

        # what one day of retention lets go: files only commits older than the window hold
        # (m3, the newest main commit before the window, and s1, slow's, stay)
        garbage = source.addresses(m1) | source.addresses(m2) | source.addresses(s0)
        garbage -= source.addresses(m3) | source.addresses(s1) | source.addresses(s2)
        assert len(garbage) == 10  # 4 + 1 of m1 (table, tmp/a), 2 + 1 of m2, 2 of s0
        store_a = world.a.store(source_ns)
        wait_for(lambda: all(store_b.exists(k) for k in garbage), 30, "the garbage replicated")

        writer.start()
        wait_for(lambda: len(writer.commits) >= 3, 30, "the writer's first commits")
        wait_for(lambda: world.b.head(name, "main") in writer.commits, 30, "main advancing")

        # GC is refused on the mirror; the source gets one day of retention
        rules = {
            "default_retention_days": 1,
            "branches": [{"branch_id": "main", "retention_days": 1}],
        }
        on_mirror = world.b.http.put(f"/repositories/{name}/settings/gc_rules", json=rules)
        assert on_mirror.status_code == 403, on_mirror.text
        assert "read-only repository" in on_mirror.json()["message"]
        refused = run_lakemirror(world.b, "gc", f"lakefs://{name}", "--sweep")
        assert refused.returncode == 3, refused.stdout + refused.stderr  # lakemirror's AUTH
        assert "read-only repository" in refused.stderr
        on_source = world.a.http.put(f"/repositories/{repo.id}/settings/gc_rules", json=rules)
        assert on_source.status_code == 204, on_source.text

        wait_for(
            lambda: time.time() > old_history_written + GRACE + 1,
            GRACE + 5,
            "the old history to be older than the grace period",
        )
        mirror_main_before = world.b.head(name, "main")
        rounds_before = {b: c.rounds for b, c in checkers.items()}
        run = sweep(world.a, repo.id, GRACE)
        assert run["swept"] is True and run["has_rules"] is True
        assert set(run["sample"]) == garbage
        assert run["marked"] == run["deleted"] == len(garbage)
        assert not any(store_a.exists(k) for k in garbage)
        # the sweep's deletions replicate: the swept files leave the mirror's namespace too
        wait_for(
            lambda: not any(store_b.exists(k) for k in garbage), 60, "the deletions replicated"
        )
        assert sim.stats.deleted >= len(garbage)
        # the mirror kept advancing meanwhile, and every head was read whole again afterwards
        assert world.b.head(name, "main") != mirror_main_before
        wait_for(
            lambda: all(c.rounds >= rounds_before[b] + 3 for b, c in checkers.items()),
            60,
            "the heads re-read after the deletions",
        )
        assert world.b.head(name, "slow") == s1  # still lagging, still whole

        sim.release(is_s2)
        wait_for(lambda: world.b.head(name, "slow") == s2, 60, "slow to catch up")
        writer.stop()
        assert writer.errors == []
        last = writer.commits[-1]
        wait_for(lambda: world.b.head(name, "main") == last, 60, "main to catch up")
        wait_for(lambda: last in checkers["main"].checked, 30, "the last head checked")
    finally:
        writer.stop()
        for checker in checkers.values():
            checker.stop()
    for branch, checker in checkers.items():
        assert checker.violations == [], (branch, checker.violations[:5])
    assert {m3, last} <= set(checkers["main"].checked)
    assert len(checkers["main"].checked) >= 4
    assert checkers["slow"].checked[-2:] == [s1, s2]
