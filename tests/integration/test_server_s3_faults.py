"""The server on S3 + DynamoDB while S3 answers 503 for a stretch, through a proxy in front of moto.

The server is a separate process, so the faults come from a small HTTP proxy between it and the
moto server: it forwards every request and, when told to, answers the next N with 503 SlowDown.
Other tests reuse the proxy through :func:`running_proxy` with a fault answer of their own.
"""

from __future__ import annotations

import secrets
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import lakefs
import pytest
from lakefs.exceptions import ServerException

from tests.integration.harness import Server, running_server, unique
from tests.integration.moto_fixtures import (
    MotoServer,
    aws_backend_env,
    create_bucket,
    unique_name,
)

pytestmark = pytest.mark.s3

HOP_BY_HOP = {"connection", "keep-alive", "transfer-encoding", "content-length", "host"}
SLOW_DOWN = (
    b'<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>SlowDown</Code>'
    b"<Message>Please reduce your request rate.</Message></Error>"
)


Fault = tuple[int, dict[str, str], bytes]
"""The answer a failed request gets: status, headers, body."""

SLOW_DOWN_FAULT: Fault = (503, {"Content-Type": "application/xml"}, SLOW_DOWN)


@dataclass
class FaultyProxy:
    """Forwards to ``upstream``; the next ``failures`` requests get ``fault`` instead."""

    upstream: str
    url: str = ""
    failures: int = 0
    failed: int = 0
    forwarded: int = 0
    fault: Fault = SLOW_DOWN_FAULT
    lock: threading.Lock = field(default_factory=threading.Lock)

    def fail_next(self, count: int) -> None:
        with self.lock:
            self.failures = count

    def take_failure(self) -> bool:
        with self.lock:
            if self.failures > 0:
                self.failures -= 1
                self.failed += 1
                return True
            self.forwarded += 1
            return False


def _handler(proxy: FaultyProxy, upstream: httpx.Client) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        # headers and body go out in two writes: without this, each answer waits on a delayed ACK
        disable_nagle_algorithm = True

        def log_message(self, format: str, *args: Any) -> None:
            pass

        def _serve(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(length) if length else b""
            if proxy.take_failure():
                self._answer(*proxy.fault)
                return
            headers = {k: v for k, v in self.headers.items() if k.lower() not in HOP_BY_HOP}
            answer = upstream.request(self.command, self.path, headers=headers, content=body)
            kept = {k: v for k, v in answer.headers.items() if k.lower() not in HOP_BY_HOP}
            kept.pop("content-encoding", None)
            self._answer(answer.status_code, kept, answer.content)

        def _answer(self, status: int, headers: dict[str, str], body: bytes) -> None:
            self.send_response(status)
            for key, value in headers.items():
                self.send_header(key, value)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(body)

        do_GET = do_PUT = do_POST = do_DELETE = do_HEAD = _serve

    return Handler


@contextmanager
def running_proxy(upstream_url: str, fault: Fault = SLOW_DOWN_FAULT) -> Iterator[FaultyProxy]:
    """Run a :class:`FaultyProxy` to ``upstream_url`` on a free port until the block ends."""
    state = FaultyProxy(upstream_url, fault=fault)
    with httpx.Client(base_url=upstream_url, timeout=60.0) as upstream:
        httpd = ThreadingHTTPServer(("127.0.0.1", 0), _handler(state, upstream))
        httpd.daemon_threads = True
        state.url = f"http://127.0.0.1:{httpd.server_address[1]}"
        thread = threading.Thread(target=httpd.serve_forever, daemon=True)
        thread.start()
        try:
            yield state
        finally:
            httpd.shutdown()
            httpd.server_close()
            thread.join(timeout=10)


@pytest.fixture
def proxy(moto_region: MotoServer) -> Iterator[FaultyProxy]:
    with running_proxy(moto_region.url) as state:
        yield state


@pytest.fixture
def faulty_server(
    tmp_path: Path, moto_region: MotoServer, s3_client: Any, proxy: FaultyProxy
) -> Iterator[Server]:
    bucket = create_bucket(moto_region, s3_client)
    env = aws_backend_env(
        moto_region, unique_name("faults"), s3_endpoint_url=proxy.url, s3_max_attempts=4
    )
    with running_server(
        tmp_path / "data",
        tmp_path / "server.log",
        access_key_id="AKIAJFAULT" + secrets.token_hex(5).upper(),
        secret_access_key=secrets.token_urlsafe(30),
        env=env,
        namespace_root=f"s3://{bucket}/",
    ) as server:
        yield server


def test_s3_503_stretch_is_retried_or_reported_and_nothing_acknowledged_is_lost(
    faulty_server: Server, proxy: FaultyProxy
) -> None:
    client = lakefs.Client(
        host=faulty_server.url,
        username=faulty_server.access_key_id,
        password=faulty_server.secret_access_key,
    )
    name = unique("faults")
    repo = lakefs.Repository(name, client=client).create(faulty_server.namespace(name))
    main = repo.branch("main")
    acknowledged: dict[str, bytes] = {}

    def upload(path: str, data: bytes) -> None:
        main.object(path).upload(data, pre_sign=False)
        acknowledged[path] = data

    upload("before.txt", b"written before the faults")
    main.commit("before")
    assert proxy.forwarded > 0  # the server's S3 traffic does go through the proxy

    # a short stretch: botocore's retries (4 attempts) ride it out
    proxy.fail_next(2)
    upload("during/short.bin", secrets.token_bytes(70_000))
    short_commit = main.commit("through a short stretch").get_commit().id
    assert proxy.failed == 2

    # a stretch longer than the retries: the write fails with a clear error, not a hang
    proxy.fail_next(1000)
    with pytest.raises(ServerException) as raised:
        upload("during/long.bin", secrets.token_bytes(70_000))
    assert raised.value.status_code == 503
    message = str(raised.value.body)
    assert "SlowDown" in message or "503" in message, message
    assert "Traceback" not in message
    proxy.fail_next(0)

    # afterwards every acknowledged object is readable, staged and committed alike
    upload("after.txt", b"written after the faults")
    final = main.commit("after").get_commit().id
    for path, data in acknowledged.items():
        assert main.object(path).reader().read() == data, path
        assert repo.ref(final).object(path).reader().read() == data, path
    assert (
        repo.ref(short_commit).object("during/short.bin").reader().read()
        == (acknowledged["during/short.bin"])
    )
    listed = {o.path for o in repo.ref(final).objects()}
    assert set(acknowledged) <= listed
    assert "during/long.bin" not in listed
    log = faulty_server.log()
    assert "Traceback" not in log
