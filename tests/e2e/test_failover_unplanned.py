"""An unplanned failover and the fail-back: region ``a``'s server killed while replication of
its newest files is stalled, ``b`` promoted with force, ``a`` restarted and reconciled.

Region ``a`` accepted commits that never reached ``b``. After the forced promotion ``b`` takes
writes from the commit it had validated; when ``a`` comes back its ``main`` has diverged. Adopting
``a`` as a mirror of ``b`` is refused naming the first differing commit, unless the diverged
commits are preserved on a ``preserved-main-<UTC time>`` branch of ``a``; those commits are then
copied to ``b`` by ``b``'s replicant once their files are there.

What a forced promotion reports missing is checked against the dead source's own history: the
commits behind the last head the replicant saw are counted when their records were copied, and
given as a lower bound when they were not.
"""

from __future__ import annotations

import re
import signal
from collections.abc import Iterator
from typing import Any

import lakefs
import pytest

from mirror.block import BlockResolver
from mirror.core.catalog import Catalog
from mirror.kv.sqlite import SqliteKV
from tests.e2e.failover import (
    Failover,
    make_named_user,
    new_source_region,
    objects_at,
    repository,
    restarted,
)
from tests.e2e.regions import MIRRORS, Region, Replicant, TwoRegions, wait_for
from tests.integration.harness import unique

PRESERVED = "/service/replication/v1/repositories/{repo}/preserved-branches"

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def failover(world: TwoRegions) -> Iterator[Failover]:
    both = Failover(world)
    try:
        yield both
    finally:
        both.close()


def _commit(
    region: Region, repo: str, files: dict[str, bytes], message: str, branch: str = "main"
) -> str:
    base = f"/repositories/{repo}/branches/{branch}"
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


LATE_COMMITS = 6


def test_a_forced_promotion_counts_what_the_dead_source_held(failover: Failover) -> None:
    """Region ``a`` is killed while ``b``'s replicant has seen a new head on two mirrors and
    moved to neither: replication holds the files back. On ``copied`` it has copied the commit
    records behind the head; on ``unread`` it could not read them (its key in ``a``, a reader's,
    is denied ``fs:ReadCommit`` on that repository), so it never counted them. A replicant
    started after the kill promotes both with force."""
    b = failover.regions["b"]
    with new_source_region(failover, "a-counted") as a:
        reader_id, reader = make_named_user(a, "FSReadAll")
        repos = {case: unique(case) for case in ("copied", "unread")}
        sims = []
        for name in repos.values():
            lakefs.Repository(name, client=a.client).create(a.namespace(name))
            sims.append(failover.replicate("a", a.namespace(name), "b", b.namespace(name)))
        bases: dict[str, str] = {}
        heads: dict[str, str] = {}
        with failover.replicant("b", peer_key=reader) as in_b:
            for case, name in repos.items():
                assert failover.mirror(in_b, name, name, branches=["main"]).status_code == 201
                bases[case] = _commit(a, name, {"base.csv": b"base\n" * 50}, "base")
            for case, name in repos.items():
                at_base = bases[case]
                wait_for(lambda n=name, c=at_base: b.head(n, "main") == c, 30, f"{name} at base")
            for sim in sims:
                sim.stall()
            unread = repos["unread"]
            deny = {
                "id": unique("no-commit-records"),
                "statement": [
                    {
                        "effect": "deny",
                        "action": ["fs:ReadCommit"],
                        "resource": f"arn:lakefs:fs:::repository/{unread}",
                    }
                ],
            }
            assert a.http.post("/auth/policies", json=deny).status_code == 201
            attached = a.http.put(f"/auth/users/{reader_id}/policies/{deny['id']}")
            assert attached.status_code == 201, attached.text
            for case, name in repos.items():
                # written on a branch not mirrored, then main jumps there: the replicant sees
                # no head in between (it would finish validating that one first)
                late = {"name": "late", "source": "main"}
                assert a.http.post(f"/repositories/{name}/branches", json=late).status_code == 201
                for i in range(LATE_COMMITS):
                    files = {f"late/{i}.bin": bytes([i + 1]) * 3000}
                    heads[case] = _commit(a, name, files, f"late {i}", branch="late")
                reset = a.http.put(
                    f"/repositories/{name}/branches/main/hard_reset", params={"ref": heads[case]}
                )
                assert reset.status_code == 204, reset.text
            _wait_status(
                in_b,
                repos["copied"],
                {"source_head": heads["copied"], "state": "waiting", "lag_commits": LATE_COMMITS},
            )
            copied_record = b.http.get(f"/repositories/{repos['copied']}/commits/{heads['copied']}")
            assert copied_record.status_code == 200, copied_record.text
            seen = _wait_status(
                in_b,
                unread,
                {
                    "source_head": heads["unread"],
                    "state": "error",
                    "lag_commits": None,
                    "lag_commits_at_least": 1,
                },
            )
            assert "fs:ReadCommit" in seen["last_error"]
            unread_record = b.http.get(f"/repositories/{unread}/commits/{heads['unread']}")
            assert unread_record.status_code == 404, unread_record.text
            assert in_b.metric("lakemirror_lag_commits", mirror=repos["copied"]) == LATE_COMMITS
            assert in_b.metric("lakemirror_lag_commits", mirror=unread) == 1
            a.server.process.send_signal(signal.SIGKILL)
            a.server.process.wait(timeout=10)
        for sim in sims:
            failover.stop_replication(sim)
        # a replicant started after the source died reports what the last one saw
        with failover.replicant("b", peer_key=reader) as again:
            reports = {}
            for case, name in repos.items():
                forced = failover.promote(again, name, name, force=True)
                assert forced.status_code == 200, forced.text
                reports[case] = forced.json()
    behind = _history_behind(a, repos, heads, bases)
    assert behind == {"copied": LATE_COMMITS, "unread": LATE_COMMITS}
    assert reports["copied"]["missing"] == {
        "main": {
            "mirror_head": bases["copied"],
            "source_head": heads["copied"],
            "lag_commits": behind["copied"],
            "lag_commits_at_least": None,
        }
    }
    # only the seen head is known to be missing: a lower bound, never an understated count
    assert reports["unread"]["missing"] == {
        "main": {
            "mirror_head": bases["unread"],
            "source_head": heads["unread"],
            "lag_commits": None,
            "lag_commits_at_least": 1,
        }
    }
    assert reports["unread"]["missing"]["main"]["lag_commits_at_least"] <= behind["unread"]
    record = b.http.get(f"/repositories/{unread}/mirror/promotion")
    assert record.status_code == 200
    assert record.json()["missing"] == reports["unread"]["missing"]


def _wait_status(replicant: Replicant, name: str, expected: dict[str, Any]) -> dict[str, Any]:
    seen: list[dict[str, Any]] = [{}]

    def reached() -> bool:
        seen[0] = _status_of(replicant, name) or {}
        return all(seen[0].get(k, "absent") == v for k, v in expected.items())

    try:
        wait_for(reached, 30, f"{name}'s status {expected}")
    except AssertionError as exc:
        raise AssertionError(f"{exc}; last status {seen[0]}") from None
    return seen[0]


def _status_of(replicant: Replicant, name: str) -> dict[str, Any] | None:
    response = replicant.http.get(MIRRORS.format(repo=name) + f"/{name}")
    if response.status_code != 200:
        return None
    found = [s for s in response.json()["status"] if s["branch"] == "main"]
    return found[0] if found else None


def _history_behind(
    region: Region, repos: dict[str, str], heads: dict[str, str], bases: dict[str, str]
) -> dict[str, int]:
    """Count, in the region's KV (its server stopped), the first-parent commits from each
    case's head back to its base."""
    kv = SqliteKV(region.server.data_dir / "kv.sqlite")
    try:
        catalog = Catalog(kv, BlockResolver(region.server.data_dir))
        behind: dict[str, int] = {}
        for case, name in repos.items():
            count = 0
            for commit in catalog.log(name, heads[case], first_parent=True):
                if commit.id == bases[case]:
                    break
                count += 1
            else:
                raise AssertionError(f"{bases[case]} is not in {name}'s history")
            behind[case] = count
        return behind
    finally:
        kv.close()
