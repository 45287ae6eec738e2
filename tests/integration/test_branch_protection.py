"""Branch protection against live server processes: the official SDK, raw HTTP and the CLI.

Two `lakemirror server` processes share one data directory (one KV), so a rule set through one
must hold on the other at once.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import lakefs_sdk
import pytest
from lakefs_sdk.exceptions import ApiException

from tests.integration.harness import Server, running_server, unique

KEY = ("AKIAPROTECT000000001", "branch-protection-secret-key-000000000")
WRITE_REFUSED = "cannot write to protected branch"
COMMIT_REFUSED = "cannot commit to protected branch"


@pytest.fixture(scope="module")
def shared(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("protection") / "data"


@pytest.fixture(scope="module")
def primary(shared: Path) -> Iterator[Server]:
    with running_server(
        shared, shared.parent / "primary.log", access_key_id=KEY[0], secret_access_key=KEY[1]
    ) as server:
        yield server


@pytest.fixture(scope="module")
def second(shared: Path, primary: Server) -> Iterator[Server]:
    with running_server(
        shared, shared.parent / "second.log", access_key_id=KEY[0], secret_access_key=KEY[1]
    ) as server:
        yield server


def _http(server: Server) -> httpx.Client:
    return httpx.Client(base_url=f"{server.url}/api/v1", auth=KEY, timeout=30.0)


@pytest.fixture(scope="module")
def http(primary: Server) -> Iterator[httpx.Client]:
    with _http(primary) as client:
        yield client


@pytest.fixture(scope="module")
def sdk(primary: Server) -> lakefs_sdk.ApiClient:
    configuration = lakefs_sdk.Configuration(
        host=f"{primary.url}/api/v1", username=KEY[0], password=KEY[1]
    )
    return lakefs_sdk.ApiClient(configuration)


@pytest.fixture
def repo(primary: Server, http: httpx.Client) -> str:
    """A repository with one committed object ``a`` on ``main`` and a branch ``dev``."""
    name = unique("protect")
    made = http.post(
        "/repositories", json={"name": name, "storage_namespace": primary.namespace(name)}
    )
    assert made.status_code == 201, made.text
    _upload(http, name, "main", "a", b"1")
    committed = http.post(f"/repositories/{name}/branches/main/commits", json={"message": "a"})
    assert committed.status_code == 201, committed.text
    dev = http.post(f"/repositories/{name}/branches", json={"name": "dev", "source": "main"})
    assert dev.status_code == 201, dev.text
    return name


def _upload(http: httpx.Client, repo: str, branch: str, path: str, data: bytes) -> httpx.Response:
    return http.post(
        f"/repositories/{repo}/branches/{branch}/objects", params={"path": path}, content=data
    )


def _settings(repo: str) -> str:
    return f"/repositories/{repo}/settings/branch_protection"


def _protect(http: httpx.Client, repo: str, *patterns: str) -> None:
    put = http.put(_settings(repo), json=[{"pattern": p} for p in patterns])
    assert put.status_code == 204, put.text


def _refused(response: httpx.Response, status: int, text: str) -> None:
    assert response.status_code == status, response.text
    assert response.json()["message"].startswith(text), response.text


def test_rules_round_trip_with_etag_and_if_match(
    sdk: lakefs_sdk.ApiClient, http: httpx.Client, primary: Server, repo: str
) -> None:
    api = lakefs_sdk.RepositoriesApi(sdk)
    never = api.get_branch_protection_rules_with_http_info(repo)
    assert never.data == [] and never.headers is not None and never.headers["ETag"] == ""
    rules = [lakefs_sdk.BranchProtectionRule(pattern=p) for p in ("main", "release-*")]
    api.set_branch_protection_rules(repo, rules)
    read = api.get_branch_protection_rules_with_http_info(repo)
    assert sorted(r.pattern for r in read.data) == ["main", "release-*"]
    assert read.headers is not None
    etag = read.headers["ETag"]
    assert len(etag) == 64 and int(etag, 16) >= 0 and not etag.startswith('"')

    # If-Match: any other ETag, or "" once rules exist, is 412 "Precondition failed"
    for stale in ("0" * 64, ""):
        refused = http.put(_settings(repo), json=[], headers={"If-Match": stale})
        _refused(refused, 412, "Precondition failed")
    with pytest.raises(ApiException) as caught:
        api.set_branch_protection_rules(repo, [], if_match="f" * 64)
    assert caught.value.status == 412
    assert sorted(r.pattern for r in api.get_branch_protection_rules(repo)) == ["main", "release-*"]

    # the current ETag lets the write through; [] clears the rules
    api.set_branch_protection_rules(repo, [], if_match=etag)
    cleared = http.get(_settings(repo))
    assert cleared.json() == []
    assert cleared.headers["etag"] not in ("", etag)
    assert cleared.headers["etag"] == hashlib.sha256(b'{"patterns":[],"version":1}').hexdigest()

    # "" writes only where rules were never stored
    other = unique("protect")
    http.post("/repositories", json={"name": other, "storage_namespace": primary.namespace(other)})
    first = http.put(_settings(other), json=[{"pattern": "main"}], headers={"If-Match": ""})
    assert first.status_code == 204, first.text
    assert http.delete(f"/repositories/{other}").status_code == 204


def test_bad_patterns_and_bodies_are_refused(http: httpx.Client, repo: str) -> None:
    bad = http.put(_settings(repo), json=[{"pattern": "release-{1,2"}])
    _refused(bad, 400, "invalid branch pattern syntax")
    assert http.put(_settings(repo), json=[{"name": "main"}]).status_code == 400
    assert http.put(_settings(repo), json={"pattern": "main"}).status_code == 400
    assert http.get(_settings(repo)).headers["etag"] == ""
    _refused(http.get(_settings("no-such-repo")), 404, "repository not found")


def test_deprecated_endpoints(sdk: lakefs_sdk.ApiClient, http: httpx.Client, repo: str) -> None:
    internal = lakefs_sdk.InternalApi(sdk)
    internal.create_branch_protection_rule_preflight(repo)
    with pytest.warns(DeprecationWarning):
        internal.internal_create_branch_protection_rule(
            repo, lakefs_sdk.BranchProtectionRule(pattern="main")
        )
    old = f"/repositories/{repo}/branch_protection"
    again = http.post(old, json={"pattern": "main"})
    _refused(again, 409, "branch protection rule already exists: not unique")
    assert http.post(old, json={"pattern": "feat-*"}).status_code == 204
    with pytest.warns(DeprecationWarning):
        listed = internal.internal_get_branch_protection_rules(repo)
    assert sorted(r.pattern for r in listed) == ["feat-*", "main"]
    with pytest.warns(DeprecationWarning):
        internal.internal_delete_branch_protection_rule(
            repo, lakefs_sdk.InternalDeleteBranchProtectionRuleRequest(pattern="feat-*")
        )
    missing = http.request("DELETE", old, json={"pattern": "feat-*"})
    assert (missing.status_code, missing.content) == (404, b"")
    assert http.get(old).json() == [{"pattern": "main"}]


def test_a_protected_branch_refuses_direct_changes_with_lakefs_texts(
    sdk: lakefs_sdk.ApiClient, http: httpx.Client, repo: str
) -> None:
    _upload(http, repo, "main", "staged", b"s")
    head = http.get(f"/repositories/{repo}/branches/main").json()["commit_id"]
    _protect(http, repo, "ma?n")
    base = f"/repositories/{repo}/branches/main"
    namespace = http.get(f"/repositories/{repo}").json()["storage_namespace"]

    _refused(_upload(http, repo, "main", "b", b"2"), 403, WRITE_REFUSED)
    link = {"path": "b", "physical_address": f"{namespace}/data/x/y", "size_bytes": 1}
    linked = http.post(f"{base}/staging/bulk", json={"objects": [{**link, "checksum": "c"}]})
    _refused(linked, 403, WRITE_REFUSED)
    copied = http.post(
        f"{base}/objects/copy", params={"dest_path": "b"}, json={"src_path": "a", "src_ref": "dev"}
    )
    _refused(copied, 403, WRITE_REFUSED)
    metadata = http.put(
        f"{base}/objects/stat/user_metadata", params={"path": "a"}, json={"set": {"k": "v"}}
    )
    _refused(metadata, 403, WRITE_REFUSED)
    _refused(http.delete(f"{base}/objects", params={"path": "a"}), 403, WRITE_REFUSED)
    _refused(http.put(base, json={"type": "reset"}), 403, WRITE_REFUSED)
    _refused(http.put(base, json={"type": "object", "path": "staged"}), 403, WRITE_REFUSED)
    _refused(http.post(f"{base}/commits", json={"message": "direct"}), 403, COMMIT_REFUSED)
    hard = http.put(f"{base}/hard_reset", params={"ref": "dev"})
    _refused(hard, 403, "protected branch")

    bulk = http.post(f"{base}/objects/delete", json={"paths": ["a", "staged"]})
    assert bulk.status_code == 200, bulk.text
    errors = bulk.json()["errors"]
    assert [(e["path"], e["status_code"]) for e in errors] == [("a", 403), ("staged", 403)]
    assert all(e["message"].startswith(WRITE_REFUSED) for e in errors)

    # the official SDK sees 403 too
    with pytest.raises(ApiException) as caught:
        lakefs_sdk.CommitsApi(sdk).commit(repo, "main", lakefs_sdk.CommitCreation(message="x"))
    assert caught.value.status == 403 and COMMIT_REFUSED in str(caught.value.body)

    # nothing changed
    assert http.get(base).json()["commit_id"] == head
    diff = http.get(f"{base}/diff").json()["results"]
    assert [(d["type"], d["path"]) for d in diff] == [("added", "staged")]
    assert http.get(f"/repositories/{repo}/refs/main/objects", params={"path": "a"}).content == b"1"


def test_merges_reverts_cherry_picks_and_refs_still_work(http: httpx.Client, repo: str) -> None:
    _protect(http, repo, "main")
    base = f"/repositories/{repo}"
    assert _upload(http, repo, "dev", "b", b"2").status_code == 201
    picked = http.post(f"{base}/branches/dev/commits", json={"message": "b"}).json()["id"]
    assert _upload(http, repo, "dev", "c", b"3").status_code == 201
    assert http.post(f"{base}/branches/dev/commits", json={"message": "c"}).status_code == 201

    merged = http.post(f"{base}/refs/dev/merge/main", json={})
    assert merged.status_code == 200, merged.text
    reverted = http.post(f"{base}/branches/main/revert", json={"ref": "main", "parent_number": 1})
    assert reverted.status_code == 204, reverted.text
    picked_up = http.post(f"{base}/branches/main/cherry-pick", json={"ref": picked})
    assert picked_up.status_code == 201, picked_up.text
    listing = http.get(f"{base}/refs/main/objects/ls").json()["results"]
    assert [o["path"] for o in listing] == ["a", "b"]

    assert http.post(f"{base}/tags", json={"id": "v1", "ref": "main"}).status_code == 201
    assert http.delete(f"{base}/tags/v1").status_code == 204
    made = http.post(f"{base}/branches", json={"name": "main-copy", "source": "main"})
    assert made.status_code == 201
    assert http.delete(f"{base}/branches/main-copy").status_code == 204


def test_a_rule_holds_on_every_server_process_at_once(
    http: httpx.Client, second: Server, repo: str
) -> None:
    with _http(second) as other:
        _protect(http, repo, "*")
        _refused(_upload(other, repo, "dev", "x", b"x"), 403, WRITE_REFUSED)
        cleared = other.put(_settings(repo), json=[])
        assert cleared.status_code == 204
        assert _upload(http, repo, "dev", "x", b"x").status_code == 201
        assert (
            other.get(_settings(repo)).headers["etag"] == http.get(_settings(repo)).headers["etag"]
        )


def test_a_mirror_refuses_rules(http: httpx.Client, primary: Server) -> None:
    name = unique("mirror")
    made = http.post(
        "/mirror/repositories",
        json={
            "name": name,
            "storage_namespace": primary.namespace(name),
            "mirror_of": "elsewhere/source",
        },
    )
    assert made.status_code == 201, made.text
    _refused(http.put(_settings(name), json=[{"pattern": "*"}]), 403, "read-only repository")
    old = f"/repositories/{name}/branch_protection"
    _refused(http.post(old, json={"pattern": "*"}), 403, "read-only repository")
    _refused(http.get(f"{old}/set_allowed"), 403, "read-only repository")
    assert http.get(_settings(name)).json() == []


def _cli(server: Server, home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("LAKECTL_")}
    env.update(
        HOME=str(home),
        LAKECTL_SERVER_ENDPOINT_URL=server.url,
        LAKECTL_CREDENTIALS_ACCESS_KEY_ID=KEY[0],
        LAKECTL_CREDENTIALS_SECRET_ACCESS_KEY=KEY[1],
    )
    return subprocess.run(
        [sys.executable, "-m", "mirror.cli.main", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_cli_adds_lists_and_deletes_rules(
    primary: Server, http: httpx.Client, repo: str, tmp_path: Path
) -> None:
    uri = f"lakefs://{repo}"
    added = _cli(primary, tmp_path, "branch-protect", "add", uri, "main")
    assert added.returncode == 0, added.stderr
    assert "protected branches matching 'main'" in added.stdout
    again = _cli(primary, tmp_path, "branch-protect", "add", uri, "main", "-o", "json")
    assert json.loads(again.stdout)["added"] is False
    assert _cli(primary, tmp_path, "branch-protect", "add", uri, "rel-*").returncode == 0
    listed = _cli(primary, tmp_path, "branch-protect", "list", uri, "-o", "json")
    assert json.loads(listed.stdout) == [{"pattern": "main"}, {"pattern": "rel-*"}]
    table = _cli(primary, tmp_path, "branch-protect", "list", uri)
    assert table.stdout.split() == ["BRANCH", "NAME", "PATTERN", "main", "rel-*"]
    http.post(f"/repositories/{repo}/branches", json={"name": "rel-1", "source": "main"})
    _refused(_upload(http, repo, "rel-1", "x", b"x"), 403, WRITE_REFUSED)

    deleted = _cli(primary, tmp_path, "branch-protect", "delete", uri, "main", "-y")
    assert deleted.returncode == 0, deleted.stderr
    missing = _cli(primary, tmp_path, "branch-protect", "delete", uri, "main", "-y")
    assert missing.returncode == 4 and "not found" in missing.stderr
    bad = _cli(primary, tmp_path, "branch-protect", "add", uri, "[a-")
    assert bad.returncode == 6 and "invalid branch pattern syntax" in bad.stderr
    assert http.get(_settings(repo)).json() == [{"pattern": "rel-*"}]
