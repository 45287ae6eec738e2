"""The soak's processes: two regions on the production path, each process killable and restartable.

Per region a dynalite process (the KV, on LevelDB so that a restart keeps the tables), a moto
server process (S3) and ``lakemirror server`` with two workers; in region ``b`` two replicant
replicas sharing the region's KV; between the regions' buckets ``lakemirror
simulate-replication`` as a process of its own. Everything is started through the end-to-end
harness (``two_regions`` and ``aws_backend`` of :mod:`tests.e2e.regions`, its replicants,
``running_dynalite`` of :mod:`tests.integration.dynalite`); this module adds the handles that
kill a process with SIGKILL and start it again the way it was started.

The moto servers are :mod:`bench.s3_server`'s (as ``bench.first_sync`` runs them): moto's S3
with listing pages cut from a sorted index of the keys, and requests counted by operation. The
replication lists the whole source namespace on every scan, as S3 Replication does not, and
moto's own listing sorts every key for every page (0.35-0.8 s a page of 1,000 on this
machine): its scans of a bucket growing all run long would soon take all of the region's S3
server, and the soak would measure moto.
"""

from __future__ import annotations

import dataclasses
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from contextlib import AbstractContextManager, ExitStack, contextmanager
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any, Protocol, TypeVar

import httpx
import lakefs
import yaml

from bench.procfs import children
from bench.s3_process import S3Process, s3_process
from tests.e2e.regions import Region, Replicant, TwoRegions, aws_backend, two_regions, wait_for
from tests.integration import harness
from tests.integration.dynalite import Dynalite, running_dynalite
from tests.integration.harness import free_port, stop_process, unique
from tests.integration.moto_fixtures import MotoServer, s3_settings

__all__ = [
    "HEALTH_DEADLINE",
    "KVServer",
    "ReplicantReplica",
    "ReplicationProcess",
    "ServerWorkers",
    "SoakWorld",
    "close_sdk",
    "soak_world",
    "wait_answering",
]

WORKERS = 2
REPLICAS = ("r1", "r2")
HEALTH_DEADLINE = 120.0
"""Seconds a restarted process (or a replaced worker) gets to answer again."""
REPLICANT_POLL = 0.2
REPLICANT_LEASE = 3.0
REPLICATION_POLL = 1.0
REPLICATION_DELAY = "0:1"
MOTO_REGIONS = {"a": "us-east-1", "b": "eu-west-1"}


def _signal_kill(process: subprocess.Popen[bytes]) -> None:
    process.send_signal(signal.SIGKILL)
    process.wait(timeout=30)


class KVServer:
    """A region's dynalite process, on a LevelDB directory and a port that survive restarts."""

    def __init__(self, region: str, workdir: Path) -> None:
        self.region = region
        self.label = f"{region}.kv (dynalite)"
        self.kind = "kv"
        self._log_dir = workdir
        self._path = workdir / f"dynalite-{region}-db"
        self._port = free_port()
        self._stack = ExitStack()
        self.dynalite: Dynalite = self._start()

    def _start(self) -> Dynalite:
        aws_region = MOTO_REGIONS[self.region]
        return self._stack.enter_context(
            running_dynalite(self._log_dir, aws_region, path=self._path, port=self._port)
        )

    def pid(self) -> int:
        """Return the process ID of the running dynalite."""
        return self.dynalite.process.pid

    def kill(self) -> int:
        """Kill dynalite with SIGKILL; return the killed process ID."""
        pid = self.pid()
        _signal_kill(self.dynalite.process)
        return pid

    def restart(self) -> None:
        """Start dynalite again on the same port and data (it answers when this returns)."""
        self._stack.close()
        self.dynalite = self._start()

    def close(self) -> None:
        """Stop dynalite."""
        self._stack.close()


class ServerWorkers:
    """The worker processes of a region's ``lakemirror server`` (children of its process)."""

    def __init__(self, region: Region) -> None:
        self.region = region
        self.label = f"{region.name}.server worker"
        self.kind = "worker"
        self.slots: list[int] = []
        """Worker process IDs in a stable order: a replacement takes its predecessor's slot."""
        self.refresh()

    def supervisor_pid(self) -> int:
        """Return the process ID of ``lakemirror server`` (the workers' supervisor)."""
        return self.region.server.process.pid

    def worker_pids(self) -> list[int]:
        """Return the workers' process IDs (the supervisor's children running the app)."""
        found = []
        for pid in children(self.supervisor_pid()):
            try:
                command = Path(f"/proc/{pid}/cmdline").read_bytes()
            except OSError:
                continue
            if b"resource_tracker" not in command:
                found.append(pid)
        return sorted(found)

    def refresh(self) -> list[int]:
        """Update :attr:`slots` from the running workers and return it."""
        alive = self.worker_pids()
        kept = [pid for pid in self.slots if pid in alive]
        new = [pid for pid in alive if pid not in kept]
        slots = []
        for pid in self.slots:
            if pid in kept:
                slots.append(pid)
            elif new:
                slots.append(new.pop(0))
        self.slots = slots + new
        return self.slots

    def kill(self, pid: int) -> int:
        """Kill worker ``pid`` with SIGKILL; return it."""
        os.kill(pid, signal.SIGKILL)
        return pid

    def wait_replaced(self, pid: int) -> None:
        """Wait until the supervisor has replaced ``pid`` and the server answers again."""

        def replaced() -> bool:
            workers = self.worker_pids()
            return pid not in workers and len(workers) == WORKERS

        wait_for(replaced, HEALTH_DEADLINE, f"{self.label} {pid} replaced", interval=0.2)
        wait_answering(self.region.server.url + "/readyz", HEALTH_DEADLINE)
        self.refresh()


class ReplicantReplica:
    """One replicant replica of region ``b``, restarted with the same ID and port."""

    def __init__(self, world: TwoRegions, replica_id: str) -> None:
        self.world = world
        self.replica_id = replica_id
        self.label = f"b.replicant {replica_id}"
        self.kind = "replicant"
        self._port = free_port()
        self._stack = ExitStack()
        self.replicant: Replicant = self._start()

    def _start(self) -> Replicant:
        return self._stack.enter_context(
            self.world.replicant(
                self.replica_id, poll=REPLICANT_POLL, lease=REPLICANT_LEASE, port=self._port
            )
        )

    def pid(self) -> int:
        """Return the replica's process ID."""
        return self.replicant.process.pid

    def kill(self) -> int:
        """Kill the replica with SIGKILL (its leases are left to expire); return its ID."""
        pid = self.pid()
        self.replicant.kill()
        return pid

    def restart(self) -> None:
        """Start the replica again (it answers ``/healthz`` when this returns)."""
        self._stack.close()
        self.replicant = self._start()

    def close(self) -> None:
        """Stop the replica."""
        self._stack.close()


class ReplicationProcess:
    """``lakemirror simulate-replication`` from region ``a``'s bucket to region ``b``'s."""

    def __init__(
        self, workdir: Path, s3: dict[str, MotoServer], source: str, destination: str, seed: int
    ) -> None:
        self.label = "replication"
        self.kind = "replication"
        self._log = workdir / "replication.log"
        self._config = workdir / "replication.yaml"
        regions = {}
        for name, server in s3.items():
            settings = s3_settings(server)
            regions[name] = {
                "endpoint_url": settings.endpoint_url,
                "region": settings.region,
                "access_key_id": settings.access_key_id,
                "secret_access_key": settings.secret_access_key,
            }
        config = {"blockstore": {"s3": {"addressing_style": "path", "regions": regions}}}
        self._config.write_text(yaml.safe_dump(config))
        self._command = [
            *(sys.executable, "-m", "mirror.cli.main", "simulate-replication"),
            *("--config", str(self._config)),
            *("--from", source, "--from-region", "a", "--to", destination, "--to-region", "b"),
            *("--poll", str(REPLICATION_POLL), "--delay", REPLICATION_DELAY),
            *("--seed", str(seed), "--resume"),
        ]
        self._starts = 0
        self.process = self._start()

    def _start(self) -> subprocess.Popen[bytes]:
        self._starts += 1
        env = {k: v for k, v in os.environ.items() if not k.startswith("LAKEMIRROR_")}
        with open(self._log, "ab") as log:
            process = subprocess.Popen(self._command, env=env, stdout=log, stderr=subprocess.STDOUT)
        started = self._starts

        def replicating() -> bool:
            if process.poll() is not None:
                raise RuntimeError(f"replication exited with {process.returncode}: {self.log()}")
            return self.log().count("replicating s3://") >= started

        wait_for(replicating, HEALTH_DEADLINE, "replication to start", interval=0.1)
        return process

    def log(self) -> str:
        """Return the process's output so far (every start's)."""
        return self._log.read_text(errors="replace")

    def pid(self) -> int:
        """Return the process ID."""
        return self.process.pid

    def kill(self) -> int:
        """Kill the process with SIGKILL; return its ID."""
        pid = self.pid()
        _signal_kill(self.process)
        return pid

    def restart(self) -> None:
        """Start replicating again (``--resume``: what already arrived is not copied again)."""
        self.process = self._start()

    def close(self) -> None:
        """Stop replicating."""
        stop_process(self.process)


@dataclass
class SoakWorld:
    """Everything the soak runs, and the names it reports them under."""

    regions: TwoRegions
    moto: dict[str, MotoServer]
    s3: dict[str, S3Process]
    """The same S3 servers, with their request counts."""
    kv: dict[str, KVServer]
    workers: dict[str, ServerWorkers]
    replicas: list[ReplicantReplica]
    replication: ReplicationProcess
    source_repo: str
    mirror_repo: str
    tables: dict[str, str]
    """Region → its DynamoDB table."""

    def processes(self) -> list[tuple[str, str, int]]:
        """Return ``(label, kind, pid)`` of every running process, in a stable order."""
        out: list[tuple[str, str, int]] = []
        for name in ("a", "b"):
            out.append((self.kv[name].label, "store", self.kv[name].pid()))
            out.append((f"{name}.s3 (moto)", "store", self.moto[name].process.pid))
            workers = self.workers[name]
            out.append((f"{name}.server", "server", workers.supervisor_pid()))
            for i, pid in enumerate(workers.refresh(), 1):
                out.append((f"{name}.server worker {i}", "worker", pid))
        for replica in self.replicas:
            out.append((replica.label, "replicant", replica.pid()))
        out.append((self.replication.label, "replication", self.replication.pid()))
        return out

    def replica_roles(self) -> dict[str, str]:
        """Return each replicant replica's role: ``active`` while it holds the mirror's lease,
        ``standby`` otherwise, ``""`` when it does not answer (it is being restarted)."""
        roles = {}
        for replica in self.replicas:
            try:
                held = replica.replicant.metric("lakemirror_lease_held", mirror=self.mirror_repo)
            except (httpx.HTTPError, RuntimeError, ValueError):
                # no answer, or its client closed: the replica is being restarted
                roles[replica.label] = ""
                continue
            roles[replica.label] = "active" if held > 0 else "standby"
        return roles

    def sdk(self, region: str) -> lakefs.Client:
        """Return a new official SDK client of ``region`` signed in as its administrator."""
        server = self.region(region).server
        return lakefs.Client(
            host=server.url, username=server.access_key_id, password=server.secret_access_key
        )

    def http(self, region: str, timeout: float = 60.0) -> httpx.Client:
        """Return a new HTTP client of ``region``'s ``/api/v1`` signed in as its administrator."""
        server = self.region(region).server
        return httpx.Client(
            base_url=f"{server.url}/api/v1",
            auth=(server.access_key_id, server.secret_access_key),
            timeout=timeout,
        )

    def gateway(self, region: str) -> Any:
        """Return a boto3 S3 client of ``region``'s S3 gateway (no retries: errors show)."""
        import boto3
        from botocore.config import Config

        server = self.region(region).server
        return boto3.client(
            "s3",
            endpoint_url=server.url,
            region_name="us-east-1",
            aws_access_key_id=server.access_key_id,
            aws_secret_access_key=server.secret_access_key,
            config=Config(
                s3={"addressing_style": "path"},
                retries={"total_max_attempts": 1},
                connect_timeout=10,
                read_timeout=60,
            ),
        )

    def region(self, name: str) -> Region:
        """Return region ``a`` or ``b``."""
        return self.regions.a if name == "a" else self.regions.b


T = TypeVar("T")


def enter_together(
    stack: ExitStack, managers: Mapping[str, AbstractContextManager[T]]
) -> dict[str, T]:
    """Enter ``managers`` at once, each in a thread of its own, and push their exits on ``stack``.

    Processes started so wait for their start-ups side by side instead of one after another.
    When one fails to enter, the others that entered are still pushed (``stack`` stops them)
    and the first failure is raised.
    """
    with ThreadPoolExecutor(len(managers)) as pool:
        futures = {name: pool.submit(manager.__enter__) for name, manager in managers.items()}
    entered: dict[str, T] = {}
    failure: BaseException | None = None
    for name, future in futures.items():
        try:
            entered[name] = future.result()
        except BaseException as exc:  # pytest.fail's outcome is no Exception
            failure = failure or exc
            continue
        stack.push(managers[name].__exit__)
    if failure is not None:
        raise failure
    return entered


class _Closable(Protocol):
    def close(self) -> None: ...


H = TypeVar("H", bound=_Closable)


@contextmanager
def _handle(make: Callable[[], H]) -> Iterator[H]:
    """Make a handle (which starts its process) and close it when the block ends."""
    handle = make()
    try:
        yield handle
    finally:
        handle.close()


def close_sdk(client: lakefs.Client) -> None:
    """Close the connections of an official SDK client (it has no close of its own)."""
    client.sdk_client._api.rest_client.pool_manager.clear()


def wait_answering(url: str, deadline: float) -> None:
    """Wait until ``url`` answers 200 (without credentials); fail after ``deadline`` seconds."""

    def answers() -> bool:
        try:
            return httpx.get(url, timeout=2.0).status_code == 200
        except httpx.TransportError:
            return False

    wait_for(answers, deadline, f"{url} to answer 200", interval=0.2)


@contextmanager
def soak_world(workdir: Path, seed: int, log: Callable[[str], None]) -> Iterator[SoakWorld]:
    """Start every process, a source repository in ``a`` and its mirror in ``b``; stop them all.

    The source repository gets the branches ``stream`` and ``gw`` beside ``main``; the mirror
    (every branch, tags too) is created through replica ``r1`` and has reached the source's
    ``main`` when the block starts.
    """
    with ExitStack() as stack:
        began = time.monotonic()
        # a soak runs for long on machines busy with other work: a process started (or
        # restarted) gets as long as a fault's recovery to answer, not the tests' 30 s
        stack.callback(setattr, harness, "STARTUP_DEADLINE", harness.STARTUP_DEADLINE)
        harness.STARTUP_DEADLINE = max(harness.STARTUP_DEADLINE, HEALTH_DEADLINE)
        stores: dict[str, Any] = enter_together(
            stack,
            {
                **{
                    f"s3 {n}": s3_process(workdir / f"s3-{n}.log", [], indexed=True)
                    for n in MOTO_REGIONS
                },
                **{f"kv {n}": _handle(partial(KVServer, n, workdir)) for n in MOTO_REGIONS},
            },
        )
        s3: dict[str, S3Process] = {n: stores[f"s3 {n}"] for n in MOTO_REGIONS}
        moto = {n: MotoServer(s3[n].url, aws, s3[n].process) for n, aws in MOTO_REGIONS.items()}
        kv: dict[str, KVServer] = {n: stores[f"kv {n}"] for n in MOTO_REGIONS}
        backends = {}
        tables = {}
        for name in ("a", "b"):
            backend = aws_backend(kv[name].dynalite, moto[name])
            env = {**backend.env, "LAKEMIRROR_SERVER__WORKERS": str(WORKERS)}
            backends[name] = dataclasses.replace(backend, env=env)
            tables[name] = env["LAKEMIRROR_KV__DYNAMODB__TABLE"]
        regions = stack.enter_context(two_regions(workdir, backends["a"], backends["b"]))
        for region in (regions.a, regions.b):
            stack.callback(close_sdk, region.client)
        log(f"stores and servers up in {time.monotonic() - began:.1f} s")
        workers = {name: ServerWorkers(regions.a if name == "a" else regions.b) for name in "ab"}
        source = unique("soak")
        namespace = regions.a.namespace(source)
        repo = lakefs.Repository(source, client=regions.a.client).create(namespace)
        for branch in ("stream", "gw"):
            repo.branch(branch).create("main")
        mirror = f"{source}-mirror"
        mirror_ns = regions.b.namespace(mirror)
        started: dict[str, Any] = enter_together(
            stack,
            {
                **{r: _handle(partial(ReplicantReplica, regions, r)) for r in REPLICAS},
                "replication": _handle(
                    partial(ReplicationProcess, workdir, moto, namespace, mirror_ns, seed)
                ),
            },
        )
        replicas: list[ReplicantReplica] = [started[r] for r in REPLICAS]
        replication: ReplicationProcess = started["replication"]
        created = regions.create_mirror(replicas[0].replicant, source, mirror, mirror_ns)
        if created.status_code != 201:
            answer = f"{created.status_code}: {created.text}"
            raise RuntimeError(f"creating the mirror answered {answer}")
        head = regions.a.head(source, "main")
        wait_for(
            lambda: regions.b.head(mirror, "main") == head,
            HEALTH_DEADLINE,
            "the mirror's first head",
            interval=0.2,
        )
        log(f"mirror {mirror} at the source's head after {time.monotonic() - began:.1f} s")
        yield SoakWorld(
            regions, moto, s3, kv, workers, replicas, replication, source, mirror, tables
        )
