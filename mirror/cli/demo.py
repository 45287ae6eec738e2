"""``lakemirror demo``: transactional mirroring between two local regions, watched live.

The demo starts what a two-region deployment runs, on the embedded default (SQLite + local
directories under ``--data-dir``): a ``lakemirror server`` per region, the ``lakemirror
replicant`` of region ``b`` signed in as a user with the built-in ``Replicator`` policy, and a
:class:`~mirror.simulate.ReplicationSimulator` copying region ``a``'s namespace into region
``b``'s late, out of order and with dropped deliveries, as S3 Replication would. It creates the
source repository ``origin``, mirrors it as ``origin-mirror`` through the replicant's
configuration API, and commits to ``origin`` every ``--commit-interval`` seconds (CSV, JSON and
Parquet objects of mixed sizes; now and then a deletion) while a terminal view shows both heads,
the lag and the replicant's counters. At the end (``--duration`` or Ctrl-C) it lets the mirror
catch up and compares it with the source, byte for byte, at the mirrored commit.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import random
import secrets
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING, Any, TextIO

import httpx
import yaml

from mirror.cli.arguments import UsageError as _UsageError
from mirror.cli.arguments import parse_interval, parse_seconds
from mirror.errors import LakeMirrorError

if TYPE_CHECKING:
    from mirror.simulate import ReplicationSimulator, ReplicationStats

__all__ = ["DemoRegions", "demo_regions", "register_demo_command", "run_demo"]

_PROG = "lakemirror demo"
_SOURCE_REPO = "origin"
_MIRROR_REPO = "origin-mirror"
_BRANCH = "main"
_MIRROR_REGION = "b"
_MIRRORS_PATH = "/service/replication/v1/repositories/{repo}/mirrors"
_STARTUP_DEADLINE = 30.0
_STOP_DEADLINE = 10.0
_CATCH_UP_DEADLINE = 15.0
_DROP_PROBABILITY = 0.05
_DROP_FOR = (0.5, 2.0)
_REPLICANT_POLL = 0.2
_OBSERVE_EVERY = 0.25
_PLAIN_EVERY = 2.0
_HTTP_TIMEOUT = 30.0


class _DemoError(LakeMirrorError):
    """A step of the demo failed: the message says which and why."""


class _InterruptedError(_DemoError):
    """Ctrl-C or SIGTERM arrived before the demo was running."""


def register_demo_command(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the ``demo`` subcommand to ``sub``."""
    cmd = sub.add_parser(
        "demo",
        help="run two regions locally, mirror a repository between them while a writer "
        "commits, watch it live, and check the mirror byte for byte at the end",
        description="Start a server per region (SQLite + local directories), a replicant, "
        "simulated object-store replication and a writer; create a mirror through the "
        "configuration API; show the source and mirror heads, lag and validation counters "
        "live; after --duration seconds (or Ctrl-C) print a consistency report. Exit code 0 "
        "when the mirror equals the source at the mirrored commit, 1 otherwise.",
    )
    cmd.add_argument(
        "--data-dir",
        default="./lakemirror-demo",
        help="where the regions keep their data and logs; region-a/ and region-b/ are "
        "emptied first (./lakemirror-demo)",
    )
    cmd.add_argument(
        "--duration", metavar="SECONDS", help="stop writing after this long (default: Ctrl-C)"
    )
    cmd.add_argument(
        "--commit-interval", metavar="SECONDS", default="1.0", help="seconds between commits (1)"
    )
    cmd.add_argument(
        "--delay",
        metavar="MIN:MAX",
        default="0:2",
        help="seconds replication takes per object, drawn uniformly (0:2)",
    )
    cmd.add_argument("--seed", metavar="N", help="seed of the writer and of replication (random)")
    cmd.add_argument(
        "--no-live",
        action="store_true",
        help="print a progress line every 2 seconds instead of redrawing the view",
    )


# -- arguments -------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Options:
    data_dir: Path
    duration: float | None
    commit_interval: float
    delay: tuple[float, float]
    seed: int | None
    live: bool
    drop_probability: float = _DROP_PROBABILITY
    replication_poll: float = 0.1


def _options(args: argparse.Namespace, out: TextIO) -> _Options:
    seed: int | None = None
    if args.seed is not None:
        try:
            seed = int(args.seed)
        except ValueError:
            raise _UsageError(f"--seed {args.seed!r}: not an integer") from None
    duration = None if args.duration is None else parse_seconds("--duration", args.duration)
    isatty = getattr(out, "isatty", None)
    return _Options(
        data_dir=Path(args.data_dir),
        duration=duration,
        commit_interval=parse_seconds("--commit-interval", args.commit_interval, positive=True),
        delay=parse_interval("--delay", args.delay),
        seed=seed,
        live=not args.no_live and callable(isatty) and bool(isatty()),
    )


# -- child processes -------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Key:
    access_key_id: str
    secret_access_key: str

    @property
    def auth(self) -> tuple[str, str]:
        return self.access_key_id, self.secret_access_key


@dataclass(frozen=True, slots=True)
class _Child:
    name: str
    url: str
    log_path: Path
    process: subprocess.Popen[bytes]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def _new_key(region: str) -> _Key:
    return _Key(f"AKIADEMO{region.upper()}{secrets.token_hex(6).upper()}", secrets.token_hex(20))


def _clean_environment() -> dict[str, str]:
    """Return this process's environment without ``LAKEMIRROR_*`` variables.

    The demo runs on the embedded default whatever the shell configures for real deployments.
    """
    return {k: v for k, v in os.environ.items() if not k.upper().startswith("LAKEMIRROR_")}


def _tail(path: Path, lines: int = 15) -> str:
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return ""
    return "\n".join(text.splitlines()[-lines:])


class _Children:
    """Start ``lakemirror`` processes and make sure they all end."""

    def __init__(self, stop: threading.Event) -> None:
        self._stop = stop
        self._children: list[_Child] = []

    def spawn(
        self, name: str, args: list[str], port: int, log_path: Path, env: dict[str, str]
    ) -> _Child:
        command = [sys.executable, "-m", "mirror.cli.main", *args]
        with open(log_path, "wb") as log:
            # a session of its own: Ctrl-C at the terminal reaches the demo only, which then
            # finishes its report before stopping the children
            process = subprocess.Popen(
                command,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        child = _Child(name, f"http://127.0.0.1:{port}", log_path, process)
        self._children.append(child)
        return child

    def wait_healthy(self, child: _Child) -> None:
        """Wait until ``child`` answers ``/healthz``.

        Raises:
            _DemoError: it exited, did not answer within the deadline, or the demo was stopped.
        """
        deadline = time.monotonic() + _STARTUP_DEADLINE
        with httpx.Client(timeout=2.0) as client:
            while True:
                try:
                    if client.get(f"{child.url}/healthz").status_code == 200:
                        return
                except httpx.TransportError:
                    pass
                code = child.process.poll()
                if code is not None:
                    raise _DemoError(
                        f"{child.name} exited with code {code} while starting; the end of "
                        f"{child.log_path}:\n{_tail(child.log_path)}"
                    )
                if time.monotonic() > deadline:
                    raise _DemoError(
                        f"{child.name} did not answer within {_STARTUP_DEADLINE:g}s; the end of "
                        f"{child.log_path}:\n{_tail(child.log_path)}"
                    )
                if self._stop.wait(0.1):
                    raise _InterruptedError("interrupted while starting")

    def check_alive(self) -> None:
        """Raise :class:`_DemoError` if a child has exited."""
        for child in self._children:
            code = child.process.poll()
            if code is not None:
                raise _DemoError(
                    f"{child.name} exited with code {code}; the end of {child.log_path}:\n"
                    f"{_tail(child.log_path)}"
                )

    def stop_all(self) -> None:
        """Terminate every child (last started first); kill those left at the deadline."""
        for child in reversed(self._children):
            if child.process.poll() is None:
                child.process.terminate()
        deadline = time.monotonic() + _STOP_DEADLINE
        for child in reversed(self._children):
            try:
                child.process.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                child.process.kill()
                child.process.wait()
        self._children.clear()


# -- talking to the servers ------------------------------------------------------------------


def _check(response: httpx.Response, what: str, *expected: int) -> httpx.Response:
    if response.status_code not in (expected or (200,)):
        raise _DemoError(f"{what}: HTTP {response.status_code}: {response.text[:300]}")
    return response


def _create_replicator(api: httpx.Client) -> _Key:
    """Create user ``replicator`` with the built-in ``Replicator`` policy; return its new key."""
    _check(api.post("/auth/users", json={"id": "replicator"}), "create user replicator", 201)
    _check(
        api.put("/auth/users/replicator/policies/Replicator"),
        "attach policy Replicator to replicator",
        201,
    )
    created = _check(
        api.post("/auth/users/replicator/credentials"), "create replicator's key", 201
    ).json()
    return _Key(str(created["access_key_id"]), str(created["secret_access_key"]))


def _head(api: httpx.Client, repo: str) -> str | None:
    response = api.get(f"/repositories/{repo}/branches/{_BRANCH}")
    if response.status_code == 404:
        return None
    return str(_check(response, f"read {repo}/{_BRANCH}").json()["commit_id"])


def _paged(api: httpx.Client, path: str, what: str) -> Iterator[dict[str, Any]]:
    after = ""
    while True:
        body = _check(api.get(path, params={"after": after, "amount": 1000}), what).json()
        yield from body["results"]
        if not body["pagination"]["has_more"]:
            return
        after = body["pagination"]["next_offset"]


def _listing(api: httpx.Client, repo: str, commit: str) -> dict[str, tuple[int, str]]:
    """Return ``path → (size, checksum)`` of every object of ``repo`` at ``commit``."""
    rows = _paged(api, f"/repositories/{repo}/refs/{commit}/objects/ls", f"list {repo}@{commit}")
    return {
        str(r["path"]): (int(r["size_bytes"]), str(r["checksum"]))
        for r in rows
        if r.get("path_type", "object") == "object"
    }


def _history(api: httpx.Client, repo: str, commit: str) -> list[str]:
    rows = _paged(api, f"/repositories/{repo}/refs/{commit}/commits", f"log {repo}@{commit}")
    return [str(r["id"]) for r in rows]


def _read(api: httpx.Client, repo: str, commit: str, path: str) -> bytes | str:
    """Return an object's bytes, or why it could not be read."""
    response = api.get(f"/repositories/{repo}/refs/{commit}/objects", params={"path": path})
    if response.status_code != 200:
        return f"HTTP {response.status_code}: {response.text[:200]}"
    return response.content


def _metric_totals(text: str, mirror: str) -> dict[str, float]:
    """Sum the replicant's samples of ``mirror`` by ``name`` and ``name{op|result=value}``."""
    from prometheus_client.parser import text_string_to_metric_families

    totals: dict[str, float] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.labels.get("mirror") != mirror:
                continue
            totals[sample.name] = totals.get(sample.name, 0.0) + sample.value
            for label in ("op", "result"):
                if label in sample.labels:
                    key = f"{sample.name}{{{label}={sample.labels[label]}}}"
                    totals[key] = totals.get(key, 0.0) + sample.value
    return totals


# -- the writer ------------------------------------------------------------------------------


class _Writer:
    """Commit a few objects of mixed kinds and sizes to the source branch at a steady pace."""

    def __init__(self, api: httpx.Client, interval: float, rng: random.Random) -> None:
        self._api = api
        self._interval = interval
        self._rng = rng
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="demo-writer", daemon=True)
        self._lock = threading.Lock()
        self._live: list[str] = []
        self.commits: list[str] = []
        self.objects_written = 0
        self.objects_deleted = 0
        self.errors = 0
        self.last_error: str | None = None

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=_HTTP_TIMEOUT * 2)

    @property
    def head(self) -> str | None:
        with self._lock:
            return self.commits[-1] if self.commits else None

    def _run(self) -> None:
        number = 0
        next_at = time.monotonic()
        while not self._stop.wait(max(0.0, next_at - time.monotonic())):
            next_at = max(next_at + self._interval, time.monotonic())
            number += 1
            try:
                commit = self._commit(number)
            except (_DemoError, httpx.HTTPError) as exc:
                with self._lock:
                    self.errors += 1
                    self.last_error = str(exc)
                continue
            with self._lock:
                self.commits.append(commit)

    def _upload(self, path: str, body: bytes, content_type: str) -> None:
        _check(
            self._api.post(
                f"/repositories/{_SOURCE_REPO}/branches/{_BRANCH}/objects",
                params={"path": path},
                content=body,
                headers={"content-type": content_type},
            ),
            f"upload {path}",
            201,
        )
        self.objects_written += 1

    def _commit(self, number: int) -> str:
        rng = self._rng
        for i in range(rng.randint(1, 3)):
            kind = rng.choices(("csv", "json", "parquet"), weights=(3, 1, 3))[0]
            if kind == "parquet":
                path = f"tables/events/part-{number:05}-{i}.parquet"
                self._upload(path, self._parquet(number), "application/octet-stream")
            elif kind == "csv":
                path = f"raw/clicks/{number:05}-{i}.csv"
                self._upload(path, self._csv(number), "text/csv")
            else:
                path = f"raw/runs/{number:05}-{i}.json"
                self._upload(path, self._json(number, i), "application/json")
            self._live.append(path)
        if len(self._live) > 4 and rng.random() < 0.3:
            victim = self._live.pop(rng.randrange(len(self._live) - 1))
            _check(
                self._api.delete(
                    f"/repositories/{_SOURCE_REPO}/branches/{_BRANCH}/objects",
                    params={"path": victim},
                ),
                f"delete {victim}",
                204,
            )
            self.objects_deleted += 1
        # one object every commit rewrites: the mirror must show each version whole
        latest = json.dumps({"commit": number, "objects": len(self._live)}).encode()
        self._upload("state/latest.json", latest, "application/json")
        body = {"message": f"demo commit {number}", "metadata": {"writer": "lakemirror demo"}}
        response = self._api.post(
            f"/repositories/{_SOURCE_REPO}/branches/{_BRANCH}/commits", json=body
        )
        return str(_check(response, f"commit {number}", 201).json()["id"])

    def _csv(self, number: int) -> bytes:
        rows = self._rng.choice((5, 50, 500, 5000))
        lines = ["id,user,page,ms"]
        lines.extend(
            f"{number * 100_000 + r},u{self._rng.randrange(1000)},/p/{self._rng.randrange(50)},"
            f"{self._rng.randrange(5000)}"
            for r in range(rows)
        )
        return ("\n".join(lines) + "\n").encode()

    def _json(self, number: int, index: int) -> bytes:
        doc = {
            "run": number,
            "part": index,
            "started": time.time(),
            "params": {f"k{i}": self._rng.random() for i in range(self._rng.randint(1, 40))},
        }
        return json.dumps(doc, indent=1).encode()

    def _parquet(self, number: int) -> bytes:
        import pyarrow as pa
        import pyarrow.parquet as pq

        rows = self._rng.choice((100, 1_000, 10_000, 30_000))
        rng = self._rng
        table = pa.table(
            {
                "id": pa.array(range(number * 100_000, number * 100_000 + rows), pa.int64()),
                "value": pa.array([rng.random() for _ in range(rows)], pa.float64()),
                "country": pa.array([rng.choice(("de", "fr", "us", "jp")) for _ in range(rows)]),
            }
        )
        buffer = io.BytesIO()
        pq.write_table(table, buffer)
        return buffer.getvalue()


# -- observing -------------------------------------------------------------------------------


@dataclass(slots=True)
class _Snapshot:
    """What the view shows at one moment."""

    elapsed: float = 0.0
    source_head: str | None = None
    commits: int = 0
    writer_errors: int = 0
    mirror_head: str | None = None
    state: str = "starting"
    lag_seconds: float = 0.0
    lag_commits: int = 0
    advances: int = 0
    skipped: int = 0
    validated: int = 0
    missing_seen: int = 0
    requests: int = 0
    requests_by_op: dict[str, int] = field(default_factory=dict)
    pending: int = 0
    copied: int = 0
    dropped: int = 0
    problem: str | None = None


class _Observer:
    """Read the mirror's status and the replicant's metrics; keep the lag seen over time."""

    def __init__(self, replicant: httpx.Client, initial_head: str | None) -> None:
        self._replicant = replicant
        self._initial_head = initial_head
        self.last = _Snapshot()
        self.lag_seconds: list[float] = []
        self.lag_commits_max = 0

    def observe(
        self, elapsed: float, writer: _Writer, stats: ReplicationStats, *, sample: bool
    ) -> _Snapshot:
        snap = _Snapshot(
            elapsed=elapsed,
            source_head=writer.head or self._initial_head,
            commits=len(writer.commits),
            writer_errors=writer.errors,
            pending=stats.pending,
            copied=stats.copied,
            dropped=stats.dropped,
        )
        previous = self.last
        try:
            status = self._status()
            totals = _metric_totals(self._replicant.get("/metrics").text, _MIRROR_REPO)
        except (httpx.HTTPError, _DemoError, ValueError) as exc:
            snap.problem = f"replicant unreachable: {exc}"
            for name in ("mirror_head", "state", "lag_seconds", "lag_commits", "advances"):
                setattr(snap, name, getattr(previous, name))
            snap.skipped, snap.validated = previous.skipped, previous.validated
            snap.requests, snap.requests_by_op = previous.requests, previous.requests_by_op
            snap.missing_seen = previous.missing_seen
        else:
            if status is not None:
                snap.mirror_head = status.get("mirror_head")
                snap.state = str(status.get("state") or "waiting")
                snap.lag_seconds = float(status.get("lag_seconds") or 0.0)
                snap.lag_commits = int(status.get("lag_commits") or 0)
                if status.get("last_error"):
                    snap.problem = str(status["last_error"])
            snap.advances = int(totals.get("lakemirror_head_advances_total", 0))
            snap.skipped = int(totals.get("lakemirror_commits_skipped_total", 0))
            snap.validated = int(
                totals.get("lakemirror_validation_objects_total{result=present}", 0)
            )
            snap.missing_seen = int(
                totals.get("lakemirror_validation_objects_total{result=missing}", 0)
            )
            snap.requests = int(totals.get("lakemirror_validation_requests_total", 0))
            prefix = "lakemirror_validation_requests_total{op="
            snap.requests_by_op = {
                k[len(prefix) : -1]: int(v) for k, v in totals.items() if k.startswith(prefix)
            }
            if sample and status is not None:
                self.lag_seconds.append(snap.lag_seconds)
                self.lag_commits_max = max(self.lag_commits_max, snap.lag_commits)
        if snap.problem is None and writer.last_error and writer.errors:
            snap.problem = f"writer: {writer.last_error}"
        self.last = snap
        return snap

    def _status(self) -> dict[str, Any] | None:
        path = _MIRRORS_PATH.format(repo=_SOURCE_REPO) + f"/{_MIRROR_REPO}"
        body = _check(self._replicant.get(path), "read the mirror's status").json()
        for branch in body.get("status", []):
            if branch.get("branch") == _BRANCH:
                found: dict[str, Any] = branch
                return found
        return None


def _plural(count: int, noun: str) -> str:
    return f"{count} {noun}" + ("" if count == 1 else "s")


def _short(commit: str | None) -> str:
    return commit[:12] if commit else "-"


class _View:
    """Show snapshots: a block redrawn in place on a terminal, or a line every few seconds."""

    def __init__(self, out: TextIO, live: bool) -> None:
        self._out = out
        self._live = live
        self._drawn = 0
        self._next_line = 0.0

    def show(self, snap: _Snapshot) -> None:
        if not self._live:
            now = time.monotonic()
            if now >= self._next_line:
                self._next_line = now + _PLAIN_EVERY
                self._out.write(self._line(snap) + "\n")
                self._out.flush()
            return
        lines = self._block(snap)
        parts = [f"\x1b[{self._drawn}F"] if self._drawn else []
        parts.extend(f"\x1b[2K{line}\n" for line in lines)
        self._out.write("".join(parts))
        self._out.flush()
        self._drawn = len(lines)

    def detach(self) -> None:
        """Leave the block drawn so far in place: the next snapshot is drawn below it."""
        self._drawn = 0

    def _line(self, s: _Snapshot) -> str:
        line = (
            f"{s.elapsed:6.1f}s source {_short(s.source_head)} ({s.commits} commits) "
            f"mirror {_short(s.mirror_head)} {s.state} lag {s.lag_seconds:.1f}s/{s.lag_commits} "
            f"skipped {s.skipped} advances {s.advances} validated {s.validated} "
            f"s3 {s.requests} pending {s.pending}"
        )
        return line + (f" [{s.problem}]" if s.problem else "")

    def _block(self, s: _Snapshot) -> list[str]:
        return [
            f"elapsed       {s.elapsed:7.1f} s",
            f"source head   {_short(s.source_head)}  {_plural(s.commits, 'commit')} written"
            + (f", {s.writer_errors} failed" if s.writer_errors else ""),
            f"mirror head   {_short(s.mirror_head)}  {s.state:<10}  lag {s.lag_seconds:.1f} s, "
            f"{_plural(s.lag_commits, 'commit')}",
            f"replicant     {s.advances} head advances, {s.skipped} commits skipped, "
            f"{s.validated} objects validated, {s.requests} S3 requests",
            f"replication   {s.pending} objects pending, {s.copied} copied, "
            f"{s.dropped} deliveries dropped",
            f"              {(s.problem or '')[:110]}",
        ]


# -- the consistency check -------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Comparison:
    """The mirror against the source at the mirrored commit."""

    commit: str | None
    source_head: str | None
    objects: int = 0
    equal_bytes: int = 0
    listing_equal: bool = False
    history: int = 0
    history_equal: bool = False
    problems: tuple[str, ...] = ()

    @property
    def consistent(self) -> bool:
        return (
            self.commit is not None
            and self.listing_equal
            and self.history_equal
            and self.equal_bytes == self.objects
            and not self.problems
        )


def _compare(source: httpx.Client, mirror: httpx.Client, source_head: str | None) -> _Comparison:
    """Compare the mirror branch's head commit with the same commit in the source region."""
    commit = _head(mirror, _MIRROR_REPO)
    if commit is None:
        return _Comparison(None, source_head, problems=("the mirror branch does not exist",))
    problems: list[str] = []
    theirs = _listing(source, _SOURCE_REPO, commit)
    ours = _listing(mirror, _MIRROR_REPO, commit)
    listing_equal = theirs == ours
    if not listing_equal:
        extra = sorted(set(ours) - set(theirs))[:5]
        lacking = sorted(set(theirs) - set(ours))[:5]
        changed = sorted(p for p in set(ours) & set(theirs) if ours[p] != theirs[p])[:5]
        problems.append(
            f"listings differ: only on the mirror {extra}, only on the source {lacking}, "
            f"different size or checksum {changed}"
        )
    equal = 0
    for path in sorted(ours):
        mine = _read(mirror, _MIRROR_REPO, commit, path)
        origin = _read(source, _SOURCE_REPO, commit, path)
        if isinstance(mine, str):
            problems.append(f"{path}: mirror read failed: {mine}")
        elif isinstance(origin, str):
            problems.append(f"{path}: source read failed: {origin}")
        elif mine != origin:
            problems.append(f"{path}: {len(mine)} bytes on the mirror differ from the source's")
        else:
            equal += 1
    their_log = _history(source, _SOURCE_REPO, commit)
    our_log = _history(mirror, _MIRROR_REPO, commit)
    if their_log != our_log:
        problems.append(
            f"histories differ: {len(our_log)} commits on the mirror, {len(their_log)} on the "
            "source"
        )
    return _Comparison(
        commit=commit,
        source_head=source_head,
        objects=len(ours),
        equal_bytes=equal,
        listing_equal=listing_equal,
        history=len(our_log),
        history_equal=their_log == our_log,
        problems=tuple(problems),
    )


def _percentile(values: list[float], q: float) -> float:
    if not values:
        return 0.0
    if len(values) == 1:
        return values[0]
    return statistics.quantiles(values, n=100, method="inclusive")[round(q * 100) - 1]


def _report(
    out: TextIO,
    result: _Comparison,
    writer: _Writer,
    observer: _Observer,
    written_for: float,
) -> None:
    def say(text: str = "") -> None:
        print(text, file=out)

    s = observer.last
    say()
    say("consistency report")
    if result.commit is None:
        say("  mirrored commit   none")
    else:
        behind = (
            "the source head: the mirror caught up"
            if result.commit == result.source_head
            else f"the source head is {_short(result.source_head)}: the mirror is behind"
        )
        say(f"  mirrored commit   {result.commit}  ({behind})")
        say(
            f"  history           {result.history} commits, "
            + ("the same IDs in both regions" if result.history_equal else "DIFFERENT")
        )
        say(
            f"  listing           {result.objects} objects at that commit, "
            + (
                "the same paths, sizes and checksums in both regions"
                if result.listing_equal
                else "DIFFERENT"
            )
        )
        say(
            f"  contents          {result.equal_bytes} of {result.objects} objects equal byte "
            "for byte (mirror read from region b, source from region a)"
        )
    for problem in result.problems[:20]:
        say(f"  problem           {problem}")
    if len(result.problems) > 20:
        say(f"  problem           ... and {len(result.problems) - 20} more")
    if result.consistent:
        say(
            f"  result            CONSISTENT: the mirror matches the source byte for byte at "
            f"the mirrored commit {_short(result.commit)}"
        )
    else:
        say("  result            INCONSISTENT")
    say("totals")
    say(
        f"  commits written   {len(writer.commits)} in {written_for:.1f} s "
        f"({writer.objects_written} objects uploaded, {writer.objects_deleted} deleted"
        + (f", {writer.errors} commits failed" if writer.errors else "")
        + ")"
    )
    say(f"  head advances     {s.advances}")
    say(f"  commits skipped   {s.skipped}")
    say(
        f"  objects validated {s.validated} "
        f"(and {s.missing_seen} checks of objects not yet arrived)"
    )
    ops = ", ".join(f"{op} {n}" for op, n in sorted(s.requests_by_op.items()))
    say(f"  S3 requests       {s.requests}" + (f" ({ops})" if ops else ""))
    lags = observer.lag_seconds
    say(
        f"  lag               p50 {_percentile(lags, 0.5):.1f} s, max "
        f"{max(lags, default=0.0):.1f} s; at most {_plural(observer.lag_commits_max, 'commit')} "
        "behind"
    )
    say(f"  replication       {s.copied} objects copied, {s.dropped} deliveries dropped")


# -- the run ---------------------------------------------------------------------------------


@contextmanager
def _stop_on_signals(stop: threading.Event) -> Iterator[None]:
    """Set ``stop`` on SIGINT or SIGTERM; a second Ctrl-C interrupts at once (main thread only)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def handle(signum: int, frame: FrameType | None) -> None:
        stop.set()
        signal.signal(signal.SIGINT, signal.default_int_handler)

    previous = {sig: signal.signal(sig, handle) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def _ignore_interrupts() -> None:
    """Let Ctrl-C no longer interrupt: the clean-up that follows is bounded by deadlines."""
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGINT, signal.SIG_IGN)


def _prepare(data_dir: Path) -> tuple[Path, Path]:
    data_dir.mkdir(parents=True, exist_ok=True)
    regions = data_dir / "region-a", data_dir / "region-b"
    for region in regions:
        if region.exists():
            shutil.rmtree(region)
        region.mkdir()
    return regions


def _server_args(port: int, data_dir: Path) -> list[str]:
    return [
        "server",
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--data-dir",
        str(data_dir),
        "--log-format",
        "json",
    ]


def _replicant_config(
    path: Path, region_b: Path, port: int, a: tuple[str, _Key], b: tuple[str, _Key]
) -> None:
    config = {
        "data_dir": str(region_b),
        "replicant": {
            "region": _MIRROR_REGION,
            "host": "127.0.0.1",
            "port": port,
            "poll_interval": _REPLICANT_POLL,
            "lease_seconds": 5.0,
            "replica_id": "demo",
        },
        "regions": {
            "a": {
                "server_url": a[0],
                "access_key_id": a[1].access_key_id,
                "secret_access_key": a[1].secret_access_key,
            },
            "b": {
                "server_url": b[0],
                "access_key_id": b[1].access_key_id,
                "secret_access_key": b[1].secret_access_key,
            },
        },
        "logging": {"format": "json", "level": "info"},
    }
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    path.chmod(0o600)


@dataclass(frozen=True, slots=True)
class _Regions:
    """What runs once the demo is set up: API clients of both regions and of the replicant."""

    source: httpx.Client
    mirror: httpx.Client
    replicant: httpx.Client
    initial_head: str | None


class _Demo:
    """One run: start everything, write and watch, check the mirror, stop everything."""

    def __init__(self, options: _Options, out: TextIO, err: TextIO, stop: threading.Event) -> None:
        self.options = options
        self.out = out
        self.err = err
        self.stop = stop
        self.children = _Children(stop)
        self.clients: list[httpx.Client] = []
        self.simulator: ReplicationSimulator | None = None
        self.writer: _Writer | None = None

    def say(self, text: str = "") -> None:
        print(text, file=self.out, flush=True)

    def client(self, base_url: str, key: _Key) -> httpx.Client:
        http = httpx.Client(base_url=base_url, auth=key.auth, timeout=_HTTP_TIMEOUT)
        self.clients.append(http)
        return http

    def run(self) -> int:
        """Run the demo; return the exit code. Every child process is stopped on return."""
        logs = self.options.data_dir / "*.log"
        try:
            regions = self._start()
            result = self._write_and_watch(regions)
            self.say(f"logs: {logs}")
            return 0 if result.consistent else 1
        except _InterruptedError as exc:
            print(f"{_PROG}: {exc}", file=self.err, flush=True)
            return 130
        except (_DemoError, httpx.HTTPError) as exc:
            what = "HTTP request failed: " if isinstance(exc, httpx.HTTPError) else ""
            print(f"{_PROG}: {what}{exc}", file=self.err, flush=True)
            if any(self.options.data_dir.glob("*.log")):
                print(f"{_PROG}: logs: {logs}", file=self.err, flush=True)
            return 1
        except KeyboardInterrupt:
            print(f"{_PROG}: interrupted", file=self.err, flush=True)
            return 130
        finally:
            self._shut_down()

    def _start(self) -> _Regions:
        """Start both regions, the replicant and replication, and create the mirror."""
        from mirror.block import BlockResolver
        from mirror.simulate import ReplicationSimulator

        opts = self.options
        try:
            region_a, region_b = _prepare(opts.data_dir)
        except OSError as exc:
            raise _DemoError(f"cannot prepare {opts.data_dir}: {exc}") from exc
        key_a, key_b = _new_key("a"), _new_key("b")
        env = _clean_environment()
        port_a, port_b, port_r = _free_port(), _free_port(), _free_port()
        self.say(f"LakeMirror demo: two regions on 127.0.0.1, data and logs in {opts.data_dir}")
        a = self._server("a", port_a, region_a, key_a, env)
        b = self._server("b", port_b, region_b, key_b, env)
        self.children.wait_healthy(a)
        self.children.wait_healthy(b)
        for child, key in ((a, key_a), (b, key_b)):
            self.say(
                f"  {child.name:<10}{child.url}  admin key {key.access_key_id} / "
                f"{key.secret_access_key}"
            )
        source = self.client(f"{a.url}/api/v1", key_a)
        mirror = self.client(f"{b.url}/api/v1", key_b)
        replicator = _create_replicator(mirror)
        self.say(f"  region b  user replicator (policy Replicator), key {replicator.access_key_id}")
        config = opts.data_dir / "replicant.yaml"
        _replicant_config(config, region_b, port_r, (a.url, key_a), (b.url, replicator))
        rep = self.children.spawn(
            "replicant",
            ["replicant", "--config", str(config)],
            port_r,
            opts.data_dir / "replicant.log",
            env,
        )
        # the repository is created while the replicant starts
        repository = {
            "name": _SOURCE_REPO,
            "storage_namespace": f"local://{_SOURCE_REPO}",
            "default_branch": _BRANCH,
        }
        what = f"create repository {_SOURCE_REPO} in region a"
        _check(source.post("/repositories", json=repository), what, 201)
        initial = _head(source, _SOURCE_REPO)
        self.say(f"  region a  repository {_SOURCE_REPO} at local://{_SOURCE_REPO}")
        self.children.wait_healthy(rep)
        self.say(f"  replicant {rep.url}/service/replication/v1 (region b, config {config})")
        low, high = opts.delay
        self.simulator = ReplicationSimulator(
            BlockResolver(region_a).open(f"local://{_SOURCE_REPO}"),
            BlockResolver(region_b).open(f"local://{_MIRROR_REPO}"),
            seed=opts.seed,
            delay=opts.delay,
            drop_probability=opts.drop_probability,
            drop_for=_DROP_FOR,
            poll_interval=opts.replication_poll,
        )
        self.simulator.start()
        self.say(
            f"  replication  region a local://{_SOURCE_REPO} -> region b local://{_MIRROR_REPO}: "
            f"{low:g}-{high:g} s late, random order, {opts.drop_probability:.0%} of deliveries "
            "dropped and retried"
        )
        replicant = self.client(rep.url, key_b)
        body = {
            "name": _MIRROR_REPO,
            "region": _MIRROR_REGION,
            "storage_namespace": f"local://{_MIRROR_REPO}",
        }
        mirrors = _MIRRORS_PATH.format(repo=_SOURCE_REPO)
        response = _check(replicant.post(mirrors, json=body), "create the mirror", 201)
        self.say(
            f"  mirror     POST {mirrors} -> {response.status_code}: "
            f"{_SOURCE_REPO} (region a) -> {_MIRROR_REPO} (region b)"
        )
        return _Regions(source, mirror, replicant, initial)

    def _server(
        self, region: str, port: int, data_dir: Path, key: _Key, env: dict[str, str]
    ) -> _Child:
        environment = {
            **env,
            "LAKEMIRROR_ADMIN_ACCESS_KEY_ID": key.access_key_id,
            "LAKEMIRROR_ADMIN_SECRET_ACCESS_KEY": key.secret_access_key,
        }
        args = _server_args(port, data_dir)
        log = self.options.data_dir / f"region-{region}.log"
        return self.children.spawn(f"region {region}", args, port, log, environment)

    def _write_and_watch(self, regions: _Regions) -> _Comparison:
        """Commit and show progress until the end; let the mirror catch up; compare."""
        opts = self.options
        simulator = self.simulator
        assert simulator is not None  # started by _start
        writer = self.writer = _Writer(
            regions.source, opts.commit_interval, random.Random(opts.seed)
        )
        observer = _Observer(regions.replicant, regions.initial_head)
        view = _View(self.out, opts.live)
        until = "until Ctrl-C" if opts.duration is None else f"for {opts.duration:g} s"
        self.say(f"writing a commit every {opts.commit_interval:g} s {until} (Ctrl-C stops)")
        self.say()
        started = time.monotonic()
        writer.start()
        while not self.stop.is_set():
            elapsed = time.monotonic() - started
            if opts.duration is not None and elapsed >= opts.duration:
                break
            self.children.check_alive()
            view.show(observer.observe(elapsed, writer, simulator.stats, sample=True))
            wait = _OBSERVE_EVERY
            if opts.duration is not None:
                wait = max(0.0, min(wait, opts.duration - elapsed))
            self.stop.wait(wait)
        writer.stop()
        written_for = time.monotonic() - started
        target = writer.head or regions.initial_head
        patience = _CATCH_UP_DEADLINE + 2 * opts.delay[1]
        view.detach()
        self.say()
        self.say(
            f"stopped writing; waiting up to {patience:g} s for the mirror to reach "
            f"{_short(target)}"
        )
        deadline = time.monotonic() + patience
        while time.monotonic() < deadline and _head(regions.mirror, _MIRROR_REPO) != target:
            view.show(
                observer.observe(time.monotonic() - started, writer, simulator.stats, sample=False)
            )
            time.sleep(_OBSERVE_EVERY)  # pacing of a deadline-bounded wait
        observer.observe(time.monotonic() - started, writer, simulator.stats, sample=False)
        result = _compare(regions.source, regions.mirror, target)
        _report(self.out, result, writer, observer, written_for)
        return result

    def _shut_down(self) -> None:
        """Stop the writer, replication, and every child process, whatever happened."""
        _ignore_interrupts()
        if self.writer is not None:
            self.writer.stop()
        if self.simulator is not None:
            try:
                self.simulator.stop()
            except Exception as exc:
                print(f"{_PROG}: replication simulator: {exc}", file=self.err, flush=True)
        for http in self.clients:
            http.close()
        self.children.stop_all()


@dataclass(frozen=True, slots=True)
class DemoRegions:
    """The demo's two running regions and the mirror between them, for scripts and benchmarks.

    ``source`` and ``mirror`` are administrator clients of the regions' ``/api/v1``;
    ``replicant`` is signed in to the configuration API with region ``b``'s administrator key.
    """

    source: httpx.Client
    mirror: httpx.Client
    replicant: httpx.Client
    simulator: ReplicationSimulator
    source_repo: str
    mirror_repo: str
    branch: str
    initial_head: str | None


@contextmanager
def demo_regions(
    data_dir: Path,
    *,
    delay: tuple[float, float] = (0.0, 2.0),
    drop_probability: float = _DROP_PROBABILITY,
    replication_poll: float = 0.1,
    seed: int | None = None,
    out: TextIO | None = None,
) -> Iterator[DemoRegions]:
    """Start what the demo starts (no writer, no view) and stop it all when the block ends.

    ``replication_poll`` is how often the simulator looks for new files: the time it takes to
    notice one comes on top of ``delay``.

    Raises:
        LakeMirrorError: a process did not start, or a set-up request failed.
    """
    options = _Options(data_dir, None, 1.0, delay, seed, False, drop_probability, replication_poll)
    demo = _Demo(options, out or io.StringIO(), out or io.StringIO(), threading.Event())
    try:
        regions = demo._start()
        assert demo.simulator is not None  # started by _start
        yield DemoRegions(
            regions.source,
            regions.mirror,
            regions.replicant,
            demo.simulator,
            _SOURCE_REPO,
            _MIRROR_REPO,
            _BRANCH,
            regions.initial_head,
        )
    finally:
        demo._shut_down()


def run_demo(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    """Run the demo ``args`` (from :func:`register_demo_command`) describe; return the exit code.

    Returns 0 when the mirror equals the source at the mirrored commit, 1 when it does not or
    a step fails (one line on ``err`` naming it, and where the logs are), 2 on a bad argument.
    The servers and the replicant run as child processes and are always stopped before return.
    """
    try:
        options = _options(args, out)
    except _UsageError as exc:
        print(f"{_PROG}: {exc}", file=err, flush=True)
        return 2
    stop = threading.Event()
    with _stop_on_signals(stop):
        return _Demo(options, out, err, stop).run()


def _main() -> int:
    parser = argparse.ArgumentParser(prog="lakemirror")
    register_demo_command(parser.add_subparsers(dest="command", required=True))
    return run_demo(parser.parse_args(), sys.stdout, sys.stderr)


if __name__ == "__main__":
    sys.exit(_main())
