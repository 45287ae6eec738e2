"""Several `lakemirror server` processes on one KV and one object store, correct together.

Replicas run as separate processes: three on DynamoDB (dynalite, faithful to conditional writes
under concurrency) + S3 (a moto server), and two on the embedded default (one SQLite file and one
local directory, what ``server.workers`` gives). Threads of the test drive them concurrently and
check the invariants of docs/architecture.md ("Several server processes"):

- concurrent commits and merges to one branch through different replicas lose nothing: every
  acknowledged commit is in the branch's history, every upload acknowledged before a commit
  request started is in that commit, and a merge either lands or fails with a 409/412;
- a replica never serves a stale branch head, a deleted branch, tag or repository, nor anything
  of a deleted repository re-created under the same name;
- auth changes made through one replica take effect on the others within the documented bound.
"""

from __future__ import annotations

import itertools
import os
import random
import secrets
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest

from mirror.auth.store import AUTH_CHANGE_BOUND_SECONDS
from tests.integration.dynalite import Dynalite, running_dynalite
from tests.integration.harness import (
    ADMIN_KEY_ENV,
    ADMIN_SECRET_ENV,
    Server,
    free_port,
    unique,
    wait_healthy,
)
from tests.integration.moto_fixtures import (  # noqa: F401  (fixtures of the S3 replicas)
    MotoServer,
    create_bucket,
    moto_log_dir,
    moto_region,
    s3_client,
    unique_name,
)

AWS_REPLICAS = 3
EMBEDDED_REPLICAS = 2
MARGIN = 5.0
"""Seconds allowed on top of a documented bound for a request to go round."""


@dataclass
class Replica:
    """One server process and an HTTP client of its ``/api/v1`` signed in as the administrator."""

    name: str
    server: Server
    http: httpx.Client

    def as_user(self, key: str, secret: str) -> httpx.Client:
        return httpx.Client(base_url=f"{self.server.url}/api/v1", auth=(key, secret), timeout=60.0)


@dataclass
class Cluster:
    """Replicas sharing one KV and one object store, and where repositories go."""

    replicas: list[Replica]
    namespace_root: str
    logs: list[Path] = field(default_factory=list)

    def namespace(self, name: str) -> str:
        return f"{self.namespace_root}{name}"

    def check_logs(self) -> None:
        for log in self.logs:
            text = log.read_text(errors="replace")
            assert "Traceback" not in text, f"{log}:\n{text[-4000:]}"


@contextmanager
def running_replicas(
    root: Path, count: int, env: Mapping[str, str], namespace_root: str, *, shared_dir: bool
) -> Iterator[Cluster]:
    """Start ``count`` servers at once (as a Deployment's pods do) on the backends of ``env``.

    With ``shared_dir`` every replica uses the same data directory (one SQLite file and one
    local object root); otherwise each gets its own, and ``env`` names the shared backends.
    """
    key = "AKIAJREPLICA" + secrets.token_hex(4).upper()
    secret = secrets.token_urlsafe(30)
    environment = {k: v for k, v in os.environ.items() if not k.startswith("LAKEMIRROR_")}
    environment.update(env)
    environment[ADMIN_KEY_ENV] = key
    environment[ADMIN_SECRET_ENV] = secret
    started: list[tuple[subprocess.Popen[bytes], str, Path, Path]] = []
    try:
        for i in range(count):
            data_dir = root / ("data" if shared_dir else f"data-{i}")
            log_path = root / f"replica-{i}.log"
            port = free_port()
            command = [
                sys.executable,
                *("-m", "mirror.cli.main", "server", "--host", "127.0.0.1"),
                *("--port", str(port), "--data-dir", str(data_dir)),
            ]
            with open(log_path, "ab") as log:
                process = subprocess.Popen(
                    command, env=environment, stdout=log, stderr=subprocess.STDOUT
                )
            started.append((process, f"http://127.0.0.1:{port}", data_dir, log_path))
        with ExitStack() as stack:
            replicas = []
            for i, (process, url, data_dir, log_path) in enumerate(started):
                wait_healthy(process, url, log_path)
                server = Server(url, data_dir, log_path, key, secret, process, namespace_root)
                http = stack.enter_context(
                    httpx.Client(base_url=f"{url}/api/v1", auth=(key, secret), timeout=60.0)
                )
                replicas.append(Replica(chr(ord("A") + i), server, http))
            yield Cluster(replicas, namespace_root, [s[3] for s in started])
    finally:
        for process, *_ in started:
            process.terminate()
        for process, *_ in started:
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


@pytest.fixture(scope="module")
def dynalite_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Dynalite]:
    with running_dynalite(tmp_path_factory.mktemp("dynalite")) as server:
        yield server


@pytest.fixture(scope="module")
def aws(
    tmp_path_factory: pytest.TempPathFactory,
    dynalite_server: Dynalite,
    moto_region: MotoServer,  # noqa: F811
    s3_client: Any,  # noqa: F811
) -> Iterator[Cluster]:
    """Three replicas on one dynalite table and one bucket of a moto server."""
    bucket = create_bucket(moto_region, s3_client)
    env = {
        **dynalite_server.env(unique_name("replicas")),
        "LAKEMIRROR_BLOCKSTORE__S3__ENDPOINT_URL": moto_region.url,
        "LAKEMIRROR_BLOCKSTORE__S3__REGION": moto_region.region,
        "LAKEMIRROR_BLOCKSTORE__S3__ACCESS_KEY_ID": "AKIAMOTOTESTING00000",
        "LAKEMIRROR_BLOCKSTORE__S3__SECRET_ACCESS_KEY": "moto-testing-secret",
        "LAKEMIRROR_BLOCKSTORE__S3__ADDRESSING_STYLE": "path",
    }
    root = tmp_path_factory.mktemp("aws-replicas")
    with running_replicas(root, AWS_REPLICAS, env, f"s3://{bucket}/", shared_dir=False) as c:
        yield c
        c.check_logs()


@pytest.fixture(scope="module")
def embedded(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    """Two replicas on one data directory: one SQLite file, one local object root."""
    root = tmp_path_factory.mktemp("embedded-replicas")
    with running_replicas(root, EMBEDDED_REPLICAS, {}, "local://", shared_dir=True) as c:
        yield c
        c.check_logs()


@pytest.fixture(params=[pytest.param("aws", marks=pytest.mark.s3), "embedded"])
def cluster(request: pytest.FixtureRequest) -> Cluster:
    """Each test runs on both: the replicas on DynamoDB + S3, and those on the embedded store."""
    value: Cluster = request.getfixturevalue(request.param)
    return value


# wire helpers


def _ok(answer: httpx.Response, *codes: int) -> httpx.Response:
    assert answer.status_code in (codes or (200, 201, 204)), (
        answer.request.method,
        str(answer.request.url),
        answer.status_code,
        answer.text,
    )
    return answer


def create_repo(cluster: Cluster, via: Replica, prefix: str) -> str:
    name = unique(prefix)
    body = {"name": name, "storage_namespace": cluster.namespace(name), "default_branch": "main"}
    _ok(via.http.post("/repositories", json=body), 201)
    return name


def upload(http: httpx.Client, repo: str, branch: str, path: str, data: bytes) -> httpx.Response:
    return http.post(
        f"/repositories/{repo}/branches/{branch}/objects", params={"path": path}, content=data
    )


def commit(http: httpx.Client, repo: str, branch: str, message: str) -> httpx.Response:
    return http.post(f"/repositories/{repo}/branches/{branch}/commits", json={"message": message})


def head(http: httpx.Client, repo: str, branch: str) -> str:
    return str(_ok(http.get(f"/repositories/{repo}/branches/{branch}"), 200).json()["commit_id"])


def pages(http: httpx.Client, url: str, **params: Any) -> Iterator[dict[str, Any]]:
    after = ""
    while True:
        body = _ok(http.get(url, params={**params, "after": after, "amount": 1000}), 200).json()
        yield from body["results"]
        if not body["pagination"]["has_more"]:
            return
        after = body["pagination"]["next_offset"]


def history(http: httpx.Client, repo: str, ref: str) -> list[dict[str, Any]]:
    return list(pages(http, f"/repositories/{repo}/refs/{ref}/commits"))


def tree(http: httpx.Client, repo: str, ref: str) -> dict[str, str]:
    """Return ``{path: checksum}`` of every object at ``ref``."""
    listing = pages(http, f"/repositories/{repo}/refs/{ref}/objects/ls")
    return {o["path"]: o["checksum"] for o in listing}


def read(http: httpx.Client, repo: str, ref: str, path: str) -> httpx.Response:
    return http.get(f"/repositories/{repo}/refs/{ref}/objects", params={"path": path})


def poll(condition: Callable[[], bool], bound: float, what: str) -> float:
    """Wait until ``condition`` holds, up to ``bound`` + :data:`MARGIN` seconds; return the wait."""
    started = time.monotonic()
    deadline = started + bound + MARGIN
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"{what}: not within {bound + MARGIN}s")
        time.sleep(0.05)  # polling interval of a deadline-bounded wait
    return time.monotonic() - started


# concurrent commits


@dataclass
class Ledger:
    """What the replicas acknowledged, with the test's clock around each request."""

    lock: threading.Lock = field(default_factory=threading.Lock)
    uploads: dict[str, tuple[float, bytes]] = field(default_factory=dict)
    """Path → (when the upload was acknowledged, its bytes)."""
    latest: dict[int, int] = field(default_factory=dict)
    """Writer → the last round whose write of the writer's ``latest`` object was acknowledged."""
    commits: dict[str, float] = field(default_factory=dict)
    """Commit ID → when its request was sent."""
    seen: list[tuple[str, str]] = field(default_factory=list)
    """(acknowledged commit, the head another replica reported right after)."""
    refused: list[tuple[float, str, int, str]] = field(default_factory=list)
    """(when a refused commit was sent, the head reported right after, status, message)."""
    first_upload: threading.Event = field(default_factory=threading.Event)
    stale: list[str] = field(default_factory=list)
    """Reads that missed or predated an acknowledged write."""
    reads: int = 0


def _reader(repo: str, replica: Replica, ledger: Ledger, done: threading.Event) -> None:
    """Read acknowledged writes back through ``replica`` while commits move the branch."""
    rng = random.Random(replica.name)
    ledger.first_upload.wait()
    while not done.is_set():
        with ledger.lock:
            uploads = dict(ledger.uploads)
            latest = dict(ledger.latest)
        path = rng.choice(sorted(uploads))
        answer = read(replica.http, repo, "main", path)
        if answer.status_code != 200 or answer.content != uploads[path][1]:
            ledger.stale.append(f"{replica.name} read {path}: {answer.status_code}")
        for w, r in latest.items():
            answer = read(replica.http, repo, "main", f"w{w:02d}/latest")
            if answer.status_code != 200 or int(answer.content) < r:
                ledger.stale.append(
                    f"{replica.name} read w{w:02d}/latest: {answer.status_code} "
                    f"{answer.content[:20]!r}, acknowledged round {r}"
                )
        listed = tree(replica.http, repo, "main") if rng.random() < 0.3 else None
        if listed is not None:
            lost = {p for p in uploads if p not in listed}
            if lost:
                ledger.stale.append(f"{replica.name} listing lacks {sorted(lost)[:3]}")
        with ledger.lock:
            ledger.reads += 1


def commit_storm(cluster: Cluster, repo: str, writers: int, rounds: int, files: int) -> Ledger:
    """Have ``writers`` threads upload and commit through replicas in turn, readers read back.

    Each writer also overwrites its own ``w<N>/latest`` object with the round number, so a
    reader can tell an old value from a new one.
    """
    ledger = Ledger()
    replicas = cluster.replicas

    def writer(w: int) -> None:
        mine = replicas[w % len(replicas)]
        other = replicas[(w + 1) % len(replicas)]
        for r in range(rounds):
            for f in range(files):
                path = f"w{w:02d}/r{r:02d}/f{f}.bin"
                data = secrets.token_bytes(64 + w + r)
                _ok(upload(mine.http, repo, "main", path, data), 201)
                with ledger.lock:
                    ledger.uploads[path] = (time.monotonic(), data)
                ledger.first_upload.set()
            _ok(upload(mine.http, repo, "main", f"w{w:02d}/latest", b"%d" % r), 201)
            with ledger.lock:
                ledger.latest[w] = r
            sent = time.monotonic()
            answer = commit(mine.http, repo, "main", f"writer {w} round {r}")
            # read-your-writes through another process, at once
            reported = head(other.http, repo, "main")
            with ledger.lock:
                if answer.status_code == 201:
                    cid = answer.json()["id"]
                    ledger.commits[cid] = sent
                    ledger.seen.append((cid, reported))
                else:
                    ledger.refused.append((sent, reported, answer.status_code, answer.text))

    done = threading.Event()
    with ThreadPoolExecutor(writers + len(replicas)) as pool:
        readers = [pool.submit(_reader, repo, via, ledger, done) for via in replicas]
        try:
            for f in [pool.submit(writer, w) for w in range(writers)]:
                f.result()
        finally:
            done.set()
            ledger.first_upload.set()
        for f in readers:
            f.result()
    return ledger


def check_ledger(cluster: Cluster, repo: str, ledger: Ledger) -> None:
    """Check every invariant of a commit storm against what each replica now serves."""
    assert not ledger.stale, ledger.stale[:10]
    a, b = cluster.replicas[0], cluster.replicas[-1]
    log = history(a.http, repo, "main")
    assert history(b.http, repo, "main") == log
    order = [c["id"] for c in log]
    position = {cid: i for i, cid in enumerate(order)}
    parents = {c["id"]: c["parents"] for c in log}
    # one line of first parents: every acknowledged commit is on it
    for newer, older in itertools.pairwise(order):
        assert parents[newer][0] == older, (newer, parents[newer])
    missing = set(ledger.commits) - set(position)
    assert not missing, f"acknowledged commits missing from the history: {missing}"
    # a head read right after an acknowledged commit is that commit or a later one
    for cid, reported in ledger.seen:
        assert reported in position and position[reported] <= position[cid], (cid, reported)

    def acked_before(sent: float) -> set[str]:
        return {p for p, (acked, _) in ledger.uploads.items() if acked < sent}

    # every upload acknowledged before a commit request was sent is in that commit
    for cid, sent in ledger.commits.items():
        lost = acked_before(sent) - set(tree(b.http, repo, cid))
        assert not lost, f"commit {cid} lacks uploads acknowledged before it: {sorted(lost)[:5]}"
    # a commit is refused only when concurrent commits took all its changes along (lakeFS
    # answers that case the same way): they are in the head reported right after the refusal
    for sent, reported, status, text in ledger.refused:
        assert status == 400 and "no changes" in text, (status, text)
        lost = acked_before(sent) - set(tree(b.http, repo, reported))
        assert not lost, f"refused commit: {sorted(lost)[:5]} not committed by {reported}"
    # at the end, with one last commit, everything acknowledged is committed, byte for byte
    final = commit(a.http, repo, "main", "last")
    assert final.status_code in (201, 400), final.text
    final_head = head(b.http, repo, "main")
    files = tree(b.http, repo, final_head)
    writers = {p.split("/", 1)[0] + "/latest" for p in ledger.uploads}
    assert set(files) == set(ledger.uploads) | writers
    for i, (path, (_, data)) in enumerate(sorted(ledger.uploads.items())):
        via = cluster.replicas[i % len(cluster.replicas)]
        assert _ok(read(via.http, repo, final_head, path), 200).content == data, path


def test_concurrent_commits_through_every_replica_lose_nothing(cluster: Cluster) -> None:
    a = cluster.replicas[0]
    repo = create_repo(cluster, a, "storm")
    ledger = commit_storm(cluster, repo, writers=2 * len(cluster.replicas), rounds=5, files=2)
    assert ledger.commits and ledger.reads
    check_ledger(cluster, repo, ledger)


# concurrent merges


def test_concurrent_merges_into_one_branch_all_land(cluster: Cluster) -> None:
    replicas = cluster.replicas
    a = replicas[0]
    repo = create_repo(cluster, a, "merges")
    _ok(upload(a.http, repo, "main", "base.txt", b"base"), 201)
    _ok(commit(a.http, repo, "main", "base"), 201)
    features = [f"feature-{i}" for i in range(3 * len(replicas))]
    expected: dict[str, bytes] = {"base.txt": b"base"}
    for i, name in enumerate(features):
        via = replicas[i % len(replicas)]
        body = {"name": name, "source": "main"}
        _ok(via.http.post(f"/repositories/{repo}/branches", json=body), 201)
        for f in range(2):
            path, data = f"{name}/part-{f}.bin", secrets.token_bytes(100 + i)
            _ok(upload(via.http, repo, name, path, data), 201)
            expected[path] = data
        _ok(commit(via.http, repo, name, f"work on {name}"), 201)

    outcomes: dict[str, httpx.Response] = {}

    def merge(i: int) -> None:
        via = replicas[i % len(replicas)]
        name = features[i]
        outcomes[name] = via.http.post(f"/repositories/{repo}/refs/{name}/merge/main", json={})

    with ThreadPoolExecutor(len(features)) as pool:
        for f in [pool.submit(merge, i) for i in range(len(features))]:
            f.result()

    landed: dict[str, str] = {}
    for name, answer in outcomes.items():
        # a merge that lost every race may say so; it must never answer anything else
        assert answer.status_code in (200, 409, 412), (name, answer.status_code, answer.text)
        if answer.status_code == 200:
            landed[name] = answer.json()["reference"]
    assert landed
    # merges refused for concurrency are retried one at a time; then every branch is in main
    for name in sorted(set(features) - set(landed)):
        answer = _ok(a.http.post(f"/repositories/{repo}/refs/{name}/merge/main", json={}), 200)
        landed[name] = answer.json()["reference"]

    for via in replicas:
        log = {c["id"]: c for c in history(via.http, repo, "main")}
        for name, merged in landed.items():
            assert merged in log, (via.name, name)
            assert log[merged]["parents"][1] == head(via.http, repo, name)
        final = head(via.http, repo, "main")
        assert tree(via.http, repo, final) == tree(a.http, repo, final)
        assert set(tree(via.http, repo, final)) == set(expected)
    for i, (path, data) in enumerate(sorted(expected.items())):
        via = replicas[i % len(replicas)]
        assert _ok(read(via.http, repo, "main", path), 200).content == data, path


# staleness


def test_a_replica_never_serves_a_stale_head_branch_or_tag(cluster: Cluster) -> None:
    replicas = cluster.replicas
    repo = create_repo(cluster, replicas[0], "fresh")
    for i in range(6):
        writer, reader = replicas[i % len(replicas)], replicas[(i + 1) % len(replicas)]
        _ok(upload(writer.http, repo, "main", "file.txt", b"version %d" % i), 201)
        # the staged write is visible through the other process at once
        assert _ok(read(reader.http, repo, "main", "file.txt"), 200).content == b"version %d" % i
        cid = _ok(commit(writer.http, repo, "main", f"v{i}"), 201).json()["id"]
        assert head(reader.http, repo, "main") == cid
        assert _ok(read(reader.http, repo, cid, "file.txt"), 200).content == b"version %d" % i

    a, b = replicas[0], replicas[1]
    _ok(a.http.post(f"/repositories/{repo}/branches", json={"name": "dev", "source": "main"}), 201)
    _ok(upload(b.http, repo, "dev", "dev.txt", b"on dev"), 201)  # b serves the new branch
    dev = _ok(commit(b.http, repo, "dev", "dev"), 201).json()["id"]
    _ok(a.http.post(f"/repositories/{repo}/tags", json={"id": "v1", "ref": dev}), 201)
    assert _ok(b.http.get(f"/repositories/{repo}/tags/v1"), 200).json()["commit_id"] == dev

    _ok(a.http.delete(f"/repositories/{repo}/branches/dev"), 204)
    _ok(a.http.delete(f"/repositories/{repo}/tags/v1"), 204)
    for via in replicas[1:]:
        _ok(via.http.get(f"/repositories/{repo}/branches/dev"), 404)
        _ok(read(via.http, repo, "dev", "dev.txt"), 404)
        _ok(upload(via.http, repo, "dev", "late.txt", b"late"), 404)
        _ok(via.http.get(f"/repositories/{repo}/tags/v1"), 404)
        _ok(read(via.http, repo, "v1", "dev.txt"), 404)
        names = [r["id"] for r in pages(via.http, f"/repositories/{repo}/branches")]
        assert names == ["main"]
    # the deleted branch's commit stays readable by ID, as in lakeFS
    assert _ok(read(b.http, repo, dev, "dev.txt"), 200).content == b"on dev"


def test_a_recreated_repository_shares_nothing_with_the_deleted_one(cluster: Cluster) -> None:
    replicas = cluster.replicas
    a, others = replicas[0], replicas[1:]
    name = unique("reborn")
    old_ns, new_ns = cluster.namespace(name + "-old"), cluster.namespace(name + "-new")
    _ok(a.http.post("/repositories", json={"name": name, "storage_namespace": old_ns}), 201)
    paths = [f"data/{i:03d}.csv" for i in range(40)]
    for path in paths:
        _ok(upload(a.http, name, "main", path, b"old " + path.encode()), 201)
    old = _ok(commit(a.http, name, "main", "old data"), 201).json()["id"]
    _ok(a.http.post(f"/repositories/{name}/tags", json={"id": "release", "ref": old}), 201)
    # the other replicas read everything, filling whatever they cache
    for via in others:
        assert len(history(via.http, name, "main")) == 2
        assert set(tree(via.http, name, "main")) == set(paths)
        assert _ok(read(via.http, name, "main", paths[7]), 200).content == b"old " + b"data/007.csv"
        _ok(via.http.get(f"/repositories/{name}/commits/{old}"), 200)

    _ok(a.http.delete(f"/repositories/{name}"), 204)
    for via in others:
        _ok(via.http.get(f"/repositories/{name}"), 404)
        _ok(via.http.get(f"/repositories/{name}/branches/main"), 404)
        _ok(read(via.http, name, old, paths[0]), 404)
        listed = [r["id"] for r in pages(via.http, "/repositories", prefix=name)]
        assert listed == []

    _ok(a.http.post("/repositories", json={"name": name, "storage_namespace": new_ns}), 201)
    for via in others:
        got = _ok(via.http.get(f"/repositories/{name}"), 200).json()
        assert got["storage_namespace"] == new_ns
        log = history(via.http, name, "main")
        assert [c["message"] for c in log] == ["Repository created"]
        assert old not in {c["id"] for c in log}
        _ok(via.http.get(f"/repositories/{name}/commits/{old}"), 404)
        _ok(read(via.http, name, old, paths[0]), 404)
        _ok(read(via.http, name, "release", paths[0]), 404)
        _ok(read(via.http, name, "main", paths[0]), 404)
        assert tree(via.http, name, "main") == {}
        assert [r["id"] for r in pages(via.http, f"/repositories/{name}/tags")] == []

    # the same paths with new bytes: every replica reads the new repository's own objects
    for path in paths[:10]:
        _ok(upload(a.http, name, "main", path, b"new " + path.encode()), 201)
    new = _ok(commit(a.http, name, "main", "new data"), 201).json()["id"]
    for via in others:
        assert head(via.http, name, "main") == new
        assert set(tree(via.http, name, "main")) == set(paths[:10])
        for path in paths[:10]:
            assert _ok(read(via.http, name, "main", path), 200).content == b"new " + path.encode()
        _ok(read(via.http, name, "main", paths[20]), 404)
        stat = _ok(
            via.http.get(f"/repositories/{name}/refs/main/objects/stat", params={"path": paths[0]}),
            200,
        ).json()
        assert stat["physical_address"].startswith(new_ns + "/"), stat["physical_address"]


# auth


def test_auth_changes_reach_every_replica_within_the_bound(cluster: Cluster) -> None:
    replicas = cluster.replicas
    a, others = replicas[0], replicas[1:]
    repo = create_repo(cluster, a, "authz")
    user = unique("user")
    _ok(a.http.post("/auth/users", json={"id": user}), 201)
    _ok(a.http.put(f"/auth/groups/Readers/members/{user}"), 201)
    first = _ok(a.http.post(f"/auth/users/{user}/credentials"), 201).json()
    second = _ok(a.http.post(f"/auth/users/{user}/credentials"), 201).json()
    clients = [
        (via, via.as_user(first["access_key_id"], first["secret_access_key"])) for via in others
    ]
    spare = [
        (via, via.as_user(second["access_key_id"], second["secret_access_key"])) for via in others
    ]
    branch = f"/repositories/{repo}/branches/main"
    waits: list[float] = []

    def everywhere(what: str, status: int, users: list[tuple[Replica, httpx.Client]]) -> None:
        for via, client in users:
            waits.append(
                poll(
                    lambda c=client: c.get(branch).status_code == status,  # type: ignore[misc]
                    AUTH_CHANGE_BOUND_SECONDS,
                    f"{what} seen by replica {via.name}",
                )
            )

    try:
        everywhere("Readers membership", 200, clients)  # every replica has verified the key
        _ok(a.http.delete(f"/auth/groups/Readers/members/{user}"), 204)
        everywhere("membership removed", 403, clients)
        _ok(a.http.put(f"/auth/users/{user}/policies/FSReadAll"), 201)
        everywhere("policy attached", 200, clients)
        _ok(a.http.delete(f"/auth/users/{user}/policies/FSReadAll"), 204)
        everywhere("policy detached", 403, clients)
        policy = unique("read-repo")

        def statement(effect: str) -> dict[str, Any]:
            return {"effect": effect, "action": ["fs:Read*"], "resource": "*"}

        body = {"id": policy, "statement": [statement("allow")]}
        _ok(a.http.post("/auth/policies", json=body), 201)
        _ok(a.http.put(f"/auth/users/{user}/policies/{policy}"), 201)
        everywhere("own policy attached", 200, clients)
        body = {"id": policy, "statement": [statement("deny")]}
        _ok(a.http.put(f"/auth/policies/{policy}", json=body), 200)
        everywhere("own policy turned to deny", 403, clients)
        _ok(a.http.delete(f"/auth/policies/{policy}"), 204)
        _ok(a.http.put(f"/auth/groups/Writers/members/{user}"), 201)
        everywhere("Writers membership", 200, clients)
        _ok(a.http.delete(f"/auth/users/{user}/credentials/{first['access_key_id']}"), 204)
        everywhere("credentials deleted", 401, clients)
        everywhere("the other key still signing in", 200, spare)
        _ok(a.http.delete(f"/auth/users/{user}"), 204)
        everywhere("user deleted", 401, spare)
    finally:
        for _, client in clients + spare:
            client.close()
    assert max(waits) <= AUTH_CHANGE_BOUND_SECONDS + MARGIN
