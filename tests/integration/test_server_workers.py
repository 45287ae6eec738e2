"""``server.workers`` = 2, with real processes: one port, two worker processes, one KV.

Requests land on both workers (each names itself in ``X-LakeMirror-Worker``, its process ID,
and both are children of the server process), ``/metrics`` adds up both whichever one answers
the scrape, concurrent commits to one branch through both lose nothing — on the embedded SQLite
default and on DynamoDB (dynalite) — and SIGTERM to the server stops every worker, exit code 0.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from mirror.api.app import WORKER_HEADER
from tests.e2e.regions import wait_for
from tests.integration.dynalite import Dynalite, running_dynalite
from tests.integration.harness import Server, running_server, unique

KEY = ("AKIAWORKERS000000001", "workers-secret-key-00000000000000000000")
WORKERS = 2
THREADS = 6
COMMITS_PER_THREAD = 5


@pytest.fixture(scope="module")
def dynalite_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Dynalite]:
    with running_dynalite(tmp_path_factory.mktemp("dynalite")) as server:
        yield server


@contextmanager
def _two_workers(tmp_path: Path, env: dict[str, str]) -> Iterator[Server]:
    environment = {**env, "LAKEMIRROR_SERVER__WORKERS": str(WORKERS)}
    with running_server(
        tmp_path / "data",
        tmp_path / "server.log",
        access_key_id=KEY[0],
        secret_access_key=KEY[1],
        env=environment,
    ) as server:
        yield server


@pytest.fixture(params=["sqlite", "dynamodb"])
def backend_env(request: pytest.FixtureRequest) -> dict[str, str]:
    if request.param == "sqlite":
        return {}
    dynalite: Dynalite = request.getfixturevalue("dynalite_server")
    return dynalite.env(unique("workers"))


def _parent(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("PPid:"):
            return int(line.split()[1])
    raise AssertionError(f"no PPid for {pid}")


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0]
    except OSError:
        return False
    return state != "Z"


def _workers_seen(url: str, seen: set[str]) -> set[str]:
    """Send requests on fresh connections from several threads; return the workers seen."""
    lock = threading.Lock()

    def hit() -> None:
        for _ in range(5):
            with httpx.Client(timeout=10) as http:  # a new connection each time
                worker = http.get(f"{url}/healthz").headers[WORKER_HEADER]
            with lock:
                seen.add(worker)

    threads = [threading.Thread(target=hit) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return seen


def _healthz_count(text: str) -> float:
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            if s.name == "lakemirror_http_requests_total" and s.labels == {
                "method": "GET",
                "route": "/healthz",
                "status": "200",
            }:
                return s.value
    return 0.0


def test_requests_land_on_both_workers_and_metrics_add_up(tmp_path: Path) -> None:
    with _two_workers(tmp_path, {}) as server:
        seen: set[str] = set()
        found = wait_for(
            lambda: len(_workers_seen(server.url, seen)) == WORKERS,
            60,
            "requests answered by both workers",
        )
        assert found
        pids = {int(p) for p in seen}
        assert server.process.pid not in pids
        assert all(_parent(pid) == server.process.pid for pid in pids)
        # every /healthz so far (the start-up polls included) was counted by one worker or the
        # other; whichever worker answers the scrape, it shows the sum over both
        with httpx.Client(timeout=10) as http:
            scrapes = [http.get(f"{server.url}/metrics") for _ in range(6)]
        assert {r.headers[WORKER_HEADER] for r in scrapes} <= {str(p) for p in pids}
        counts = {_healthz_count(scrape.text) for scrape in scrapes}
        assert len(counts) == 1, counts

        def logged() -> int:
            return sum(
                1
                for line in server.log().splitlines()
                if '"path": "/healthz"' in line and '"status": 200' in line
            )

        # a worker writes a request's access line after its answer: the log may trail by a line
        counted = int(counts.pop())
        wait_for(lambda: logged() == counted, 10, f"{counted} /healthz access lines")
        # SIGTERM to the server stops every worker, and the server exits 0
        server.process.send_signal(signal.SIGTERM)
        assert server.process.wait(timeout=60) == 0, server.log()
        wait_for(lambda: not any(_alive(p) for p in pids), 30, "every worker to exit")
        assert "Traceback" not in server.log()


def test_concurrent_commits_to_one_branch_through_both_workers_lose_nothing(
    tmp_path: Path, backend_env: dict[str, str]
) -> None:
    repo = unique("workers")
    with _two_workers(tmp_path, backend_env) as server:
        # both workers serving before the writers start (one may still be starting up)
        seen: set[str] = set()
        wait_for(
            lambda: len(_workers_seen(server.url, seen)) == WORKERS, 60, "both workers serving"
        )
        api = f"{server.url}/api/v1"
        body = {"name": repo, "storage_namespace": f"local://{repo}", "default_branch": "main"}
        assert httpx.post(f"{api}/repositories", json=body, auth=KEY).status_code == 201
        acknowledged: list[str] = []
        uploaded: list[str] = []
        workers: set[str] = set()
        errors: list[str] = []
        lock = threading.Lock()
        start = threading.Barrier(THREADS)

        def writer(n: int) -> None:
            start.wait()
            for k in range(COMMITS_PER_THREAD):
                path = f"t{n}/{k}.txt"
                # a fresh connection per request, so both workers get them
                with httpx.Client(base_url=api, auth=KEY, timeout=60) as http:
                    put = http.post(
                        f"/repositories/{repo}/branches/main/objects",
                        params={"path": path},
                        content=path.encode(),
                    )
                with httpx.Client(base_url=api, auth=KEY, timeout=60) as http:
                    commit = http.post(
                        f"/repositories/{repo}/branches/main/commits",
                        json={"message": f"commit {path}"},
                    )
                with lock:
                    workers.add(put.headers[WORKER_HEADER])
                    workers.add(commit.headers[WORKER_HEADER])
                    if put.status_code != 201:
                        errors.append(f"upload {path}: {put.status_code} {put.text}")
                        continue
                    uploaded.append(path)
                    if commit.status_code == 201:
                        acknowledged.append(commit.json()["id"])
                    elif not (commit.status_code == 400 and "no changes" in commit.text):
                        # 400 "no changes": another commit took this upload along
                        errors.append(f"commit {path}: {commit.status_code} {commit.text}")

        threads = [threading.Thread(target=writer, args=(n,)) for n in range(THREADS)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert errors == []
        assert len(workers) == WORKERS
        assert len(uploaded) == THREADS * COMMITS_PER_THREAD
        assert acknowledged
        with httpx.Client(base_url=api, auth=KEY, timeout=60) as http:
            log = http.get(f"/repositories/{repo}/refs/main/commits", params={"amount": 1000})
            assert log.status_code == 200
            history = [c["id"] for c in log.json()["results"]]
            # every acknowledged commit is in main's history, once
            assert sorted(set(acknowledged)) == sorted(set(acknowledged) & set(history))
            assert len(acknowledged) == len(set(acknowledged))
            listed = http.get(
                f"/repositories/{repo}/refs/main/objects/ls", params={"amount": 1000}
            ).json()["results"]
            assert sorted(o["path"] for o in listed) == sorted(uploaded)
            # nothing left staged: every upload is in a commit
            diff = http.get(f"/repositories/{repo}/branches/main/diff").json()["results"]
            assert diff == []
        server.process.send_signal(signal.SIGTERM)
        assert server.process.wait(timeout=60) == 0, server.log()


def test_one_worker_is_the_default_and_names_no_worker(tmp_path: Path) -> None:
    with running_server(tmp_path / "data", tmp_path / "server.log") as server:
        response = httpx.get(f"{server.url}/healthz")
        assert response.status_code == 200 and WORKER_HEADER not in response.headers


def test_a_second_server_on_the_same_port_is_refused(tmp_path: Path) -> None:
    # each worker listens with SO_REUSEPORT: a second server must not quietly share the port
    with _two_workers(tmp_path, {}) as server:
        port = server.url.rsplit(":", 1)[1]
        env = {k: v for k, v in os.environ.items() if not k.startswith("LAKEMIRROR_")}
        env["LAKEMIRROR_SERVER__WORKERS"] = str(WORKERS)
        command = [sys.executable, "-m", "mirror.cli.main", "server", "--host", "127.0.0.1"]
        second = subprocess.run(
            [*command, "--port", port, "--data-dir", str(tmp_path / "second")],
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert second.returncode == 1, second.stderr
        assert "Address already in use" in second.stderr
        assert "the server did not start" in second.stderr
        assert httpx.get(f"{server.url}/healthz").status_code == 200
