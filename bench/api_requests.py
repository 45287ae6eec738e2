"""The requests ``bench.api`` times, one :class:`Operation` a kind, against its repository.

The server's repository (:data:`REPO`) holds :data:`OBJECTS` committed 1 KiB objects under
``list/``; the bare app answers ``/small``, ``/small-async`` and ``/upload``. Each operation
checks its answer (status, and for reads and listings what came back), so a cell never times
errors.
"""

from __future__ import annotations

import itertools
import random
import time
from collections.abc import Callable, Sequence

import httpx

__all__ = [
    "API",
    "BODY_SIZE",
    "OBJECTS",
    "REPO",
    "BareGet",
    "BareGetAsync",
    "BarePost",
    "Commit",
    "CreateBranch",
    "GetBranch",
    "ListPage",
    "Operation",
    "Read",
    "Stat",
    "Upload",
    "check",
    "list_path",
    "payload",
]

API = "/api/v1"
REPO = "bench"
OBJECTS = 1000
BODY_SIZE = 1024


def payload(tag: str) -> bytes:
    """Return a 1 KiB body that starts with ``tag``."""
    return f"{tag}\n".encode().ljust(BODY_SIZE, b".")[:BODY_SIZE]


def list_path(i: int) -> str:
    """Return the path of the repository's ``i``-th committed object."""
    return f"list/part-{i:04d}.bin"


def check(response: httpx.Response, *expected: int) -> httpx.Response:
    """Return ``response`` if its status is one of ``expected``; raise otherwise."""
    if response.status_code not in expected:
        raise RuntimeError(
            f"{response.request.method} {response.request.url.path} answered "
            f"{response.status_code}: {response.text[:300]}"
        )
    return response


def _timed(send: Callable[[], httpx.Response], *expected: int) -> float:
    start = time.perf_counter()
    response = send()
    elapsed = time.perf_counter() - start
    check(response, *expected)
    return elapsed


class Operation:
    """One kind of request: how to prepare for a cell and how to send one timed request."""

    name = ""
    kind = "object"
    bare = "GET"

    def prepare(self, clients: Sequence[httpx.Client], concurrency: int) -> None:
        """Set up what the cell's requests need (not timed)."""

    def call(self, client: httpx.Client, worker: int, i: int) -> float:
        """Send request ``i`` from thread ``worker``; return its latency in seconds."""
        raise NotImplementedError


class BareGet(Operation):
    name = "bare GET (small JSON)"
    kind = "bare"

    def call(self, client: httpx.Client, worker: int, i: int) -> float:
        return _timed(lambda: client.get("/small"), 200)


class BareGetAsync(Operation):
    name = "bare GET, async endpoint"
    kind = "bare"
    bare = "GET async"

    def call(self, client: httpx.Client, worker: int, i: int) -> float:
        return _timed(lambda: client.get("/small-async"), 200)


class BarePost(Operation):
    name = "bare POST (1 KiB body)"
    kind = "bare"
    bare = "POST"

    def __init__(self) -> None:
        self.data = payload("bare")

    def call(self, client: httpx.Client, worker: int, i: int) -> float:
        return _timed(lambda: client.post("/upload", content=self.data), 201)


class Stat(Operation):
    name = "stat object"

    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)

    def call(self, client: httpx.Client, worker: int, i: int) -> float:
        params = {"path": list_path(self.rng.randrange(OBJECTS))}
        url = f"{API}/repositories/{REPO}/refs/main/objects/stat"
        return _timed(lambda: client.get(url, params=params), 200)


class Read(Operation):
    name = "read 1 KiB"

    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)

    def call(self, client: httpx.Client, worker: int, i: int) -> float:
        params = {"path": list_path(self.rng.randrange(OBJECTS))}
        url = f"{API}/repositories/{REPO}/refs/main/objects"
        start = time.perf_counter()
        response = client.get(url, params=params)
        elapsed = time.perf_counter() - start
        if len(check(response, 200).content) != BODY_SIZE:
            raise RuntimeError(f"read {params['path']}: {len(response.content)} bytes")
        return elapsed


class Upload(Operation):
    name = "upload 1 KiB"
    bare = "POST"

    def __init__(self) -> None:
        self.counter = itertools.count()
        self.url = f"{API}/repositories/{REPO}/branches/uploads/objects"

    def prepare(self, clients: Sequence[httpx.Client], concurrency: int) -> None:
        _create_branch(clients[0], "uploads", exist_ok=True)

    def call(self, client: httpx.Client, worker: int, i: int) -> float:
        n = next(self.counter)
        params = {"path": f"upload/{n:07d}.bin"}
        data = payload(params["path"])
        return _timed(lambda: client.post(self.url, params=params, content=data), 201)


class ListPage(Operation):
    name = f"list {OBJECTS:,} objects"

    def call(self, client: httpx.Client, worker: int, i: int) -> float:
        params = {"prefix": "list/", "amount": str(OBJECTS)}
        url = f"{API}/repositories/{REPO}/refs/main/objects/ls"
        start = time.perf_counter()
        response = client.get(url, params=params)
        elapsed = time.perf_counter() - start
        results = check(response, 200).json()["pagination"]["results"]
        if results != OBJECTS:
            raise RuntimeError(f"list answered {results} objects, expected {OBJECTS}")
        return elapsed


class GetBranch(Operation):
    name = "get branch"
    kind = "branch"

    def call(self, client: httpx.Client, worker: int, i: int) -> float:
        return _timed(lambda: client.get(f"{API}/repositories/{REPO}/branches/main"), 200)


class CreateBranch(Operation):
    name = "create branch"
    kind = "branch"
    bare = "POST"

    def __init__(self) -> None:
        self.counter = itertools.count()

    def call(self, client: httpx.Client, worker: int, i: int) -> float:
        body = {"name": f"b-{next(self.counter):07d}", "source": "main"}
        url = f"{API}/repositories/{REPO}/branches"
        return _timed(lambda: client.post(url, json=body), 201)


class Commit(Operation):
    name = "commit 1 change"
    kind = "branch"
    bare = "POST"

    def __init__(self) -> None:
        self.cells = itertools.count()
        self.branches: list[str] = []
        self.counter = itertools.count()

    def prepare(self, clients: Sequence[httpx.Client], concurrency: int) -> None:
        cell = next(self.cells)
        self.branches = [f"commit-{cell}-{w:02d}" for w in range(concurrency)]
        for branch in self.branches:
            _create_branch(clients[0], branch)

    def call(self, client: httpx.Client, worker: int, i: int) -> float:
        branch = self.branches[worker]
        path = f"commit/{next(self.counter):07d}.bin"
        upload = f"{API}/repositories/{REPO}/branches/{branch}/objects"
        check(client.post(upload, params={"path": path}, content=payload(path)), 201)
        url = f"{API}/repositories/{REPO}/branches/{branch}/commits"
        body = {"message": f"bench {path}"}
        return _timed(lambda: client.post(url, json=body), 201)


def _create_branch(client: httpx.Client, name: str, *, exist_ok: bool = False) -> None:
    url = f"{API}/repositories/{REPO}/branches"
    response = client.post(url, json={"name": name, "source": "main"})
    check(response, 201, 409) if exist_ok else check(response, 201)
