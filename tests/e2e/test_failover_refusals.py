"""Promotion refused: a mirror that does not catch up in time (the source is made writable again),
a second promotion, callers without keys or permissions, on the replicant and on the servers, a
replicant whose key in the source region only reads, and a writable repository."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest

from tests.e2e.failover import Failover, make_named_user, make_user, repository
from tests.e2e.regions import MIRRORS, Replicant, TwoRegions, wait_for

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def failover(world: TwoRegions) -> Iterator[Failover]:
    both = Failover(world)
    try:
        yield both
    finally:
        both.close()


@pytest.fixture(scope="module")
def in_b(failover: Failover) -> Iterator[Replicant]:
    with failover.replicant("b") as running:
        yield running


def _mirrored(failover: Failover, replicant: Replicant, prefix: str) -> tuple[str, str]:
    source, ns_a = failover.world.source_repo(prefix)
    name = source.id
    failover.replicate("a", ns_a, "b", failover.regions["b"].namespace(name), seed=31)
    assert failover.mirror(replicant, name, name).status_code == 201
    wait_for(lambda: failover.synced(replicant, name, name, "main"), 30, "the mirror")
    return name, ns_a


def _commit(region_http: httpx.Client, repo: str, path: str) -> httpx.Response:
    base = f"/repositories/{repo}/branches/main"
    upload = region_http.post(
        base + "/objects",
        params={"path": path},
        content=b"x" * 100,
        headers={"Content-Type": "application/octet-stream"},
    )
    if upload.status_code != 201:
        return upload
    return region_http.post(base + "/commits", json={"message": path})


def test_a_mirror_that_does_not_catch_up_is_not_promoted(
    failover: Failover, in_b: Replicant
) -> None:
    a, b = failover.regions["a"], failover.regions["b"]
    name, _ = _mirrored(failover, in_b, "lagging")
    failover.simulators[-1].stall()
    behind = _commit(a.http, name, "never-replicated.bin")
    assert behind.status_code == 201, behind.text
    refused = failover.promote(in_b, name, name, timeout=2)
    assert refused.status_code == 409, refused.text
    message = refused.json()["message"]
    assert "main" in message and "1 commit" in message
    # the source takes writes again, the mirror is still a mirror and keeps mirroring
    assert (repository(a, name) or {})["read_only"] is False
    assert _commit(a.http, name, "after-the-refusal.bin").status_code == 201
    assert (repository(b, name) or {})["read_only"] is True
    assert b.http.get(f"/repositories/{name}/mirror/promotion").status_code == 404
    assert in_b.metric("lakemirror_promotions_total", mirror=name) == 0
    failover.simulators[-1].resume()
    head = a.head(name, "main")
    wait_for(lambda: b.head(name, "main") == head, 30, "the mirror catching up after all")


def test_a_second_promotion_is_refused(failover: Failover, in_b: Replicant) -> None:
    b = failover.regions["b"]
    name, _ = _mirrored(failover, in_b, "twice")
    first = failover.promote(in_b, name, name)
    assert first.status_code == 200, first.text
    for force in (False, True):
        again = failover.promote(in_b, name, name, force=force)
        assert again.status_code == 409, again.text
        assert "already promoted at " in again.json()["message"]
    # the mirror's configuration is gone; the repository is writable
    gone = in_b.http.get(MIRRORS.format(repo=name) + f"/{name}")
    assert gone.status_code == 404
    assert (repository(b, name) or {})["read_only"] is False
    # the server refuses to promote a repository that is not a mirror
    not_mirror = b.http.post(f"/repositories/{name}/mirror/promote", json={"promotion": {}})
    assert not_mirror.status_code == 409
    assert not_mirror.json() == {"message": f"repository '{name}' is not a mirror"}


def test_callers_need_keys_and_permissions(failover: Failover, in_b: Replicant) -> None:
    a, b = failover.regions["a"], failover.regions["b"]
    name, _ = _mirrored(failover, in_b, "guarded")
    nobody = make_user(b, "FSReadAll")
    path = MIRRORS.format(repo=name) + f"/{name}/promote"
    for auth in (None, (b.server.access_key_id, "wrong-secret-7Hq2LmXv9Rt4")):
        with httpx.Client(base_url=in_b.url, auth=auth, timeout=30.0) as client:
            answered = client.post(path, json={"force": True})
        assert answered.status_code == 401, answered.text
    forbidden = failover.promote(in_b, name, name, force=True, auth=nobody)
    assert forbidden.status_code == 403, forbidden.text
    adopt = MIRRORS.format(repo=name)
    with httpx.Client(base_url=in_b.url, auth=nobody, timeout=30.0) as client:
        refused = client.post(
            adopt,
            json={"name": "x", "region": "b", "storage_namespace": "local://x", "existing": True},
        )
    assert refused.status_code == 403, refused.text
    # the servers' endpoints: a region's reader may neither demote, promote nor preserve
    reader_a = make_user(a, "FSReadAll")
    with httpx.Client(base_url=f"{a.server.url}/api/v1", auth=reader_a, timeout=30.0) as client:
        demote = client.post(f"/repositories/{name}/mirror/demote", json={"mirror_of": "b/x"})
        assert demote.status_code == 403, demote.text
    with httpx.Client(base_url=f"{b.server.url}/api/v1", timeout=30.0) as anonymous:
        promote = anonymous.post(f"/repositories/{name}/mirror/promote", json={"promotion": {}})
        assert promote.status_code == 401, promote.text
    with httpx.Client(base_url=f"{b.server.url}/api/v1", auth=nobody, timeout=30.0) as client:
        preserve = client.post(
            f"/repositories/{name}/mirror/preserve",
            json={"branch": "p", "head": "0" * 64, "commits": []},
        )
        assert preserve.status_code == 403, preserve.text
    # nothing changed: a writable, b still its mirror
    assert (repository(a, name) or {})["read_only"] is False
    assert (repository(b, name) or {})["read_only"] is True
    assert in_b.metric("lakemirror_promotions_total", mirror=name) == 0


def test_a_switchover_needs_the_mirror_permission_in_the_source_region(
    failover: Failover,
) -> None:
    """A replicant whose key in the source region only reads (``FSReadAll``) mirrors, but its
    planned promotion cannot demote the source: 403, lakeFS's text, then which permission and
    which key; nothing changes. With the ``Replicator`` policy on that key it switches over."""
    a, b = failover.regions["a"], failover.regions["b"]
    reader_id, reader = make_named_user(a, "FSReadAll")
    with failover.replicant("b", peer_key=reader) as reading:
        name, _ = _mirrored(failover, reading, "read-key")
        refused = failover.promote(reading, name, name, timeout=10)
        assert refused.status_code == 403, refused.text
        assert refused.json() == {
            "message": f"insufficient permissions: user '{reader_id}' may not "
            f"fs:MirrorRepository on arn:lakefs:fs:::repository/{name}; a planned promotion "
            "demotes the source repository, so the replicant's key for region 'a' (regions.a "
            "in its configuration) needs fs:MirrorRepository on "
            f"arn:lakefs:fs:::repository/{name} in that region (the built-in Replicator policy "
            "grants it); nothing was changed"
        }
        assert (repository(a, name) or {})["read_only"] is False
        assert (repository(b, name) or {})["read_only"] is True
        assert reading.http.get(MIRRORS.format(repo=name) + f"/{name}").status_code == 200
        assert reading.metric("lakemirror_promotions_total", mirror=name) == 0
        # the documented key: the Replicator policy on the replicant's user in the source region
        granted = a.http.put(f"/auth/users/{reader_id}/policies/Replicator")
        assert granted.status_code == 201, granted.text
        head = a.head(name, "main")
        switched = failover.promote(reading, name, name, timeout=30)
        assert switched.status_code == 200, switched.text
        report = switched.json()
        assert report["forced"] is False and report["missing"] == {}
        assert report["heads"] == {"main": head}
    assert (repository(a, name) or {})["mirror_of"] == f"b/{name}"
    assert (repository(b, name) or {})["read_only"] is False
