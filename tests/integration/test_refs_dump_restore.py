"""Refs dump and restore against a live server, through the official ``lakefs_sdk``.

A repository with a history (commits with metadata, a branch, a merge commit of two parents,
tags) is dumped; its namespace is copied; a new bare repository on the copy restores the dump;
both then read the same: every branch's log (IDs, parents, metadata, metaranges), branches,
tags, diffs and object bytes. The sync calls (``refs/dump``, ``refs/restore``) and the task
forms (``dump``, ``restore`` with their status) are both exercised, with their refusals: not
bare (400), a mirror (403 restoring; dumping it is allowed), no permission (403), unknown or
misshapen task IDs (404), and a restore of metaranges that do not exist (the task's error).
The CLI's ``lakemirror refs dump|restore`` make the same round trip.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import lakefs
import lakefs_sdk
import pytest
from lakefs_sdk.exceptions import BadRequestException, ForbiddenException, NotFoundException

from tests.e2e.regions import wait_for
from tests.integration.harness import MakeUser, Server, unique

TASK_DEADLINE = 60.0


def _sdk(client: lakefs.Client) -> Any:
    return client.sdk_client


def _namespace_dir(server: Server, name: str) -> Any:
    return server.data_dir / name


@pytest.fixture(scope="module")
def source(server: Server, client: lakefs.Client) -> Iterator[str]:
    """A repository with a branch, a merge commit, commit metadata and tags."""
    name = unique("dumpsrc")
    repo = lakefs.Repository(name, client=client).create(server.namespace(name))
    main = repo.branch("main")
    main.object("a.txt").upload(b"alpha")
    main.object("dir/b.txt").upload(b"bravo")
    main.commit("first", metadata={"team": "data"})
    dev = repo.branch("dev").create(source_reference="main")
    dev.object("dir/c.txt").upload(b"charlie")
    dev.commit("on dev")
    main.object("a.txt").upload(b"alpha 2")
    main.commit("second on main", metadata={"k": "v", "run": "7"})
    dev.merge_into(main)
    repo.tag("v1").create("main")
    repo.tag("v0").create("dev~1")
    dev.object("dir/d.txt").upload(b"delta")
    dev.commit("after the merge")
    yield name
    repo.delete()


@pytest.fixture
def mirror(server: Server, http: httpx.Client, make_user: MakeUser) -> Iterator[str]:
    """A read-only mirror repository, made through the replicant's endpoint."""
    replicator = make_user(policies=("Replicator",))
    name = unique("dumpmirror")
    created = replicator.http.post(
        "/mirror/repositories",
        json={
            "name": name,
            "storage_namespace": server.namespace(name),
            "mirror_of": "us-east-1/dumpsource",
        },
    )
    assert created.status_code == 201, created.text
    yield name
    http.delete(f"/repositories/{name}", params={"force": "true"})


def _copy_namespace(request: pytest.FixtureRequest, server: Server, of: str, to: str) -> None:
    """Copy the namespace of repository ``of`` to where repository ``to``'s goes."""
    source, target = server.namespace(of), server.namespace(to)
    if not source.startswith("s3://"):
        shutil.copytree(_namespace_dir(server, of), _namespace_dir(server, to))
        return
    s3 = request.getfixturevalue("s3_client")
    bucket, _, prefix = source.removeprefix("s3://").partition("/")
    new_prefix = target.removeprefix("s3://").partition("/")[2]
    pages = s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix + "/")
    for page in pages:
        for item in page.get("Contents", []):
            key = new_prefix + item["Key"][len(prefix) :]
            s3.copy_object(
                Bucket=bucket, Key=key, CopySource={"Bucket": bucket, "Key": item["Key"]}
            )


@pytest.fixture
def bare_copy(
    request: pytest.FixtureRequest, server: Server, client: lakefs.Client, http: httpx.Client
) -> Iterator[Callable[[str], str]]:
    """Make a bare repository on a copy of a repository's namespace."""
    made: list[str] = []

    def make(of: str) -> str:
        name = unique("dumpdst")
        _copy_namespace(request, server, of, name)
        _sdk(client).repositories_api.create_repository(
            lakefs_sdk.RepositoryCreation(
                name=name, storage_namespace=server.namespace(name), default_branch="main"
            ),
            bare=True,
        )
        made.append(name)
        return name

    yield make
    for name in made:
        http.delete(f"/repositories/{name}")


def _state(client: lakefs.Client, repo: str) -> dict[str, Any]:
    """Everything a restore must reproduce, read through the SDK."""
    sdk = _sdk(client)
    branches = {
        b.id: b.commit_id for b in sdk.branches_api.list_branches(repo, amount=1000).results
    }
    tags = {t.id: t.commit_id for t in sdk.tags_api.list_tags(repo, amount=1000).results}
    logs = {}
    for branch in sorted(branches):
        logs[branch] = [
            (c.id, c.parents, c.metadata, c.meta_range_id, c.message, c.committer, c.creation_date)
            for c in sdk.refs_api.log_commits(repo, branch, amount=1000).results
        ]
    diff = [
        (d.path, d.type) for d in sdk.refs_api.diff_refs(repo, "main", "dev", amount=1000).results
    ]
    objects = {
        ref: {
            o.path: bytes(sdk.objects_api.get_object(repo, ref, o.path))
            for o in sdk.objects_api.list_objects(repo, ref, amount=1000).results
        }
        for ref in ("main", "dev", "v0", "v1")
    }
    return {"branches": branches, "tags": tags, "logs": logs, "diff": diff, "objects": objects}


def _restore(dump: lakefs_sdk.RefsDump, force: bool = False) -> lakefs_sdk.RefsRestore:
    return lakefs_sdk.RefsRestore(
        commits_meta_range_id=dump.commits_meta_range_id,
        tags_meta_range_id=dump.tags_meta_range_id,
        branches_meta_range_id=dump.branches_meta_range_id,
        force=force,
    )


def _namespace_file(request: pytest.FixtureRequest, server: Server, repo: str, key: str) -> bytes:
    location = f"{server.namespace(repo)}/{key}"
    if location.startswith("s3://"):
        bucket, _, name = location.removeprefix("s3://").partition("/")
        body: bytes = (
            request.getfixturevalue("s3_client").get_object(Bucket=bucket, Key=name)["Body"].read()
        )
        return body
    return (_namespace_dir(server, repo) / key).read_bytes()


@pytest.mark.both_backends
def test_sync_dump_then_restore_on_a_namespace_copy_is_identical(
    request: pytest.FixtureRequest,
    server: Server,
    client: lakefs.Client,
    source: str,
    bare_copy: Callable[[str], str],
) -> None:
    internal = _sdk(client).internal_api
    dump = internal.dump_refs(source)
    manifest = json.loads(_namespace_file(request, server, source, "_lakefs/refs_manifest.json"))
    assert manifest == dump.to_dict()
    for mid in manifest.values():
        assert _namespace_file(request, server, source, f"_lakefs/{mid}")
    # content-derived: the same refs dump to the same metaranges
    assert internal.dump_refs(source) == dump

    target = bare_copy(source)
    internal.restore_refs(target, _restore(dump))
    before = _state(client, source)
    assert len(before["logs"]["main"]) >= 5
    assert any(len(c[1]) == 2 for c in before["logs"]["main"])
    assert _state(client, target) == before

    # restored, it is no longer bare
    with pytest.raises(BadRequestException) as again:
        internal.restore_refs(target, _restore(dump))
    assert "can only restore into a bare repository" in json.loads(again.value.body)["message"]


def test_restore_refusals(
    client: lakefs.Client,
    source: str,
    mirror: str,
    make_user: MakeUser,
    bare_copy: Callable[[str], str],
) -> None:
    internal = _sdk(client).internal_api
    dump = internal.dump_refs(source)
    with pytest.raises(BadRequestException) as not_bare:
        internal.restore_refs(source, _restore(dump))
    assert json.loads(not_bare.value.body)["message"].startswith(
        "can only restore into a bare repository"
    )
    for force in (False, True):
        with pytest.raises(ForbiddenException) as read_only:
            internal.restore_refs(mirror, _restore(dump, force))
        assert "read-only repository" in json.loads(read_only.value.body)["message"]
    with pytest.raises(NotFoundException):
        internal.restore_refs(unique("nosuchrepo"), _restore(dump))
    # a mirror may be dumped: reading
    empty = internal.dump_refs(mirror)
    assert empty.commits_meta_range_id and empty.branches_meta_range_id

    # readers may dump, not restore
    reader = make_user("Readers")
    assert _sdk(reader.client).internal_api.dump_refs(source) == dump
    target = bare_copy(source)
    with pytest.raises(ForbiddenException):
        _sdk(reader.client).internal_api.restore_refs(target, _restore(dump))
    with pytest.raises(ForbiddenException):
        _sdk(reader.client).repositories_api.restore_submit(target, _restore(dump))

    # metaranges that are not in the namespace
    bogus = lakefs_sdk.RefsDump(
        commits_meta_range_id="f" * 64,
        tags_meta_range_id=dump.tags_meta_range_id,
        branches_meta_range_id=dump.branches_meta_range_id,
    )
    with pytest.raises(NotFoundException):
        internal.restore_refs(target, _restore(bogus))
    # tags where commits are expected
    mixed = lakefs_sdk.RefsDump(
        commits_meta_range_id=dump.tags_meta_range_id,
        tags_meta_range_id=dump.tags_meta_range_id,
        branches_meta_range_id=dump.branches_meta_range_id,
    )
    with pytest.raises(BadRequestException):
        internal.restore_refs(target, _restore(mixed))
    # nothing was written by the refused restores: it is still bare and restores
    internal.restore_refs(target, _restore(dump))


def _wait_done(read: Callable[[], Any]) -> Any:
    return wait_for(lambda: (s := read()).done and s, TASK_DEADLINE, "the task to finish")


def test_async_dump_and_restore(
    client: lakefs.Client, source: str, bare_copy: Callable[[str], str]
) -> None:
    repos = _sdk(client).repositories_api
    task = repos.dump_submit(source)
    assert task.id.startswith("DR") and len(task.id) == 22
    status = _wait_done(lambda: repos.dump_status(source, task.id))
    assert status.error is None
    assert status.refs == _sdk(client).internal_api.dump_refs(source)

    target = bare_copy(source)
    restoring = repos.restore_submit(target, _restore(status.refs))
    assert restoring.id.startswith("RR") and len(restoring.id) == 22
    restored = _wait_done(lambda: repos.restore_status(target, restoring.id))
    assert restored.error is None
    assert _state(client, target) == _state(client, source)

    # not bare any more: refused up front
    with pytest.raises(BadRequestException):
        repos.restore_submit(target, _restore(status.refs))


def test_async_task_ids_and_failures(
    client: lakefs.Client, source: str, mirror: str, bare_copy: Callable[[str], str]
) -> None:
    repos = _sdk(client).repositories_api
    dumping = repos.dump_submit(source)
    _wait_done(lambda: repos.dump_status(source, dumping.id))
    for wrong in (
        "DR" + "x" * 19,
        "DR" + "x" * 21,
        "RR" + dumping.id[2:],
        "DR" + "!" * 20,
        dumping.id[2:] + "DR",
    ):
        with pytest.raises(NotFoundException):
            repos.dump_status(source, wrong)
    # a task is only found under its own repository and operation
    with pytest.raises(NotFoundException):
        repos.dump_status(mirror, dumping.id)
    with pytest.raises(NotFoundException):
        repos.restore_status(source, dumping.id)

    with pytest.raises(ForbiddenException):
        repos.restore_submit(mirror, _restore(repos.dump_status(source, dumping.id).refs))
    # a mirror's refs dump as a task too
    mirrored = repos.dump_submit(mirror)
    assert _wait_done(lambda: repos.dump_status(mirror, mirrored.id)).refs is not None

    target = bare_copy(source)
    bogus = lakefs_sdk.RefsRestore(
        commits_meta_range_id="e" * 64,
        tags_meta_range_id="e" * 64,
        branches_meta_range_id="e" * 64,
    )
    failing = repos.restore_submit(target, bogus)
    failed = _wait_done(lambda: repos.restore_status(target, failing.id))
    assert failed.error and "not found" in failed.error


def _cli(
    server: Server, tmp_path: Path, *args: str, stdin: bytes = b""
) -> subprocess.CompletedProcess[bytes]:
    """Run `lakemirror` as a process signed in as the administrator."""
    base = {k: v for k, v in os.environ.items() if not k.startswith(("LAKECTL_", "LAKEMIRROR_"))}
    env = {
        **base,
        "HOME": str(tmp_path),
        "LAKECTL_SERVER_ENDPOINT_URL": server.url,
        "LAKECTL_CREDENTIALS_ACCESS_KEY_ID": server.access_key_id,
        "LAKECTL_CREDENTIALS_SECRET_ACCESS_KEY": server.secret_access_key,
    }
    return subprocess.run(
        [sys.executable, "-m", "mirror.cli.main", *args],
        env=env,
        input=stdin,
        capture_output=True,
        timeout=120,
        check=False,
        cwd=tmp_path,
    )


def test_cli_refs_dump_and_restore(
    server: Server,
    client: lakefs.Client,
    source: str,
    bare_copy: Callable[[str], str],
    tmp_path: Path,
) -> None:
    dumped = _cli(server, tmp_path, "refs", "dump", f"lakefs://{source}", "--manifest", "m.json")
    assert dumped.returncode == 0, dumped.stderr
    manifest = json.loads(dumped.stdout)
    assert manifest == _sdk(client).internal_api.dump_refs(source).to_dict()
    assert json.loads((tmp_path / "m.json").read_text()) == manifest

    target = bare_copy(source)
    restored = _cli(
        server,
        tmp_path,
        "refs",
        "restore",
        f"lakefs://{target}",
        "--manifest",
        "-",
        stdin=dumped.stdout,
    )
    assert restored.returncode == 0, restored.stderr
    assert f"restored refs into lakefs://{target}" in restored.stdout.decode()
    assert _state(client, target) == _state(client, source)

    again = _cli(server, tmp_path, "refs", "restore", f"lakefs://{target}", "--manifest", "m.json")
    assert again.returncode == 6  # rejected, as a 400
    assert "can only restore into a bare repository" in again.stderr.decode()
