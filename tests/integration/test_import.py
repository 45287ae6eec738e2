"""Import (``…/branches/{branch}/import``) through the official clients, on a live server.

- The ``lakefs`` wrapper's ``import_data(...).prefix(...).object(...).run()`` imports a prefix
  and an object in one commit on the branch: FULL source addresses with size and ETag, lakeFS's
  default message and ``source-wins`` metadata, everything under each destination replaced
  (a prefix match). On ``aws`` the sources are S3 objects of the moto server.
- Every documented error: unknown repository, branch or import ID, a bad type, the namespace
  as a source, a dirty branch, a read-only mirror, and canceling a finished import.
- Progress and cancel: an import held inside its listing (a FIFO among the source files) shows
  its ingested count, reads ``import error: Canceled`` once canceled, and leaves the branch.
- The import's commit runs the branch's pre-commit and post-commit hooks; a failing pre-commit
  hook fails the import.
- ``lakemirror import --wait`` prints the commit once done (on a protected branch too); without
  ``--wait`` the import's ID.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import lakefs
import lakefs_sdk
import pytest
from lakefs_sdk.exceptions import ApiException

from tests.integration.harness import Server, unique
from tests.webhooks import Receiver, webhook_receiver

DEADLINE = 60.0
STRATEGY = {".lakefs.merge.strategy": "source-wins"}


def _sdk(client: lakefs.Client) -> lakefs_sdk.ImportApi:
    return client.sdk_client.import_api


def _error(call: Callable[..., Any], *args: Any, **kwargs: Any) -> tuple[int, str]:
    with pytest.raises(ApiException) as err:
        call(*args, **kwargs)
    assert err.value.status is not None
    return err.value.status, json.loads(err.value.body or "{}").get("message", "")


def _until(check: Callable[[], Any], what: str) -> Any:
    deadline = time.monotonic() + DEADLINE
    while time.monotonic() < deadline:
        value = check()
        if value:
            return value
    pytest.fail(f"not within {DEADLINE}s: {what}")


def _sources(server: Server, s3_client: Any, files: dict[str, bytes]) -> str:
    """Write ``files`` outside any repository namespace; return the URI of their prefix."""
    prefix = unique("import-src")
    if server.namespace_root.startswith("s3://"):
        bucket = server.namespace_root[len("s3://") :].split("/", 1)[0]
        for key, data in files.items():
            s3_client.put_object(Bucket=bucket, Key=f"{prefix}/{key}", Body=data)
        return f"s3://{bucket}/{prefix}/"
    root = server.data_dir / prefix
    for key, data in files.items():
        (root / key).parent.mkdir(parents=True, exist_ok=True)
        (root / key).write_bytes(data)
    return f"local://{prefix}/"


@pytest.fixture
def s3(request: pytest.FixtureRequest, server: Server) -> Any:
    if server.namespace_root.startswith("s3://"):
        return request.getfixturevalue("s3_client")
    return None


@pytest.mark.both_backends
def test_import_replaces_destinations_in_one_commit(
    server: Server, client: lakefs.Client, repo: lakefs.Repository, s3: Any
) -> None:
    files = {f"tables/t{i}/part-{i}.parquet": bytes([i]) * (10 + i) for i in range(5)}
    files["single/obj.bin"] = b"the object"
    source = _sources(server, s3, files)
    main = repo.branch("main")
    for path in ("landing/old", "landing/t9/x", "lone", "lone10", "keep/me"):
        main.object(path).upload(b"old")
    main.commit("before import")
    parent = main.get_commit().id

    importer = (
        main.import_data(commit_message="")
        .prefix(source + "tables/", destination="landing/")
        .object(source + "single/obj.bin", destination="lone")
    )
    status = importer.run()
    assert status.completed and status.error is None
    assert status.ingested_objects == 6
    commit = main.get_commit()
    assert status.commit is not None and status.commit.id == commit.id
    assert commit.message == "Import objects"
    assert commit.metadata == STRATEGY
    assert commit.parents == [parent]
    assert status.metarange_id == commit.meta_range_id
    assert repo.metadata[".lakefs.last.import.timestamp"] == str(commit.creation_date)

    paths = sorted(o.path for o in main.objects())
    # landing/old and landing/t9/x are gone; lone10 too (lone is a prefix of it)
    assert paths == sorted(
        [f"landing/t{i}/part-{i}.parquet" for i in range(5)] + ["keep/me", "lone"]
    )
    stat = main.object("landing/t3/part-3.parquet").stat()
    assert stat.physical_address == source + "tables/t3/part-3.parquet"
    assert stat.size_bytes == 13
    assert stat.checksum == hashlib.md5(bytes([3]) * 13).hexdigest()
    # the source's modification time, as its store lists it
    rest = source.split("://", 1)[1] + "tables/t3/part-3.parquet"
    if s3 is not None:
        bucket, key = rest.split("/", 1)
        listed = s3.head_object(Bucket=bucket, Key=key)["LastModified"].timestamp()
    else:
        listed = (server.data_dir / rest).stat().st_mtime
    assert stat.mtime == int(listed)
    assert main.object("landing/t3/part-3.parquet").reader().read() == bytes([3]) * 13
    assert main.object("lone").reader().read() == b"the object"

    # a finished import cannot be canceled
    status_code, message = _error(_sdk(client).import_cancel, repo.id, "main", importer.import_id)
    assert status_code == 409 and message.startswith("conflict found")


@pytest.mark.both_backends
def test_config_advertises_import(server: Server, client: lakefs.Client, s3: Any) -> None:
    # lakeFS's web UI (and ours) offers an import only where the server says it imports
    storage = client.sdk_client.config_api.get_config().storage_config
    assert storage is not None
    assert storage.import_support is True
    source = _sources(server, s3, {"x": b"x"})
    assert re.match(storage.import_validity_regex, source), (storage.import_validity_regex, source)
    assert not re.match(storage.import_validity_regex, "mem://elsewhere/")


def test_import_errors(
    server: Server, client: lakefs.Client, repo: lakefs.Repository, http: httpx.Client
) -> None:
    api = _sdk(client)
    source = _sources(server, None, {"a": b"a"})

    def start(repository: str, branch: str, *paths: tuple[str, str, str]) -> tuple[int, str]:
        body = lakefs_sdk.ImportCreation(
            paths=[lakefs_sdk.ImportLocation(type=t, path=p, destination=d) for t, p, d in paths],
            commit=lakefs_sdk.CommitCreation(message="m"),
        )
        return _error(api.import_start, repository, branch, body)

    ok = ("common_prefix", source, "d/")
    assert start("nope-" + repo.id, "main", ok)[0] == 404
    assert start(repo.id, "nope", ok)[0] == 404
    namespace = server.namespace(repo.id)
    assert start(repo.id, "main", ("common_prefix", namespace + "/data/", "d/")) == (
        400,
        f"import path ({namespace}/data/) in repository namespace ({namespace}) is "
        "prohibited: invalid import source",
    )
    # the SDK refuses other types itself: send one raw
    bad = http.post(
        f"/repositories/{repo.id}/branches/main/import",
        json={
            "paths": [{"type": "dir", "path": source, "destination": "d/"}],
            "commit": {"message": "m"},
        },
    )
    assert (bad.status_code, bad.json()["message"]) == (400, "invalid import type: dir")
    assert _error(api.import_status, repo.id, "main", "c0000000000000000000")[0] == 404
    assert _error(api.import_cancel, repo.id, "main", "c0000000000000000000")[0] == 404

    repo.branch("main").object("dirty").upload(b"1")
    status, message = start(repo.id, "main", ok)
    assert status == 400 and "uncommitted changes (dirty branch)" in message

    mirror = unique("mirror")
    made = http.post(
        "/mirror/repositories",
        json={
            "name": mirror,
            "storage_namespace": server.namespace(mirror),
            "mirror_of": "elsewhere/source",
        },
    )
    assert made.status_code == 201, made.text
    status, message = start(mirror, "main", ok)
    assert status == 403 and "read-only repository" in message


@pytest.fixture
def held_source(server: Server) -> Iterator[tuple[str, Path]]:
    """Source files with a FIFO in the middle: listing it waits until the FIFO is opened."""
    prefix = unique("import-held")
    root = server.data_dir / prefix
    root.mkdir(parents=True)
    for i in range(200):
        if i != 150:
            (root / f"f{i:03d}").write_bytes(b"x")
    fifo = root / "f150"
    os.mkfifo(fifo)
    yield f"local://{prefix}/", fifo
    # a listing still waiting on the FIFO gets its end of file and goes on
    try:
        os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
    except OSError:
        pass  # no reader waits


def test_progress_then_cancel(
    client: lakefs.Client, repo: lakefs.Repository, held_source: tuple[str, Path]
) -> None:
    source, fifo = held_source
    api = _sdk(client)
    head = repo.branch("main").get_commit().id
    body = lakefs_sdk.ImportCreation(
        paths=[lakefs_sdk.ImportLocation(type="common_prefix", path=source, destination="in/")],
        commit=lakefs_sdk.CommitCreation(message="held"),
    )
    started = api.import_start(repo.id, "main", body)

    # 150 files listed, then the listing waits on the FIFO: progress is saved meanwhile
    # (the count trails the listing by the records merged but not yet passed on)
    status = _until(
        lambda: (s := api.import_status(repo.id, "main", started.id)).ingested_objects >= 140 and s,
        "the objects before the FIFO ingested",
    )
    assert status.ingested_objects <= 150
    assert not status.completed and status.error is None

    api.import_cancel(repo.id, "main", started.id)
    canceled = api.import_status(repo.id, "main", started.id)
    assert not canceled.completed
    assert canceled.error is not None and canceled.error.message == "import error: Canceled"

    # let the listing go on: the import stops at its next object and never commits
    with open(fifo, "wb"):
        pass
    ended = _until(
        lambda: (
            (s := api.import_status(repo.id, "main", started.id)).update_time > canceled.update_time
            and s
        ),
        "the import to record its end",
    )
    assert not ended.completed and ended.error.message == "import error: Canceled"
    assert ended.ingested_objects < 200
    assert repo.branch("main").get_commit().id == head


def _cli(server: Server, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("LAKECTL_")}
    env.update(
        LAKECTL_SERVER_ENDPOINT_URL=server.url,
        LAKECTL_CREDENTIALS_ACCESS_KEY_ID=server.access_key_id,
        LAKECTL_CREDENTIALS_SECRET_ACCESS_KEY=server.secret_access_key,
    )
    return subprocess.run(
        [sys.executable, "-m", "mirror.cli.main", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_cli_import_waits_for_the_commit(
    server: Server, repo: lakefs.Repository, http: httpx.Client
) -> None:
    source = _sources(server, None, {f"p/{i}": b"v" * i for i in range(1, 4)})
    target = f"lakefs://{repo.id}/main"
    # branch protection does not apply to imports (as in lakeFS)
    protected = http.put(
        f"/repositories/{repo.id}/settings/branch_protection", json=[{"pattern": "main"}]
    )
    assert protected.status_code == 204
    done = _cli(server, "import", "--branch", target, "--from", source, "--to", "in/", "--wait")
    assert done.returncode == 0, done.stderr
    head = repo.branch("main").get_commit()
    assert done.stdout == f"imported 3 objects into {target}: commit {head.id}\n"
    assert sorted(o.path for o in repo.branch("main").objects()) == ["in/p/1", "in/p/2", "in/p/3"]

    started = _cli(server, "import", "--branch", target, "--from", source, "--to", "x/")
    assert started.returncode == 0, started.stderr
    assert started.stdout.startswith("import ") and "started on" in started.stdout

    namespace = server.namespace(repo.id)
    refused = _cli(
        server, "import", "--branch", target, "--from", namespace + "/", "--to", "x/", "--wait"
    )
    assert refused.returncode != 0
    assert "invalid import source" in refused.stderr and "Traceback" not in refused.stderr


def test_import_commit_runs_commit_hooks(
    server: Server,
    client: lakefs.Client,
    repo: lakefs.Repository,
) -> None:
    with webhook_receiver() as receiver:
        _import_hooks(server, client, repo, receiver)


def _import_hooks(
    server: Server, client: lakefs.Client, repo: lakefs.Repository, receiver: Receiver
) -> None:
    url = receiver.url

    def received() -> list[str]:
        return [
            f"{c.path} {c.body.get('event_type')} {c.body.get('commit_message', '')}"
            for c in receiver.of(repo.id)
        ]

    main = repo.branch("main")

    def action(name: str, branch: str, path: str) -> str:
        return (
            f"name: {name}\non:\n  pre-commit:\n    branches: [{branch}]\n"
            f"  post-commit:\n    branches: [{branch}]\nhooks:\n"
            f"  - id: check\n    type: webhook\n    properties:\n      url: {url}{path}\n"
        )

    main.object("_lakefs_actions/fail.yaml").upload(action("Refuse", "refused", "/fail"))
    main.object("_lakefs_actions/ok.yaml").upload(action("Accept", "main", "/ok"))
    main.commit("actions")
    refused = repo.branch("refused").create("main")
    head = refused.get_commit().id
    source = _sources(server, None, {"x": b"x"})
    api = _sdk(client)
    body = lakefs_sdk.ImportCreation(
        paths=[lakefs_sdk.ImportLocation(type="common_prefix", path=source, destination="in/")],
        commit=lakefs_sdk.CommitCreation(message="hooked"),
    )

    started = api.import_start(repo.id, "refused", body)
    failed = _until(
        lambda: (s := api.import_status(repo.id, "refused", started.id)).error and s,
        "the import to fail",
    )
    assert not failed.completed
    assert failed.error.message.startswith("import error: pre-commit hook aborted")
    assert refused.get_commit().id == head
    assert "/fail pre-commit hooked" in received()

    started = api.import_start(repo.id, "main", body)
    done = _until(
        lambda: (s := api.import_status(repo.id, "main", started.id)).completed and s,
        "the import to commit",
    )
    assert done.commit.message == "hooked"
    _until(lambda: "/ok post-commit hooked" in received(), "the post-commit hook")
    assert "/ok pre-commit hooked" in received()
