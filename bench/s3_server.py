"""An S3 server process for benchmarks: moto's S3, filled in-process, counting its requests.

``python -m bench.s3_server HOST PORT [--bucket NAME ...] [--fill BUCKET/PREFIX:N ...]``
creates the buckets, puts ``N`` data objects under ``PREFIX`` of ``BUCKET`` straight into moto's
S3 backend (:func:`data_address` and :func:`data_size` name them), and only then serves moto's
S3 API over HTTP, threaded as ``moto_server`` is. Filling in-process takes ~35 µs an object; the
same over HTTP, one ``PutObject`` each, takes hours.

Every request is counted by S3 operation (``ListObjectsV2``, ``GetObject``, ``HeadObject``, ...)
with the time the server spent answering it. ``GET /_bench/requests`` returns the counts as JSON
(``{"ops": {op: {"count": n, "seconds": s}}, "pid": pid}``), ``POST /_bench/reset`` zeroes them.

moto lists a bucket by walking all its keys and sorting those under the prefix, for every page:
with a million keys one ``ListObjectsV2`` page costs the server about a second. With
``--indexed-listing`` (or ``POST /_bench/listing?indexed=1``) a page is cut from a sorted index of
the bucket's keys instead (rebuilt whenever the bucket's key count changes), answering the same
pages as moto; ``?indexed=0`` restores moto's own listing, so that both rates can be measured on
the same server.

moto's server (werkzeug's) closes the connection after every answer, so each request of a client
opens a new one. With ``--keep-alive`` the same application is served by waitress (8 threads),
which keeps HTTP/1.1 connections open as S3 does.
"""

from __future__ import annotations

import argparse
import bisect
import json
import os
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterable
from typing import Any
from urllib.parse import parse_qs

__all__ = ["DATA_PARTITION", "data_address", "data_size", "main", "operation"]

DATA_PARTITION = 50_000
"""Data objects per data prefix, as ``DataPathProvider`` rotates them."""

_CONTROL = "/_bench/"

StartResponse = Callable[..., Any]


def data_address(i: int) -> str:
    """Return the namespace-relative address of data object ``i`` (addresses sort by index)."""
    return f"data/g{i // DATA_PARTITION:07d}bulkload/{i:026d}"


def data_size(i: int) -> int:
    """Return the size of data object ``i``: a few bytes."""
    return i % 4


def operation(method: str, path: str, query: str, headers: dict[str, str]) -> str:
    """Return the S3 operation name of a path-style request."""
    parts = path.lstrip("/").split("/", 1)
    has_key = len(parts) == 2 and parts[1] != ""
    params = parse_qs(query, keep_blank_values=True)
    if not parts[0]:
        return "ListBuckets"
    if not has_key:
        if method == "GET":
            if "list-type" in params:
                return "ListObjectsV2"
            if "location" in params:
                return "GetBucketLocation"
            return "ListObjects"
        if method == "POST" and "delete" in params:
            return "DeleteObjects"
        return {"HEAD": "HeadBucket", "PUT": "CreateBucket", "DELETE": "DeleteBucket"}.get(
            method, f"{method} bucket"
        )
    if method == "PUT":
        return "CopyObject" if "HTTP_X_AMZ_COPY_SOURCE" in headers else "PutObject"
    return {"GET": "GetObject", "HEAD": "HeadObject", "DELETE": "DeleteObject"}.get(
        method, f"{method} object"
    )


class Counts:
    """Requests and server seconds by operation, safe across the server's threads."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.count: Counter[str] = Counter()
        self.seconds: Counter[str] = Counter()

    def add(self, op: str, seconds: float) -> None:
        """Count one request of ``op`` that took ``seconds``."""
        with self._lock:
            self.count[op] += 1
            self.seconds[op] += seconds

    def reset(self) -> None:
        """Forget every request counted."""
        with self._lock:
            self.count.clear()
            self.seconds.clear()

    def as_json(self) -> dict[str, dict[str, float]]:
        """Return ``{op: {"count": n, "seconds": s}}``."""
        with self._lock:
            return {op: {"count": n, "seconds": self.seconds[op]} for op, n in self.count.items()}


class KeyIndex:
    """Sorted key names of moto's buckets, for listing pages by bisection."""

    def __init__(self) -> None:
        self.enabled = False
        self._lock = threading.Lock()
        self._names: dict[str, tuple[int, list[str]]] = {}

    def names(self, bucket: Any) -> list[str]:
        """Return the sorted key names of ``bucket``, rebuilt when its key count changed."""
        size = len(bucket.keys)
        with self._lock:
            known = self._names.get(bucket.name)
            if known is None or known[0] != size:
                known = (size, sorted(bucket.keys.keys()))
                self._names[bucket.name] = known
            return known[1]


def install_index(index: KeyIndex) -> None:
    """Make moto's ``list_objects_v2`` cut pages from ``index`` while it is enabled."""
    from moto.s3.models import FakeKey, S3Backend

    original = S3Backend.list_objects_v2

    def list_objects_v2(
        self: Any,
        bucket: Any,
        prefix: str | None,
        delimiter: str | None,
        continuation_token: str | None,
        start_after: str | None,
        max_keys: int,
    ) -> Any:
        if not index.enabled or delimiter or type(bucket.keys).__name__ != "_VersionedKeyStore":
            return original(
                self, bucket, prefix, delimiter, continuation_token, start_after, max_keys
            )
        prefix = prefix or ""
        names = index.names(bucket)
        limit = (
            self._pagination_tokens.get(continuation_token) if continuation_token else start_after
        )
        first = bisect.bisect_left(names, prefix)
        if limit:
            first = max(first, bisect.bisect_right(names, limit))
        found: list[FakeKey] = []
        for name in names[first : first + max_keys + 1]:
            if not name.startswith(prefix):
                break
            found.append(bucket.keys[name])
        return self._truncate_result(found, max_keys)

    S3Backend.list_objects_v2 = list_objects_v2


class CountingApp:
    """WSGI middleware: count S3 requests by operation and serve the ``/_bench/`` endpoints."""

    def __init__(self, app: Callable[..., Iterable[bytes]], index: KeyIndex) -> None:
        self.app = app
        self.counts = Counts()
        self.index = index

    def _control(self, environ: dict[str, Any], start_response: StartResponse) -> list[bytes]:
        path = environ["PATH_INFO"]
        method = environ["REQUEST_METHOD"]
        body: object
        if path == "/_bench/requests" and method == "GET":
            body = {"ops": self.counts.as_json(), "pid": os.getpid()}
        elif path == "/_bench/reset" and method == "POST":
            self.counts.reset()
            body = {"reset": True}
        elif path == "/_bench/listing" and method == "POST":
            params = parse_qs(environ.get("QUERY_STRING", ""))
            self.index.enabled = params.get("indexed", ["1"])[0] == "1"
            body = {"indexed": self.index.enabled}
        else:
            start_response("404 Not Found", [("Content-Type", "application/json")])
            return [b'{"error": "not found"}']
        start_response("200 OK", [("Content-Type", "application/json")])
        return [json.dumps(body).encode()]

    def __call__(self, environ: dict[str, Any], start_response: StartResponse) -> Iterable[bytes]:
        path = environ.get("PATH_INFO", "")
        if path.startswith(_CONTROL):
            return self._control(environ, start_response)
        op = operation(
            environ["REQUEST_METHOD"], path, environ.get("QUERY_STRING", ""), dict(environ)
        )
        started = time.perf_counter()
        # the body is produced eagerly so that the time counted is the server's whole answer
        chunks = list(self.app(environ, start_response))
        self.counts.add(op, time.perf_counter() - started)
        return chunks


def fill(buckets: list[str], fills: list[tuple[str, str, int]], region: str) -> None:
    """Create ``buckets`` and put the data objects ``fills`` name into moto's backend."""
    from moto.core import DEFAULT_ACCOUNT_ID
    from moto.s3.models import s3_backends

    backend = s3_backends[DEFAULT_ACCOUNT_ID]["aws"]
    for name in buckets:
        backend.create_bucket(name, region)
    bodies = [b"x" * size for size in range(4)]
    for bucket, prefix, count in fills:
        for i in range(count):
            backend.put_object(bucket, prefix + data_address(i), bodies[data_size(i)])


def _fill_spec(text: str) -> tuple[str, str, int]:
    where, _, count = text.rpartition(":")
    bucket, _, prefix = where.partition("/")
    if prefix and not prefix.endswith("/"):
        prefix += "/"
    return bucket, prefix, int(count)


def main(argv: list[str] | None = None) -> None:
    """Fill the buckets, then serve S3 on HOST:PORT until killed."""
    parser = argparse.ArgumentParser(prog="python -m bench.s3_server", description=__doc__)
    parser.add_argument("host")
    parser.add_argument("port", type=int)
    parser.add_argument("--bucket", action="append", default=[], help="create this bucket")
    parser.add_argument(
        "--fill", action="append", default=[], type=_fill_spec, help="BUCKET/PREFIX:N objects"
    )
    parser.add_argument("--region", default="us-east-1")
    parser.add_argument("--indexed-listing", action="store_true")
    parser.add_argument("--keep-alive", action="store_true")
    args = parser.parse_args(argv)

    from moto.moto_server.werkzeug_app import (
        DomainDispatcherApplication,
        MotoRequestHandler,
        create_backend_app,
    )
    from werkzeug.serving import run_simple

    index = KeyIndex()
    index.enabled = args.indexed_listing
    install_index(index)
    fill(args.bucket, args.fill, args.region)
    app = CountingApp(DomainDispatcherApplication(create_backend_app), index)
    if args.keep_alive:
        import waitress

        waitress.serve(app, host=args.host, port=args.port, threads=8, _quiet=True)
        return
    run_simple(args.host, args.port, app, threaded=True, request_handler=MotoRequestHandler)


if __name__ == "__main__":
    main()
