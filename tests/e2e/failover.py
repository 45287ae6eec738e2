"""Disaster recovery across two regions: replicants of either region, replication in both
directions, a writer that commits wherever writes are accepted, and a checker of the writable role.

:mod:`tests.e2e.regions` runs region ``a`` as the source and ``b`` as the mirror region. A
failover turns that around, so here both regions get a ``Replicator`` user and can run a
replicant, and files can be replicated from either region's namespace into the other's.

:class:`ContinuousWriter` commits one object per commit to whichever region accepts it and
keeps every acknowledged commit (region, commit, parent, path, bytes, time).
:class:`WritableRegionChecker` polls both regions' repository ``read_only`` flags and branch
heads; :func:`ack_violations` checks the writer's acknowledgements form one chain. Together
they show that at most one region was writable at every moment and that no commit was
acknowledged on top of a head that another region had already built on.
"""

from __future__ import annotations

import itertools
import os
import secrets
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import yaml
from lakefs_sdk.models.user_creation import UserCreation

from mirror.block import BlockResolver
from mirror.simulate import ReplicationSimulator
from tests.e2e.regions import (
    MIRRORS,
    Region,
    Replicant,
    TwoRegions,
    _admin_client,
    _make_replicator,
    wait_for,
)
from tests.integration.harness import (
    free_port,
    running_server,
    stop_process,
    unique,
    wait_healthy,
)

__all__ = [
    "Ack",
    "ContinuousWriter",
    "Failover",
    "Sample",
    "WritableRegionChecker",
    "ack_violations",
    "make_named_user",
    "make_user",
    "new_source_region",
    "objects_at",
]


class Failover:
    """Two regions that can each be the source: replicants and replication either way.

    Args:
        world: the two regions' servers (region ``b`` already has a replicator user).
    """

    def __init__(self, world: TwoRegions) -> None:
        self.world = world
        self.regions = {"a": world.a, "b": world.b}
        self.replicators = {"a": _make_replicator(world.a), "b": world.replicator_key}
        self.simulators: list[ReplicationSimulator] = []

    def other(self, region: str) -> str:
        """Return the name of the region that is not ``region``."""
        return "b" if region == "a" else "a"

    def replicant_config(
        self,
        region: str,
        replica_id: str,
        port: int,
        poll: float,
        lease: float,
        peer_key: tuple[str, str] | None = None,
    ) -> dict[str, Any]:
        """Return the configuration of a replicant of ``region``: its own region's server is
        reached with the replicator's key, the other region's with ``peer_key`` (by default
        its administrator's)."""
        local = self.regions[region]
        peer_name = self.other(region)
        peer = self.regions[peer_name]
        key, secret = self.replicators[region]
        peer_id, peer_secret = peer_key or (
            peer.server.access_key_id,
            peer.server.secret_access_key,
        )
        return {
            "data_dir": str(local.server.data_dir),
            "replicant": {
                "region": region,
                "host": "127.0.0.1",
                "port": port,
                "poll_interval": poll,
                "lease_seconds": lease,
                "replica_id": replica_id,
            },
            "regions": {
                region: {
                    "server_url": local.server.url,
                    "access_key_id": key,
                    "secret_access_key": secret,
                },
                peer_name: {
                    "server_url": peer.server.url,
                    "access_key_id": peer_id,
                    "secret_access_key": peer_secret,
                },
            },
            "logging": {"format": "json", "level": "info"},
        }

    @contextmanager
    def replicant(
        self,
        region: str,
        replica_id: str | None = None,
        poll: float = 0.1,
        lease: float = 2.0,
        peer_key: tuple[str, str] | None = None,
    ) -> Iterator[Replicant]:
        """Run a replicant of ``region`` (a process sharing its server's KV) until the block
        ends; its HTTP client signs in as the region's administrator. ``peer_key`` is the key
        it reaches the other region with (by default that region's administrator's)."""
        replica_id = replica_id or f"{region}-{secrets.token_hex(3)}"
        port = free_port()
        config = self.replicant_config(region, replica_id, port, poll, lease, peer_key)
        path = self.world.tmp / f"replicant-{replica_id}.yaml"
        path.write_text(yaml.safe_dump(config))
        log_path = self.world.tmp / f"replicant-{replica_id}.log"
        command = [sys.executable, "-m", "mirror.cli.main", "replicant", "--config", str(path)]
        url = f"http://127.0.0.1:{port}"
        local = self.regions[region]
        with open(log_path, "ab") as log:
            env = {**os.environ, **local.env}
            process = subprocess.Popen(command, env=env, stdout=log, stderr=subprocess.STDOUT)
        admin = (local.server.access_key_id, local.server.secret_access_key)
        http = httpx.Client(base_url=url, auth=admin, timeout=120.0)
        try:
            wait_healthy(process, url, log_path)
            yield Replicant(url, replica_id, process, log_path, http)
        finally:
            http.close()
            stop_process(process)

    def replicate(
        self,
        source: str,
        source_ns: str,
        destination: str,
        destination_ns: str,
        start: bool = True,
        **faults: Any,
    ) -> ReplicationSimulator:
        """Replicate ``source_ns`` of region ``source`` into ``destination_ns`` of region
        ``destination`` (with the simulator's faults: ``delay``, ``seed``, ...), in the
        background unless ``start`` is false."""
        faults.setdefault("poll_interval", 0.02)
        sim = ReplicationSimulator(
            self.regions[source].store(source_ns),
            self.regions[destination].store(destination_ns),
            **faults,
        )
        if start:
            sim.start()
            self.simulators.append(sim)
        return sim

    def stop_replication(self, sim: ReplicationSimulator) -> None:
        """Stop one replication direction (like disabling a bucket's replication rule)."""
        sim.stop()
        if sim in self.simulators:
            self.simulators.remove(sim)

    def close(self) -> None:
        """Stop every replication this object started."""
        for sim in self.simulators:
            sim.stop()
        self.simulators.clear()

    # calls of the configuration API

    def mirror(
        self, replicant: Replicant, source_repo: str, name: str, **extra: Any
    ) -> httpx.Response:
        """Configure (or with ``existing=True`` adopt) ``name`` in the replicant's region as a
        mirror of ``source_repo``; the namespace is the region's default for ``name``."""
        region = self._region_of(replicant)
        body = {
            "name": name,
            "region": region,
            "storage_namespace": self.regions[region].namespace(name),
            **extra,
        }
        return replicant.http.post(MIRRORS.format(repo=source_repo), json=body)

    def promote(
        self,
        replicant: Replicant,
        source_repo: str,
        name: str,
        force: bool = False,
        timeout: float = 60,
        auth: tuple[str, str] | None = None,
    ) -> httpx.Response:
        """Ask the replicant to promote its mirror ``name`` of ``source_repo``."""
        path = MIRRORS.format(repo=source_repo) + f"/{name}/promote"
        body = {"force": force, "timeout": timeout}
        if auth is None:
            return replicant.http.post(path, json=body)
        with httpx.Client(base_url=replicant.url, auth=auth, timeout=120.0) as other:
            return other.post(path, json=body)

    def status(self, replicant: Replicant, source_repo: str, name: str) -> dict[str, Any]:
        """Return the mirror's configuration and status (raises on an error status)."""
        response = replicant.http.get(MIRRORS.format(repo=source_repo) + f"/{name}")
        response.raise_for_status()
        data: dict[str, Any] = response.json()
        return data

    def synced(self, replicant: Replicant, source_repo: str, name: str, branch: str) -> bool:
        """Return whether the mirror shows ``branch`` synced at the source's head."""
        response = replicant.http.get(MIRRORS.format(repo=source_repo) + f"/{name}")
        if response.status_code != 200:
            return False
        for status in response.json()["status"]:
            if status["branch"] == branch:
                return bool(
                    status["state"] == "synced"
                    and status["mirror_head"]
                    and status["mirror_head"] == status["source_head"]
                )
        return False

    def _region_of(self, replicant: Replicant) -> str:
        for name in self.regions:
            if replicant.replica_id.startswith(f"{name}-"):
                return name
        raise AssertionError(f"replica {replicant.replica_id!r} names no region")


@contextmanager
def new_source_region(failover: Failover, label: str) -> Iterator[Region]:
    """Run a new server (its own data directory) as region ``a`` until the block ends.

    It stands in for the world's region ``a`` meanwhile, so a test may kill it and leave the
    module's region ``a`` to the other tests.
    """
    tmp = failover.world.tmp
    with running_server(
        tmp / label,
        tmp / f"{label}.log",
        access_key_id="AKIAREGIONA0000000002",
        secret_access_key=secrets.token_hex(20),
    ) as server:
        http = httpx.Client(
            base_url=f"{server.url}/api/v1",
            auth=(server.access_key_id, server.secret_access_key),
            timeout=30.0,
        )
        previous = failover.regions["a"]
        failover.regions["a"] = Region(
            "a", server, _admin_client(server), http, BlockResolver(server.data_dir)
        )
        try:
            yield failover.regions["a"]
        finally:
            failover.regions["a"] = previous
            http.close()


@contextmanager
def restarted(region: Region, log_path: Path) -> Iterator[Region]:
    """Start ``region``'s server again on its data directory (after it was killed) until the
    block ends; return the region as it is now (a new port, new clients)."""
    server = region.server
    with running_server(
        server.data_dir,
        log_path,
        access_key_id=server.access_key_id,
        secret_access_key=server.secret_access_key,
        env=region.env,
        namespace_root=server.namespace_root,
    ) as again:
        http = httpx.Client(
            base_url=f"{again.url}/api/v1",
            auth=(again.access_key_id, again.secret_access_key),
            timeout=30.0,
        )
        try:
            yield Region(
                region.name, again, _admin_client(again), http, region.resolver, dict(region.env)
            )
        finally:
            http.close()


def make_user(region: Region, *policies: str) -> tuple[str, str]:
    """Create a user of ``region`` with ``policies`` attached; return its key and secret."""
    _, key = make_named_user(region, *policies)
    return key


def make_named_user(region: Region, *policies: str) -> tuple[str, tuple[str, str]]:
    """Create a user of ``region`` with ``policies`` attached; return its ID, key and secret."""
    auth = region.client.sdk_client.auth_api
    user_id = unique("user")
    auth.create_user(UserCreation(id=user_id))
    for policy in policies:
        auth.attach_policy_to_user(user_id, policy)
    creds = auth.create_credentials(user_id)
    return user_id, (creds.access_key_id, creds.secret_access_key)


def repository(region: Region, repo: str) -> dict[str, Any] | None:
    """Return the repository's JSON in ``region`` (``None`` when it does not exist)."""
    response = region.http.get(f"/repositories/{repo}")
    if response.status_code == 404:
        return None
    response.raise_for_status()
    data: dict[str, Any] = response.json()
    return data


def objects_at(region: Region, repo: str, ref: str) -> dict[str, bytes]:
    """Return every object of ``ref`` in ``region``: path → bytes, read through its server."""
    out: dict[str, bytes] = {}
    after = ""
    base = f"/repositories/{repo}/refs/{ref}/objects"
    while True:
        page = region.http.get(base + "/ls", params={"after": after, "amount": 1000})
        page.raise_for_status()
        body = page.json()
        for item in body["results"]:
            got = region.http.get(base, params={"path": item["path"]})
            got.raise_for_status()
            out[item["path"]] = got.content
        if not body["pagination"]["has_more"]:
            return out
        after = body["pagination"]["next_offset"]


@dataclass(frozen=True)
class Ack:
    """A commit a region acknowledged to the writer (its commit call answered 201)."""

    region: str
    repo: str
    branch: str
    commit: str
    parent: str | None
    path: str
    data: bytes
    at: float
    """``time.monotonic()`` when the acknowledgement arrived."""


@dataclass(frozen=True)
class Refusal:
    """A write a region did not accept: the status (0: unreachable) and when."""

    region: str
    step: str
    status: int
    at: float


class ContinuousWriter:
    """Commit one new object per commit, every ``interval`` seconds, to whichever region takes it.

    The writer keeps to the region that accepted its last commit. When a write there is refused
    (read-only: 403, unreachable, any other error) it tries the next region on its next step, so
    it follows the writable role wherever it goes. Each object's bytes name its sequence number
    and region, so that a copy can be told from its original.

    Args:
        regions: ``(region name, Region, repository)`` in order of preference.
        branch: the branch committed to.
        interval: seconds between steps.
        prefix: the folder of the objects written.
        event_hooks: httpx's event hooks of the writer's clients (to time its requests, say).
    """

    def __init__(
        self,
        regions: Sequence[tuple[str, Region, str]],
        branch: str = "main",
        interval: float = 0.1,
        prefix: str = "writer",
        event_hooks: Mapping[str, list[Callable[..., Any]]] | None = None,
    ) -> None:
        self.targets = list(regions)
        self.branch = branch
        self.interval = interval
        self.prefix = prefix
        self.acks: list[Ack] = []
        self.refusals: list[Refusal] = []
        self._current = 0
        self._seq = 0
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="writer", daemon=True)
        self._clients = {
            name: httpx.Client(
                base_url=region.http.base_url,
                auth=region.http.auth,
                timeout=10.0,
                event_hooks=event_hooks,
            )
            for name, region, _ in self.targets
        }

    def start(self) -> ContinuousWriter:
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop after the step in progress and close the clients."""
        self._stop.set()
        self._thread.join(timeout=60)
        for client in self._clients.values():
            client.close()

    def acked(self, region: str | None = None) -> list[Ack]:
        """Return the acknowledgements so far (of ``region`` only, when given)."""
        with self._lock:
            return [a for a in self.acks if region is None or a.region == region]

    def first_ack_after(self, region: str, moment: float) -> Ack | None:
        """Return the first commit ``region`` acknowledged after ``moment`` (monotonic)."""
        return next((a for a in self.acked(region) if a.at > moment), None)

    def _run(self) -> None:
        while not self._stop.is_set():
            self.step()
            self._stop.wait(self.interval)

    def step(self) -> Ack | None:
        """Write and commit one object to the current region; move on when it is refused."""
        name, _, repo = self.targets[self._current]
        client = self._clients[name]
        self._seq += 1
        path = f"{self.prefix}/{self._seq:06}.txt"
        data = f"{self._seq} {name} {secrets.token_hex(8)}\n".encode() * 4
        base = f"/repositories/{repo}/branches/{self.branch}"
        try:
            upload = client.post(
                base + "/objects",
                params={"path": path},
                content=data,
                headers={"Content-Type": "application/octet-stream"},
            )
            if upload.status_code != 201:
                self._refused(name, "upload", upload.status_code)
                return None
            commit = client.post(base + "/commits", json={"message": f"write {self._seq}"})
            if commit.status_code != 201:
                self._refused(name, "commit", commit.status_code)
                return None
        except httpx.TransportError:
            self._refused(name, "connect", 0)
            return None
        body = commit.json()
        parents = body.get("parents") or []
        ack = Ack(
            name,
            repo,
            self.branch,
            str(body["id"]),
            str(parents[0]) if parents else None,
            path,
            data,
            time.monotonic(),
        )
        with self._lock:
            self.acks.append(ack)
        return ack

    def _refused(self, region: str, step: str, status: int) -> None:
        with self._lock:
            self.refusals.append(Refusal(region, step, status, time.monotonic()))
        self._current = (self._current + 1) % len(self.targets)


def ack_violations(acks: Sequence[Ack]) -> list[str]:
    """Return what is wrong with a writer's acknowledgements of one branch, in order.

    Acknowledged commits must form one chain: each one's parent is the commit acknowledged just
    before it, whichever region acknowledged either. Two commits on the same parent mean two
    regions each took the branch's head as theirs (a fork); a parent other than the previous
    acknowledgement means an acknowledged commit was left out of the history that went on.
    """
    problems: list[str] = []
    by_parent: dict[str | None, Ack] = {}
    for previous, ack in itertools.pairwise(acks):
        if ack.parent != previous.commit:
            problems.append(
                f"{ack.region} acknowledged {ack.commit[:12]} on {ack.parent and ack.parent[:12]}, "
                f"not on {previous.commit[:12]} acknowledged before by {previous.region}"
            )
    for ack in acks:
        other = by_parent.get(ack.parent)
        if other is not None:
            problems.append(
                f"{other.region} and {ack.region} both acknowledged a commit on "
                f"{ack.parent and ack.parent[:12]}: {other.commit[:12]}, {ack.commit[:12]}"
            )
        by_parent[ack.parent] = ack
    return problems


@dataclass(frozen=True)
class Sample:
    """One reading of a region: whether its repository takes writes, and the branch head."""

    region: str
    at: float
    state: str
    """``writable``, ``read-only``, ``absent`` (404) or ``unreachable``."""
    head: str | None
    mirror_of: str | None


@dataclass
class WritableRegionChecker:
    """Poll the regions' repositories in turn and find moments when more than one took writes.

    Readings alternate between the regions. A region read writable twice in a row, with another
    region read writable in between, was writable at the same moment as that one (the two
    readings bracket the other's). :meth:`violations` lists every such moment, and every reading
    where the same branch was writable in both with different heads.

    Args:
        targets: ``(region name, Region, repository)`` of each region.
        branch: the branch whose heads are read.
    """

    targets: Sequence[tuple[str, Region, str]]
    branch: str = "main"
    samples: list[Sample] = field(default_factory=list)
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def start(self) -> WritableRegionChecker:
        clients = {
            name: httpx.Client(base_url=region.http.base_url, auth=region.http.auth, timeout=5.0)
            for name, region, _ in self.targets
        }
        self._thread = threading.Thread(
            target=self._run, args=(clients,), name="writable-checker", daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=30)

    def _run(self, clients: dict[str, httpx.Client]) -> None:
        try:
            while not self._stop.is_set():
                for name, _, repo in self.targets:
                    sample = self.read(clients[name], name, repo)
                    with self._lock:
                        self.samples.append(sample)
                self._stop.wait(0.01)
        finally:
            for client in clients.values():
                client.close()

    def read(self, client: httpx.Client, name: str, repo: str) -> Sample:
        """Read one region: the repository's flags, then the branch head."""
        try:
            found = client.get(f"/repositories/{repo}")
            if found.status_code == 404:
                return Sample(name, time.monotonic(), "absent", None, None)
            found.raise_for_status()
            record = found.json()
            head = client.get(f"/repositories/{repo}/branches/{self.branch}")
            commit = str(head.json()["commit_id"]) if head.status_code == 200 else None
        except (httpx.TransportError, httpx.HTTPStatusError):
            return Sample(name, time.monotonic(), "unreachable", None, None)
        state = "read-only" if record.get("read_only") else "writable"
        return Sample(name, time.monotonic(), state, commit, record.get("mirror_of"))

    def readings(self, region: str) -> list[Sample]:
        """Return the samples of one region."""
        with self._lock:
            return [s for s in self.samples if s.region == region]

    def writable_regions(self) -> set[str]:
        """Return the regions that were read writable at least once."""
        with self._lock:
            return {s.region for s in self.samples if s.state == "writable"}

    def violations(self) -> list[str]:
        """Return every moment two regions were writable together, oldest first."""
        with self._lock:
            samples = list(self.samples)
        problems: list[str] = []
        last: dict[str, Sample] = {}
        pending: list[tuple[Sample, Sample]] = []
        """(earlier writable reading of X, writable reading of Y after it) awaiting X's next."""
        for sample in samples:
            still: list[tuple[Sample, Sample]] = []
            for before, other in pending:
                if sample.region != before.region:
                    still.append((before, other))
                elif sample.state == "writable":
                    problems.append(
                        f"regions {before.region} and {other.region} both writable at "
                        f"{other.at:.3f} ({before.region} read writable at {before.at:.3f} and "
                        f"{sample.at:.3f})"
                    )
                    if before.head and other.head and before.head != other.head:
                        problems.append(
                            f"branch {self.branch} writable in {before.region} at "
                            f"{before.head[:12]} and in {other.region} at {other.head[:12]}"
                        )
            pending = still
            if sample.state == "writable":
                for region, earlier in last.items():
                    if region != sample.region and earlier.state == "writable":
                        pending.append((earlier, sample))
            last[sample.region] = sample
        return problems


def wait_writable(region: Region, repo: str, timeout: float = 30) -> dict[str, Any]:
    """Wait until ``repo`` takes writes in ``region``; return its JSON."""

    def writable() -> dict[str, Any] | None:
        found = repository(region, repo)
        return found if found is not None and not found.get("read_only") else None

    return wait_for(writable, timeout, f"{repo} writable in region {region.name}")
