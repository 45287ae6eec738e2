"""The mirror configuration API of a live replicant, given bad input, bad callers, and good ones.

Every refusal answers lakeFS's error body ``{"message": ...}`` with the status of the error tree;
no secret ever shows in a response or in the replicant's log. The mirror repository it creates
refuses every ordinary write, the region administrator's included, naming what it mirrors.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import httpx
import lakefs
import lakefs_sdk
import pytest
from lakefs.exceptions import ServerException

from tests.e2e.regions import MIRRORS, Replicant, TwoRegions, unique, wait_for

pytestmark = pytest.mark.slow

STATUS_FIELDS = {
    "branch",
    "state",
    "source_head",
    "mirror_head",
    "lag_seconds",
    "lag_commits",
    "missing_objects",
    "last_error",
}
WRONG_SECRET = "wrong-secret-Zq8v4NfT2pLx9RmKc7Wd"


@dataclass
class Calls:
    """HTTP clients of the replicant that keep every response body they received."""

    replicant: Replicant
    bodies: list[str] = field(default_factory=list)

    def send(
        self, method: str, path: str, auth: tuple[str, str] | None = None, **kwargs: Any
    ) -> httpx.Response:
        """Send a request as the region admin (or as ``auth``; ``("", "")``: no credentials)."""
        if auth == ("", ""):
            with httpx.Client(base_url=self.replicant.url, timeout=30.0) as anonymous:
                response = anonymous.request(method, path, **kwargs)
        elif auth is not None:
            with httpx.Client(base_url=self.replicant.url, auth=auth, timeout=30.0) as other:
                response = other.request(method, path, **kwargs)
        else:
            response = self.replicant.http.request(method, path, **kwargs)
        self.bodies.append(response.text)
        return response


@pytest.fixture(scope="module")
def replicant(world: TwoRegions) -> Iterator[Replicant]:
    with world.replicant("config-api") as running:
        yield running


@pytest.fixture(scope="module")
def calls(replicant: Replicant) -> Calls:
    return Calls(replicant)


@pytest.fixture(scope="module")
def source(world: TwoRegions) -> lakefs.Repository:
    """A source repository of region ``a`` with one committed object."""
    repo, _ = world.source_repo("config-src")
    main = repo.branch("main")
    main.object("data/a.csv").upload(b"a,1\n")
    main.commit("one object")
    return repo


def _replicate(world: TwoRegions, source: lakefs.Repository, name: str) -> None:
    """Replicate ``source``'s namespace into that of the mirror ``name``."""
    world.simulator(world.a.namespace(source.id), world.b.namespace(name))


@pytest.fixture(scope="module")
def reader_key(world: TwoRegions) -> tuple[str, str]:
    """Return the access key of a region ``b`` user in the built-in ``Readers`` group."""
    auth = world.b.client.sdk_client.auth_api
    user_id = unique("reader")
    auth.create_user(lakefs_sdk.UserCreation(id=user_id))
    auth.add_group_membership("Readers", user_id)
    creds = auth.create_credentials(user_id)
    return creds.access_key_id, creds.secret_access_key


def _error(response: httpx.Response, status: int) -> str:
    """Assert ``response`` is a lakeFS error of ``status``; return its message."""
    assert response.status_code == status, (response.status_code, response.text)
    body = response.json()
    assert set(body) == {"message"} and isinstance(body["message"], str), body
    assert body["message"]
    return str(body["message"])


def _body(world: TwoRegions, name: str, **extra: Any) -> dict[str, Any]:
    return {"name": name, "region": "b", "storage_namespace": world.b.namespace(name), **extra}


def _mirrors(source: str) -> str:
    return MIRRORS.format(repo=source)


def _audit(world: TwoRegions, **filters: str) -> list[dict[str, Any]]:
    """Return region ``b``'s audit events the filters match, newest first."""
    answer = world.b.http.get("/audit", params={**filters, "amount": 1000})
    assert answer.status_code == 200, answer.text
    return list(answer.json()["results"])


def test_bad_input_is_refused_and_creates_nothing(
    world: TwoRegions, calls: Calls, source: lakefs.Repository
) -> None:
    path = _mirrors(source.id)
    name = unique("bad")
    missing = _error(calls.send("POST", _mirrors("no-such-repo"), json=_body(world, name)), 404)
    assert "no-such-repo" in missing
    unknown = _error(calls.send("POST", path, json=_body(world, name, region="zz")), 400)
    assert "zz" in unknown
    # region "a" is configured, but this replicant mirrors into "b" only
    foreign = _error(calls.send("POST", path, json=_body(world, name, region="a")), 400)
    assert "'a'" in foreign
    for namespace in ("ftp://x", "local://../escape", "", "local://", "no-scheme"):
        body = _body(world, name, storage_namespace=namespace)
        _error(calls.send("POST", path, json=body), 400)
    good = _body(world, name)
    bad_bodies: list[Any] = [
        {**good, "name": 5},
        {**good, "region": ["b"]},
        {**good, "storage_namespace": None},
        {**good, "branches": "main"},
        {**good, "branches": [1]},
        {**good, "branches": []},
        {**good, "tags": "yes"},
        {**good, "unexpected": True},
        {k: v for k, v in good.items() if k != "name"},
        {k: v for k, v in good.items() if k != "region"},
        {k: v for k, v in good.items() if k != "storage_namespace"},
        {**good, "name": "Not A Valid Name"},
        [good],
        "mirror",
        {},
    ]
    for bad in bad_bodies:
        _error(calls.send("POST", path, json=bad), 400)
    not_json = calls.send(
        "POST", path, content=b"{not json", headers={"Content-Type": "application/json"}
    )
    _error(not_json, 400)
    # nothing of the refused requests was configured or created
    listed = calls.send("GET", path)
    assert listed.status_code == 200 and listed.json() == {"results": []}
    _error(calls.send("GET", f"{path}/{name}"), 404)
    assert world.b.http.get(f"/repositories/{name}").status_code == 404
    # the administrator's refused creations are in the audit trail, each with its answer (the
    # bodies the schema refuses never reach the handler, so they are none)
    refused = _audit(world, repository=name, kind="mirror.create")
    assert {e["result"] for e in refused} == {"failure"}
    assert sorted(e["status"] for e in refused) == [400] * 10 + [404]
    assert all(e["actor"]["via"] == "replicant" for e in refused)


def test_callers_need_valid_keys_and_permissions(
    world: TwoRegions, calls: Calls, source: lakefs.Repository, reader_key: tuple[str, str]
) -> None:
    path = _mirrors(source.id)
    name = unique("auth")
    admin_key = world.b.server.access_key_id
    for auth in (("", ""), (admin_key, WRONG_SECRET), ("AKIANOSUCHKEY0000000", WRONG_SECRET)):
        for method, url, kwargs in (
            ("POST", path, {"json": _body(world, name)}),
            ("GET", path, {}),
            ("GET", f"{path}/{name}", {}),
            ("DELETE", f"{path}/{name}", {}),
        ):
            response = calls.send(method, url, auth=auth, **kwargs)
            _error(response, 401)
            assert response.headers["WWW-Authenticate"].startswith("Basic")
    # region a's administrator is no user of region b
    region_a = (world.a.server.access_key_id, world.a.server.secret_access_key)
    _error(calls.send("GET", path, auth=region_a), 401)
    # a reader may look but not configure
    _error(calls.send("POST", path, auth=reader_key, json=_body(world, name)), 403)
    assert world.b.http.get(f"/repositories/{name}").status_code == 404
    assert calls.send("GET", path, auth=reader_key).status_code == 200
    created = calls.send("POST", path, json=_body(world, name))
    assert created.status_code == 201, created.text
    try:
        _error(calls.send("DELETE", f"{path}/{name}", auth=reader_key), 403)
        assert calls.send("GET", f"{path}/{name}", auth=reader_key).status_code == 200
    finally:
        assert calls.send("DELETE", f"{path}/{name}").status_code == 204


def _branch_status(calls: Calls, path: str, name: str) -> dict[str, Any] | None:
    response = calls.send("GET", f"{path}/{name}")
    assert response.status_code == 200, response.text
    for status in response.json()["status"]:
        if status["branch"] == "main" and status["state"] == "synced":
            return dict(status)
    return None


def test_mirror_lifecycle_with_status(
    world: TwoRegions, calls: Calls, source: lakefs.Repository
) -> None:
    path = _mirrors(source.id)
    name = unique("life")
    _replicate(world, source, name)
    created = calls.send("POST", path, json=_body(world, name, branches=["main"]))
    assert created.status_code == 201, created.text
    mirror = created.json()
    assert mirror["name"] == name and mirror["source_repo"] == source.id
    assert mirror["source_region"] == "a" and mirror["region"] == "b"
    assert mirror["storage_namespace"] == world.b.namespace(name)
    assert mirror["branches"] == ["main"] and mirror["tags"] is True
    # the name is taken, whatever the rest of the request says
    _error(calls.send("POST", path, json=_body(world, name)), 409)
    other, _ = world.source_repo("config-other")
    _error(calls.send("POST", _mirrors(other.id), json=_body(world, name)), 409)
    head = source.branch("main").get_commit().id
    status = wait_for(lambda: _branch_status(calls, path, name), 30, "main synced")
    assert STATUS_FIELDS <= set(status)
    assert status["source_head"] == status["mirror_head"] == head
    assert status["lag_seconds"] == 0 and status["lag_commits"] == 0
    assert status["missing_objects"] == 0 and status["last_error"] is None
    listed = calls.send("GET", path)
    assert listed.status_code == 200
    [entry] = [m for m in listed.json()["results"] if m["name"] == name]
    assert {s["branch"] for s in entry["status"]} == {"main"}
    assert STATUS_FIELDS <= set(entry["status"][0])
    # a mirror belongs to its source: asked for under another source, it does not exist
    _error(calls.send("GET", f"{_mirrors(other.id)}/{name}"), 404)
    _error(calls.send("DELETE", f"{_mirrors(other.id)}/{name}"), 404)
    deleted = calls.send("DELETE", f"{path}/{name}")
    assert deleted.status_code == 204 and deleted.content == b""
    assert name in _error(calls.send("GET", f"{path}/{name}"), 404)
    _error(calls.send("DELETE", f"{path}/{name}"), 404)
    # the audit trail: who created and deleted it, from where; the refused attempts too
    events = _audit(world, repository=name)
    assert [(e["kind"], e["status"]) for e in events] == [
        ("mirror.delete", 404),
        ("mirror.delete", 204),
        ("mirror.delete", 404),  # asked under another source
        ("mirror.create", 409),  # under another source
        ("mirror.create", 409),
        ("mirror.create", 201),
        ("repository.create", 201),  # the replicant's call to the region's server, within it
    ]
    admin = world.b.server.access_key_id
    created, server_side, removed = events[-2], events[-1], events[1]
    target = {"mirror": name, "repository": name, "source_repository": source.id}
    for event in (created, removed):
        assert event["actor"]["access_key_id"] == admin and event["actor"]["via"] == "replicant"
        assert event["actor"]["address"] == "127.0.0.1"
        assert event["target"] == target
    assert created["after"]["source_region"] == "a" and created["after"]["branches"] == ["main"]
    assert removed["before"]["storage_namespace"] == world.b.namespace(name)
    assert server_side["actor"]["access_key_id"] == world.replicator_key[0]
    assert server_side["after"]["mirror_of"] == f"a/{source.id}"
    assert all(m["name"] != name for m in calls.send("GET", path).json()["results"])
    # the mirror repository stays, read-only, at what it showed
    assert world.b.head(name, "main") == head


def _login(url: str, key: tuple[str, str]) -> str:
    """Return the login token a region's server issues for ``key`` (lakeFS's auth/login)."""
    body = {"access_key_id": key[0], "secret_access_key": key[1]}
    answer = httpx.post(f"{url}/api/v1/auth/login", json=body, timeout=30.0)
    assert answer.status_code == 200, answer.text
    return str(answer.json()["token"])


def _bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def test_region_mirrors_lag_history_and_the_servers_login_tokens(
    world: TwoRegions,
    calls: Calls,
    reader_key: tuple[str, str],
) -> None:
    # a source of its own: the module's is left as the other tests expect it
    source, _ = world.source_repo("config-hist")
    source.branch("main").object("data/a.csv").upload(b"a,1\n")
    source.branch("main").commit("one object")
    path = _mirrors(source.id)
    name = unique("history")
    simulator = world.simulator(world.a.namespace(source.id), world.b.namespace(name))
    created = calls.send("POST", path, json=_body(world, name, branches=["main"]))
    assert created.status_code == 201, created.text
    try:
        wait_for(lambda: _branch_status(calls, path, name), 30, "main synced")
        region = calls.send("GET", "/service/replication/v1/mirrors")
        assert region.status_code == 200, region.text
        assert region.json()["region"] == "b"
        [entry] = [m for m in region.json()["results"] if m["name"] == name]
        assert entry["source_repo"] == source.id and entry["status"][0]["branch"] == "main"
        _error(calls.send("GET", "/service/replication/v1/mirrors", auth=("", "")), 401)

        # replication held back while the source commits: the history shows the lag
        simulator.stall()
        main = source.branch("main")
        main.object("data/held.csv").upload(b"held,1\n")
        main.commit("held back")
        history_path = f"{path}/{name}/lag_history"

        def lagging() -> dict[str, Any] | None:
            answer = calls.send("GET", history_path)
            assert answer.status_code == 200, answer.text
            body: dict[str, Any] = answer.json()
            samples = [s for b in body["branches"] for s in b["samples"]]
            return body if any((s["lag_commits"] or 0) >= 1 for s in samples) else None

        history = wait_for(lagging, 30, "a lagging sample")
        assert history["mirror"] == name
        assert history["window_seconds"] == 3600 and history["slot_seconds"] == 10
        [branch] = history["branches"]
        assert branch["branch"] == "main"
        times = [s["time"] for s in branch["samples"]]
        assert times == sorted(times) and len(times) <= 360
        for sample in branch["samples"]:
            assert set(sample) == {"time", "lag_seconds", "lag_commits", "lag_commits_at_least"}
            assert (sample["lag_commits"] is None) != (sample["lag_commits_at_least"] is None)
        simulator.resume()
        wait_for(lambda: _branch_status(calls, path, name), 30, "main synced again")
        _error(calls.send("GET", f"{path}/no-such-mirror/lag_history"), 404)
        unknown = _error(calls.send("GET", f"{path}/{name}/promotion"), 404)
        assert unknown == f"promotion of mirror {name!r} of {source.id!r} not found"

        # the region's login tokens sign in as the key they were issued for, and only as it
        reader = _login(world.b.server.url, reader_key)
        as_reader = calls.send("GET", history_path, auth=("", ""), headers=_bearer(reader))
        assert as_reader.status_code == 200 and as_reader.json()["mirror"] == name
        refused = calls.send("DELETE", f"{path}/{name}", auth=("", ""), headers=_bearer(reader))
        assert "may not fs:DeleteRepository" in _error(refused, 403)
        region_a = (world.a.server.access_key_id, world.a.server.secret_access_key)
        foreign = _login(world.a.server.url, region_a)
        bad = calls.send("GET", history_path, auth=("", ""), headers=_bearer(foreign))
        assert _error(bad, 401) == "error authenticating request: invalid token signature"
        # the session cookie alone is no credential here: only a Bearer token is
        cookie = calls.send(
            "GET",
            history_path,
            auth=("", ""),
            headers={"Cookie": f"internal_auth_session={reader}"},
        )
        assert "no credentials" in _error(cookie, 401)
    finally:
        simulator.resume()
        assert calls.send("DELETE", f"{path}/{name}").status_code == 204
    _error(calls.send("GET", f"{path}/{name}/lag_history"), 404)


def _refusal(write: Callable[[], object]) -> tuple[int | None, str]:
    """Return the status and message with which the server refused an SDK write."""
    try:
        write()
    except ServerException as exc:
        return exc.status_code, str(exc.body.get("message", ""))
    except lakefs_sdk.exceptions.ApiException as exc:
        return exc.status, str(json.loads(exc.body or "{}").get("message", ""))
    pytest.fail("the write was accepted")


def test_mirror_repository_refuses_writes_of_everyone(
    world: TwoRegions, calls: Calls, source: lakefs.Repository
) -> None:
    name = unique("readonly")
    _replicate(world, source, name)
    created = calls.send("POST", _mirrors(source.id), json=_body(world, name))
    assert created.status_code == 201, created.text
    head = source.branch("main").get_commit().id
    wait_for(lambda: world.b.head(name, "main") == head, 30, "mirror synced")
    refusal = f'read-only repository: repository "{name}" is a read-only mirror of "a/{source.id}"'
    replicator = lakefs.Client(
        host=world.b.server.url,
        username=world.replicator_key[0],
        password=world.replicator_key[1],
    )
    repo = lakefs.Repository(name, client=world.b.client)
    writes: list[Callable[[], object]] = [
        lambda: repo.branch("main").object("new.csv").upload(b"x"),
        lambda: repo.branch("main").commit("nope", allow_empty=True),
        lambda: repo.branch("dev").create("main"),
        lambda: repo.tag("v1").create("main"),
    ]
    for write in writes:
        assert _refusal(write) == (403, refusal)
    # the SDK keeps only the status of a refused deletion; the wire carries the message
    assert _refusal(lambda: repo.branch("main").object("data/a.csv").delete())[0] == 403
    # the replicator moves mirror heads through its own endpoints only
    as_replicator = lakefs.Repository(name, client=replicator)
    assert _refusal(lambda: as_replicator.branch("main").object("r.csv").upload(b"r"))[0] == 403
    assert _refusal(lambda: as_replicator.tag("r1").create("main"))[0] == 403
    deleted = world.b.http.delete(
        f"/repositories/{name}/branches/main/objects", params={"path": "data/a.csv"}
    )
    assert deleted.status_code == 403 and deleted.json() == {"message": refusal}
    mirror = lakefs.Repository(name, client=world.b.client)
    assert [o.path for o in mirror.ref("main").objects()] == ["data/a.csv"]
    assert [b.id for b in mirror.branches()] == ["main"]
    assert list(mirror.tags()) == []
    assert world.b.head(name, "main") == head
    assert calls.send("DELETE", f"{_mirrors(source.id)}/{name}").status_code == 204


def test_no_secret_in_responses_or_log(
    world: TwoRegions, calls: Calls, replicant: Replicant, reader_key: tuple[str, str]
) -> None:
    # a refused body naming a secret-looking value must not echo it back
    echoed = calls.send(
        "POST",
        _mirrors("no-such-repo"),
        json={"name": WRONG_SECRET.lower(), "region": WRONG_SECRET, "storage_namespace": 7},
    )
    _error(echoed, 400)
    wait_for(lambda: "mirror deleted" in replicant.log(), 10, "the log of earlier calls")
    secrets = {
        world.a.server.secret_access_key,
        world.b.server.secret_access_key,
        world.replicator_key[1],
        reader_key[1],
        WRONG_SECRET,
    }
    log = replicant.log()
    assert calls.bodies, "the earlier tests of this module sent nothing"
    # the region's audit trail holds this module's mirrors (the regions' keys configured in
    # the replicant among them), and none of the secrets
    trail = json.dumps(_audit(world))
    assert '"mirror.create"' in trail and '"mirror.delete"' in trail
    for secret in secrets:
        assert secret not in log
        assert secret.lower() not in log
        assert secret not in trail
        for body in calls.bodies:
            assert secret not in body
