"""Reading a mirror through the gateway of the mirror region's server.

Two regions run as processes (``tests/e2e/regions.py``): region ``a`` holds the source
repository, region ``b`` a mirror of it whose storage namespace a replication simulator fills
from the source's, holding one data file back. The mirror's commit records are imported and its
branch set through the mirror endpoints, as the replicant does. boto3 then reads the mirror in
region ``b``: what has arrived reads byte for byte as at the source, writes are refused naming the
mirror, the file that has not arrived answers ``503 SlowDown`` until replication delivers it, and
the content headers an object was written with at the source are answered at the mirror.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import boto3
import httpx
import pytest
from botocore.config import Config
from botocore.exceptions import ClientError

from mirror.simulate import ReplicationSimulator
from tests.e2e.regions import TwoRegions, two_regions, unique, wait_for
from tests.gateway.live import REGION

pytestmark = pytest.mark.e2e

FILES = {
    "tables/a.csv": b"a,1\n" * 100,
    "tables/held.csv": b"held,2\n" * 50,
    "dir/with space+ü.txt": "ünï +".encode(),
    "empty": b"",
}
HELD = "tables/held.csv"
WITH_HEADERS = "tables/a.csv"
"""Written through the source region's gateway with content headers and user metadata."""
CONTENT = {
    "CacheControl": "max-age=600",
    "ContentDisposition": 'attachment; filename="a.csv"',
    "ContentEncoding": "identity",
    "ContentLanguage": "en-GB",
}
EXPIRES = "Thu, 02 Jan 2031 03:04:05 GMT"


@dataclass
class Mirrored:
    """A source repository in ``a``, its mirror in ``b``, and the simulator between them."""

    world: TwoRegions
    source: str
    mirror: str
    commit: str
    held_address: str
    simulator: ReplicationSimulator

    def s3(self, region: str, *, attempts: int = 1) -> Any:
        return _s3(self.world, region, attempts)


def _s3(world: TwoRegions, region: str, attempts: int = 1) -> Any:
    server = (world.a if region == "a" else world.b).server
    return boto3.client(
        "s3",
        endpoint_url=server.url,
        region_name=REGION,
        aws_access_key_id=server.access_key_id,
        aws_secret_access_key=server.secret_access_key,
        config=Config(
            s3={"addressing_style": "path"},
            retries={"total_max_attempts": attempts, "mode": "standard"},
        ),
    )


def _held(address: str) -> Any:
    return lambda key: key == address


@pytest.fixture(scope="module")
def mirrored(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Mirrored]:
    with two_regions(tmp_path_factory.mktemp("regions")) as world:
        repo, source_ns = world.source_repo()
        _s3(world, "a").put_object(
            Bucket=repo.id,
            Key=f"main/{WITH_HEADERS}",
            Body=FILES[WITH_HEADERS],
            ContentType="text/csv",
            Metadata={"owner": "ops"},
            Expires=EXPIRES,
            **CONTENT,
        )
        for path, data in FILES.items():
            if path == WITH_HEADERS:
                continue
            done = world.a.http.post(
                f"/repositories/{repo.id}/branches/main/objects",
                params={"path": path},
                content=data,
            )
            assert done.status_code == 201, done.text
        made = world.a.http.post(
            f"/repositories/{repo.id}/branches/main/commits", json={"message": "files"}
        )
        assert made.status_code == 201, made.text
        commit = str(made.json()["id"])
        stat = world.a.http.get(
            f"/repositories/{repo.id}/refs/main/objects/stat", params={"path": HELD}
        ).json()
        address = str(stat["physical_address"]).removeprefix(source_ns + "/")

        name = unique("origin-mirror")
        mirror_ns = world.b.namespace(name)
        simulator = ReplicationSimulator(
            world.a.store(source_ns), world.b.store(mirror_ns), poll_interval=0.02
        )
        simulator.withhold(_held(address))
        simulator.start()
        world.simulators.append(simulator)
        wait_for(
            lambda: (s := simulator.stats).discovered > 1 and s.pending == s.withheld == 1,
            30,
            "every file but one replicated",
        )
        replicator = httpx.Client(
            base_url=f"{world.b.server.url}/api/v1", auth=world.replicator_key, timeout=30.0
        )
        with replicator:
            created = replicator.post(
                "/mirror/repositories",
                json={
                    "name": name,
                    "storage_namespace": mirror_ns,
                    "mirror_of": f"a/{repo.id}",
                },
            )
            assert created.status_code == 201, created.text
            log = world.a.http.get(f"/repositories/{repo.id}/refs/main/commits")
            for record in reversed(log.json()["results"]):
                imported = replicator.post(f"/repositories/{name}/mirror/commits", json=record)
                assert imported.status_code == 201, imported.text
            moved = replicator.put(
                f"/repositories/{name}/mirror/branches/main",
                json={"commit_id": commit, "expected": None},
            )
            assert moved.status_code == 200, moved.text
        yield Mirrored(world, repo.id, name, commit, address, simulator)


def _listing(s3: Any, bucket: str, prefix: str) -> list[tuple[str, int, str]]:
    pages = s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix)
    return [
        (o["Key"].partition("/")[2], o["Size"], o["ETag"])
        for page in pages
        for o in page.get("Contents", [])
    ]


def test_reads_at_the_mirror_match_the_source(mirrored: Mirrored) -> None:
    source, mirror = mirrored.s3("a"), mirrored.s3("b")
    for ref in ("main", mirrored.commit):
        assert _listing(mirror, mirrored.mirror, f"{ref}/") == _listing(
            source, mirrored.source, f"{ref}/"
        )
    assert len(_listing(mirror, mirrored.mirror, "main/")) == len(FILES)
    root = mirror.list_objects_v2(Bucket=mirrored.mirror, Delimiter="/")
    assert [c["Prefix"] for c in root["CommonPrefixes"]] == ["main/"]
    for path in FILES:
        if path == HELD:
            continue
        here = mirror.get_object(Bucket=mirrored.mirror, Key=f"main/{path}")
        there = source.get_object(Bucket=mirrored.source, Key=f"main/{path}")
        assert here["Body"].read() == there["Body"].read() == FILES[path]
        assert here["ETag"] == there["ETag"]
        head = mirror.head_object(Bucket=mirrored.mirror, Key=f"{mirrored.commit}/{path}")
        assert head["ContentLength"] == len(FILES[path]) and head["ETag"] == there["ETag"]


def test_content_headers_travel_with_the_object_into_the_mirror(mirrored: Mirrored) -> None:
    mirror = mirrored.s3("b")
    for ref in ("main", mirrored.commit):
        for answer in (
            mirror.head_object(Bucket=mirrored.mirror, Key=f"{ref}/{WITH_HEADERS}"),
            mirror.get_object(Bucket=mirrored.mirror, Key=f"{ref}/{WITH_HEADERS}"),
        ):
            assert {k: answer.get(k) for k in CONTENT} == CONTENT
            assert answer["ExpiresString"] == EXPIRES
            assert answer["ContentType"] == "text/csv"
            assert answer["Metadata"] == {"owner": "ops"}
    # the mirror's committed entry holds them, as the source's does
    stats = [
        region.http.get(
            f"/repositories/{name}/refs/{mirrored.commit}/objects/stat",
            params={"path": WITH_HEADERS},
        ).json()
        for region, name in (
            (mirrored.world.a, mirrored.source),
            (mirrored.world.b, mirrored.mirror),
        )
    ]
    assert (
        stats[0]["metadata"]
        == stats[1]["metadata"]
        == {
            "X-Amz-Meta-owner": "ops",
            "Cache-Control": "max-age=600",
            "Content-Disposition": 'attachment; filename="a.csv"',
            "Content-Encoding": "identity",
            "Content-Language": "en-GB",
            "Expires": EXPIRES,
        }
    )


def _error(call: Any) -> dict[str, Any]:
    with pytest.raises(ClientError) as err:
        call()
    response: dict[str, Any] = err.value.response
    return response


def test_writes_to_the_mirror_are_refused_naming_it(mirrored: Mirrored, tmp_path: Path) -> None:
    mirror = mirrored.s3("b")
    bucket = mirrored.mirror
    refusals = [
        lambda: mirror.put_object(Bucket=bucket, Key="main/new.csv", Body=b"x"),
        lambda: mirror.delete_object(Bucket=bucket, Key="main/tables/a.csv"),
        lambda: mirror.copy_object(
            Bucket=bucket,
            Key="main/copy.csv",
            CopySource={"Bucket": bucket, "Key": "main/tables/a.csv"},
        ),
    ]
    for refused in refusals:
        response = _error(refused)
        assert response["Error"]["Code"] == "AccessDenied"
        assert response["ResponseMetadata"]["HTTPStatusCode"] == 403
        assert bucket in response["Error"]["Message"]
        assert "mirror" in response["Error"]["Message"]
    assert [k for k, _, _ in _listing(mirror, bucket, "main/")] == sorted(FILES)
    assert (
        mirror.get_object(Bucket=bucket, Key="main/tables/a.csv")["Body"].read()
        == FILES["tables/a.csv"]
    )


def test_a_commit_whose_metadata_has_not_arrived_lists_slow_down(mirrored: Mirrored) -> None:
    world = mirrored.world
    metadata = _metadata
    # the new commit's ranges and metarange stay in region a
    mirrored.simulator.withhold(metadata)
    try:
        done = world.a.http.post(
            f"/repositories/{mirrored.source}/branches/main/objects",
            params={"path": "tables/later.csv"},
            content=b"later\n",
        )
        assert done.status_code == 201, done.text
        made = world.a.http.post(
            f"/repositories/{mirrored.source}/branches/main/commits", json={"message": "later"}
        )
        assert made.status_code == 201, made.text
        record = made.json()
        with httpx.Client(
            base_url=f"{world.b.server.url}/api/v1", auth=world.replicator_key, timeout=30.0
        ) as replicator:
            commits = f"/repositories/{mirrored.mirror}/mirror/commits"
            imported = replicator.post(commits, json=record)
            assert imported.status_code == 201, imported.text
        s3 = mirrored.s3("b")
        at_new = f"{record['id']}/"
        listed = _error(lambda: s3.list_objects_v2(Bucket=mirrored.mirror, Prefix=at_new))
        assert listed["Error"]["Code"] == "SlowDown"
        assert listed["ResponseMetadata"]["HTTPStatusCode"] == 503
        assert "not yet replicated" in listed["Error"]["Message"]
        got = _error(
            lambda: s3.get_object(Bucket=mirrored.mirror, Key=f"{record['id']}/tables/a.csv")
        )
        assert got["Error"]["Code"] == "SlowDown"
        # the mirror branch still points at the commit whose files are all here
        assert len(_listing(s3, mirrored.mirror, "main/")) == len(FILES)
    finally:
        mirrored.simulator.release(metadata)


def _metadata(key: str) -> bool:
    return key.startswith("_lakefs/")


def test_a_file_not_yet_replicated_answers_slow_down_until_it_arrives(
    mirrored: Mirrored,
) -> None:
    bucket, key = mirrored.mirror, f"main/{HELD}"
    # without retries the client sees S3's throttling answer, not NoSuchKey
    response = _error(lambda: mirrored.s3("b").get_object(Bucket=bucket, Key=key))
    assert response["Error"]["Code"] == "SlowDown"
    assert response["ResponseMetadata"]["HTTPStatusCode"] == 503
    assert response["ResponseMetadata"]["HTTPHeaders"]["retry-after"] == "1"
    # with retries on (botocore's default), the read succeeds once replication delivers
    retrying = mirrored.s3("b", attempts=5)
    store = mirrored.world.b.store(mirrored.world.b.namespace(mirrored.mirror))
    answers: list[int] = []

    def deliver_on_503(response: tuple[Any, Any] | None, **_: Any) -> None:
        # called after every attempt, before botocore decides to retry
        assert response is not None
        answers.append(response[0].status_code)
        if response[0].status_code == 503:
            mirrored.simulator.release()
            wait_for(lambda: store.exists(mirrored.held_address), 30, "the held file delivered")

    retrying.meta.events.register("needs-retry.s3.GetObject", deliver_on_503)
    body = retrying.get_object(Bucket=bucket, Key=key)["Body"].read()
    assert body == FILES[HELD]
    assert answers == [503, 200]
