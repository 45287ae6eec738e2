"""lakeFS actions against a live server process, through the official SDK.

A stdlib HTTP server on 127.0.0.1 (in a thread) receives the webhooks and records them; its
path decides the answer: ``/ok`` 200, ``/fail`` 500, ``/slow`` answers only after the hook's
timeout. Each test makes its own repository, so its action files and runs are its own.
"""

from __future__ import annotations

import base64
import json
import os
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import AbstractContextManager
from dataclasses import dataclass
from pathlib import Path

import httpx
import lakefs_sdk
import pytest
from lakefs_sdk.exceptions import ApiException

from tests.integration.harness import Server, running_server, unique
from tests.webhooks import Receiver, webhook_receiver

KEY = ("AKIAACTIONS000000001", "actions-secret-key-00000000000000000000")
HEADER_SECRET = "s3cr3t-header-value-91"
DEADLINE = 20.0
RFC3339 = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$")
RUN_ID = re.compile(r"^[0-9a-v]{20}$")


@pytest.fixture(scope="module")
def receiver() -> Iterator[Receiver]:
    with webhook_receiver() as received:
        yield received


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    data = tmp_path_factory.mktemp("actions") / "data"
    env = {
        "LAKEFSACTION_HEADER": HEADER_SECRET,
        "OTHER_SECRET": "never-used",
        "LAKEMIRROR_ACTIONS__MIRROR_POST_HOOKS": "true",
    }
    with running_server(
        data, data.parent / "server.log", access_key_id=KEY[0], secret_access_key=KEY[1], env=env
    ) as found:
        yield found


@pytest.fixture(scope="module")
def second(server: Server) -> Iterator[Server]:
    """Another server process over the same data directory (the same KV)."""
    with running_server(
        server.data_dir,
        server.data_dir.parent / "second.log",
        access_key_id=KEY[0],
        secret_access_key=KEY[1],
    ) as found:
        yield found


@pytest.fixture(scope="module")
def sdk(server: Server) -> lakefs_sdk.ApiClient:
    configuration = lakefs_sdk.Configuration(
        host=f"{server.url}/api/v1", username=KEY[0], password=KEY[1]
    )
    return lakefs_sdk.ApiClient(configuration)


@dataclass
class Repo:
    """A repository of one test and the SDK's APIs."""

    name: str
    sdk: lakefs_sdk.ApiClient
    http: httpx.Client

    @property
    def objects(self) -> lakefs_sdk.ObjectsApi:
        return lakefs_sdk.ObjectsApi(self.sdk)

    @property
    def commits(self) -> lakefs_sdk.CommitsApi:
        return lakefs_sdk.CommitsApi(self.sdk)

    @property
    def branches(self) -> lakefs_sdk.BranchesApi:
        return lakefs_sdk.BranchesApi(self.sdk)

    @property
    def tags(self) -> lakefs_sdk.TagsApi:
        return lakefs_sdk.TagsApi(self.sdk)

    @property
    def actions(self) -> lakefs_sdk.ActionsApi:
        return lakefs_sdk.ActionsApi(self.sdk)

    def put(self, branch: str, path: str, data: str) -> None:
        answer = self.http.post(
            f"/repositories/{self.name}/branches/{branch}/objects",
            params={"path": path},
            content=data.encode(),
        )
        assert answer.status_code == 201, answer.text

    def commit(self, branch: str, message: str, **metadata: str) -> lakefs_sdk.Commit:
        creation = lakefs_sdk.CommitCreation(message=message, metadata=metadata or None)
        return self.commits.commit(self.name, branch, creation)

    def head(self, branch: str) -> str:
        return str(self.branches.get_branch(self.name, branch).commit_id)

    def runs(self, **filters: str) -> list[lakefs_sdk.ActionRun]:
        return list(self.actions.list_repository_runs(self.name, **filters).results)

    def wait_runs(self, count: int) -> list[lakefs_sdk.ActionRun]:
        deadline = time.monotonic() + DEADLINE
        while True:
            found = self.runs()
            if len(found) >= count:
                return found
            if time.monotonic() > deadline:
                pytest.fail(f"{count} runs expected, found {found}")
            time.sleep(0.05)


@pytest.fixture(scope="module")
def http(server: Server) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=f"{server.url}/api/v1", auth=KEY, timeout=30.0) as client:
        yield client


@pytest.fixture
def repo(server: Server, sdk: lakefs_sdk.ApiClient, http: httpx.Client) -> Repo:
    name = unique("actions")
    creation = lakefs_sdk.RepositoryCreation(
        name=name, storage_namespace=server.namespace(name), default_branch="main"
    )
    lakefs_sdk.RepositoriesApi(sdk).create_repository(creation)
    return Repo(name, sdk, http)


def _action(name: str, on: str, hooks: str) -> str:
    return f"name: {name}\non:\n{on}\nhooks:\n{hooks}"


def _webhook(hook_id: str, url: str, extra: str = "", condition: str = "") -> str:
    text = f"  - id: {hook_id}\n    type: webhook\n"
    if condition:
        text += f"    if: {condition}\n"
    text += f"    properties:\n      url: {url}\n"
    return text + extra


def test_pre_merge_hook_that_rejects_blocks_the_merge(repo: Repo, receiver: Receiver) -> None:
    action = _action(
        "Reject merges",
        "  pre-merge:\n    branches: [main, 'release-*']",
        _webhook("deny", f"{receiver.url}/fail"),
    )
    repo.put("main", "_lakefs_actions/reject.yaml", action)
    repo.commit("main", "add the action")
    repo.branches.create_branch(repo.name, lakefs_sdk.BranchCreation(name="dev", source="main"))
    repo.put("dev", "data/a", "1")
    dev_head = repo.commit("dev", "data").id
    before = repo.head("main")
    with pytest.raises(ApiException) as caught:
        lakefs_sdk.RefsApi(repo.sdk).merge_into_branch(repo.name, "dev", "main")
    assert caught.value.status == 412
    message = json.loads(caught.value.body)["message"]
    run_id = repo.runs()[0].run_id
    assert message == (
        f"update branch main: pre-merge hook aborted, run id '{run_id}': 1 error occurred:\n"
        "\t* hook run id '0000_0000' failed on action 'Reject merges' hook 'deny': "
        "action failed: webhook request failed (status code: 500)\n\n"
    )
    assert repo.head("main") == before
    (call,) = receiver.of(repo.name)
    assert call.body["event_type"] == "pre-merge"
    assert call.body["branch_id"] == "main"
    assert call.body["source_ref"] == dev_head
    assert call.body["merge_source"] == "dev"
    assert call.body["commit_message"] == "Merge 'dev' into 'main'"
    assert call.body["commit_metadata"] == {".lakefs.merge.strategy": "default"}
    # the merge commit the hook was told about was never stored
    with pytest.raises(ApiException) as missing:
        repo.commits.get_commit(repo.name, call.body["commit_id"])
    assert missing.value.status == 404
    run = repo.actions.get_run(repo.name, run_id)
    assert (run.status, run.event_type, run.branch) == ("failed", "pre-merge", "main")


def test_commit_payloads_query_params_and_env_headers(repo: Repo, receiver: Receiver) -> None:
    extra = (
        "      timeout: 10s\n"
        "      query_params: {a: x, b: [y, z]}\n"
        "      headers: {X-Token: '{{ ENV.LAKEFSACTION_HEADER }}', X-Plain: plain}\n"
    )
    action = _action(
        "Notify commits",
        "  pre-commit:\n  post-commit:",
        _webhook("tell", f"{receiver.url}/ok", extra),
    )
    repo.put("main", "_lakefs_actions/notify.yaml", action)
    commit = repo.commit("main", "first", owner="data-team")
    calls = receiver.wait_for(repo.name, lambda c: len(c) == 2)
    pre, post = sorted(calls, key=lambda c: c.body["event_type"] != "pre-commit")
    assert set(pre.body) == {
        "event_type", "event_time", "action_name", "hook_id", "repository_id",
        "branch_id", "source_ref", "commit_message", "committer", "commit_metadata",
    }  # fmt: skip
    assert pre.body["event_type"] == "pre-commit"
    assert RFC3339.match(pre.body["event_time"])
    assert pre.body["action_name"] == "Notify commits"
    assert pre.body["hook_id"] == "tell"
    assert pre.body["repository_id"] == repo.name
    assert pre.body["branch_id"] == "main"
    assert pre.body["source_ref"] == "main"
    assert pre.body["commit_message"] == "first"
    assert pre.body["committer"] == commit.committer
    assert pre.body["commit_metadata"] == {"owner": "data-team"}
    assert post.body == {
        "event_type": "post-commit",
        "event_time": post.body["event_time"],
        "action_name": "Notify commits",
        "hook_id": "tell",
        "repository_id": repo.name,
        "branch_id": "main",
        "source_ref": commit.id,
        "commit_id": commit.id,
        "commit_message": "first",
        "committer": commit.committer,
        "commit_metadata": {"owner": "data-team"},
    }
    for call in (pre, post):
        assert call.query == {"a": ["x"], "b": ["y", "z"]}
        assert call.headers["X-Token"] == HEADER_SECRET
        assert call.headers["X-Plain"] == "plain"
        assert call.headers["Content-Type"] == "application/json"
    runs = repo.wait_runs(2)
    # newest first; the pre-commit run got the new commit's ID afterwards
    assert [r.event_type for r in runs] == ["post-commit", "pre-commit"]
    assert all(r.commit_id == commit.id and r.status == "completed" for r in runs)
    output = repo.actions.get_run_hook_output(repo.name, runs[1].run_id, "0000_0000")
    assert b"X-Plain: plain" in output and b"******" in output
    assert HEADER_SECRET.encode() not in output


def test_branch_and_tag_events(repo: Repo, receiver: Receiver) -> None:
    events = (
        "pre-create-branch", "post-create-branch", "pre-delete-branch", "post-delete-branch",
        "pre-create-tag", "post-create-tag", "pre-delete-tag", "post-delete-tag",
    )  # fmt: skip
    on = "\n".join(f"  {e}:" for e in events)
    repo.put(
        "main",
        "_lakefs_actions/refs.yaml",
        _action("Refs", on, _webhook("refs", f"{receiver.url}/ok")),
    )
    head = repo.commit("main", "actions").id
    repo.branches.create_branch(repo.name, lakefs_sdk.BranchCreation(name="feature", source="main"))
    repo.tags.create_tag(repo.name, lakefs_sdk.TagCreation(id="v1", ref="main"))
    repo.tags.delete_tag(repo.name, "v1")
    repo.branches.delete_branch(repo.name, "feature")
    calls = receiver.wait_for(repo.name, lambda c: len(c) == 8)
    by_type = {c.body["event_type"]: c.body for c in calls}
    assert set(by_type) == set(events)
    for kind in ("pre-create-branch", "post-create-branch"):
        body = by_type[kind]
        assert (body["branch_id"], body["source_ref"], body["commit_id"]) == (
            "feature",
            "main",
            head,
        )
    for kind in ("pre-delete-branch", "post-delete-branch"):
        body = by_type[kind]
        assert (body["branch_id"], body["source_ref"]) == ("feature", head)
        assert "commit_id" not in body
    for kind in ("pre-create-tag", "post-create-tag", "pre-delete-tag", "post-delete-tag"):
        body = by_type[kind]
        assert (body["tag_id"], body["source_ref"], body["commit_id"]) == ("v1", head, head)
        assert "branch_id" not in body
    assert {r.event_type for r in repo.wait_runs(8)} == set(events)


def test_runs_api_listing_filters_and_hooks(repo: Repo, receiver: Receiver, server: Server) -> None:
    hooks = (
        _webhook("first", f"{receiver.url}/fail")
        + _webhook("after_failure", f"{receiver.url}/ok", condition="failure()")
        + _webhook("skipped", f"{receiver.url}/ok")
    )
    action = _action("Post", "  post-commit:\n    branches: [main]", hooks)
    repo.put("main", "_lakefs_actions/post.yaml", action)
    first = repo.commit("main", "one")
    repo.put("main", "x", "1")
    second = repo.commit("main", "two")
    runs = repo.wait_runs(2)
    assert [r.commit_id for r in runs] == [second.id, first.id]
    assert all(RUN_ID.match(r.run_id) for r in runs)
    assert runs[0].run_id < runs[1].run_id
    assert all(r.status == "failed" and r.branch == "main" for r in runs)
    assert [r.commit_id for r in repo.runs(commit=first.id)] == [first.id]
    assert len(repo.runs(branch="main")) == 2
    assert repo.runs(branch="other") == []
    page = repo.actions.list_repository_runs(repo.name, amount=1)
    assert page.pagination.has_more and page.pagination.next_offset == runs[0].run_id
    rest = repo.actions.list_repository_runs(repo.name, after=page.pagination.next_offset)
    assert [r.run_id for r in rest.results] == [runs[1].run_id]
    with pytest.raises(ApiException) as conflict:
        repo.runs(branch="main", commit=first.id)
    assert conflict.value.status == 400
    assert "parameters conflict" in json.loads(conflict.value.body)["message"]
    with pytest.raises(ApiException) as missing:
        repo.actions.get_run(repo.name, "0" * 20)
    assert missing.value.status == 404
    found = repo.actions.list_run_hooks(repo.name, runs[0].run_id).results
    assert [(h.hook_run_id, h.hook_id, h.status) for h in found] == [
        ("0000_0000", "first", "failed"),
        ("0000_0001", "after_failure", "completed"),
        ("0000_0002", "skipped", "failed"),
    ]
    assert all(h.action == "Post" for h in found)
    assert found[2].end_time is None and found[0].end_time is not None
    output = repo.actions.get_run_hook_output_with_http_info(repo.name, runs[0].run_id, "0000_0000")
    assert output.headers is not None
    assert output.headers["Content-Disposition"] == "attachment; filename=0000_0000.log"
    assert b"500" in output.data
    assert repo.actions.get_run_hook_output(repo.name, runs[0].run_id, "0000_0002") == b""
    # the logs are in the repository's namespace, next to the run's manifest
    logs = server.data_dir.rglob(f"{repo.name}/_lakefs/actions/log/{runs[0].run_id}/*")
    assert sorted(p.name for p in logs) == ["0000_0000.log", "0000_0001.log", "run.manifest"]


def test_invalid_action_file_fails_the_operation(repo: Repo) -> None:
    repo.put("main", "_lakefs_actions/bad.yaml", "name: Bad\non:\n  pre-commit:\nhooks: []\n")
    with pytest.raises(ApiException) as caught:
        repo.commit("main", "bad")
    assert caught.value.status == 500
    assert "'hooks' is required" in json.loads(caught.value.body)["message"]
    lua = "name: Lua\non:\n  pre-commit:\nhooks:\n  - id: lua_hook\n    type: lua\n"
    repo.put("main", "_lakefs_actions/bad.yaml", lua)
    with pytest.raises(ApiException) as refused:
        repo.commit("main", "lua")
    assert refused.value.status == 500
    message = json.loads(refused.value.body)["message"]
    assert "_lakefs_actions/bad.yaml" in message
    assert "'script' or 'script_path' must be supplied" in message
    assert repo.runs() == []


def test_timeout_aborts_with_412(repo: Repo, receiver: Receiver) -> None:
    action = _action(
        "Slow", "  pre-commit:", _webhook("wait", f"{receiver.url}/slow", "      timeout: 1s\n")
    )
    repo.put("main", "_lakefs_actions/slow.yaml", action)
    before = repo.head("main")
    with pytest.raises(ApiException) as caught:
        repo.commit("main", "slow")
    assert caught.value.status == 412
    message = json.loads(caught.value.body)["message"]
    assert message.startswith("pre-commit hook aborted, run id '")
    assert "context deadline exceeded" in message
    assert repo.head("main") == before
    assert repo.runs()[0].status == "failed"


def test_post_hook_failure_does_not_fail_the_operation(
    repo: Repo, receiver: Receiver, second: Server
) -> None:
    action = _action("Post fails", "  post-commit:", _webhook("fails", f"{receiver.url}/fail"))
    repo.put("main", "_lakefs_actions/post.yaml", action)
    commit = repo.commit("main", "post")
    assert repo.head("main") == commit.id
    (run,) = repo.wait_runs(1)
    assert (run.event_type, run.status, run.commit_id) == ("post-commit", "failed", commit.id)
    # the run is in the KV: another server process lists it, hooks and output included
    configuration = lakefs_sdk.Configuration(
        host=f"{second.url}/api/v1", username=KEY[0], password=KEY[1]
    )
    other = lakefs_sdk.ActionsApi(lakefs_sdk.ApiClient(configuration))
    assert [r.run_id for r in other.list_repository_runs(repo.name).results] == [run.run_id]
    assert [h.status for h in other.list_run_hooks(repo.name, run.run_id).results] == ["failed"]
    assert b"500" in other.get_run_hook_output(repo.name, run.run_id, "0000_0000")


def test_env_outside_prefix_fails_the_hook(repo: Repo, receiver: Receiver, tmp_path: Path) -> None:
    extra = "      headers: {X-Token: '{{ ENV.OTHER_SECRET }}'}\n"
    action = _action("Env", "  pre-commit:", _webhook("env", f"{receiver.url}/ok", extra))
    repo.put("main", "_lakefs_actions/env.yaml", action)
    with pytest.raises(ApiException) as caught:
        repo.commit("main", "env")
    assert caught.value.status == 412
    assert "'OTHER_SECRET' is not allowed" in json.loads(caught.value.body)["message"]
    assert receiver.of(repo.name) == []


def _cli(server: Server, home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("LAKECTL_")}
    env.update(
        HOME=str(home),
        LAKECTL_SERVER_ENDPOINT_URL=server.url,
        LAKECTL_CREDENTIALS_ACCESS_KEY_ID=KEY[0],
        LAKECTL_CREDENTIALS_SECRET_ACCESS_KEY=KEY[1],
    )
    command = [sys.executable, "-m", "mirror.cli.main", *args]
    return subprocess.run(command, env=env, capture_output=True, text=True, timeout=60)


def test_cli_runs_list_describe_and_output(
    repo: Repo, receiver: Receiver, server: Server, tmp_path: Path
) -> None:
    hooks = _webhook("first", f"{receiver.url}/fail") + _webhook("second", f"{receiver.url}/ok")
    repo.put("main", "_lakefs_actions/cli.yaml", _action("Cli", "  post-commit:", hooks))
    commit = repo.commit("main", "cli")
    (run,) = repo.wait_runs(1)
    uri = f"lakefs://{repo.name}"
    listed = _cli(
        server, tmp_path, "actions", "runs", "list", uri, "--branch", "main", "-o", "json"
    )
    assert listed.returncode == 0, listed.stderr
    assert [(r["run_id"], r["commit_id"]) for r in json.loads(listed.stdout)] == [
        (run.run_id, commit.id)
    ]
    shown = _cli(server, tmp_path, "actions", "runs", "describe", uri, run.run_id)
    assert shown.returncode == 0, shown.stderr
    assert "post-commit" in shown.stdout and "0000_0001" in shown.stdout
    output = _cli(
        server, tmp_path, "actions", "runs", "hooks", "output", uri, run.run_id, "0000_0000"
    )
    assert output.returncode == 0, output.stderr
    assert "500" in output.stdout and f"{receiver.url}/fail" in output.stdout
    missing = _cli(server, tmp_path, "actions", "runs", "describe", uri, "0" * 20)
    assert missing.returncode != 0 and "not found" in missing.stderr


def test_airflow_hook_triggers_a_dag_run(repo: Repo, receiver: Receiver) -> None:
    hook = (
        "  - id: dag\n    type: airflow\n    properties:\n"
        f"      url: {receiver.url}/\n      dag_id: nightly\n      username: af\n"
        "      password: '{{ ENV.LAKEFSACTION_HEADER }}'\n      dag_conf: {team: data}\n"
    )
    repo.put("main", "_lakefs_actions/dag.yaml", _action("Dag", "  pre-commit:", hook))
    repo.commit("main", "dag")
    (call,) = receiver.of(repo.name)
    assert call.path == "/api/v1/dags/nightly/dagRuns"
    token = base64.b64encode(f"af:{HEADER_SECRET}".encode()).decode()
    assert call.headers["Authorization"] == f"Basic {token}"
    assert call.body["conf"]["team"] == "data"
    event = call.body["conf"]["lakeFS_event"]
    assert (event["event_type"], event["action_name"], event["hook_id"]) == (
        "pre-commit",
        "Dag",
        "dag",
    )
    (run,) = repo.runs()
    assert run.status == "completed"


def test_runs_api_requires_credentials_and_ci_read_action(repo: Repo, server: Server) -> None:
    with httpx.Client(base_url=f"{server.url}/api/v1", timeout=30.0) as anonymous:
        for path in ("actions/runs", "actions/runs/x", "actions/runs/x/hooks"):
            answer = anonymous.get(f"/repositories/{repo.name}/{path}")
            assert answer.status_code == 401, (path, answer.text)
    with pytest.raises(ApiException) as missing:
        repo.actions.list_repository_runs("no-such-repository")
    assert missing.value.status == 404
    # a reader (FSReadAll) holds no ci:ReadAction; RepoManagementFullAccess holds ci:*
    auth = lakefs_sdk.AuthApi(repo.sdk)
    user = unique("reader")
    auth.create_user(lakefs_sdk.UserCreation(id=user))
    auth.add_group_membership("Readers", user)
    creds = auth.create_credentials(user)
    key = (creds.access_key_id, creds.secret_access_key)
    with httpx.Client(base_url=f"{server.url}/api/v1", auth=key, timeout=30.0) as reader:
        assert reader.get(f"/repositories/{repo.name}/actions/runs").status_code == 403
        auth.attach_policy_to_user(user, "RepoManagementFullAccess")
        allowed = reader.get(f"/repositories/{repo.name}/actions/runs")
        assert allowed.status_code == 200, allowed.text


def test_mirror_branch_advance_runs_post_commit_hooks(
    repo: Repo, receiver: Receiver, http: httpx.Client
) -> None:
    """The replicant's way: commit records imported, then the mirror branch moved."""
    action = _action("Arrived", "  post-commit:", _webhook("arrived", f"{receiver.url}/ok"))
    repo.put("main", "_lakefs_actions/arrived.yaml", action)
    head = repo.commit("main", "data arrives").id
    receiver.wait_for(repo.name, lambda c: len(c) == 1)
    source = http.get(f"/repositories/{repo.name}").json()
    mirror = unique("mirror")
    made = http.post(
        "/mirror/repositories",
        json={
            "name": mirror,
            "storage_namespace": source["storage_namespace"],
            "mirror_of": f"source/{repo.name}",
        },
    )
    assert made.status_code == 201, made.text
    log = http.get(f"/repositories/{repo.name}/refs/main/commits").json()["results"]
    for record in reversed(log):
        imported = http.post(f"/repositories/{mirror}/mirror/commits", json=record)
        assert imported.status_code == 201, imported.text
    moved = http.put(
        f"/repositories/{mirror}/mirror/branches/main", json={"commit_id": head, "expected": None}
    )
    assert moved.status_code == 200, moved.text
    (call,) = receiver.wait_for(mirror, lambda c: len(c) == 1)
    assert (call.body["event_type"], call.body["branch_id"]) == ("post-commit", "main")
    assert (call.body["commit_id"], call.body["source_ref"]) == (head, head)
    assert call.body["commit_message"] == "data arrives"
    deadline = time.monotonic() + DEADLINE
    while not (runs := repo.actions.list_repository_runs(mirror).results):
        assert time.monotonic() < deadline, "the mirror's run was never recorded"
        time.sleep(0.05)
    assert (runs[0].event_type, runs[0].status, runs[0].commit_id) == (
        "post-commit",
        "completed",
        head,
    )


def _crash_server(data: Path, log: Path) -> AbstractContextManager[Server]:
    env = {"LAKEMIRROR_ACTIONS__POST_LEASE_SECONDS": "1"}
    return running_server(data, log, access_key_id=KEY[0], secret_access_key=KEY[1], env=env)


@pytest.mark.slow
def test_post_hook_cut_short_by_a_crash_runs_in_the_next_process(tmp_path: Path) -> None:
    """kill -9 while a post-commit webhook is held: the next process over the KV delivers it."""
    data = tmp_path / "data"
    name = unique("crash")
    action = _action("Held", "  post-commit:", _webhook("held", "{url}/slow"))
    with webhook_receiver() as held:
        with (
            _crash_server(data, tmp_path / "first.log") as first,
            httpx.Client(base_url=f"{first.url}/api/v1", auth=KEY, timeout=30.0) as http,
        ):
            made = http.post(
                "/repositories", json={"name": name, "storage_namespace": first.namespace(name)}
            )
            assert made.status_code == 201, made.text
            put = http.post(
                f"/repositories/{name}/branches/main/objects",
                params={"path": "_lakefs_actions/held.yaml"},
                content=action.replace("{url}", held.url).encode(),
            )
            assert put.status_code == 201, put.text
            commit = http.post(f"/repositories/{name}/branches/main/commits", json={"message": "m"})
            assert commit.status_code == 201, commit.text
            commit_id = commit.json()["id"]
            held.wait_for(name, lambda calls: len(calls) == 1)
            first.process.kill()
            first.process.wait()
        with (
            _crash_server(data, tmp_path / "second.log") as second,
            httpx.Client(base_url=f"{second.url}/api/v1", auth=KEY, timeout=30.0) as http,
        ):
            held.release.set()
            calls = held.wait_for(name, lambda calls: len(calls) == 2)
            assert [c.body["event_type"] for c in calls] == ["post-commit"] * 2
            assert [c.body["commit_id"] for c in calls] == [commit_id] * 2
            deadline = time.monotonic() + DEADLINE
            while not (runs := http.get(f"/repositories/{name}/actions/runs").json()["results"]):
                assert time.monotonic() < deadline, "the run was never recorded"
                time.sleep(0.05)
    (run,) = runs
    assert (run["event_type"], run["status"], run["commit_id"]) == (
        "post-commit",
        "completed",
        commit_id,
    )
