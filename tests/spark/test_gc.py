"""``lakemirror gc`` against a `lakemirror server` process: a dry run, then a sweep, by object.

One repository holds every kind of garbage lakeFS collects: versions only expired commits hold,
a deleted branch's commits outside the default window, a deleted branch's staged data, data
staged then replaced or deleted before any commit. It also holds what must stay: the retained
commits' objects, a recently deleted branch's commits (dangling, inside the window), every
branch's staged data, and garbage younger than the grace period. The server's grace period
(``gc.grace_period``) and page size (``gc.uncommitted_page_size``) are set small through the
environment, so the run takes both from the server and pages through the staged addresses.
"""

from __future__ import annotations

import json
import os
import secrets
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pyarrow.parquet as pq
import pytest
from pyspark.sql import SparkSession

from mirror.cli.gc_cmd import run_and_report
from mirror.client.client import LakeFSClient
from mirror.client.config import ClientConfig, api_base_url
from mirror.client.errors import AuthError, NotFoundError, UsageError
from mirror.spark.gc import run_gc
from mirror.spark.submit import GC_JOB
from tests.integration.harness import Server, running_server, unique

DAY = 86_400
GRACE = 3_600


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    root = tmp_path_factory.mktemp("gc-server")
    with running_server(
        root / "data",
        root / "server.log",
        access_key_id="AKIAGC" + secrets.token_hex(7).upper(),
        secret_access_key=secrets.token_urlsafe(30),
        env={
            "LAKEMIRROR_GC__GRACE_PERIOD": str(GRACE),
            "LAKEMIRROR_GC__UNCOMMITTED_PAGE_SIZE": "2",
        },
    ) as running:
        yield running


@pytest.fixture(scope="module")
def http(server: Server) -> Iterator[httpx.Client]:
    with httpx.Client(
        base_url=f"{server.url}/api/v1",
        auth=(server.access_key_id, server.secret_access_key),
        timeout=60.0,
    ) as client:
        yield client


@pytest.fixture(scope="module")
def api(server: Server) -> Iterator[LakeFSClient]:
    config = ClientConfig(api_base_url(server.url), server.access_key_id, server.secret_access_key)
    with LakeFSClient(config) as client:
        yield client


@dataclass
class Lake:
    """A repository built for collection: which data objects must go and which must stay."""

    server: Server
    http: httpx.Client
    repo: str
    garbage: set[str] = field(default_factory=set)
    kept: set[str] = field(default_factory=set)
    retained: set[str] = field(default_factory=set)
    expired: dict[str, str] = field(default_factory=dict)
    """Paths of expired commits whose data goes: commit -> path."""

    def file(self, address: str) -> Path:
        return self.server.data_dir / self.repo / address

    def upload(self, branch: str, path: str, data: bytes) -> str:
        answer = self.http.post(
            f"/repositories/{self.repo}/branches/{branch}/objects",
            params={"path": path},
            content=data,
        )
        assert answer.status_code == 201, answer.text
        return self.address(answer.json()["physical_address"])

    def address(self, physical: str) -> str:
        prefix = f"local://{self.repo}/"
        assert physical.startswith(prefix), physical
        return physical[len(prefix) :]

    def delete(self, branch: str, path: str) -> None:
        answer = self.http.delete(
            f"/repositories/{self.repo}/branches/{branch}/objects", params={"path": path}
        )
        assert answer.status_code == 204, answer.text

    def commit(self, branch: str, message: str, days_ago: float) -> str:
        answer = self.http.post(
            f"/repositories/{self.repo}/branches/{branch}/commits",
            json={"message": message, "date": int(time.time() - days_ago * DAY)},
        )
        assert answer.status_code == 201, answer.text
        return str(answer.json()["id"])

    def branch(self, name: str, source: str) -> None:
        answer = self.http.post(
            f"/repositories/{self.repo}/branches", json={"name": name, "source": source}
        )
        assert answer.status_code == 201, answer.text

    def delete_branch(self, name: str) -> None:
        answer = self.http.delete(f"/repositories/{self.repo}/branches/{name}")
        assert answer.status_code == 204, answer.text

    def data_files(self) -> set[str]:
        root = self.server.data_dir / self.repo
        return {str(p.relative_to(root)) for p in (root / "data").rglob("*") if p.is_file()}


def _age(lake: Lake, addresses: set[str], seconds: int) -> None:
    old = time.time() - seconds
    for address in addresses:
        os.utime(lake.file(address), (old, old))


@pytest.fixture(scope="module")
def lake(server: Server, http: httpx.Client) -> Lake:
    repo = unique("gcrepo")
    created = http.post(
        "/repositories",
        json={"name": repo, "storage_namespace": f"local://{repo}", "default_branch": "main"},
    )
    assert created.status_code == 201, created.text
    lake = Lake(server, http, repo)
    rules = {"default_retention_days": 7, "branches": []}
    assert http.put(f"/repositories/{repo}/settings/gc_rules", json=rules).status_code == 204

    # main: c1 (30 days ago) - c2 (20) - c3 (10) - c4 (2); 7 days retain c4 and c3
    a1 = lake.upload("main", "a.csv", b"a1")
    b1 = lake.upload("main", "b.csv", b"b1")
    keep = lake.upload("main", "keep.csv", b"keep")
    c1 = lake.commit("main", "c1", 30)
    a2 = lake.upload("main", "a.csv", b"a2")
    lake.delete("main", "b.csv")
    c2 = lake.commit("main", "c2", 20)
    a3 = lake.upload("main", "a.csv", b"a3")
    c3 = lake.commit("main", "c3", 10)
    a4 = lake.upload("main", "a.csv", b"a4")
    c4 = lake.commit("main", "c4", 2)
    lake.garbage |= {a1, b1, a2}
    lake.kept |= {keep, a3, a4}
    lake.retained |= {c3, c4}
    lake.expired = {c1: "a.csv", c2: "a.csv"}

    # a branch deleted a day after its commit: that commit dangles inside the window and stays
    lake.branch("feature", c4)
    f1 = lake.upload("feature", "f.csv", b"f1")
    lake.retained.add(lake.commit("feature", "f1", 1))
    lake.delete_branch("feature")
    lake.kept.add(f1)
    # a branch deleted long ago: its commit dangles outside the window and goes
    lake.branch("stale", c1)
    lake.garbage.add(lake.upload("stale", "s.csv", b"s1"))
    lake.commit("stale", "s1", 29)
    lake.delete_branch("stale")
    # a deleted branch's staged data goes
    lake.branch("scratch", "main")
    lake.garbage.add(lake.upload("scratch", "x.csv", b"x1"))
    lake.delete_branch("scratch")
    # staged then replaced, staged then deleted: the first goes, what is staged stays
    lake.garbage.add(lake.upload("main", "u.csv", b"u1"))
    lake.kept.add(lake.upload("main", "u.csv", b"u2"))
    lake.garbage.add(lake.upload("main", "d.csv", b"d1"))
    lake.delete("main", "d.csv")
    lake.branch("dev", "main")
    for i in range(3):
        lake.kept.add(lake.upload("dev", f"e{i}.csv", f"e{i}".encode()))

    # everything so far is a month old on disk; then garbage younger than the grace period
    assert lake.data_files() == lake.garbage | lake.kept
    _age(lake, lake.garbage | lake.kept, 40 * DAY)
    fresh = lake.upload("main", "g.csv", b"g1")
    lake.kept |= {fresh, lake.upload("main", "g.csv", b"g2")}
    return lake


def _client(server: Server) -> LakeFSClient:
    return LakeFSClient(
        ClientConfig(api_base_url(server.url), server.access_key_id, server.secret_access_key)
    )


def _cli(
    server: Server, *args: str, command: tuple[str, ...] = ()
) -> subprocess.CompletedProcess[str]:
    """Run ``lakemirror gc`` (or ``command``) with lakectl's variables pointing at ``server``."""
    env = {
        **os.environ,
        "LAKECTL_SERVER_ENDPOINT_URL": server.url,
        "LAKECTL_CREDENTIALS_ACCESS_KEY_ID": server.access_key_id,
        "LAKECTL_CREDENTIALS_SECRET_ACCESS_KEY": server.secret_access_key,
        "PYSPARK_PYTHON": sys.executable,
        "PYSPARK_DRIVER_PYTHON": sys.executable,
        "SPARK_LOCAL_IP": "127.0.0.1",
    }
    return subprocess.run(
        [*(command or (sys.executable, "-m", "mirror.cli.main", "gc")), *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def _read_fully(http: httpx.Client, repo: str, ref: str) -> int:
    listed = http.get(f"/repositories/{repo}/refs/{ref}/objects/ls", params={"amount": 1000})
    assert listed.status_code == 200, listed.text
    paths = [o["path"] for o in listed.json()["results"]]
    for path in paths:
        got = http.get(f"/repositories/{repo}/refs/{ref}/objects", params={"path": path})
        assert got.status_code == 200, (ref, path, got.text)
    return len(paths)


def _report(lake: Lake, run_id: str) -> tuple[dict[str, Any], set[str]]:
    root = lake.server.data_dir / lake.repo / "_lakefs/retention/gc/unified" / run_id
    summary = json.loads((root / "summary.json").read_text())
    marked = set()
    for part in (root / "deleted").glob("*.parquet"):
        marked |= set(pq.read_table(part).column("address").to_pylist())
    return summary, marked


def test_dry_run_then_sweep(
    lake: Lake, server: Server, http: httpx.Client, spark: SparkSession
) -> None:
    before = lake.data_files()
    dry = _cli(
        server,
        f"lakefs://{lake.repo}",
        "--master",
        "local[2]",
        "--local-root",
        str(server.data_dir),
        "-o",
        "json",
    )
    assert dry.returncode == 0, dry.stderr
    shown = json.loads(dry.stdout)
    # a dry run deletes nothing
    assert lake.data_files() == before
    assert shown["num_deleted_objects"] == shown["marked"] == len(lake.garbage)
    assert shown["sample"] == sorted(lake.garbage)
    assert shown["grace_period"] == GRACE and shown["has_rules"] is True
    assert shown["retained_commits"] == len(lake.retained)
    assert shown["uncommitted_addresses"] == 5  # u2, e0-e2, g2 (g1 was replaced)
    assert shown["swept"] is False and shown["success"] is True
    assert shown["marked_bytes"] == sum(len(lake.file(a).read_bytes()) for a in lake.garbage)
    summary, marked = _report(lake, shown["run_id"])
    assert marked == lake.garbage
    assert {"run_id", "success", "first_slice", "start_time", "cutoff_time"} <= summary.keys()
    assert summary["start_time"].endswith("Z") and summary["first_slice"]

    warnings: list[str] = []
    with _client(server) as client:
        # as `lakemirror gc --sweep --mark-id` runs it: the sweep is reported to the audit trail
        swept = run_and_report(
            spark,
            lake.repo,
            client=client,
            sweep=True,
            mark_id=shown["run_id"],
            local_root=server.data_dir,
            warn=warnings.append,
        )
    assert swept.swept and swept.deleted == len(lake.garbage)
    assert warnings == []
    [event] = http.get("/audit", params={"kind": "gc.sweep", "repository": lake.repo}).json()[
        "results"
    ]
    assert (event["result"], event["target"]) == ("success", {"repository": lake.repo})
    assert event["actor"]["access_key_id"] == server.access_key_id
    assert event["details"] == {
        "run_id": shown["run_id"],
        "mark_id": shown["run_id"],
        "marked": len(lake.garbage),
        "marked_bytes": shown["marked_bytes"],
        "deleted": len(lake.garbage),
        "reported_by": "lakemirror gc",
    }
    remaining = lake.data_files()
    assert remaining == lake.kept, (remaining - lake.kept, lake.kept - remaining)
    summary, _ = _report(lake, shown["run_id"])
    assert summary["swept"] is True and summary["deleted"] == len(lake.garbage)

    # every retained commit still reads in full; the branches' staged data too
    for commit in lake.retained:
        assert _read_fully(http, lake.repo, commit) >= 2
    assert _read_fully(http, lake.repo, "main") == 4  # a, keep, u, g
    assert _read_fully(http, lake.repo, "dev") == 5
    # an expired commit's swept data: lakeFS's 410
    for commit, path in lake.expired.items():
        gone = http.get(f"/repositories/{lake.repo}/refs/{commit}/objects", params={"path": path})
        assert gone.status_code == 410, gone.text
        assert gone.json()["message"].startswith("No data")

    # a second run finds nothing more to collect
    with _client(server) as client:
        again = run_gc(spark, lake.repo, client=client, sweep=True, local_root=server.data_dir)
    assert again.marked == 0 and again.deleted == 0
    assert again.objects_listed == len(lake.kept)
    assert lake.data_files() == lake.kept


def test_without_rules_every_commit_is_kept(
    server: Server, http: httpx.Client, spark: SparkSession
) -> None:
    repo = unique("gcnorules")
    created = http.post(
        "/repositories", json={"name": repo, "storage_namespace": f"local://{repo}"}
    )
    assert created.status_code == 201
    lake = Lake(server, http, repo)
    old = lake.upload("main", "a.csv", b"1")
    lake.commit("main", "one", 400)
    new = lake.upload("main", "a.csv", b"2")
    lake.commit("main", "two", 300)
    replaced = lake.upload("main", "b.csv", b"staged")
    staged = lake.upload("main", "b.csv", b"staged again")
    _age(lake, {old, new, replaced, staged}, 40 * DAY)
    # the job as a cluster runs it: spark-submit of the entry script, the master submit's
    submit = Path(sys.executable).with_name("spark-submit")
    dry = _cli(
        server,
        repo,
        "--grace-period",
        "0",
        "--local-root",
        str(server.data_dir),
        "-o",
        "json",
        command=(str(submit), "--master", "local[1]", GC_JOB),
    )
    assert dry.returncode == 0, dry.stderr
    shown = json.loads(dry.stdout)
    assert shown["sample"] == [replaced] and not shown["swept"]
    assert lake.data_files() == {old, new, replaced, staged}
    with _client(server) as client:
        run = run_gc(
            spark, repo, client=client, sweep=True, grace_period=0, local_root=server.data_dir
        )
    assert not run.has_rules and run.retained_commits is None
    # only uncommitted garbage goes
    assert run.sample == (replaced,) and run.deleted == 1
    assert lake.data_files() == {old, new, staged}
    with _client(server) as client:
        with pytest.raises(NotFoundError):
            root = server.data_dir
            run_gc(spark, repo, client=client, sweep=True, mark_id="0" * 20, local_root=root)
        with pytest.raises(UsageError):
            run_gc(spark, repo, client=client, sweep=True, mark_id="../x")
        with pytest.raises(UsageError):
            run_gc(spark, repo, client=client, mark_id=run.run_id)  # a mark id needs --sweep


def test_refused_on_a_mirror(server: Server, http: httpx.Client, spark: SparkSession) -> None:
    name = unique("gcmirror")
    created = http.post(
        "/mirror/repositories",
        json={"name": name, "storage_namespace": f"local://{name}", "mirror_of": "us-east-1/x"},
    )
    assert created.status_code == 201, created.text
    refused = _cli(server, name, "--local-root", str(server.data_dir))
    assert refused.returncode == 3, refused.stderr
    assert "read-only repository" in refused.stderr
    with _client(server) as client:
        with pytest.raises(AuthError) as info:
            run_gc(spark, name, client=client, local_root=server.data_dir)
        assert info.value.status == 403
        assert "read-only repository" in info.value.message
        with pytest.raises(AuthError):
            run_gc(
                spark, name, client=client, sweep=True, mark_id="0" * 20, local_root=server.data_dir
            )
