"""Two regions on one machine: a server per region, replicants of the mirror region, simulated
object-store replication between their namespaces, and a safety checker of mirror heads.

Region ``a`` holds source repositories; region ``b`` holds mirrors. Each region is its own
`lakemirror server` process with its own data directory and backends: by default the embedded
ones (SQLite KV + ``local://`` namespaces), or with :func:`aws_backend` a DynamoDB table on its own
dynalite process and a bucket on its own moto server process. Each replicant is its own
`lakemirror replicant` process sharing region ``b``'s KV and object store.
"""

from __future__ import annotations

import hashlib
import json
import os
import secrets
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import httpx
import lakefs
import lakefs_sdk
import pytest
import yaml

from mirror.block import BlockResolver
from mirror.block.protocol import BlockStore
from mirror.block.s3 import S3Settings, make_s3_client, s3_store_factory
from mirror.simulate import ReplicationSimulator
from tests.integration.dynalite import Dynalite
from tests.integration.harness import (
    Server,
    free_port,
    running_server,
    stop_process,
    unique,
    wait_healthy,
)
from tests.integration.moto_fixtures import (
    MotoServer,
    aws_backend_env,
    create_bucket,
    s3_settings,
    unique_name,
)

T = TypeVar("T")
MIRRORS = "/service/replication/v1/repositories/{repo}/mirrors"


def wait_for(
    condition: Callable[[], T | None], timeout: float, what: str, interval: float = 0.05
) -> T:
    """Poll ``condition`` until it returns a truthy value; fail after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(interval)  # polling interval of a deadline-bounded wait


@dataclass
class Region:
    """One region: its server, an admin SDK client, an admin HTTP client of ``/api/v1``."""

    name: str
    server: Server
    client: lakefs.Client
    http: httpx.Client
    resolver: BlockResolver
    env: dict[str, str] = field(default_factory=dict)
    """``LAKEMIRROR_*`` variables the region's processes run with (backends)."""

    def store(self, namespace: str) -> BlockStore:
        """Return the object store of one of this region's namespaces."""
        return self.resolver.open(namespace)

    def namespace(self, name: str) -> str:
        """Return the storage namespace a repository called ``name`` gets in this region."""
        return self.server.namespace(name)

    def head(self, repo: str, branch: str) -> str | None:
        response = self.http.get(f"/repositories/{repo}/branches/{branch}")
        if response.status_code == 404:
            return None
        response.raise_for_status()
        return str(response.json()["commit_id"])


@dataclass
class Replicant:
    """A running `lakemirror replicant` process."""

    url: str
    replica_id: str
    process: subprocess.Popen[bytes]
    log_path: Path
    http: httpx.Client

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def metrics(self) -> dict[str, float]:
        """Return every sample of ``/metrics`` as ``name{labels}`` → value."""
        from prometheus_client.parser import text_string_to_metric_families

        text = self.http.get("/metrics").text
        out: dict[str, float] = {}
        for family in text_string_to_metric_families(text):
            for sample in family.samples:
                labels = ",".join(f"{k}={v}" for k, v in sorted(sample.labels.items()))
                out[f"{sample.name}{{{labels}}}"] = sample.value
        return out

    def metric(self, name: str, **labels: str) -> float:
        """Return the sum of the samples of ``name`` whose labels include ``labels``."""
        total = 0.0
        for key, value in self.metrics().items():
            base, _, rest = key.partition("{")
            got = dict(kv.split("=", 1) for kv in rest.rstrip("}").split(",") if kv)
            if base == name and all(got.get(k) == v for k, v in labels.items()):
                total += value
        return total

    def kill(self) -> None:
        """Kill the process at once (SIGKILL): no clean-up, leases left to expire."""
        self.process.send_signal(signal.SIGKILL)
        self.process.wait(timeout=10)


@dataclass
class TwoRegions:
    """Region ``a`` (sources) and ``b`` (mirrors), and what runs between them."""

    a: Region
    b: Region
    replicator_key: tuple[str, str]
    tmp: Path
    simulators: list[ReplicationSimulator] = field(default_factory=list)
    backend: str = "embedded"
    """Name of region ``b``'s backend (:attr:`RegionBackend.name`)."""

    def replicant_config(
        self, replica_id: str, port: int, poll: float = 0.1, lease: float = 2.0
    ) -> Path:
        config = {
            "data_dir": str(self.b.server.data_dir),
            "replicant": {
                "region": "b",
                "host": "127.0.0.1",
                "port": port,
                "poll_interval": poll,
                "lease_seconds": lease,
                "replica_id": replica_id,
            },
            "regions": {
                "a": {
                    "server_url": self.a.server.url,
                    "access_key_id": self.a.server.access_key_id,
                    "secret_access_key": self.a.server.secret_access_key,
                },
                "b": {
                    "server_url": self.b.server.url,
                    "access_key_id": self.replicator_key[0],
                    "secret_access_key": self.replicator_key[1],
                },
            },
            "logging": {"format": "json", "level": "info"},
        }
        path = self.tmp / f"replicant-{replica_id}.yaml"
        path.write_text(yaml.safe_dump(config))
        return path

    @contextmanager
    def replicant(
        self, replica_id: str = "r1", poll: float = 0.1, lease: float = 2.0, port: int = 0
    ) -> Iterator[Replicant]:
        """Run a replicant replica of region ``b`` until the block ends (on ``port``, or any)."""
        port = port or free_port()
        config = self.replicant_config(replica_id, port, poll, lease)
        log_path = self.tmp / f"replicant-{replica_id}.log"
        command = [sys.executable, "-m", "mirror.cli.main", "replicant", "--config", str(config)]
        url = f"http://127.0.0.1:{port}"
        env = {**os.environ, **self.b.env}
        with open(log_path, "ab") as log:
            process = subprocess.Popen(command, env=env, stdout=log, stderr=subprocess.STDOUT)
        admin = (self.b.server.access_key_id, self.b.server.secret_access_key)
        http = httpx.Client(base_url=url, auth=admin, timeout=30.0)
        try:
            wait_healthy(process, url, log_path)
            yield Replicant(url, replica_id, process, log_path, http)
        finally:
            http.close()
            stop_process(process)

    def simulator(self, source_ns: str, mirror_ns: str, **faults: Any) -> ReplicationSimulator:
        """Start replicating region ``a``'s ``source_ns`` into region ``b``'s ``mirror_ns``."""
        # a moto server answers one request at a time: list its bucket less often
        faults.setdefault("poll_interval", 0.02 if self.backend == "embedded" else 0.1)
        sim = ReplicationSimulator(self.a.store(source_ns), self.b.store(mirror_ns), **faults)
        sim.start()
        self.simulators.append(sim)
        return sim

    def source_repo(self, prefix: str = "origin") -> tuple[lakefs.Repository, str]:
        """Create a repository in region ``a``; return it and its namespace."""
        name = unique(prefix)
        namespace = self.a.namespace(name)
        repo = lakefs.Repository(name, client=self.a.client).create(namespace)
        return repo, namespace

    def create_mirror(
        self, replicant: Replicant, source: str, name: str, namespace: str, **extra: Any
    ) -> httpx.Response:
        body = {"name": name, "region": "b", "storage_namespace": namespace, **extra}
        return replicant.http.post(MIRRORS.format(repo=source), json=body)

    def mirror_status(self, replicant: Replicant, source: str, name: str) -> dict[str, Any]:
        response = replicant.http.get(MIRRORS.format(repo=source) + f"/{name}")
        response.raise_for_status()
        data: dict[str, Any] = response.json()
        return data

    def close(self) -> None:
        for sim in self.simulators:
            sim.stop()
        self.simulators.clear()


def objects_at(region_client: lakefs.Client, repo: str, ref: str) -> dict[str, bytes]:
    """Return every object of ``repo`` at ``ref``, path to bytes, read through the SDK."""
    r = lakefs.Repository(repo, client=region_client).ref(ref)
    return {o.path: r.object(o.path).reader(mode="rb").read() for o in r.objects()}


def run_lakemirror(region: Region, *args: str) -> subprocess.CompletedProcess[str]:
    """Run ``lakemirror`` as an operator of ``region`` would (lakectl's variables)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("LAKECTL_", "LAKEMIRROR_"))}
    env |= {
        "LAKECTL_SERVER_ENDPOINT_URL": region.server.url,
        "LAKECTL_CREDENTIALS_ACCESS_KEY_ID": region.server.access_key_id,
        "LAKECTL_CREDENTIALS_SECRET_ACCESS_KEY": region.server.secret_access_key,
        "PYSPARK_PYTHON": sys.executable,
        "PYSPARK_DRIVER_PYTHON": sys.executable,
        "SPARK_LOCAL_IP": "127.0.0.1",
    }
    command = [sys.executable, "-m", "mirror.cli.main", *args]
    return subprocess.run(command, capture_output=True, text=True, env=env, timeout=300)


def sweep(region: Region, repository: str, grace_period: int) -> dict[str, Any]:
    """Run ``lakemirror gc --sweep`` (the PySpark job) on ``repository``; return its JSON report.

    Every marked address is in the report's sample (up to 1,000).
    """
    gc = run_lakemirror(
        region,
        "gc",
        f"lakefs://{repository}",
        "--sweep",
        "--grace-period",
        str(grace_period),
        "--sample",
        "1000",
        "--local-root",
        str(region.server.data_dir),
        "-o",
        "json",
    )
    assert gc.returncode == 0, gc.stdout + gc.stderr
    report: dict[str, Any] = json.loads(gc.stdout)
    return report


def _admin_client(server: Server) -> lakefs.Client:
    return lakefs.Client(
        host=server.url, username=server.access_key_id, password=server.secret_access_key
    )


def _make_replicator(region: Region) -> tuple[str, str]:
    auth = region.client.sdk_client.auth_api
    user_id = unique("replicator")
    auth.create_user(lakefs_sdk.UserCreation(id=user_id))
    auth.attach_policy_to_user(user_id, "Replicator")
    creds = auth.create_credentials(user_id)
    return creds.access_key_id, creds.secret_access_key


@dataclass(frozen=True)
class RegionBackend:
    """How a region keeps its data: server environment, namespace root, and a resolver factory
    (given the region's data directory) that opens its namespaces from the test process."""

    env: dict[str, str] = field(default_factory=dict)
    namespace_root: str = "local://"
    resolver: Callable[[Path], BlockResolver] = BlockResolver
    name: str = "embedded"


def s3_resolver(settings: S3Settings) -> Callable[[Path], BlockResolver]:
    """Return a resolver factory serving ``s3://`` namespaces with ``settings`` (and local ones)."""

    def make(data_dir: Path) -> BlockResolver:
        resolver = BlockResolver(data_dir)
        resolver.register("s3", s3_store_factory(settings))
        return resolver

    return make


def aws_backend(dynamo: Dynalite, s3: MotoServer) -> RegionBackend:
    """Return a region keeping its KV in a fresh table of ``dynamo`` and its objects in a fresh
    bucket of ``s3``.

    The region's server and its replicants run with the same variables, so they share the
    table and the bucket; the test process reaches the bucket through the resolver.
    """
    settings = s3_settings(s3)
    bucket = create_bucket(s3, make_s3_client(settings))
    table = unique_name("region")
    env = {
        **{
            key: value
            for key, value in aws_backend_env(s3, table).items()
            if key.startswith("LAKEMIRROR_BLOCKSTORE__")
        },
        **dynamo.env(table),
    }
    root = f"s3://{bucket}/"
    return RegionBackend(env, root, s3_resolver(settings), name="dynamodb-s3")


@contextmanager
def two_regions(
    tmp: Path,
    backend_a: RegionBackend | None = None,
    backend_b: RegionBackend | None = None,
    secret_a: str | None = None,
) -> Iterator[TwoRegions]:
    """Start the servers of regions ``a`` and ``b`` and a replicator user in ``b``.

    By default both regions are embedded (SQLite + ``local://`` under their data directories).
    ``secret_a``: the secret of region ``a``'s administrator when ``tmp / "a"`` already holds a
    region whose administrator has it (default: a new region, a new secret).
    """
    backends = {"a": backend_a or RegionBackend(), "b": backend_b or RegionBackend()}
    regions: list[Region] = []
    with (
        running_server(
            tmp / "a",
            tmp / "a.log",
            access_key_id="AKIAREGIONA0000000001",
            secret_access_key=secret_a or secrets.token_hex(20),
            env=backends["a"].env,
            namespace_root=backends["a"].namespace_root,
        ) as sa,
        running_server(
            tmp / "b",
            tmp / "b.log",
            access_key_id="AKIAREGIONB0000000001",
            secret_access_key=secrets.token_hex(20),
            env=backends["b"].env,
            namespace_root=backends["b"].namespace_root,
        ) as sb,
    ):
        for name, server in (("a", sa), ("b", sb)):
            http = httpx.Client(
                base_url=f"{server.url}/api/v1",
                auth=(server.access_key_id, server.secret_access_key),
                timeout=30.0,
            )
            backend = backends[name]
            regions.append(
                Region(
                    name,
                    server,
                    _admin_client(server),
                    http,
                    backend.resolver(server.data_dir),
                    dict(backend.env),
                )
            )
        world = TwoRegions(
            regions[0], regions[1], _make_replicator(regions[1]), tmp, backend=backends["b"].name
        )
        try:
            yield world
        finally:
            world.close()
            for r in regions:
                r.http.close()


BACKENDS = ["embedded", pytest.param("dynamodb-s3", marks=pytest.mark.s3)]
"""Parameters of a ``world`` fixture running a module on both backends."""


@contextmanager
def backend_world(request: pytest.FixtureRequest, tmp: Path) -> Iterator[TwoRegions]:
    """Start two regions on the backend ``request.param`` names (one of :data:`BACKENDS`).

    ``dynamodb-s3`` gives each region its own dynalite process and its own moto server process
    (the session fixtures ``dynalite``, ``dynalite_second_region``, ``moto_region`` and
    ``moto_second_region``, which the calling module must see).
    """
    if request.param == "embedded":
        with two_regions(tmp) as world:
            yield world
        return
    assert request.param == "dynamodb-s3", request.param
    backend_a = aws_backend(
        request.getfixturevalue("dynalite"), request.getfixturevalue("moto_region")
    )
    backend_b = aws_backend(
        request.getfixturevalue("dynalite_second_region"),
        request.getfixturevalue("moto_second_region"),
    )
    with two_regions(tmp, backend_a, backend_b) as world:
        yield world


class _Unanswered(Exception):
    """A request a :class:`SafetyChecker` must ask again: its answer said nothing of the mirror."""


@dataclass
class Violation:
    """An object of a mirror head that could not be read as recorded."""

    commit: str
    path: str
    problem: str


class SafetyChecker:
    """Keep reading a mirror branch's head and check every object of each new head.

    Every object listed at the head commit must be readable with its recorded size and MD5
    checksum. A commit, once fully checked, is immutable and is not checked again. With
    ``source`` (the source region and repository), every head must also be a commit of the
    source. A branch that does not exist (404: a fresh mirror before its first advance) is
    nothing to check. With ``recheck`` (seconds), the head is also read whole again that often,
    not only when it is new: files can also go after a head was checked (garbage collection at
    the source, its deletions replicated), and a head must stay readable as long as it is the
    head.

    A request that gets no answer (a connection refused or cut) is no answer about the mirror:
    the head is checked again whole on the next round, and so is it after an answer that
    ``transient`` (when given) calls a passing refusal of the server rather than a verdict on
    the mirror (a ``503`` while a region's KV is restarting, say).
    """

    def __init__(
        self,
        region: Region,
        repo: str,
        branch: str = "main",
        source: tuple[Region, str] | None = None,
        recheck: float | None = None,
        transient: Callable[[httpx.Response], bool] | None = None,
    ) -> None:
        self.region = region
        self.repo = repo
        self.branch = branch
        self.source = source
        self.recheck = recheck
        self.transient = transient
        self.interrupted = 0
        """Checks of a head cut short (no answer, or a transient one) and started again."""
        self.rounds = 0
        """Checks of a head, counting re-checks."""
        self.checked: list[str] = []
        self.violations: list[Violation] = []
        self.objects_read = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="safety-checker", daemon=True)
        self._http = httpx.Client(
            base_url=region.http.base_url, auth=region.http.auth, timeout=30.0
        )
        self._source_http = (
            None
            if source is None
            else httpx.Client(
                base_url=source[0].http.base_url, auth=source[0].http.auth, timeout=30.0
            )
        )

    def start(self) -> SafetyChecker:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=60)
        self._http.close()
        if self._source_http is not None:
            self._source_http.close()

    def _run(self) -> None:
        seen: set[str] = set()
        last_check = 0.0
        while not self._stop.is_set():
            try:
                response = self._http.get(f"/repositories/{self.repo}/branches/{self.branch}")
                if response.status_code == 200:
                    head = str(response.json()["commit_id"])
                    if head not in seen:
                        self.check_source_has(head)
                        self.check_commit(head)
                        seen.add(head)
                        self.checked.append(head)
                        self.rounds += 1
                        last_check = time.monotonic()
                    elif self.recheck is not None and time.monotonic() - last_check >= self.recheck:
                        self.check_commit(head)
                        self.rounds += 1
                        last_check = time.monotonic()
            except (httpx.TransportError, _Unanswered):
                self.interrupted += 1
            self._stop.wait(0.02)

    def _answered(self, response: httpx.Response) -> httpx.Response:
        """Return ``response``; raise :class:`_Unanswered` when ``transient`` calls it passing."""
        if self.transient is not None and self.transient(response):
            raise _Unanswered(response.status_code)
        return response

    def check_source_has(self, commit: str) -> None:
        """Record a violation if ``source`` is set and lacks ``commit``."""
        if self.source is None or self._source_http is None:
            return
        repo = self.source[1]
        found = self._answered(self._source_http.get(f"/repositories/{repo}/commits/{commit}"))
        if found.status_code != 200:
            problem = f"not a commit of {repo} (source answered {found.status_code})"
            self.violations.append(Violation(commit, "", problem))

    def check_commit(self, commit: str) -> None:
        """Read every object of ``commit`` on the mirror and record what is wrong."""
        after = ""
        base = f"/repositories/{self.repo}/refs/{commit}/objects"
        while True:
            response = self._answered(
                self._http.get(base + "/ls", params={"after": after, "amount": 1000})
            )
            if response.status_code != 200:
                self.violations.append(
                    Violation(commit, "", f"listing answered {response.status_code}")
                )
                return
            body = response.json()
            for item in body["results"]:
                path = item["path"]
                got = self._answered(self._http.get(base, params={"path": path}))
                self.objects_read += 1
                if got.status_code != 200:
                    problem = f"read answered {got.status_code}: {got.text[:200]}"
                    self.violations.append(Violation(commit, path, problem))
                    continue
                if len(got.content) != item["size_bytes"]:
                    problem = f"size {len(got.content)} != recorded {item['size_bytes']}"
                    self.violations.append(Violation(commit, path, problem))
                elif hashlib.md5(got.content).hexdigest() != item["checksum"]:
                    self.violations.append(Violation(commit, path, "checksum differs"))
            if not body["pagination"]["has_more"]:
                return
            after = body["pagination"]["next_offset"]
