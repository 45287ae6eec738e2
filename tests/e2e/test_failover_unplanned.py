"""An unplanned failover and the fail-back: region ``a``'s server killed while replication of
its newest files is stalled, ``b`` promoted with force, ``a`` restarted and reconciled.

Region ``a`` accepted commits that never reached ``b``. After the forced promotion ``b`` takes
writes from the commit it had validated; when ``a`` comes back its ``main`` has diverged. Adopting
``a`` as a mirror of ``b`` is refused naming the first differing commit, unless the diverged
commits are preserved on a ``preserved-main-<UTC time>`` branch of ``a``; those commits are then
copied to ``b`` by ``b``'s replicant once their files are there.
"""

from __future__ import annotations

import re
import signal
from collections.abc import Iterator
from typing import Any

import pytest

from tests.e2e.failover import (
    Failover,
    objects_at,
    repository,
    restarted,
)
from tests.e2e.regions import MIRRORS, Region, TwoRegions, wait_for

PRESERVED = "/service/replication/v1/repositories/{repo}/preserved-branches"

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def failover(world: TwoRegions) -> Iterator[Failover]:
    both = Failover(world)
    try:
        yield both
    finally:
        both.close()


def _commit(region: Region, repo: str, files: dict[str, bytes], message: str) -> str:
    base = f"/repositories/{repo}/branches/main"
    for path, data in files.items():
        upload = region.http.post(
            base + "/objects",
            params={"path": path},
            content=data,
            headers={"Content-Type": "application/octet-stream"},
        )
        assert upload.status_code == 201, upload.text
    commit = region.http.post(base + "/commits", json={"message": message})
    assert commit.status_code == 201, commit.text
    return str(commit.json()["id"])


def _status(failover: Failover, replicant: Any, name: str) -> dict[str, Any] | None:
    response = replicant.http.get(MIRRORS.format(repo=name) + f"/{name}")
    if response.status_code != 200:
        return None
    found = [s for s in response.json()["status"] if s["branch"] == "main"]
    return found[0] if found else None


def test_forced_failover_then_fail_back_preserves_unreplicated_commits(
    failover: Failover,
) -> None:
    a, b = failover.regions["a"], failover.regions["b"]
    source, ns_a = failover.world.source_repo("outage")
    name = source.id
    ns_b = b.namespace(name)
    to_b = failover.replicate("a", ns_a, "b", ns_b, seed=21, delay=(0.0, 0.2))
    written: dict[str, bytes] = {}
    with failover.replicant("b") as in_b:
        assert failover.mirror(in_b, name, name).status_code == 201
        for i in range(3):
            files = {f"data/{i}.csv": f"row,{i}\n".encode() * 100}
            written.update(files)
            replicated = _commit(a, name, files, f"replicated {i}")
        wait_for(lambda: b.head(name, "main") == replicated, 30, "b at the replicated commit")
        # the newest files never reach b: replication stalls, then region a dies
        to_b.stall()
        lost: dict[str, bytes] = {}
        unreplicated = []
        for i in range(2):
            files = {f"late/{i}.bin": bytes([i + 1]) * 5000, f"data/{i}.csv": b"rewritten\n"}
            lost.update(files)
            unreplicated.append(_commit(a, name, files, f"unreplicated {i}"))
        newest = {"source_head": unreplicated[-1], "state": "waiting", "lag_commits": 2}

        seen: list[dict[str, Any]] = [{}]

        def waiting() -> bool:
            seen[0] = _status(failover, in_b, name) or {}
            return all(seen[0].get(k) == v for k, v in newest.items())

        try:
            wait_for(waiting, 30, "the replicant waiting for the newest source head's files")
        except AssertionError as exc:
            raise AssertionError(f"{exc}; last status {seen[0]}") from None
        a.server.process.send_signal(signal.SIGKILL)
        a.server.process.wait(timeout=10)
        # without force the promotion needs the source: refused, naming the lag and force
        refused = failover.promote(in_b, name, name, timeout=5)
        assert refused.status_code in (409, 503), refused.text
        assert "force" in refused.json()["message"]
        assert (repository(b, name) or {})["read_only"] is True
        forced = failover.promote(in_b, name, name, force=True)
        assert forced.status_code == 200, forced.text
        report = forced.json()
        assert report["forced"] is True and report["writes_refused_seconds"] is None
        assert report["heads"] == {"main": replicated}
        assert report["missing"]["main"]["mirror_head"] == replicated
        assert report["missing"]["main"]["source_head"] == unreplicated[-1]
        assert report["missing"]["main"]["lag_commits"] == 2, report
        assert in_b.metric("lakemirror_promotions_total", mirror=name, kind="forced") == 1
        record = b.http.get(f"/repositories/{name}/mirror/promotion")
        assert record.status_code == 200 and record.json()["forced"] is True
        # b takes writes at once
        after = {"after/0.txt": b"written in b after the failover\n"}
        in_b_head = _commit(b, name, after, "after the failover")
    failover.stop_replication(to_b)
    with restarted(a, failover.world.tmp / "a-restarted.log") as a_again:
        failover.regions["a"] = a_again
        try:
            _fail_back(failover, name, ns_a, ns_b, in_b_head, replicated, unreplicated, lost)
            expected_b = {**written, **after}
            assert objects_at(a_again, name, "main") == expected_b
        finally:
            failover.regions["a"] = a


def _fail_back(
    failover: Failover,
    name: str,
    ns_a: str,
    ns_b: str,
    b_head: str,
    replicated: str,
    unreplicated: list[str],
    lost: dict[str, bytes],
) -> None:
    a, b = failover.regions["a"], failover.regions["b"]
    # region a is back, writable, with the commits b never got
    assert (repository(a, name) or {})["read_only"] is False
    assert a.head(name, "main") == unreplicated[-1]
    failover.replicate("b", ns_b, "a", ns_a, seed=22, delay=(0.0, 0.2))
    with failover.replicant("a") as in_a:
        diverged = failover.mirror(in_a, name, name, existing=True)
        assert diverged.status_code == 409, diverged.text
        message = diverged.json()["message"]
        assert "'main'" in message and unreplicated[0] in message
        assert (repository(a, name) or {})["read_only"] is False
        adopted = failover.mirror(in_a, name, name, existing=True, preserve_diverged=True)
        assert adopted.status_code == 201, adopted.text
        preserved = adopted.json()["preserved"]
        assert len(preserved) == 1
        kept = preserved[0]
        assert kept["from_branch"] == "main" and kept["head"] == unreplicated[-1]
        assert re.fullmatch(r"preserved-main-\d{8}T\d{6}", kept["branch"])
        assert [c if isinstance(c, str) else c["id"] for c in kept["commits"]] == unreplicated
        assert kept["paths"] == len(lost)
        assert in_a.metric("lakemirror_failback_preserved_commits_total", mirror=name) == 2
        # a is now a mirror of b, and the preserved branch stays, its files byte for byte
        wait_for(lambda: a.head(name, "main") == b_head, 30, "a mirroring b")
        found = repository(a, name) or {}
        assert found["read_only"] is True
        assert a.head(name, kept["branch"]) == unreplicated[-1]
        at_preserved = objects_at(a, name, kept["branch"])
        assert {p: at_preserved[p] for p in lost} == lost
    # second step, on b's replicant: refused while the branch's files are not in b's namespace,
    # done once replication has brought them
    with failover.replicant("b") as in_b:
        copy = {"region": "a", "repository": name, "branch": kept["branch"]}
        early = in_b.http.post(PRESERVED.format(repo=name), json=copy)
        assert early.status_code == 409, early.text
        assert b.head(name, kept["branch"]) is None
        failover.replicate("a", ns_a, "b", ns_b, start=False).run_until_idle(30)
        copied = in_b.http.post(PRESERVED.format(repo=name), json=copy)
        assert copied.status_code == 201, copied.text
        assert copied.json()["head"] == unreplicated[-1]
        in_b_now = objects_at(b, name, kept["branch"])
        assert {p: in_b_now[p] for p in lost} == lost
        assert b.head(name, "main") == b_head
        assert a.head(name, kept["branch"]) == unreplicated[-1]
    assert replicated in {c["id"] for c in _log(b, name, kept["branch"])}


def _log(region: Region, repo: str, ref: str) -> list[dict[str, Any]]:
    response = region.http.get(f"/repositories/{repo}/refs/{ref}/commits")
    response.raise_for_status()
    results: list[dict[str, Any]] = response.json()["results"]
    return results
