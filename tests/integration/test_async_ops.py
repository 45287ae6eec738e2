"""Asynchronous commit and merge against live server processes sharing one KV.

The official ``lakefs_sdk`` makes the calls: typed ones where the SDK has them, raw calls through
its ``ApiClient`` for the ``…/async`` paths it lacks. Every process here shares one data
directory (SQLite KV and ``local://`` namespaces) and heartbeats every 0.5 s, so a task whose
process dies reads as failed (408) about 3 s later.

- Commit and merge succeed in the background; the status, from either process, carries what the
  synchronous call returns; a conflict, a dirty branch or no changes carry the synchronous call's
  status code and lakeFS's text.
- What the synchronous call checks up front (permission, repository, read-only mirror, branch,
  body) is answered at once with the same status and message, and starts no task.
- A process killed (SIGKILL) in the middle of a long commit: its task reads completed with 408
  from the other process, the branch is unchanged, and nothing staged is lost.
- SIGTERM: a running task finishes within ``server.shutdown_timeout`` and the process exits 0;
  one that cannot reads failed at once, the branch unchanged.
- Finished tasks expire after ``server.task_ttl``: read lazily as unknown, or swept.
- The ``lakemirror`` CLI gives the same output and exit codes with and without the asynchronous
  calls advertised, and draws a spinner only on a terminal.
"""

from __future__ import annotations

import errno
import json
import os
import pty
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path
from typing import Any

import httpx
import lakefs
import lakefs_sdk
import pytest
from lakefs_sdk.exceptions import ApiException
from prometheus_client.parser import text_string_to_metric_families

from mirror.kv.sqlite import SqliteKV
from tests.integration.harness import Server, running_server, unique

KEY = ("AKIAASYNC00000000001", "async-ops-secret-access-key-0000000000")
HEARTBEAT = {"LAKEMIRROR_SERVER__TASK_HEARTBEAT": "0.5"}
LONG_COMMIT_OBJECTS = 40_000
"""Staged objects whose commit takes seconds: long enough to stop its process in the middle."""
BULK = 10_000
DEADLINE = 60.0


# -- servers and clients -------------------------------------------------------------------------


@contextmanager
def server_on(data: Path, log: Path, **env: str) -> Iterator[Server]:
    with running_server(
        data, log, access_key_id=KEY[0], secret_access_key=KEY[1], env={**HEARTBEAT, **env}
    ) as server:
        yield server


@pytest.fixture(scope="module")
def shared(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The data directory (KV and namespaces) every process of these tests shares."""
    return tmp_path_factory.mktemp("async-ops") / "data"


@pytest.fixture(scope="module")
def primary(shared: Path) -> Iterator[Server]:
    with server_on(shared, shared.parent / "primary.log") as server:
        yield server


@pytest.fixture(scope="module")
def second(shared: Path, primary: Server) -> Iterator[Server]:
    with server_on(shared, shared.parent / "second.log") as server:
        yield server


class Api:
    """The official SDK on one server: typed APIs, and raw calls for the ``…/async`` paths."""

    def __init__(self, server: Server, key: tuple[str, str] = KEY) -> None:
        configuration = lakefs_sdk.Configuration(
            host=f"{server.url}/api/v1", username=key[0], password=key[1]
        )
        self.client = lakefs_sdk.ApiClient(configuration)
        self.server = server
        self.repositories = lakefs_sdk.RepositoriesApi(self.client)
        self.branches = lakefs_sdk.BranchesApi(self.client)
        self.commits = lakefs_sdk.CommitsApi(self.client)
        self.refs = lakefs_sdk.RefsApi(self.client)
        self.objects = lakefs_sdk.ObjectsApi(self.client)
        self.config = lakefs_sdk.ConfigApi(self.client)
        self.auth = lakefs_sdk.AuthApi(self.client)
        self.lakefs = lakefs.Client(host=server.url, username=key[0], password=key[1])

    def call(
        self,
        method: str,
        path: str,
        params: Mapping[str, str],
        *,
        body: Any = None,
        query: list[tuple[str, str]] | None = None,
        returns: Mapping[str, str | None],
    ) -> Any:
        return self.client.call_api(
            path,
            method,
            dict(params),
            query or [],
            {"Content-Type": "application/json", "Accept": "application/json"},
            body=body,
            response_types_map=dict(returns),
            auth_settings=["basic_auth"],
            _return_http_data_only=True,
        )

    # the asynchronous calls

    def start_commit(
        self, repo: str, branch: str, creation: lakefs_sdk.CommitCreation, **query: str
    ) -> str:
        info = self.call(
            "POST",
            "/repositories/{repository}/branches/{branch}/commits/async",
            {"repository": repo, "branch": branch},
            body=creation,
            query=list(query.items()),
            returns={"202": "TaskInfo"},
        )
        assert isinstance(info, lakefs_sdk.TaskInfo)
        return info.id

    def commit_status(self, repo: str, branch: str, task_id: str) -> dict[str, Any]:
        status: dict[str, Any] = self.call(
            "GET",
            "/repositories/{repository}/branches/{branch}/commits/async/{id}/status",
            {"repository": repo, "branch": branch, "id": task_id},
            returns={"200": "object"},
        )
        return status

    def start_merge(
        self, repo: str, source: str, destination: str, merge: lakefs_sdk.Merge | None = None
    ) -> str:
        info = self.call(
            "POST",
            "/repositories/{repository}/refs/{sourceRef}/merge/{destinationBranch}/async",
            {"repository": repo, "sourceRef": source, "destinationBranch": destination},
            body=merge or lakefs_sdk.Merge(),
            returns={"202": "TaskInfo"},
        )
        assert isinstance(info, lakefs_sdk.TaskInfo)
        return info.id

    def merge_status(
        self, repo: str, source: str, destination: str, task_id: str
    ) -> dict[str, Any]:
        status: dict[str, Any] = self.call(
            "GET",
            "/repositories/{repository}/refs/{sourceRef}/merge/{destinationBranch}/async/{id}"
            "/status",
            {
                "repository": repo,
                "sourceRef": source,
                "destinationBranch": destination,
                "id": task_id,
            },
            returns={"200": "object"},
        )
        return status

    # set-up

    def new_repository(self, name: str | None = None) -> str:
        repo = name or unique("async")
        self.repositories.create_repository(
            lakefs_sdk.RepositoryCreation(name=repo, storage_namespace=f"local://{repo}")
        )
        return repo

    def put(self, repo: str, branch: str, path: str, data: bytes) -> None:
        lakefs.Repository(repo, client=self.lakefs).branch(branch).object(path).upload(data)

    def commit(self, repo: str, branch: str, message: str) -> str:
        made = self.commits.commit(repo, branch, lakefs_sdk.CommitCreation(message=message))
        return str(made.id)

    def head(self, repo: str, branch: str) -> str:
        return str(self.branches.get_branch(repo, branch).commit_id)

    def stage_many(self, repo: str, branch: str, count: int, version: int = 0) -> None:
        """Stage ``count`` objects by address (``…/staging/bulk``), ten thousand a call.

        The objects are ``bulk/0000000``, ``bulk/0000001``, ...; each ``version`` differs.
        """
        for start in range(0, count, BULK):
            objects = [
                {
                    "path": f"bulk/{i:07d}",
                    "physical_address": f"local://{repo}/data/bulk/{i:07d}",
                    "size_bytes": 1,
                    "checksum": f"{version:08x}{i:024x}",
                }
                for i in range(start, min(start + BULK, count))
            ]
            self.call(
                "POST",
                "/repositories/{repository}/branches/{branch}/staging/bulk",
                {"repository": repo, "branch": branch},
                body={"objects": objects},
                returns={"201": None},
            )


def wait_for(condition: Callable[[], Any], what: str, deadline: float = DEADLINE) -> Any:
    end = time.monotonic() + deadline
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > end:
            pytest.fail(f"not within {deadline}s: {what}")
        time.sleep(0.05)


def completed(read: Callable[[], dict[str, Any]]) -> dict[str, Any]:
    """Poll a task's status until it completes; return it."""
    status: dict[str, Any] = wait_for(lambda: (s := read())["completed"] and s, "task completed")
    return status


def api_error(call: Callable[..., Any], *args: Any, **kwargs: Any) -> tuple[int, str]:
    """Call ``call(*args, **kwargs)``, which must fail; return its status and message."""
    with pytest.raises(ApiException) as caught:
        call(*args, **kwargs)
    body = json.loads(caught.value.body or "{}")
    return int(caught.value.status), str(body.get("message", ""))


def answer(call: Callable[..., Any], *args: Any) -> int:
    """Return the HTTP status ``call(*args)`` gets (200 when it succeeds)."""
    try:
        call(*args)
    except ApiException as exc:
        return int(exc.status)
    return 200


def task_records(data: Path) -> list[str]:
    kv = SqliteKV(data / "kv.sqlite")
    try:
        return [key.decode() for key, _ in kv.scan(b"tasks/records/")]
    finally:
        kv.close()


@pytest.fixture(scope="module")
def api(primary: Server) -> Api:
    return Api(primary)


@pytest.fixture(scope="module")
def other(second: Server) -> Api:
    return Api(second)


@pytest.fixture
def repo(api: Api) -> Iterator[str]:
    name = api.new_repository()
    yield name
    api.repositories.delete_repository(name)


def conflicting(api: Api, repo: str) -> None:
    """Make ``left`` and ``right`` change the same object differently."""
    api.put(repo, "main", "f", b"base")
    api.commit(repo, "main", "base")
    for branch in ("left", "right"):
        api.branches.create_branch(repo, lakefs_sdk.BranchCreation(name=branch, source="main"))
        api.put(repo, branch, "f", branch.encode())
        api.commit(repo, branch, branch)


# -- capability ----------------------------------------------------------------------------------


def test_config_advertises_async_ops_to_the_official_sdk(api: Api) -> None:
    config = api.config.get_config()
    assert config.capabilities_config == {"async_ops": True}
    assert config.version_config is not None and config.storage_config is not None


# -- success -------------------------------------------------------------------------------------


def test_async_commit_answers_at_once_and_its_status_is_the_commit_on_every_process(
    api: Api, other: Api, repo: str
) -> None:
    api.put(repo, "main", "a", b"a")
    creation = lakefs_sdk.CommitCreation(message="async one", metadata={"team": "data"})
    task_id = api.start_commit(repo, "main", creation)
    assert task_id.startswith("CA") and len(task_id) == 22
    status = completed(lambda: api.commit_status(repo, "main", task_id))
    assert set(status) == {"task_id", "completed", "update_time", "result"}
    assert status["task_id"] == task_id
    datetime.fromisoformat(status["update_time"])
    commit = api.commits.get_commit(repo, status["result"]["id"])
    assert status["result"] == commit.to_dict()
    assert commit.message == "async one" and commit.metadata == {"team": "data"}
    assert api.head(repo, "main") == commit.id
    assert other.commit_status(repo, "main", task_id) == status


def test_async_merge_answers_the_merge_reference(api: Api, other: Api, repo: str) -> None:
    api.put(repo, "main", "base", b"base")
    api.commit(repo, "main", "base")
    api.branches.create_branch(repo, lakefs_sdk.BranchCreation(name="dev", source="main"))
    api.put(repo, "dev", "new", b"new")
    dev = api.commit(repo, "dev", "on dev")
    before = api.head(repo, "main")
    merge = lakefs_sdk.Merge(message="bring dev", metadata={"k": "v"})
    task_id = api.start_merge(repo, "dev", "main", merge)
    assert task_id.startswith("MA")
    status = completed(lambda: other.merge_status(repo, "dev", "main", task_id))
    assert status["result"] == {"reference": api.head(repo, "main")}
    made = api.commits.get_commit(repo, status["result"]["reference"])
    assert made.parents == [before, dev] and made.message == "bring dev"
    assert api.merge_status(repo, "dev", "main", task_id) == status


# -- failures carry the synchronous call's status and text ---------------------------------------


def test_merge_conflict_reads_409_with_lakefs_text(api: Api, repo: str) -> None:
    conflicting(api, repo)
    right = api.head(repo, "right")
    task_id = api.start_merge(repo, "left", "right")
    status = completed(lambda: api.merge_status(repo, "left", "right", task_id))
    sync_status, sync_message = api_error(
        lambda: api.refs.merge_into_branch(repo, "left", "right", merge=lakefs_sdk.Merge())
    )
    assert status["status_code"] == sync_status == 409
    assert "conflict found" in status["error"]["message"]
    assert status["error"] == {"message": sync_message, "conflicts": ["f"]}
    assert "result" not in status
    assert api.head(repo, "right") == right


def test_merge_into_a_dirty_branch_reads_400_with_lakefs_text(api: Api, repo: str) -> None:
    api.put(repo, "main", "base", b"base")
    api.commit(repo, "main", "base")
    api.branches.create_branch(repo, lakefs_sdk.BranchCreation(name="dev", source="main"))
    api.put(repo, "dev", "new", b"new")
    api.commit(repo, "dev", "on dev")
    api.put(repo, "main", "dirt", b"uncommitted")
    main = api.head(repo, "main")
    task_id = api.start_merge(repo, "dev", "main")
    status = completed(lambda: api.merge_status(repo, "dev", "main", task_id))
    sync = api_error(lambda: api.refs.merge_into_branch(repo, "dev", "main"))
    assert (status["status_code"], status["error"]["message"]) == sync
    assert status["status_code"] == 400
    assert "uncommitted changes (dirty branch)" in status["error"]["message"]
    assert api.head(repo, "main") == main


def test_commit_without_changes_reads_400_no_changes(api: Api, repo: str) -> None:
    task_id = api.start_commit(repo, "main", lakefs_sdk.CommitCreation(message="nothing"))
    status = completed(lambda: api.commit_status(repo, "main", task_id))
    sync = api_error(
        lambda: api.commits.commit(repo, "main", lakefs_sdk.CommitCreation(message="nothing"))
    )
    assert (status["status_code"], status["error"]["message"]) == sync
    assert status["status_code"] == 400 and "no changes" in status["error"]["message"]


# -- what the synchronous call refuses up front, refused at once ---------------------------------


def test_up_front_refusals_match_the_synchronous_calls_and_start_no_task(
    api: Api, repo: str, shared: Path
) -> None:
    conflicting(api, repo)
    mirror = unique("mirror")
    api.call(
        "POST",
        "/mirror/repositories",
        {},
        body={"name": mirror, "storage_namespace": f"local://{mirror}", "mirror_of": "a/b"},
        returns={"201": None},
    )
    tasks_before = task_records(shared)
    message = lakefs_sdk.CommitCreation(message="m")
    commit_cases: list[tuple[str, str, Any, dict[str, str]]] = [
        ("nope-" + repo, "main", message, {}),  # no such repository
        (repo, "nope", message, {}),  # no such branch
        (mirror, "main", message, {}),  # a read-only mirror
        (repo, "main", {"metadata": {"k": "v"}}, {}),  # no message
        (repo, "main", message, {"source_metarange": "abc"}),
    ]
    statuses = []
    for target, branch, body, query in commit_cases:
        started = api_error(api.start_commit, target, branch, body, **query)
        sync = api_error(
            api.call,
            "POST",
            "/repositories/{repository}/branches/{branch}/commits",
            {"repository": target, "branch": branch},
            body=body,
            query=list(query.items()),
            returns={"201": "Commit"},
        )
        assert started == sync, (target, branch, body, query)
        statuses.append(started[0])
    assert statuses == [404, 404, 403, 400, 400]
    assert "read-only repository" in api_error(api.start_commit, mirror, "main", message)[1]

    merge_cases = [
        ("nope-" + repo, "left", "right", lakefs_sdk.Merge()),
        (repo, "nope", "right", lakefs_sdk.Merge()),  # no such source
        (repo, "left", "nope", lakefs_sdk.Merge()),  # no such destination
        (mirror, "main", "main", lakefs_sdk.Merge()),
        (repo, "left", "right", lakefs_sdk.Merge(strategy="everyone-wins")),
    ]
    statuses = []
    for target, source, destination, merge in merge_cases:
        started = api_error(api.start_merge, target, source, destination, merge)
        sync = api_error(api.refs.merge_into_branch, target, source, destination, merge=merge)
        assert started == sync, (target, source, destination, merge)
        statuses.append(started[0])
    assert statuses == [404, 404, 404, 403, 400]
    assert task_records(shared) == tasks_before


def test_status_of_an_unknown_task_or_of_another_target_is_not_found(api: Api, repo: str) -> None:
    api.put(repo, "main", "a", b"a")
    task_id = api.start_commit(repo, "main", lakefs_sdk.CommitCreation(message="m"))
    completed(lambda: api.commit_status(repo, "main", task_id))
    api.branches.create_branch(repo, lakefs_sdk.BranchCreation(name="dev", source="main"))
    for read in (
        lambda: api.commit_status(repo, "main", "CA" + "x" * 20),
        lambda: api.commit_status(repo, "dev", task_id),
        lambda: api.merge_status(repo, "dev", "main", task_id),
    ):
        status, message = api_error(read)
        assert status == 404 and message.startswith("not found")


def test_starting_and_reading_need_the_synchronous_calls_permission(
    api: Api, primary: Server, repo: str
) -> None:
    user = unique("reader")
    api.auth.create_user(lakefs_sdk.UserCreation(id=user))
    api.auth.add_group_membership("Readers", user)
    creds = api.auth.create_credentials(user)
    try:
        reader = Api(primary, (creds.access_key_id, creds.secret_access_key))
        api.put(repo, "main", "a", b"a")
        task_id = api.start_commit(repo, "main", lakefs_sdk.CommitCreation(message="m"))
        attempts = [
            lambda: reader.start_commit(repo, "main", lakefs_sdk.CommitCreation(message="m")),
            lambda: reader.commit_status(repo, "main", task_id),
            lambda: reader.start_merge(repo, "main", "main"),
            lambda: reader.merge_status(repo, "main", "main", task_id),
        ]
        for attempt in attempts:
            assert api_error(attempt)[0] == 403
        completed(lambda: api.commit_status(repo, "main", task_id))
    finally:
        api.auth.delete_user(user)


# -- processes that stop -------------------------------------------------------------------------


def test_a_task_whose_process_is_killed_reads_408_and_leaves_the_branch_as_it_was(
    api: Api, other: Api, shared: Path, repo: str
) -> None:
    api.stage_many(repo, "main", LONG_COMMIT_OBJECTS)
    head = api.head(repo, "main")
    with server_on(shared, shared.parent / "killed.log") as doomed:
        victim = Api(doomed)
        task_id = victim.start_commit(repo, "main", lakefs_sdk.CommitCreation(message="big"))
        doomed.process.kill()
        doomed.process.wait(timeout=10)
    status = completed(lambda: other.commit_status(repo, "main", task_id))
    assert status["status_code"] == 408
    assert "expired" in status["error"]["message"]
    assert api.head(repo, "main") == head
    # nothing staged was lost: the next commit takes every object
    made = api.commits.commit(repo, "main", lakefs_sdk.CommitCreation(message="again"))
    for i in (0, LONG_COMMIT_OBJECTS // 2, LONG_COMMIT_OBJECTS - 1):
        assert api.objects.stat_object(repo, made.id, f"bulk/{i:07d}").size_bytes == 1


def test_sigterm_lets_a_running_task_finish_then_exits_0(
    api: Api, other: Api, shared: Path, repo: str
) -> None:
    api.stage_many(repo, "main", LONG_COMMIT_OBJECTS)
    with server_on(
        shared, shared.parent / "drained.log", LAKEMIRROR_SERVER__SHUTDOWN_TIMEOUT="60"
    ) as stopping:
        task_id = Api(stopping).start_commit(
            repo, "main", lakefs_sdk.CommitCreation(message="finish me")
        )
        assert not other.commit_status(repo, "main", task_id)["completed"]
        stopping.process.send_signal(signal.SIGTERM)
        assert stopping.process.wait(timeout=60) == 0
    status = other.commit_status(repo, "main", task_id)
    assert status["completed"] and "error" not in status
    assert api.head(repo, "main") == status["result"]["id"]


def test_sigterm_past_the_shutdown_timeout_leaves_the_task_failed_and_the_branch_as_it_was(
    api: Api, other: Api, shared: Path, repo: str
) -> None:
    api.stage_many(repo, "main", LONG_COMMIT_OBJECTS)
    head = api.head(repo, "main")
    with server_on(
        shared, shared.parent / "cut.log", LAKEMIRROR_SERVER__SHUTDOWN_TIMEOUT="0.2"
    ) as stopping:
        task_id = Api(stopping).start_commit(
            repo, "main", lakefs_sdk.CommitCreation(message="too long")
        )
        stopping.process.send_signal(signal.SIGTERM)
        assert stopping.process.wait(timeout=30) == 0
    # at once, not after the heartbeats run out: the stopping process removed its heartbeat
    status = other.commit_status(repo, "main", task_id)
    assert status["completed"] and status["status_code"] == 408
    assert "no longer available" in status["error"]["message"]
    assert api.head(repo, "main") == head


# -- expiry --------------------------------------------------------------------------------------


def test_finished_tasks_expire_after_the_ttl(api: Api, shared: Path, repo: str) -> None:
    with server_on(
        shared, shared.parent / "ttl.log", LAKEMIRROR_SERVER__TASK_TTL="2"
    ) as short_lived:
        brief = Api(short_lived)
        creation = lakefs_sdk.CommitCreation(message="brief", allow_empty=True)
        read_later = brief.start_commit(repo, "main", creation)
        never_read = brief.start_commit(repo, "main", creation)
        status = completed(lambda: brief.commit_status(repo, "main", read_later))
        assert status.get("result"), status
        # read after its TTL: unknown, and removed by the read
        wait_for(
            lambda: answer(api.commit_status, repo, "main", read_later) == 404,
            "the read task to expire",
        )
        # never read: removed by the server's periodic sweep
        wait_for(
            lambda: f"tasks/records/{never_read}" not in task_records(shared),
            "the unread task to be swept",
        )
        assert f"tasks/records/{read_later}" not in task_records(shared)


# -- the CLI -------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def sync_only(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """A server that does not offer the asynchronous calls (like an older lakeFS)."""
    data = tmp_path_factory.mktemp("sync-only") / "data"
    with server_on(data, data.parent / "server.log", LAKEMIRROR_SERVER__ASYNC_OPS="false") as s:
        yield s


def lakemirror(
    server: Server, *args: str, stderr: int | None = subprocess.PIPE
) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("LAKECTL_")}
    env.update(
        LAKECTL_SERVER_ENDPOINT_URL=server.url,
        LAKECTL_CREDENTIALS_ACCESS_KEY_ID=KEY[0],
        LAKECTL_CREDENTIALS_SECRET_ACCESS_KEY=KEY[1],
    )
    return subprocess.run(
        [sys.executable, "-m", "mirror.cli.main", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def requests_to(server: Server, route_suffix: str) -> float:
    text = httpx.get(f"{server.url}/metrics", timeout=10).text
    return sum(
        sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
        if sample.name == "lakemirror_http_requests_total"
        and sample.labels.get("route", "").endswith(route_suffix)
    )


def _masked(text: str, *ids: str) -> str:
    for value in ids:
        text = text.replace(value, "<id>").replace(value[:16], "<id>")
    return "\n".join(line for line in text.splitlines() if not line.startswith("Date:"))


def test_cli_commit_and_merge_say_the_same_with_and_without_async(
    api: Api, sync_only: Server, primary: Server
) -> None:
    name = unique("cli")
    outcomes: dict[str, list[tuple[int, str, str]]] = {}
    for server in (primary, sync_only):
        client = Api(server)
        client.new_repository(name)
        conflicting(client, name)
        client.put(name, "left", "g", b"g")
        uri = f"lakefs://{name}"
        runs = [
            lakemirror(server, "commit", f"{uri}/left", "-m", "more", "--meta", "k=v"),
            lakemirror(server, "commit", f"{uri}/left", "-m", "again"),  # no changes
            lakemirror(server, "merge", f"{uri}/left", f"{uri}/right"),  # conflict
            lakemirror(server, "merge", f"{uri}/left", "main", "--strategy", "source-wins"),
            lakemirror(server, "commit", f"{uri}/nope", "-m", "m"),  # no such branch
        ]
        client.put(name, "main", "dirt", b"d")
        runs.append(lakemirror(server, "merge", f"{uri}/right", f"{uri}/main"))  # dirty
        client.put(name, "right", "h", b"h")
        runs.append(lakemirror(server, "commit", f"{uri}/right", "-m", "json", "-o", "json"))
        heads = [client.head(name, b) for b in ("main", "left", "right")]
        parents = [client.commits.get_commit(name, h).parents for h in heads]
        ids = heads + [p for ps in parents for p in ps]
        outcomes[server.url] = [
            (r.returncode, _masked(r.stdout, *ids), _masked(r.stderr, *ids)) for r in runs
        ]
        client.repositories.delete_repository(name)
    with_async, without = outcomes[primary.url], outcomes[sync_only.url]
    assert [code for code, _, _ in with_async] == [0, 6, 5, 0, 4, 6, 0]
    for run_async, run_sync in zip(with_async, without, strict=True):
        assert run_async[0] == run_sync[0]
        assert run_async[2] == run_sync[2]
        if run_async is not with_async[-1]:
            assert run_async[1] == run_sync[1]
    json_async, json_sync = json.loads(with_async[-1][1]), json.loads(without[-1][1])
    assert json_async.keys() == json_sync.keys() and json_async["message"] == "json"
    assert "conflict found" in with_async[2][2] and "(409 Conflict)" in with_async[2][2]
    assert "uncommitted changes (dirty branch)" in with_async[5][2]
    assert requests_to(primary, "/commits/async") >= 4
    assert requests_to(primary, "/merge/{destinationBranch}/async") >= 3
    assert requests_to(sync_only, "/async") == 0


def run_on_terminal(server: Server, *args: str) -> tuple[int, str, str]:
    """Run the CLI with a terminal as standard error; return code, stdout and what was drawn."""
    primary_fd, secondary_fd = pty.openpty()
    env = {k: v for k, v in os.environ.items() if not k.startswith("LAKECTL_")}
    env.update(
        LAKECTL_SERVER_ENDPOINT_URL=server.url,
        LAKECTL_CREDENTIALS_ACCESS_KEY_ID=KEY[0],
        LAKECTL_CREDENTIALS_SECRET_ACCESS_KEY=KEY[1],
    )
    process = subprocess.Popen(
        [sys.executable, "-m", "mirror.cli.main", *args],
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=secondary_fd,
    )
    os.close(secondary_fd)
    drawn = b""
    while True:
        try:
            chunk = os.read(primary_fd, 4096)
        except OSError as exc:  # EIO: the child closed the terminal
            assert exc.errno == errno.EIO
            break
        if not chunk:
            break
        drawn += chunk
    os.close(primary_fd)
    assert process.stdout is not None
    out = process.stdout.read().decode()
    process.stdout.close()
    return process.wait(timeout=60), out, drawn.decode()


def test_cli_spins_on_a_terminal_only_and_erases_the_spinner(api: Api, primary: Server) -> None:
    repo = api.new_repository()
    try:
        api.stage_many(repo, "main", BULK)
        code, out, drawn = run_on_terminal(primary, "commit", f"lakefs://{repo}/main", "-m", "t")
        assert code == 0 and out.startswith(f"committed to lakefs://{repo}/main\n")
        assert "committing " in drawn and drawn.endswith("\r\x1b[K")
        api.stage_many(repo, "main", BULK // 2, version=1)
        code, out, drawn = run_on_terminal(
            primary, "commit", f"lakefs://{repo}/main", "-m", "j", "-o", "json"
        )
        assert code == 0 and json.loads(out)["message"] == "j"
        assert drawn == ""
    finally:
        api.repositories.delete_repository(repo)
