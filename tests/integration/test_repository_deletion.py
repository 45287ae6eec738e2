"""Deleting a repository through the API of a live server leaves no KV record of its instance.

The repository gets one record of every kind kept per repository instance: refs and staged
changes, a pull request, an import, action runs, metadata, GC rules, a protection rule and a
hidden branch. Once deleted, a scan of the server's SQLite KV finds no key naming its instance
(and none under its branches' staging tokens); a repository created again under the name
starts empty.

A server whose S3 gateway is disabled still removes the gateway's multipart uploads (another
process may have started them), and finishes, when it starts, a deletion a failure left half-done.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import boto3
import httpx
import pytest
from botocore.config import Config
from botocore.exceptions import ClientError

from mirror.api.hidden import HiddenBranches
from mirror.core.deletion import MARKERS
from mirror.core.ids import BranchID, RepositoryID
from mirror.core.model import Branch, Repository
from mirror.gateway.uploads import Upload, UploadStore, new_upload_id
from mirror.gc.rules import GCRules, GCRulesStore
from mirror.imports.records import ImportRecord, ImportRecords
from mirror.kv.sqlite import SqliteKV
from tests.integration.harness import Server, running_server, unique
from tests.webhooks import Receiver, webhook_receiver

KEY = ("AKIADELETION00000001", "deletion-secret-key-000000000000000000")
DEADLINE = 20.0


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    with webhook_receiver() as received:
        yield received


@pytest.fixture
def server(tmp_path: Path) -> Iterator[Server]:
    data = tmp_path / "data"
    with running_server(
        data, tmp_path / "server.log", access_key_id=KEY[0], secret_access_key=KEY[1]
    ) as found:
        yield found


def _ok(answer: httpx.Response, status: int) -> httpx.Response:
    assert answer.status_code == status, answer.text
    return answer


def _until(http: httpx.Client, path: str, done: Callable[[Any], bool]) -> None:
    deadline = time.monotonic() + DEADLINE
    while True:
        body = _ok(http.get(path), 200).json()
        if done(body):
            return
        assert time.monotonic() < deadline, f"{path}: {body}"
        time.sleep(0.05)


def test_deleting_a_repository_leaves_nothing_of_its_instance(
    server: Server, receiver: Receiver
) -> None:
    name = unique("gone")
    repo_path = f"/repositories/{name}"
    action = (
        "name: Told\non:\n  post-commit:\n    branches: [main]\nhooks:\n"
        f"  - {{id: tell, type: webhook, properties: {{url: '{receiver.url}/ok'}}}}\n"
    )
    source = server.data_dir / "import-src"
    (source / "t").mkdir(parents=True)
    (source / "t" / "part-0").write_bytes(b"imported")
    with httpx.Client(base_url=f"{server.url}/api/v1", auth=KEY, timeout=30.0) as http:
        body = {"name": name, "storage_namespace": server.namespace(name)}
        _ok(http.post("/repositories", json=body), 201)
        objects = f"{repo_path}/branches/main/objects"
        _ok(http.post(objects, params={"path": "_lakefs_actions/a.yaml"}, content=action), 201)
        _ok(http.post(f"{repo_path}/branches/main/commits", json={"message": "actions"}), 201)
        started = http.post(
            f"{repo_path}/branches/main/import",
            json={
                "paths": [
                    {"type": "common_prefix", "path": "local://import-src/", "destination": "in/"}
                ],
                "commit": {"message": "import"},
            },
        )
        import_id = _ok(started, 202).json()["id"]
        _until(
            http, f"{repo_path}/branches/main/import?id={import_id}", lambda body: body["completed"]
        )
        # the actions commit's and the import's post-commit runs
        _until(http, f"{repo_path}/actions/runs", lambda body: len(body["results"]) == 2)
        receiver.wait_for(name, lambda calls: len(calls) == 2)
        branch = {"name": "dev", "source": "main", "hidden": True}
        _ok(http.post(f"{repo_path}/branches", json=branch), 201)
        _ok(http.post(f"{repo_path}/branches/dev/objects", params={"path": "x"}, content="1"), 201)
        pull = {"title": "t", "source_branch": "dev", "destination_branch": "main"}
        _ok(http.post(f"{repo_path}/pulls", json=pull), 201)
        _ok(http.post(f"{repo_path}/metadata", json={"metadata": {"owner": "data"}}), 204)
        rules = {"default_retention_days": 7, "branches": []}
        _ok(http.put(f"{repo_path}/settings/gc_rules", json=rules), 204)
        _ok(http.post(f"{repo_path}/branch_protection", json={"pattern": "main"}), 204)

        kv = SqliteKV(server.data_dir / "kv.sqlite")
        try:
            repo = Repository.decode(kv.get(f"repos/{name}".encode()))
            uid = repo.instance_uid.encode()
            scope = f"{repo.id}:{repo.instance_uid}".encode()
            branches = kv.scan(f"refs/{name}:{repo.instance_uid}/branches/".encode())
            tokens = [
                t
                for key, raw in branches
                for t in Branch.decode(BranchID(key.rsplit(b"/", 1)[1].decode()), raw).tokens
            ]
            before = {key.split(scope, 1)[0] for key, _ in kv.scan(b"") if uid in key}
            assert before >= {
                b"refs/",
                b"pulls/",
                b"imports/",
                b"actions/runs/",
                b"actions/branch/",
                b"actions/commit/",
                b"repometa/",
                b"gc/rules/",
                b"api/hidden-branches/",
            }
            assert any(next(kv.scan(f"staging/{t}/".encode()), None) for t in tokens)

            _ok(http.delete(repo_path), 204)

            assert [key for key, _ in kv.scan(b"") if uid in key] == []
            assert [k for t in tokens for k, _ in kv.scan(f"staging/{t}/".encode())] == []
        finally:
            kv.close()
        _ok(http.delete(repo_path), 404)
        _ok(http.post("/repositories", json=body), 201)
        assert _ok(http.get(f"{repo_path}/pulls"), 200).json()["results"] == []
        assert _ok(http.get(f"{repo_path}/actions/runs"), 200).json()["results"] == []
        assert _ok(http.get(f"{repo_path}/metadata"), 200).json() == {}
        _ok(http.get(f"{repo_path}/branches/main/import?id={import_id}"), 404)


def _upload(kv: SqliteKV, repo: Repository) -> None:
    """Record a multipart upload of ``repo`` as a gateway of another process would."""
    upload = Upload(repo.id, repo.instance_uid, new_upload_id(), "main", "big.bin", 0.0, "admin")
    UploadStore(kv).create(upload)


def _naming(kv: SqliteKV, uid: str) -> list[bytes]:
    return [key for key, _ in kv.scan(b"") if uid.encode() in key]


def test_a_server_without_its_gateway_removes_every_record_and_resumes_deletions(
    tmp_path: Path,
) -> None:
    data = tmp_path / "data"
    data.mkdir()
    kv = SqliteKV(data / "kv.sqlite")
    try:
        # a deletion a failure left half-done: its marker, and records kept above the core
        left = Repository(
            RepositoryID("left"), "local://left", BranchID("main"), 0, "left-instance-uid"
        )
        kv.set(MARKERS + f"{left.id}:{left.instance_uid}".encode(), left.encode())
        _upload(kv, left)
        ImportRecords(kv).create(left, ImportRecord("imp", left.id, "main", "task", 0.0))
        HiddenBranches(kv).set(left, "dev", True)
        GCRulesStore(kv).set(left, GCRules.of(7))
        assert len(_naming(kv, left.instance_uid)) >= 5
    finally:
        kv.close()
    env = {"LAKEMIRROR_GATEWAY__ENABLED": "false"}
    with running_server(
        data, tmp_path / "server.log", access_key_id=KEY[0], secret_access_key=KEY[1], env=env
    ) as server:
        s3 = boto3.client(
            "s3",
            endpoint_url=server.url,
            region_name="us-east-1",
            aws_access_key_id=KEY[0],
            aws_secret_access_key=KEY[1],
            config=Config(s3={"addressing_style": "path"}, retries={"total_max_attempts": 1}),
        )
        with pytest.raises(ClientError):
            s3.list_buckets()  # no gateway answers

        kv = SqliteKV(data / "kv.sqlite")
        try:
            deadline = time.monotonic() + DEADLINE
            while _naming(kv, left.instance_uid) or next(kv.scan(MARKERS), None):
                assert time.monotonic() < deadline, _naming(kv, left.instance_uid)
                time.sleep(0.05)

            name = unique("nogw")
            with httpx.Client(base_url=f"{server.url}/api/v1", auth=KEY, timeout=30.0) as http:
                body = {"name": name, "storage_namespace": server.namespace(name)}
                _ok(http.post("/repositories", json=body), 201)
                repo = Repository.decode(kv.get(f"repos/{name}".encode()))
                _upload(kv, repo)
                assert next(kv.scan(f"gateway/multipart/{name}:".encode()), None) is not None

                _ok(http.delete(f"/repositories/{name}"), 204)

            assert _naming(kv, repo.instance_uid) == []
            assert next(kv.scan(MARKERS), None) is None
        finally:
            kv.close()
