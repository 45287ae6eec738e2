"""Graceful shutdown on SIGTERM, with real processes: nothing in flight is lost, leases go at once.

- The server stops accepting connections, lets a slow upload that was in flight finish (2xx,
  the object is there after a restart), and exits 0.
- The replicant releases its leases before it exits 0, so a second replica takes the mirror over
  at once, though the lease (60 s) would still run for most of a minute.
- The bound holds: a replicant worker that ignores cancellation does not hold up the stop, and a
  process whose shutdown hangs is gone ``shutdown_timeout`` + ``FORCE_EXIT_GRACE`` seconds after
  the signal.
"""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from mirror.block import BlockResolver
from mirror.config import RegionSettings
from mirror.kv.memory import MemoryKV
from mirror.kv.sqlite import SqliteKV
from mirror.replicant.readers import NamespaceReaders
from mirror.replicant.service import ReplicantService, ServiceSettings
from mirror.replicant.state import MirrorConfig, ReplicantStore
from tests.e2e.regions import two_regions, wait_for
from tests.integration.harness import free_port, running_server, unique

ROOT = Path(__file__).resolve().parents[2]
KEY = ("AKIASHUTDOWN00000001", "shutdown-secret-key-0000000000000000000")
CHUNK = b"x" * (256 * 1024)
CHUNKS = 16
LEASE_SECONDS = 60.0


def _in_flight(url: str, method: str) -> float:
    text = httpx.get(f"{url}/metrics", timeout=5).text
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if (
                sample.name == "lakemirror_http_requests_in_flight"
                and sample.labels.get("method") == method
            ):
                return sample.value
    return 0.0


def _refuses_connections(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1):
            return False
    except OSError:
        return True


def test_sigterm_lets_an_upload_in_flight_finish_then_exits_0(tmp_path: Path) -> None:
    data = tmp_path / "data"
    repo = unique("drain")
    with running_server(
        data, tmp_path / "server.log", access_key_id=KEY[0], secret_access_key=KEY[1]
    ) as server:
        api = f"{server.url}/api/v1"
        body = {"name": repo, "storage_namespace": f"local://{repo}", "default_branch": "main"}
        assert httpx.post(f"{api}/repositories", json=body, auth=KEY).status_code == 201
        port = int(server.url.rsplit(":", 1)[1])
        events: list[str] = []

        def slow_body() -> Iterator[bytes]:
            yield CHUNK
            # the server has the request in hand, then is told to stop ...
            wait_for(lambda: _in_flight(server.url, "POST") >= 1, 20, "the upload in flight")
            server.process.send_signal(signal.SIGTERM)
            events.append("sigterm")
            # ... and stops accepting connections while this upload is still being sent
            wait_for(lambda: _refuses_connections(port), 20, "the listener to close")
            events.append("listener closed")
            for _ in range(CHUNKS - 1):
                yield CHUNK

        url = f"{api}/repositories/{repo}/branches/main/objects"
        response = httpx.post(
            url, params={"path": "big.bin"}, content=slow_body(), auth=KEY, timeout=60
        )
        assert events == ["sigterm", "listener closed"]
        assert response.status_code == 201, response.text
        assert response.json()["size_bytes"] == len(CHUNK) * CHUNKS
        assert server.process.wait(timeout=60) == 0, server.log()
        assert "Traceback" not in server.log()
    # nothing lost: a new process on the same data directory has the object
    with running_server(
        data, tmp_path / "again.log", access_key_id=KEY[0], secret_access_key=KEY[1]
    ) as again:
        stat = httpx.get(
            f"{again.url}/api/v1/repositories/{repo}/refs/main/objects/stat",
            params={"path": "big.bin"},
            auth=KEY,
        )
        assert stat.status_code == 200 and stat.json()["size_bytes"] == len(CHUNK) * CHUNKS


def test_sigterm_releases_the_replicants_lease_and_the_other_replica_takes_over(
    tmp_path: Path,
) -> None:
    with two_regions(tmp_path) as world:
        repo, namespace = world.source_repo()
        mirror = unique("mirror")
        mirror_ns = world.b.namespace(mirror)
        world.simulator(namespace, mirror_ns)
        kv = SqliteKV(world.b.server.data_dir / "kv.sqlite")
        store = ReplicantStore(kv)
        try:
            with world.replicant("first", lease=LEASE_SECONDS) as first:
                created = world.create_mirror(first, repo.id, mirror, mirror_ns)
                assert created.status_code == 201, created.text
                wait_for(
                    lambda: mirror in first.http.get("/healthz").json()["working"],
                    30,
                    "the first replica to work the mirror",
                )
                with world.replicant("second", lease=LEASE_SECONDS) as second:
                    # the lease is the first replica's for the next minute
                    lease = store.get_lease(mirror)
                    assert lease is not None and lease.owner == "first"
                    assert lease.expires - time.time() > LEASE_SECONDS / 2
                    assert second.http.get("/healthz").json()["working"] == []
                    first.process.send_signal(signal.SIGTERM)
                    assert first.process.wait(timeout=60) == 0, first.log()
                    # right after the exit the first replica's lease is gone (released, not
                    # expired: it had most of a minute to run), or already the second's
                    after = store.get_lease(mirror)
                    assert after is None or after.owner == "second", first.log()
                    assert '"leases released"' in first.log()
                    wait_for(
                        lambda: mirror in second.http.get("/healthz").json()["working"],
                        LEASE_SECONDS / 4,
                        "the second replica to take the mirror over",
                    )
                    taken = store.get_lease(mirror)
                    assert taken is not None and taken.owner == "second"
                    assert second.metric("lakemirror_lease_held", mirror=mirror) == 1.0
                    # and it mirrors: a new source commit reaches the mirror's head
                    branch = repo.branch("main")
                    branch.object("after-takeover.txt").upload(data=b"after")
                    commit = branch.commit(message="after the takeover").get_commit().id
                    wait_for(
                        lambda: world.b.head(mirror, "main") == commit,
                        60,
                        "the mirror head to reach the new commit",
                    )
        finally:
            kv.close()


def _stuck_service(kv: MemoryKV, tmp_path: Path, timeout: float) -> ReplicantService:
    settings = ServiceSettings(
        region="b",
        regions={"b": RegionSettings(server_url="http://127.0.0.1:1")},
        lease_seconds=LEASE_SECONDS,
        shutdown_timeout=timeout,
        replica_id="stuck",
    )
    return ReplicantService(settings, kv, NamespaceReaders(BlockResolver(tmp_path)))


def test_a_worker_ignoring_cancellation_does_not_hold_the_stop(tmp_path: Path) -> None:
    async def scenario() -> None:
        kv = MemoryKV()
        service = _stuck_service(kv, tmp_path, timeout=0.5)
        config = MirrorConfig(
            name="stuck",
            source_region="a",
            source_repo="origin",
            region="b",
            storage_namespace="local://stuck",
            branches=("*",),
            tags=True,
            created=0,
        )
        service.store.add_mirror(config)
        assert service.store.try_lease("stuck", "stuck", LEASE_SECONDS, time.time())
        release = asyncio.Event()

        async def stubborn() -> None:
            while not release.is_set():
                try:
                    await release.wait()
                except asyncio.CancelledError:
                    continue  # a worker that swallows its cancellation

        task = asyncio.create_task(stubborn(), name="mirror:stuck")
        service._workers["stuck"] = (None, task)  # type: ignore[assignment]
        await asyncio.wait_for(service.stop(), timeout=10)
        assert not task.done()
        assert service.store.get_lease("stuck") is None
        release.set()
        await task

    asyncio.run(scenario())


_HANGING = """
import asyncio, sys
from contextlib import asynccontextmanager
from starlette.applications import Starlette
from starlette.responses import PlainTextResponse
from starlette.routing import Route
from mirror.cli.serving import serve

@asynccontextmanager
async def lifespan(app):
    yield
    while True:  # a shutdown that never ends, and ignores cancellation
        try:
            await asyncio.sleep(3600)
        except asyncio.CancelledError:
            pass

async def ok(request):
    return PlainTextResponse("ok")

app = Starlette(routes=[Route("/healthz", ok)], lifespan=lifespan)
serve(app, host="127.0.0.1", port=int(sys.argv[1]), log_level="info", shutdown_timeout=1.0)
"""


def test_a_process_whose_shutdown_hangs_is_gone_past_the_bound(tmp_path: Path) -> None:
    port = free_port()
    log = tmp_path / "hanging.log"
    with open(log, "wb") as out:
        process = subprocess.Popen(
            [sys.executable, "-c", _HANGING, str(port)],
            cwd=ROOT,
            env={**os.environ, "PYTHONPATH": str(ROOT)},
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    try:
        wait_for(
            lambda: _answers(f"http://127.0.0.1:{port}/healthz") or process.poll() is not None,
            30,
            "the process to serve",
        )
        assert process.poll() is None, log.read_text()
        process.send_signal(signal.SIGTERM)
        # shutdown_timeout 1 s + FORCE_EXIT_GRACE: well inside this wait, or the bound is broken
        assert process.wait(timeout=30) == 1, log.read_text()
        assert "shutdown took too long; exiting now" in log.read_text()
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()


def _answers(url: str) -> bool:
    try:
        return httpx.get(url, timeout=1).status_code == 200
    except httpx.TransportError:
        return False


@pytest.fixture(autouse=True)
def _no_multiprocess_metrics(monkeypatch: pytest.MonkeyPatch) -> None:
    # the processes started here serve one worker each: their /metrics is their own registry
    monkeypatch.delenv("PROMETHEUS_MULTIPROC_DIR", raising=False)
