"""The S3 gateway beside the REST API: latency and server CPU per request, and streaming memory.

Run ``python -m bench.gateway`` (options: ``--small``, ``--large``, ``--lists``, ``--stream-mib``,
``--part-mib``, ``--log-level``). It starts ``lakemirror server`` on the embedded default (SQLite
KV + local disk) in a temporary data directory, on a free port of 127.0.0.1, with a bootstrap
administrator whose key both clients use (:func:`bench.processes.lakemirror_server`; no
``LAKEMIRROR_*`` variable of the caller's environment reaches it).

Table 1 sends, one request at a time, the same operations through the gateway (boto3: SigV4,
path style, ``http://``) and through the REST API (httpx, HTTP Basic):

- **PUT 1 KiB** / **PUT 16 MiB**: a new path each time (``put_object`` / ``POST …/objects``);
- **GET 1 KiB** / **GET 16 MiB**: whole objects, read to the end;
- **list 1,000**: one page of 1,000 keys of 1,000 committed objects (``list_objects_v2`` with
  ``MaxKeys=1000`` / ``GET …/objects/ls?amount=1000``).

Each cell starts with one untimed request. Server CPU is the server's user + system CPU during
the cell (its whole process tree) per timed request.

Table 2 streams objects of ``--stream-mib`` sizes (default 256 and 1024 MiB) in and out through
the gateway — in with ``upload_fileobj`` (a multipart upload of ``--part-mib`` parts, assembled by
the server), out with ``download_fileobj`` (ranged GETs in parallel, as boto3 does) and with one
plain ``get_object`` read to the end — from a generated stream (no file of that size on disk on
the client side), checking size and SHA-256 of what comes back. The server's peak resident memory
is read from ``VmHWM`` of its processes, reset (``/proc/<pid>/clear_refs``) before each row: a
bounded peak stays the same when the object grows fourfold.
"""

from __future__ import annotations

import argparse
import hashlib
import io
import os
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import boto3
import botocore
import httpx
from boto3.s3.transfer import TransferConfig
from botocore.config import Config

from bench.api import LOG_LEVELS
from bench.machine import describe, run_footer
from bench.processes import lakemirror_server
from bench.procfs import tree_cpu
from bench.tables import markdown

__all__ = ["main"]

API = "/api/v1"
REPO = "bench"
KiB, MiB = 1 << 10, 1 << 20
LIST_OBJECTS = 1000
DEFAULT_SMALL = 200
DEFAULT_LARGE = 10
DEFAULT_LISTS = 30
DEFAULT_STREAM_MIB = (256, 1024)
DEFAULT_PART_MIB = 16
REQUEST_TIMEOUT = 600.0


def _log(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


def _body(tag: str, size: int) -> bytes:
    block = hashlib.sha256(tag.encode()).digest() * (KiB // 32)
    return (block * (size // len(block) + 1))[:size]


def _check(response: httpx.Response, *expected: int) -> httpx.Response:
    if response.status_code not in expected:
        raise SystemExit(
            f"{response.request.method} {response.request.url.path} answered "
            f"{response.status_code}: {response.text[:300]}"
        )
    return response


@dataclass
class Cell:
    """The timed requests of one operation through one interface."""

    operation: str
    interface: str
    latencies: list[float]
    cpu: float | None

    def percentile_ms(self, q: float) -> float:
        """Return the ``q``-th percentile (nearest rank) of the latencies in milliseconds."""
        ordered = sorted(self.latencies)
        rank = max(1, -(-len(ordered) * q // 100))
        return ordered[int(rank) - 1] * 1000.0

    @property
    def cpu_ms(self) -> float | None:
        """Return the server's CPU milliseconds per timed request."""
        return None if self.cpu is None else self.cpu * 1000.0 / len(self.latencies)


def run_cell(
    operation: str, interface: str, send: Callable[[int], None], requests: int, pid: int
) -> Cell:
    """Time ``requests`` calls of ``send(i)`` after one untimed call ``send(-1)``."""
    _log(f"{operation} through {interface}: {requests} requests")
    send(-1)
    latencies: list[float] = []
    cpu_before = tree_cpu(pid)
    for i in range(requests):
        start = time.perf_counter()
        send(i)
        latencies.append(time.perf_counter() - start)
    cpu_after = tree_cpu(pid)
    cpu = None if cpu_before is None or cpu_after is None else cpu_after - cpu_before
    return Cell(operation, interface, latencies, cpu)


class Clients:
    """The two ways in: boto3 through the gateway, httpx through the REST API."""

    def __init__(self, url: str, key: tuple[str, str]) -> None:
        self.s3: Any = boto3.client(
            "s3",
            endpoint_url=url,
            region_name="us-east-1",
            aws_access_key_id=key[0],
            aws_secret_access_key=key[1],
            config=Config(
                s3={"addressing_style": "path"},
                retries={"total_max_attempts": 1},
                max_pool_connections=16,
                read_timeout=REQUEST_TIMEOUT,
            ),
        )
        self.http = httpx.Client(base_url=f"{url}{API}", auth=key, timeout=REQUEST_TIMEOUT)
        self.objects = f"/repositories/{REPO}/branches/main/objects"
        self.read_url = f"/repositories/{REPO}/refs/main/objects"

    def close(self) -> None:
        """Close the HTTP client."""
        self.http.close()

    # the gateway

    def gw_put(self, path: str, data: bytes) -> None:
        self.s3.put_object(Bucket=REPO, Key=f"main/{path}", Body=data)

    def gw_get(self, path: str, size: int) -> None:
        got = self.s3.get_object(Bucket=REPO, Key=f"main/{path}")["Body"].read()
        if len(got) != size:
            raise SystemExit(f"gateway GET {path}: {len(got)} bytes, not {size}")

    def gw_list(self) -> None:
        page = self.s3.list_objects_v2(Bucket=REPO, Prefix="main/list/", MaxKeys=LIST_OBJECTS)
        if page["KeyCount"] != LIST_OBJECTS:
            raise SystemExit(f"gateway listing: {page['KeyCount']} keys")

    # the REST API

    def api_put(self, path: str, data: bytes) -> None:
        _check(self.http.post(self.objects, params={"path": path}, content=data), 201)

    def api_get(self, path: str, size: int) -> None:
        got = _check(self.http.get(self.read_url, params={"path": path}), 200).content
        if len(got) != size:
            raise SystemExit(f"API GET {path}: {len(got)} bytes, not {size}")

    def api_list(self) -> None:
        url = f"/repositories/{REPO}/refs/main/objects/ls"
        page = _check(self.http.get(url, params={"prefix": "list/", "amount": LIST_OBJECTS}), 200)
        if len(page.json()["results"]) != LIST_OBJECTS:
            raise SystemExit("API listing: not a full page")


def prepare(clients: Clients, *, with_objects: bool) -> None:
    """Create the repository, and (``with_objects``) 1,000 committed objects and objects to read."""
    _check(
        clients.http.post(
            "/repositories", json={"name": REPO, "storage_namespace": f"local://{REPO}"}
        ),
        201,
    )
    if not with_objects:
        return
    _log(f"uploading {LIST_OBJECTS} objects to list")
    for i in range(LIST_OBJECTS):
        clients.api_put(f"list/part-{i:04d}.bin", _body(str(i), 64))
    for size, name in ((KiB, "1k"), (16 * MiB, "16m")):
        clients.api_put(f"read/{name}.bin", _body(name, size))
    _check(
        clients.http.post(
            f"/repositories/{REPO}/branches/main/commits", json={"message": "bench data"}
        ),
        201,
    )


def latency_cells(clients: Clients, pid: int, small: int, large: int, lists: int) -> list[Cell]:
    """Measure every operation through both interfaces, one after the other."""
    cells: list[Cell] = []
    for size, label, requests in ((KiB, "1 KiB", small), (16 * MiB, "16 MiB", large)):
        data = _body(label, size)
        name = "1k" if size == KiB else "16m"
        for interface, put in (("gateway", clients.gw_put), ("REST API", clients.api_put)):
            tag = "gw" if interface == "gateway" else "api"

            def send_put(
                i: int, put: Any = put, tag: str = tag, name: str = name, data: bytes = data
            ) -> None:
                put(f"put/{tag}-{name}-{i + 1}.bin", data)

            cells.append(run_cell(f"PUT {label}", interface, send_put, requests, pid))
        for interface, get in (("gateway", clients.gw_get), ("REST API", clients.api_get)):

            def send_get(i: int, get: Any = get, name: str = name, size: int = size) -> None:
                get(f"read/{name}.bin", size)

            cells.append(run_cell(f"GET {label}", interface, send_get, requests, pid))
    for interface, listing in (("gateway", clients.gw_list), ("REST API", clients.api_list)):
        cells.append(
            run_cell(f"list {LIST_OBJECTS:,}", interface, lambda i, f=listing: f(), lists, pid)
        )
    return cells


class Generated(io.RawIOBase):
    """``size`` bytes of a repeating pattern, generated as they are read (no file on disk)."""

    def __init__(self, size: int) -> None:
        super().__init__()
        self._size = size
        self._pos = 0
        block = os.urandom(MiB + 7)  # not a multiple of a part: parts differ
        self._period = len(block)
        self._twice = memoryview(block + block)
        self.sha256 = hashlib.sha256()

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        n = min(len(buffer), self._size - self._pos, self._period)
        if n <= 0:
            return 0
        offset = self._pos % self._period
        piece = self._twice[offset : offset + n]
        buffer[:n] = piece
        self.sha256.update(piece)
        self._pos += n
        return n


class Sink(io.RawIOBase):
    """A writable stream that keeps only the size and SHA-256 of what it receives, in order."""

    def __init__(self) -> None:
        super().__init__()
        self.size = 0
        self.sha256 = hashlib.sha256()

    def writable(self) -> bool:
        return True

    def write(self, data: Any) -> int:
        chunk = bytes(data)
        self.sha256.update(chunk)
        self.size += len(chunk)
        return len(chunk)


def _pids(pid: int) -> list[int]:
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                fields = (entry / "stat").read_text().rpartition(")")[2].split()
            except OSError:
                continue
            children.setdefault(int(fields[1]), []).append(int(entry.name))
    found, pending = [pid], list(children.get(pid, ()))
    while pending:
        child = pending.pop()
        found.append(child)
        pending += children.get(child, ())
    return found


def _status_kib(pid: int, field: str) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    return 0


def reset_peak(pid: int) -> None:
    """Reset the peak resident size (``VmHWM``) of the server's processes to their current one."""
    for p in _pids(pid):
        Path(f"/proc/{p}/clear_refs").write_text("5")


def peak_mib(pid: int) -> float:
    """Return the largest ``VmHWM`` of the server's processes, in MiB."""
    return max(_status_kib(p, "VmHWM") for p in _pids(pid)) / 1024


@dataclass
class StreamRow:
    """Streaming one object through the gateway, and the server's peak memory meanwhile."""

    size_mib: int
    step: str
    seconds: float
    peak_mib: float
    baseline_mib: float
    cpu: float | None


def stream_rows(clients: Clients, pid: int, sizes: Sequence[int], part_mib: int) -> list[StreamRow]:
    """Stream each size in and out through the gateway; check what comes back."""
    rows: list[StreamRow] = []
    config = TransferConfig(
        multipart_threshold=part_mib * MiB, multipart_chunksize=part_mib * MiB, max_concurrency=4
    )
    for size_mib in sizes:
        key = f"main/stream/{size_mib}.bin"
        source = Generated(size_mib * MiB)
        steps: list[tuple[str, Callable[[], Sink | None]]] = [
            (
                f"in: upload_fileobj, {part_mib} MiB parts",
                lambda k=key, s=source: clients.s3.upload_fileobj(s, REPO, k, Config=config),
            ),
            ("out: download_fileobj", lambda k=key: _download(clients, k, config)),
            ("out: get_object, one GET", lambda k=key: _get_whole(clients, k)),
        ]
        for step, action in steps:
            _log(f"{size_mib} MiB, {step}")
            base = max(_status_kib(p, "VmRSS") for p in _pids(pid)) / 1024
            reset_peak(pid)
            cpu_before = tree_cpu(pid)
            start = time.perf_counter()
            sink = action()
            seconds = time.perf_counter() - start
            cpu_after = tree_cpu(pid)
            cpu = None if cpu_before is None or cpu_after is None else cpu_after - cpu_before
            if sink is not None and (
                sink.size != size_mib * MiB or sink.sha256.digest() != source.sha256.digest()
            ):
                raise SystemExit(f"{key}: {sink.size} bytes came back, not what went in")
            rows.append(StreamRow(size_mib, step, seconds, peak_mib(pid), base, cpu))
        clients.s3.delete_object(Bucket=REPO, Key=key)
    return rows


def _download(clients: Clients, key: str, config: TransferConfig) -> Sink:
    # download_fileobj writes ranges out of order to a seekable file; keep it on disk, hash after
    with tempfile.TemporaryFile() as f:
        clients.s3.download_fileobj(REPO, key, f, Config=config)
        f.seek(0)
        sink = Sink()
        while chunk := f.read(8 * MiB):
            sink.write(chunk)
        return sink


def _get_whole(clients: Clients, key: str) -> Sink:
    sink = Sink()
    body = clients.s3.get_object(Bucket=REPO, Key=key)["Body"]
    for chunk in body.iter_chunks(MiB):
        sink.write(chunk)
    return sink


def format_latency(cells: Sequence[Cell]) -> str:
    """Return table 1: each operation through the gateway and the REST API."""
    by = {(c.operation, c.interface): c for c in cells}
    body = []
    for c in cells:
        other = by.get((c.operation, "REST API"))
        ratio = (
            "-"
            if c.interface == "REST API" or other is None
            else f"{c.percentile_ms(50) / other.percentile_ms(50):.2f}x"
        )
        body.append(
            [
                c.operation,
                c.interface,
                f"{len(c.latencies):,}",
                f"{c.percentile_ms(50):.2f}",
                f"{c.percentile_ms(90):.2f}",
                "-" if c.cpu_ms is None else f"{c.cpu_ms:.2f}",
                ratio,
            ]
        )
    header = ["operation", "via", "requests", "p50 ms", "p90 ms", "server CPU ms/req", "p50 vs API"]
    return markdown(header, body, left=2)


def format_streams(rows: Sequence[StreamRow]) -> str:
    """Return table 2: streaming through the gateway and the server's peak memory."""
    body = [
        [
            f"{r.size_mib:,} MiB",
            r.step,
            f"{r.seconds:.1f}",
            f"{r.size_mib / r.seconds:,.0f}",
            "-" if r.cpu is None else f"{r.cpu:.1f}",
            f"{r.baseline_mib:.0f}",
            f"{r.peak_mib:.0f}",
        ]
        for r in rows
    ]
    header = [
        "object",
        "step",
        "seconds",
        "MiB/s",
        "server CPU s",
        "server RSS before MiB",
        "server peak RSS MiB",
    ]
    return markdown(header, body, left=2)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the benchmark and print the tables."""
    parser = argparse.ArgumentParser(
        prog="python -m bench.gateway",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--small", type=int, default=DEFAULT_SMALL, help="1 KiB requests/cell")
    parser.add_argument("--large", type=int, default=DEFAULT_LARGE, help="16 MiB requests/cell")
    parser.add_argument("--lists", type=int, default=DEFAULT_LISTS, help="listings per cell")
    parser.add_argument(
        "--stream-mib",
        type=int,
        nargs="*",
        default=list(DEFAULT_STREAM_MIB),
        help="object sizes streamed through the gateway (none: skip table 2)",
    )
    parser.add_argument("--part-mib", type=int, default=DEFAULT_PART_MIB, help="upload part size")
    parser.add_argument("--log-level", default="warning", choices=LOG_LEVELS)
    args = parser.parse_args(argv)
    if min(args.small, args.large, args.lists, args.part_mib, *args.stream_mib) < 1:
        parser.error("counts and sizes must be positive")
    if args.part_mib < 5:
        parser.error("--part-mib: S3's smallest part is 5 MiB")
    started, load = time.perf_counter(), os.getloadavg()[0]
    with tempfile.TemporaryDirectory(prefix="bench-gateway-") as tmp:
        # one server for the latencies, a fresh one for the streams: the first one's resident
        # memory after 16 MiB bodies would hide the streams' own peak
        cells: list[Cell] = []
        rows: list[StreamRow] = []
        for part, stage in enumerate(("latencies", "streams")):
            if stage == "streams" and not args.stream_mib:
                break
            root = Path(tmp) / stage
            root.mkdir()
            with lakemirror_server(root, args.log_level) as (url, key, pid):
                clients = Clients(url, key)
                try:
                    prepare(clients, with_objects=part == 0)
                    if stage == "latencies":
                        cells = latency_cells(clients, pid, args.small, args.large, args.lists)
                    else:
                        rows = stream_rows(clients, pid, args.stream_mib, args.part_mib)
                finally:
                    clients.close()
    print(
        "machine: "
        + describe(
            ("boto3", boto3.__version__),
            ("botocore", botocore.__version__),
            ("httpx", httpx.__version__),
        )
    )
    print(
        f"command: python -m bench.gateway --small {args.small} --large {args.large} "
        f"--lists {args.lists} --stream-mib {' '.join(map(str, args.stream_mib))} "
        f"--part-mib {args.part_mib} --log-level {args.log_level}"
    )
    for note in (
        "server: lakemirror server (embedded SQLite + local disk, one worker) on 127.0.0.1, "
        "one for table 1 and a fresh one for table 2; clients on the same machine, one "
        "request at a time (download_fileobj: 4 threads)",
        "gateway: boto3 (SigV4, path style, http://); REST API: httpx with HTTP Basic",
        "server CPU ms/req: the server's user + system CPU during the cell per timed request",
        "p50 vs API: the gateway's p50 over the REST API's for the same operation",
    ):
        print(note)
    print()
    print(format_latency(cells))
    if rows:
        print()
        print(format_streams(rows))
        print()
        print(
            "peak RSS: the largest VmHWM of the server's processes, reset before each step; "
            "RSS before: the server's resident size when the step started; server CPU s: its "
            "user + system CPU during the step (the upload includes assembling the parts)"
        )
    print()
    print(run_footer(started, load))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
