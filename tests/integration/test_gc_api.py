"""Garbage collection's API against a live server: rules, preparing a run, refusals on mirrors.

Rules go through the official ``lakefs_sdk`` (GarbageCollectionRules) and, for bodies the SDK
would never send, raw HTTP. Mirrors are made as the replicant makes them, by a user holding the
built-in Replicator policy. The job's S3 listing and deletion run against a moto server.
"""

from __future__ import annotations

import csv
import io
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import lakefs
import lakefs_sdk
import pyarrow.parquet as pq
import pytest
from lakefs_sdk.exceptions import (
    BadRequestException,
    ForbiddenException,
    NotFoundException,
    UnauthorizedException,
)

from mirror.spark.gc_storage import S3Options, StorageRoot
from tests.integration.harness import MakeUser, Server, unique
from tests.integration.moto_fixtures import ACCESS_KEY, SECRET_KEY, MotoServer, create_bucket


def _sdk(client: lakefs.Client) -> Any:
    return client.sdk_client


def _rules(default: int, **branches: int) -> lakefs_sdk.GarbageCollectionRules:
    return lakefs_sdk.GarbageCollectionRules(
        default_retention_days=default,
        branches=[
            lakefs_sdk.GarbageCollectionRule(branch_id=b, retention_days=d)
            for b, d in branches.items()
        ],
    )


def _as_dict(rules: lakefs_sdk.GarbageCollectionRules) -> tuple[int, dict[str, int]]:
    return rules.default_retention_days, {r.branch_id: r.retention_days for r in rules.branches}


def _local_file(server: Server, location: str) -> Path:
    """Return the file of a ``local://<name>/...`` location of the embedded server."""
    assert location.startswith("local://"), location
    return server.data_dir / location.removeprefix("local://")


def _read(request: pytest.FixtureRequest, server: Server, location: str) -> bytes:
    """Return the bytes at a location of the server's namespace, on local disk or S3."""
    if location.startswith("s3://"):
        bucket, _, key = location.removeprefix("s3://").partition("/")
        s3 = request.getfixturevalue("s3_client")
        data: bytes = s3.get_object(Bucket=bucket, Key=key)["Body"].read()
        return data
    return _local_file(server, location).read_bytes()


@pytest.fixture
def mirror(server: Server, http: httpx.Client, make_user: MakeUser) -> Iterator[str]:
    """A read-only mirror repository, made through the replicant's endpoint."""
    replicator = make_user(policies=("Replicator",))
    name = unique("gcmirror")
    created = replicator.http.post(
        "/mirror/repositories",
        json={
            "name": name,
            "storage_namespace": server.namespace(name),
            "mirror_of": "us-east-1/gcsource",
        },
    )
    assert created.status_code == 201, created.text
    yield name
    http.delete(f"/repositories/{name}", params={"force": "true"})


@pytest.mark.both_backends
def test_rules_round_trip_through_the_sdk(client: lakefs.Client, repo: lakefs.Repository) -> None:
    api = _sdk(client).repositories_api
    with pytest.raises(NotFoundException) as missing:
        api.get_gc_rules(repo.id)
    assert "not found" in str(missing.value.body)

    api.set_gc_rules(repo.id, _rules(21, main=28, dev=7))
    assert _as_dict(api.get_gc_rules(repo.id)) == (21, {"main": 28, "dev": 7})
    # a rule for a branch that does not exist (yet) is kept, as lakeFS keeps it
    api.set_gc_rules(repo.id, _rules(3, future=90))
    assert _as_dict(api.get_gc_rules(repo.id)) == (3, {"future": 90})
    # the deprecated internal paths see the same rules
    internal = _sdk(client).internal_api
    with pytest.warns(DeprecationWarning):
        old = internal.internal_get_garbage_collection_rules(repo.id)
    assert _as_dict(old) == (3, {"future": 90})

    api.delete_gc_rules(repo.id)
    with pytest.raises(NotFoundException):
        api.get_gc_rules(repo.id)
    api.delete_gc_rules(repo.id)  # deleting no rules is 204 too


def test_no_branch_rules_read_as_an_empty_list(
    http: httpx.Client, client: lakefs.Client, repo: lakefs.Repository
) -> None:
    put = http.put(
        f"/repositories/{repo.id}/settings/gc_rules",
        json={"default_retention_days": 5, "branches": None},
    )
    assert put.status_code == 204, put.text
    got = http.get(f"/repositories/{repo.id}/settings/gc_rules")
    assert got.json() == {"default_retention_days": 5, "branches": []}
    # the SDK's conlist would refuse null
    assert _as_dict(_sdk(client).repositories_api.get_gc_rules(repo.id)) == (5, {})


@pytest.mark.parametrize(
    ("body", "needle"),
    [
        ({"branches": []}, "missing default_retention_days"),
        ({"default_retention_days": 7}, "missing branches"),
        ({"default_retention_days": "seven", "branches": []}, "default_retention_days"),
        ({"default_retention_days": 1.5, "branches": []}, "whole number"),
        ({"default_retention_days": 7, "branches": {"main": 1}}, "expected a list"),
        (
            {"default_retention_days": 7, "branches": [{"branch_id": "main"}]},
            "branches[0]: branch_id and retention_days are both required",
        ),
        ([1, 2], "expected a JSON object"),
    ],
)
def test_bad_rule_bodies_are_400_naming_the_field(
    http: httpx.Client, repo: lakefs.Repository, body: object, needle: str
) -> None:
    for method, path in (("PUT", "settings/gc_rules"), ("POST", "gc/rules")):
        answer = http.request(method, f"/repositories/{repo.id}/{path}", json=body)
        assert answer.status_code == 400, answer.text
        assert needle in answer.json()["message"]
    assert http.get(f"/repositories/{repo.id}/settings/gc_rules").status_code == 404


def test_bad_bodies_the_sdk_sends(client: lakefs.Client, repo: lakefs.Repository) -> None:
    api = _sdk(client).repositories_api
    with pytest.raises(BadRequestException) as negative:
        api.set_gc_rules(repo.id, _rules(-1))
    assert "default_retention_days" in str(negative.value.body)
    with pytest.raises(BadRequestException) as empty:
        api.set_gc_rules(repo.id, _rules(1, **{"": 3}))
    assert "branch_id" in str(empty.value.body)


def test_invalid_json_is_400(http: httpx.Client, repo: lakefs.Repository) -> None:
    answer = http.put(
        f"/repositories/{repo.id}/settings/gc_rules",
        content=b"{not json",
        headers={"Content-Type": "application/json"},
    )
    assert answer.status_code == 400


def test_deprecated_paths_and_preflight(
    http: httpx.Client, client: lakefs.Client, repo: lakefs.Repository
) -> None:
    internal = _sdk(client).internal_api
    internal.set_garbage_collection_rules_preflight(repo.id)  # 204
    with pytest.warns(DeprecationWarning):
        internal.internal_set_garbage_collection_rules(repo.id, _rules(2, main=4))
    assert _as_dict(_sdk(client).repositories_api.get_gc_rules(repo.id)) == (2, {"main": 4})
    with pytest.warns(DeprecationWarning):
        internal.internal_delete_garbage_collection_rules(repo.id)
    assert http.get(f"/repositories/{repo.id}/gc/rules").status_code == 404
    assert http.get("/repositories/no-such-repo/settings/gc_rules").status_code == 404


def test_gc_config_reports_the_grace_period(server: Server, client: lakefs.Client) -> None:
    config = _sdk(client).internal_api.get_garbage_collection_config()
    assert config.grace_period == 86_400
    with httpx.Client(base_url=f"{server.url}/api/v1") as anonymous:
        assert anonymous.get("/config/garbage-collection").status_code == 401
    with pytest.raises(UnauthorizedException):
        lakefs.Client(
            host=server.url, username="AKIANOBODY", password="wrong"
        ).sdk_client.internal_api.get_garbage_collection_config()


@pytest.mark.both_backends
def test_prepare_commits_writes_the_retained_commits(
    request: pytest.FixtureRequest, server: Server, client: lakefs.Client, repo: lakefs.Repository
) -> None:
    internal = _sdk(client).internal_api
    with pytest.raises(NotFoundException):  # no rules: a run keeps every commit
        internal.prepare_garbage_collection_commits(repo.id)
    main = repo.branch("main")
    main.object("a").upload(b"1")
    first = main.commit("one").get_commit().id
    main.object("a").upload(b"2")
    second = main.commit("two").get_commit().id
    _sdk(client).repositories_api.set_gc_rules(repo.id, _rules(7))
    prepared = internal.prepare_garbage_collection_commits(repo.id)
    namespace = server.namespace(repo.id)
    assert prepared.gc_commits_location == (
        f"{namespace}/_lakefs/retention/gc/commits/run_id={prepared.run_id}/commits.csv"
    )
    assert prepared.gc_addresses_location == f"{namespace}/_lakefs/retention/gc/addresses/"
    text = _read(request, server, prepared.gc_commits_location).decode()
    rows = list(csv.DictReader(io.StringIO(text)))
    retained = {r["commit_id"]: r for r in rows}
    # every commit is inside the 7-day window; the first ("Repository created") too
    assert {first, second} <= retained.keys() and len(retained) == 3
    assert all(r["expired"] == "false" for r in rows)
    assert retained[second]["metarange_id"] == repo.commit(second).get_commit().meta_range_id


def test_prepare_uncommitted_pages(
    server: Server, client: lakefs.Client, http: httpx.Client, repo: lakefs.Repository
) -> None:
    internal = _sdk(client).internal_api
    empty = internal.prepare_garbage_collection_uncommitted(repo.id)
    assert empty.gc_uncommitted_location == "" and empty.continuation_token is None
    repo.branch("main").object("staged").upload(b"s")
    page = internal.prepare_garbage_collection_uncommitted(
        repo.id, lakefs_sdk.PrepareGCUncommittedRequest()
    )
    assert page.continuation_token is None
    assert page.gc_uncommitted_location == (
        f"{server.namespace(repo.id)}/_lakefs/retention/gc/uncommitted/{page.run_id}/uncommitted/"
    )
    files = list(_local_file(server, page.gc_uncommitted_location).iterdir())
    assert len(files) == 1
    table = pq.read_table(files[0])
    stat = repo.branch("main").object("staged").stat()
    assert table.column("physical_address").to_pylist() == [
        stat.physical_address.removeprefix(server.namespace(repo.id) + "/")
    ]
    bad = http.post(
        f"/repositories/{repo.id}/gc/prepare_uncommited", json={"continuation_token": "nope!"}
    )
    assert bad.status_code == 400
    assert bad.json()["message"].startswith("invalid continuation token")


def test_rules_and_runs_refused_on_a_mirror(
    http: httpx.Client, client: lakefs.Client, mirror: str
) -> None:
    refused = [
        http.put(
            f"/repositories/{mirror}/settings/gc_rules",
            json={"default_retention_days": 1, "branches": []},
        ),
        http.delete(f"/repositories/{mirror}/settings/gc_rules"),
        http.post(
            f"/repositories/{mirror}/gc/rules", json={"default_retention_days": 1, "branches": []}
        ),
        http.delete(f"/repositories/{mirror}/gc/rules"),
        http.get(f"/repositories/{mirror}/gc/rules/set_allowed"),
        http.post(f"/repositories/{mirror}/gc/prepare_commits"),
        http.post(f"/repositories/{mirror}/gc/prepare_uncommited", json={}),
    ]
    for answer in refused:
        assert answer.status_code == 403, (answer.request.url, answer.text)
        message = answer.json()["message"]
        assert message.startswith("read-only repository"), message
        assert "us-east-1/gcsource" in message
    with pytest.raises(ForbiddenException) as sdk_refused:
        _sdk(client).repositories_api.set_gc_rules(mirror, _rules(1))
    assert "read-only repository" in str(sdk_refused.value.body)
    # a mirror has no rules of its own: the source's live in the source region's KV
    assert http.get(f"/repositories/{mirror}/settings/gc_rules").status_code == 404


def test_writers_may_not_set_rules(make_user: MakeUser, repo: lakefs.Repository) -> None:
    writer = make_user("Writers")
    answer = writer.http.put(
        f"/repositories/{repo.id}/settings/gc_rules",
        json={"default_retention_days": 1, "branches": []},
    )
    assert answer.status_code == 403
    assert "retention:SetGarbageCollectionRules" in answer.json()["message"]


@pytest.mark.s3
def test_job_lists_and_deletes_on_s3(moto_region: MotoServer, s3_client: Any) -> None:
    bucket = create_bucket(moto_region, s3_client)
    keys = [f"data/p1/{i:04d}" for i in range(5)] + ["data/p2/x", "data/top"]
    for key in [*keys, "_lakefs/range", "elsewhere/data/p1/0000"]:
        prefix = "" if key.startswith("elsewhere") else "ns/"
        s3_client.put_object(Bucket=bucket, Key=prefix + key, Body=b"abc")
    conf = {
        "spark.hadoop.fs.s3a.endpoint": moto_region.url,
        "spark.hadoop.fs.s3a.endpoint.region": moto_region.region,
        "spark.hadoop.fs.s3a.access.key": ACCESS_KEY,
        "spark.hadoop.fs.s3a.secret.key": SECRET_KEY,
        "spark.hadoop.fs.s3a.path.style.access": "true",
    }
    options = S3Options.from_spark_conf(conf)
    assert SECRET_KEY not in repr(options)
    root = StorageRoot(f"s3a://{bucket}/ns", options)
    dirs, files = root.list_level("data/")
    assert dirs == ["data/p1/", "data/p2/"]
    assert [(k, size) for k, size, _ in files] == [("data/top", 3)]
    listed = sorted(root.walk("data/p1/"))
    assert [k for k, _, _ in listed] == keys[:5]
    assert all(size == 3 and abs(mtime - time.time()) < 600 for _, size, mtime in listed)
    # five keys two a request: three DeleteObjects; a key outside data/ is refused, not deleted
    assert root.delete([*keys[:5], "_lakefs/range"], batch=2) == (5, 1)
    left = {
        o["Key"]
        for page in s3_client.get_paginator("list_objects_v2").paginate(Bucket=bucket)
        for o in page.get("Contents", ())
    }
    assert left == {"ns/data/p2/x", "ns/data/top", "ns/_lakefs/range", "elsewhere/data/p1/0000"}
    assert root.delete(keys[:2]) == (2, 0)  # already gone: deleted again without error
