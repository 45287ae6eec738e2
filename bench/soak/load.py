"""The soak's mixed load: a few threads, each its own kind of client, writing and reading.

- **stream**: a :class:`~tests.e2e.failover.ContinuousWriter` committing one object a second to
  the branch ``stream`` through the REST API (httpx).
- **features** (the official ``lakefs`` SDK): a branch from ``main``, three uploads, a commit,
  a merge into ``main`` (a synchronous one and an asynchronous one in turn, the latter through
  the async operations API and its status), a tag on the merge, the tag of five rounds ago
  deleted, the branch deleted.
- **gateway** (boto3 on the S3 gateway): uploads to the branch ``gw``, a commit (REST) every
  three, a merge of ``gw`` into ``main`` every fifth commit.
- **janitor** (REST and the gateway): every few seconds merges ``stream`` into ``main``; when
  ``main`` holds more than ``keep`` of the acknowledged objects, deletes the oldest through the
  gateway on a branch of its own, commits and merges it, so that ``main`` stays small.
- **mirror readers** (region ``b``): read acknowledged objects of ``main`` commits the mirror
  has reached, by commit ID, through the SDK and through the gateway, and compare the bytes.

Each thread goes on after a failed request (the :class:`~bench.soak.meter.Meter` has it): a
branch whose commit or merge was never acknowledged is left as it is, never deleted.
"""

from __future__ import annotations

import hashlib
import itertools
import random
import secrets
import threading
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from typing import Any

import httpx
import lakefs
from lakefs_sdk.models.commit_creation import CommitCreation

from bench.soak.ledger import Ledger
from bench.soak.meter import Failed, Meter, Request
from bench.soak.world import SoakWorld, close_sdk
from tests.e2e.failover import ContinuousWriter

__all__ = ["Load", "ReadProblem"]

MERGE_TRIES = 3
ASYNC_DEADLINE = 120.0
TAGS_KEPT = 5


@dataclass(frozen=True)
class ReadProblem:
    """A mirror read that answered, but not with the acknowledged bytes."""

    via: str
    commit: str
    path: str
    problem: str


def _sdk_upload(branch: lakefs.Branch, path: str, data: bytes) -> None:
    branch.object(path).upload(data, mode="wb")


def _sdk_read(ref: lakefs.Reference, path: str) -> bytes:
    with ref.object(path).reader(mode="rb") as reader:
        data = reader.read()
    return data if isinstance(data, bytes) else data.encode()


def _first(parents: list[str] | None) -> str | None:
    return str(parents[0]) if parents else None


def _payload(label: str, size: int) -> bytes:
    head = f"{label} {secrets.token_hex(8)}\n".encode()
    return (head * (size // len(head) + 1))[:size]


@dataclass
class Load:
    """The load's threads, started by :meth:`start` and stopped by :meth:`stop`."""

    world: SoakWorld
    meter: Meter
    ledger: Ledger
    seed: int
    think: float = 0.3
    keep: int = 60
    janitor_every: float = 10.0
    stop_event: threading.Event = field(default_factory=threading.Event)
    crashes: list[str] = field(default_factory=list)
    """Tracebacks of errors of the load's own code (not of a request)."""
    read_problems: list[ReadProblem] = field(default_factory=list)
    mirror_reads: int = 0
    writer: ContinuousWriter | None = None
    _threads: list[threading.Thread] = field(default_factory=list)
    _closers: list[Callable[[], None]] = field(default_factory=list)

    def start(self) -> None:
        """Start every thread."""
        a = self.world.region("a")
        self.writer = ContinuousWriter(
            [("a", a, self.world.source_repo)],
            branch="stream",
            interval=1.0,
            prefix="stream",
            event_hooks=self._writer_hooks(),
        )
        self.writer.start()
        for name, body in (
            ("features", self._features()),
            ("gateway", self._gateway()),
            ("janitor", self._janitor()),
            ("mirror-sdk", self._mirror_reader("sdk")),
            ("mirror-gw", self._mirror_reader("gw")),
        ):
            thread = threading.Thread(target=self._loop, args=(name, body), name=name, daemon=True)
            thread.start()
            self._threads.append(thread)

    def stop(self) -> None:
        """Stop every thread after the step it is in."""
        self.stop_event.set()
        for thread in self._threads:
            thread.join(timeout=ASYNC_DEADLINE + 60)
        for close in self._closers:
            close()
        if self.writer is not None:
            self.writer.stop()
            self.ledger.absorb(self.writer.acked())
            for refusal in self.writer.refusals:
                if refusal.status == 0:  # answered ones were recorded by the hooks
                    kind = f"rest.stream_{refusal.step}"
                    self.meter.record(Request(kind, 0, refusal.at, 0.0), "no answer")

    def _new_sdk(self, region: str) -> lakefs.Client:
        client = self.world.sdk(region)
        self._closers.append(partial(close_sdk, client))
        return client

    def _new_http(self, region: str) -> httpx.Client:
        client = self.world.http(region)
        self._closers.append(client.close)
        return client

    def _new_gateway(self, region: str) -> Any:
        client = self.world.gateway(region)
        self._closers.append(client.close)
        return client

    def _loop(self, name: str, body: Callable[[], None]) -> None:
        while not self.stop_event.is_set():
            try:
                body()
            except Failed:
                pass
            except Exception:
                self.crashes.append(f"{name}: {traceback.format_exc()}")
                if len(self.crashes) > 50:
                    raise
            self.stop_event.wait(self.think)

    def _writer_hooks(self) -> dict[str, list[Callable[..., Any]]]:
        """Return httpx event hooks recording the stream writer's answered requests."""

        def began(request: httpx.Request) -> None:
            request.extensions["soak_began"] = time.monotonic()

        def ended(response: httpx.Response) -> None:
            request = response.request
            step = "commit" if request.url.path.endswith("/commits") else "upload"
            now = time.monotonic()
            seconds = now - float(request.extensions.get("soak_began", now))
            self.meter.record(
                Request(
                    f"rest.stream_{step}",
                    response.status_code,
                    now,
                    seconds,
                    "retry-after" in response.headers,
                ),
                "" if response.is_success else f"status {response.status_code}",
            )

        return {"request": [began], "response": [ended]}

    # merges

    def _merge_rest(self, http: httpx.Client, branch: str, kind: str) -> tuple[str, float] | None:
        """Merge ``branch`` into ``main`` synchronously; return (merge commit, sent) or None."""
        sent = time.monotonic()
        answer = self.meter.http(
            kind,
            lambda: http.post(
                f"/repositories/{self.world.source_repo}/refs/{branch}/merge/main", json={}
            ),
        )
        return str(answer.json()["reference"]), sent

    def _merge_async(self, http: httpx.Client, branch: str) -> tuple[str, float] | None:
        """Merge ``branch`` into ``main`` through the async operations API."""
        base = f"/repositories/{self.world.source_repo}/refs/{branch}/merge/main/async"
        sent = time.monotonic()
        task = self.meter.http("rest.merge_async", lambda: http.post(base, json={}), 202)
        task_id = task.json()["id"]
        deadline = time.monotonic() + ASYNC_DEADLINE
        while time.monotonic() < deadline:
            try:
                status = self.meter.http(
                    "rest.merge_async_status", lambda: http.get(f"{base}/{task_id}/status")
                ).json()
            except Failed:
                self.stop_event.wait(0.5)
                continue
            if status.get("completed"):
                now = time.monotonic()
                code = int(status.get("status_code") or (201 if status.get("result") else 500))
                error = status.get("error") or {}
                if status.get("result"):
                    self.meter.record(Request("task.merge_async", 201, now, now - sent))
                    return str(status["result"]["reference"]), sent
                request = Request("task.merge_async", code, now, now - sent)
                self.meter.record(request, str(error.get("message", ""))[:300])
                return None
            self.stop_event.wait(0.25)
        now = time.monotonic()
        self.meter.record(Request("task.merge_async", 0, now, now - sent), "never completed")
        return None

    def _merge(
        self, branch: str, how: Callable[[], tuple[str, float] | None], http: httpx.Client
    ) -> str | None:
        """Merge ``branch`` into ``main`` (``how``), trying again a few times; record the ack."""
        for _ in range(MERGE_TRIES):
            try:
                done = how()
            except Failed as failed:
                done = None
                if failed.request.status == 400 and "no changes" in failed.detail:
                    return None  # an earlier try landed without its answer
            if done is not None:
                commit, sent = done
                parent = self._first_parent(http, commit)
                self.ledger.merged(branch, commit, parent, sent, time.monotonic())
                return commit
            if self.stop_event.wait(1.0):
                return None
        return None

    def _first_parent(self, http: httpx.Client, commit: str) -> str | None:
        try:
            found = self.meter.http(
                "rest.commit_get",
                lambda: http.get(f"/repositories/{self.world.source_repo}/commits/{commit}"),
            )
        except Failed:
            return None
        parents = found.json().get("parents") or []
        return str(parents[0]) if parents else None

    # the threads' bodies

    def _features(self) -> Callable[[], None]:
        sdk = self._new_sdk("a")
        http = self._new_http("a")
        repo = lakefs.Repository(self.world.source_repo, client=sdk)
        counter = itertools.count(1)
        rng = random.Random(self.seed)
        tags: list[str] = []

        def round_() -> None:
            n = next(counter)
            name = f"f-{n:05d}"
            branch = repo.branch(name)
            self.meter.call("sdk.branch_create", lambda: branch.create("main"), 201)
            for i in range(3):
                path = f"feature/{n:05d}/{i}.bin"
                data = _payload(path, rng.randint(64, 4096))
                self.meter.call("sdk.upload", partial(_sdk_upload, branch, path, data), 201)
                self.ledger.staged_upload(name, path, data, time.monotonic())
            commit = self.meter.call(
                "sdk.commit",
                lambda: sdk.sdk_client.commits_api.commit(
                    self.world.source_repo, name, CommitCreation(message=f"feature {n}")
                ),
                201,
            )
            self.ledger.committed(name, commit.id, _first(commit.parents), time.monotonic())
            if n % 2:

                def how() -> tuple[str, float] | None:
                    sent = time.monotonic()
                    merged = self.meter.call("sdk.merge", lambda: branch.merge_into("main"))
                    return str(merged), sent

                merge = self._merge(name, how, http)
            else:
                merge = self._merge(name, lambda: self._merge_async(http, name), http)
            if merge is None:
                return  # left as it is: its commit is acknowledged, and not (known to be) merged
            tag = f"t-{n:05d}"
            self.meter.call("sdk.tag_create", lambda: repo.tag(tag).create(merge), 201)
            tags.append(tag)
            if len(tags) > TAGS_KEPT:
                old = tags.pop(0)
                self.meter.call("sdk.tag_delete", lambda: repo.tag(old).delete(), 204)
            self.meter.call("sdk.branch_delete", lambda: branch.delete(), 204)

        return round_

    def _gateway(self) -> Callable[[], None]:
        s3 = self._new_gateway("a")
        http = self._new_http("a")
        repo = self.world.source_repo
        counter = itertools.count(1)
        commits = itertools.count(1)
        rng = random.Random(self.seed + 1)

        def round_() -> None:
            for _ in range(3):
                n = next(counter)
                path = f"gateway/{n:06d}.bin"
                data = _payload(path, rng.randint(64, 8192))
                self.meter.call(
                    "gw.put", partial(s3.put_object, Bucket=repo, Key=f"gw/{path}", Body=data)
                )
                self.ledger.staged_upload("gw", path, data, time.monotonic())
            answer = self.meter.http(
                "rest.commit",
                lambda: http.post(
                    f"/repositories/{repo}/branches/gw/commits", json={"message": "gateway"}
                ),
                201,
            )
            body = answer.json()
            self.ledger.committed("gw", body["id"], _first(body.get("parents")), time.monotonic())
            if next(commits) % 5 == 0:
                self._merge("gw", lambda: self._merge_rest(http, "gw", "rest.merge"), http)

        return round_

    def _janitor(self) -> Callable[[], None]:
        s3 = self._new_gateway("a")
        http = self._new_http("a")
        repo = self.world.source_repo
        counter = itertools.count(1)

        def round_() -> None:
            if self.stop_event.wait(self.janitor_every):
                return
            if self.writer is not None:
                self.ledger.absorb(self.writer.acked())
            self._merge("stream", lambda: self._merge_rest(http, "stream", "rest.merge"), http)
            old = self.ledger.oldest_on_main(self.keep)
            if not old:
                return
            name = f"clean-{next(counter):05d}"
            self.meter.http(
                "rest.branch_create",
                lambda: http.post(
                    f"/repositories/{repo}/branches", json={"name": name, "source": "main"}
                ),
                201,
            )
            for start in range(0, len(old), 1000):
                batch = old[start : start + 1000]
                keys = [{"Key": f"{name}/{p}"} for p in batch]
                answer = self.meter.call(
                    "gw.delete_objects",
                    partial(
                        s3.delete_objects, Bucket=repo, Delete={"Objects": keys, "Quiet": True}
                    ),
                )
                if answer.get("Errors"):
                    raise RuntimeError(f"gateway DeleteObjects errors: {answer['Errors'][:3]}")
            answer = self.meter.http(
                "rest.commit",
                lambda: http.post(
                    f"/repositories/{repo}/branches/{name}/commits",
                    json={"message": f"delete {len(old)} old objects"},
                ),
                201,
            )
            body = answer.json()
            self.ledger.committed(name, body["id"], _first(body.get("parents")), time.monotonic())
            merged = self._merge(name, lambda: self._merge_rest(http, name, "rest.merge"), http)
            if merged is None:
                return
            self.ledger.deleted_from_main(old)
            self.meter.http(
                "rest.branch_delete",
                lambda: http.delete(f"/repositories/{repo}/branches/{name}"),
                204,
            )

        return round_

    def _mirror_reader(self, via: str) -> Callable[[], None]:
        mirror = self.world.mirror_repo
        sdk = self._new_sdk("b")
        s3: Any = self._new_gateway("b") if via == "gw" else None

        def read_one() -> None:
            record = self.ledger.mirrored_sample()
            if record is None:
                return
            try:
                if via == "sdk":
                    ref = lakefs.Repository(mirror, client=sdk).ref(record.commit)
                    data = self.meter.call("b.sdk.read", partial(_sdk_read, ref, record.path))
                else:
                    answer = self.meter.call(
                        "b.gw.get",
                        lambda: s3.get_object(Bucket=mirror, Key=f"{record.commit}/{record.path}"),
                    )
                    data = answer["Body"].read()
            except Failed as failed:
                if failed.request.status == 404:
                    # the commit is on the mirror's main: its objects are there, or on their
                    # way (503), never missing
                    problem = f"answered 404: {failed.detail[:200]}"
                    self.read_problems.append(ReadProblem(via, record.commit, record.path, problem))
                raise
            self.mirror_reads += 1
            if data != record.data:
                digest = hashlib.md5(data).hexdigest()
                self.read_problems.append(
                    ReadProblem(
                        via,
                        record.commit,
                        record.path,
                        f"{len(data)} bytes (md5 {digest}), not the {len(record.data)} acked",
                    )
                )

        return read_one
