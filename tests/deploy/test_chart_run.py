"""Run what the chart renders: two releases, one per region, mirror a repository end to end.

Each region's release is rendered from its example values with test overrides that only
change addresses and keys: S3 is a moto server of its own (one process per region), DynamoDB a
dynalite of its own, the other region's and its own server URL the loopback Services below.
Each region is a cluster of its own (:mod:`tests.deploy.pods`): the rendered server Deployment
(2 replicas) and replicant Deployment (2 replicas) run as processes started as their containers
would be, with the rendered ConfigMap, Secret and volumes, behind their rendered Services.
``lakemirror simulate-replication`` stands in for the S3 Replication rule of docs/deploy.md
(whole ``repos/`` prefix, bucket to bucket). Then the operator's steps of docs/deploy.md, over
HTTP: the replicant's reader key in us-east-1, the eu-central-1 release with that key in its
Secret, an operator in eu-central-1, the mirror configured with a POST to the replicant's
Service, objects written and committed in us-east-1, read back through eu-central-1.
"""

from __future__ import annotations

import secrets
import subprocess
from collections.abc import Iterator, Mapping
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import lakefs
import pytest
import yaml

from mirror.block.s3 import make_s3_client
from tests.deploy.chart import example, render, secret
from tests.deploy.pods import ENTRYPOINT, Cluster, Manifests, PodProcess, local_cluster
from tests.e2e.regions import wait_for
from tests.integration import dynalite as dynalite_keys
from tests.integration import moto_fixtures
from tests.integration.dynalite import Dynalite, running_dynalite
from tests.integration.harness import free_port
from tests.integration.moto_fixtures import MotoServer, create_bucket, running_moto, s3_settings

pytestmark = [pytest.mark.slow, pytest.mark.s3]

SOURCE, MIRROR = "us-east-1", "eu-central-1"
REPO = "origin"
OBJECTS = 12
DEADLINE = 60.0
MIRRORS = "/service/replication/v1/repositories/{repo}/mirrors"


def listen(container: str, port: int, local: int) -> dict[str, str]:
    """Make a container listen on its own loopback port (the pods share this machine's network)."""
    section = {"server": "SERVER", "replicant": "REPLICANT"}[container]
    return {f"LAKEMIRROR_{section}__HOST": "127.0.0.1", f"LAKEMIRROR_{section}__PORT": str(local)}


@dataclass
class Region:
    """One region: its stand-ins for AWS, its cluster, and what runs there."""

    name: str
    moto: MotoServer
    dynalite: Dynalite
    bucket: str
    cluster: Cluster
    server_port: int = field(default_factory=free_port)
    replicant_port: int = field(default_factory=free_port)
    admin: tuple[str, str] = ("", "")
    manifests: Manifests | None = None
    servers: list[PodProcess] = field(default_factory=list)
    replicants: list[PodProcess] = field(default_factory=list)

    @property
    def server_url(self) -> str:
        return f"http://127.0.0.1:{self.server_port}"

    @property
    def replicant_url(self) -> str:
        return f"http://127.0.0.1:{self.replicant_port}"

    def api(self, key: tuple[str, str]) -> httpx.Client:
        return httpx.Client(base_url=f"{self.server_url}/api/v1", auth=key, timeout=30.0)


def overrides(region: Region, regions: Mapping[str, Region]) -> dict[str, Any]:
    """Return the test's values on top of a region's example: addresses, and short timings."""
    return {
        # the Services' in-cluster and public names are loopback ports here
        "regions": {name: {"serverUrl": r.server_url} for name, r in regions.items()},
        "kv": {"dynamodb": {"endpointUrl": region.dynalite.url, "createTable": True}},
        "blockstore": {
            "s3": {"endpointUrl": region.moto.url, "addressingStyle": "path", "maxAttempts": 3}
        },
        "replicant": {"pollInterval": 0.2, "leaseSeconds": 4},
    }


def static_keys() -> dict[str, Any]:
    """Return the S3 and DynamoDB keys of the stand-ins (an IAM role in production)."""
    return {
        "s3": {
            "accessKeyId": moto_fixtures.ACCESS_KEY,
            "secretAccessKey": moto_fixtures.SECRET_KEY,
        },
        "dynamodb": {
            "accessKeyId": dynalite_keys.ACCESS_KEY,
            "secretAccessKey": dynalite_keys.SECRET_KEY,
        },
    }


def install(region: Region, manifests: Manifests) -> None:
    """Start a release's Deployments and Services, as `helm install` and the cluster would."""
    region.manifests = manifests
    cluster = region.cluster
    region.servers = cluster.start_deployment(manifests, "lakemirror-server", listen)
    cluster.start_service(manifests, "lakemirror-server", region.servers, region.server_port)
    region.replicants = cluster.start_deployment(manifests, "lakemirror-replicant", listen)
    cluster.start_service(
        manifests, "lakemirror-replicant", region.replicants, region.replicant_port
    )


def create_user(api: httpx.Client, user: str, policy: str) -> tuple[str, str]:
    """Create ``user`` with ``policy`` and a key, as docs/deploy.md does with curl."""
    assert api.post("/auth/users", json={"id": user}).status_code == 201
    assert api.put(f"/auth/users/{user}/policies/{policy}").status_code == 201
    created = api.post(f"/auth/users/{user}/credentials")
    assert created.status_code == 201, created.text
    body = created.json()
    return body["access_key_id"], body["secret_access_key"]


@contextmanager
def simulated_replication(tmp: Path, source: Region, destination: Region) -> Iterator[Path]:
    """Copy new objects of ``s3://<source bucket>/repos`` to the destination bucket's ``repos``."""
    config = {
        "blockstore": {
            "s3": {
                "regions": {
                    r.name: {
                        "endpoint_url": r.moto.url,
                        "region": r.name,
                        "access_key_id": moto_fixtures.ACCESS_KEY,
                        "secret_access_key": moto_fixtures.SECRET_KEY,
                        "addressing_style": "path",
                    }
                    for r in (source, destination)
                }
            }
        }
    }
    path = tmp / "replication.yaml"
    path.write_text(yaml.safe_dump(config))
    log = tmp / "replication.log"
    command = [
        *ENTRYPOINT,
        "simulate-replication",
        *("--from", f"s3://{source.bucket}/repos", "--to", f"s3://{destination.bucket}/repos"),
        *("--from-region", source.name, "--to-region", destination.name),
        *("--config", str(path), "--poll", "0.2", "--delay", "0:0.5", "--seed", "7"),
    ]
    with open(log, "wb") as out:
        process = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT)
    try:
        yield log
    finally:
        process.terminate()
        assert process.wait(timeout=30) == 0, log.read_text()


def stopped_cleanly(pod: PodProcess) -> bool:
    """Stop ``pod`` as the kubelet does (SIGTERM); say whether it drained and exited with 0.

    A process still running after the grace period is killed (SIGKILL) and is not clean.
    """
    return pod.stop() == 0


def head(api: httpx.Client, repo: str, branch: str) -> str | None:
    response = api.get(f"/repositories/{repo}/branches/{branch}")
    if response.status_code == 404:
        return None
    response.raise_for_status()
    return str(response.json()["commit_id"])


def read_all(api: httpx.Client, repo: str, ref: str) -> dict[str, bytes]:
    """Return every object of ``repo`` at ``ref``, read through the API."""
    listing = api.get(f"/repositories/{repo}/refs/{ref}/objects/ls", params={"amount": 1000})
    listing.raise_for_status()
    out: dict[str, bytes] = {}
    for item in listing.json()["results"]:
        got = api.get(f"/repositories/{repo}/refs/{ref}/objects", params={"path": item["path"]})
        assert got.status_code == 200, got.text
        out[item["path"]] = got.content
    return out


def write_and_commit(region: Region, start: int, count: int) -> tuple[str, dict[str, bytes]]:
    """Upload ``count`` objects to the source's main branch and commit them."""
    client = lakefs.Client(
        host=region.server_url, username=region.admin[0], password=region.admin[1]
    )
    branch = lakefs.Repository(REPO, client=client).branch("main")
    written = {}
    for i in range(start, start + count):
        data = f"id,value\n{i},{secrets.token_hex(8)}\n".encode() * (i + 1)
        path = f"tables/events/part-{i:04}.csv"
        branch.object(path).upload(data)
        written[path] = data
    commit = branch.commit(f"events {start}..{start + count - 1}").get_commit().id
    return commit, written


@pytest.fixture
def world(tmp_path: Path) -> Iterator[dict[str, Region]]:
    logs = tmp_path / "logs"
    logs.mkdir()
    with ExitStack() as stack:
        regions: dict[str, Region] = {}
        for name in (SOURCE, MIRROR):
            moto = stack.enter_context(contextmanager(running_moto)(name, logs))
            dynalite = stack.enter_context(running_dynalite(logs, name))
            bucket = create_bucket(moto, make_s3_client(s3_settings(moto)), f"lakemirror-{name}")
            cluster = stack.enter_context(local_cluster())
            regions[name] = Region(name, moto, dynalite, bucket, cluster)
        yield regions


def test_two_releases_mirror_a_repository(world: dict[str, Region], tmp_path: Path) -> None:
    source, mirror = world[SOURCE], world[MIRROR]

    # 1. us-east-1, installed with its example values and the chart's own Secret
    source.admin = ("AKIAUSEAST1ADMIN0001", secrets.token_hex(20))
    credentials = {
        "existingSecret": "",
        "admin": {"accessKeyId": source.admin[0], "secretAccessKey": source.admin[1]},
        "encryptSecretKey": secrets.token_hex(20),
        **static_keys(),
    }
    install(
        source,
        render([example(SOURCE), overrides(source, world), {"credentials": credentials}], tmp_path),
    )
    with source.api(source.admin) as api:
        # 2. the key eu-central-1's replicant reads us-east-1 with
        reader = create_user(api, f"replicator-{MIRROR}", "FSReadAll")
        # 3. the source repository, in the replicated prefix of the bucket
        created = api.post(
            "/repositories",
            json={
                "name": REPO,
                "storage_namespace": f"s3://{source.bucket}/repos/{REPO}",
                "default_branch": "main",
            },
        )
        assert created.status_code == 201, created.text

    # 4. eu-central-1, installed with its example values and an existing Secret
    mirror.admin = ("AKIAEUCENTRAL1ADMIN1", secrets.token_hex(20))
    keys = {
        "admin-access-key-id": mirror.admin[0],
        "admin-secret-access-key": mirror.admin[1],
        f"region-{SOURCE}-access-key-id": reader[0],
        f"region-{SOURCE}-secret-access-key": reader[1],
        "s3-access-key-id": moto_fixtures.ACCESS_KEY,
        "s3-secret-access-key": moto_fixtures.SECRET_KEY,
        "dynamodb-access-key-id": dynalite_keys.ACCESS_KEY,
        "dynamodb-secret-access-key": dynalite_keys.SECRET_KEY,
        "encrypt-secret-key": secrets.token_hex(20),
    }
    manifests = render([example(MIRROR), overrides(mirror, world)], tmp_path)
    assert not manifests.of_kind("Secret")
    manifests.docs.append(secret("lakemirror-credentials", keys))
    install(mirror, manifests)
    assert len(mirror.servers) == 2 and len(mirror.replicants) == 2

    with (
        mirror.api(mirror.admin) as mirror_admin,
        simulated_replication(tmp_path, source, mirror) as replication_log,
    ):
        # 5. an operator of eu-central-1 configures the mirror on the replicant's Service
        operator = create_user(mirror_admin, "operator", "FSFullAccess")
        with httpx.Client(base_url=mirror.replicant_url, auth=operator, timeout=30.0) as conf:
            created = conf.post(
                MIRRORS.format(repo=REPO),
                json={
                    "name": REPO,
                    "region": MIRROR,
                    "storage_namespace": f"s3://{mirror.bucket}/repos/{REPO}",
                },
            )
            assert created.status_code == 201, created.text
            assert created.json()["source_region"] == SOURCE

            # 6. data written and committed in us-east-1 appears, whole, in eu-central-1
            commit, written = write_and_commit(source, 0, OBJECTS)
            wait_for(
                lambda: head(mirror_admin, REPO, "main") == commit,
                DEADLINE,
                f"mirror head at {commit}\n{replication_log.read_text()[-2000:]}",
            )
            assert read_all(mirror_admin, REPO, "main") == written
            status = conf.get(MIRRORS.format(repo=REPO) + f"/{REPO}").json()
            (branch,) = status["status"]
            assert branch["state"] == "synced" and branch["mirror_head"] == commit
            names = {pod.name for pod in mirror.replicants}
            holder = status["worker"]
            assert holder in names, f"lease held by {holder}, not one of {names}"

            # 7. the replica working the mirror stops (a rolling update, a drained node): the
            # other one takes the lease and the mirror keeps up
            stopping = next(p for p in mirror.replicants if p.name == holder)
            assert stopped_cleanly(stopping), stopping.log()[-3000:]
            commit2, written2 = write_and_commit(source, OBJECTS, 4)
            wait_for(lambda: head(mirror_admin, REPO, "main") == commit2, DEADLINE, "a new holder")
            assert read_all(mirror_admin, REPO, "main") == {**written, **written2}
            status = conf.get(MIRRORS.format(repo=REPO) + f"/{REPO}").json()
            assert status["worker"] in names - {holder}

        # the mirror is read-only, whoever asks
        refused = mirror_admin.post(
            f"/repositories/{REPO}/branches/main/objects",
            params={"path": "x.csv"},
            content=b"x",
            headers={"Content-Type": "application/octet-stream"},
        )
        assert refused.status_code == 403


def test_the_embedded_release_keeps_its_data_on_its_claim(tmp_path: Path) -> None:
    admin = ("AKIAEMBEDDEDADMIN001", secrets.token_hex(20))
    manifests = render([example("embedded")], tmp_path)
    manifests.docs.append(
        secret(
            "lakemirror-credentials",
            {"admin-access-key-id": admin[0], "admin-secret-access-key": admin[1]},
        )
    )
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    with local_cluster() as cluster:
        (pod,) = cluster.start_deployment(manifests, "lakemirror-server", listen)
        cluster.start_service(manifests, "lakemirror-server", [pod], port)
        client = lakefs.Client(host=url, username=admin[0], password=admin[1])
        repo = lakefs.Repository("demo", client=client).create("local://demo")
        repo.branch("main").object("hello.txt").upload(b"hello from the volume\n")
        commit = repo.branch("main").commit("first").get_commit().id
        claim = cluster.workdir / "claims" / "lakemirror-server"
        assert (claim / "kv.sqlite").is_file(), "SQLite lives on the PersistentVolumeClaim"
        assert any((claim / "demo").rglob("*")), "local:// namespaces live there too"

        # the Deployment's strategy is Recreate: the old pod goes, a new one mounts the claim
        assert stopped_cleanly(pod), pod.log()[-3000:]
        (again,) = cluster.start_deployment(manifests, "lakemirror-server", listen)
        assert again.name != pod.name
        service = cluster.start_service(manifests, "lakemirror-server", [again])
        with httpx.Client(base_url=f"{service.url}/api/v1", auth=admin) as api:
            assert head(api, "demo", "main") == commit
            assert read_all(api, "demo", "main") == {"hello.txt": b"hello from the volume\n"}
