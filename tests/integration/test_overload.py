"""Overload against live processes: bounded turns, 503 with ``Retry-After``, slow clients cut off.

Three processes, each started with small limits through ``LAKEMIRROR_SERVER__*`` variables:

- ``busy``, a server serving 2 requests at once with 2 more waiting (``Retry-After: 7``, JSON
  bodies up to 4 KiB). The tests take its turns with object uploads whose bodies they leave
  unfinished (the handler waits for the rest; the body timeout is the default minute), and read
  its state from ``/metrics``: nothing depends on timing.
- ``strict``, a server serving 1 request and queueing none, with 1-second header, body and
  keep-alive timeouts: slowloris heads, stalled bodies and idle connections are cut off, and
  the turn a stalled body held serves the next request.
- a replicant serving 1 request and queueing none.
"""

from __future__ import annotations

import base64
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path

import boto3
import httpx
import pytest
import yaml
from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.config import Config
from botocore.credentials import Credentials
from botocore.exceptions import ClientError
from prometheus_client.parser import text_string_to_metric_families

from mirror.httputil.admission import overloaded_message
from mirror.httputil.body_limit import too_large_message
from tests.e2e.regions import wait_for
from tests.integration.harness import Server, free_port, running_server, wait_healthy

KEY = ("AKIAOVERLOADTEST0001", "overload-secret-key-000000000000000000")
REPO = "overload"
RETRY_AFTER = 7
JSON_LIMIT = 4096
DEADLINE = 15.0


def _env(**settings: object) -> dict[str, str]:
    return {f"LAKEMIRROR_SERVER__{name.upper()}": str(value) for name, value in settings.items()}


@contextmanager
def _server(root: Path, env: dict[str, str]) -> Iterator[Server]:
    with running_server(
        root / "data",
        root / "server.log",
        access_key_id=KEY[0],
        secret_access_key=KEY[1],
        env=env,
    ) as server:
        with httpx.Client(base_url=server.url, auth=KEY, timeout=30) as http:
            body = {"name": REPO, "storage_namespace": f"local://{REPO}"}
            assert http.post("/api/v1/repositories", json=body).status_code == 201
        yield server


@pytest.fixture(scope="module")
def busy(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    env = _env(
        max_concurrent_requests=2,
        max_queued_requests=2,
        retry_after=RETRY_AFTER,
        max_json_body=JSON_LIMIT,
    )
    with _server(tmp_path_factory.mktemp("busy"), env) as server:
        yield server


@pytest.fixture(scope="module")
def strict(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    env = _env(
        max_concurrent_requests=1,
        max_queued_requests=0,
        header_timeout=1,
        body_timeout=1,
        keep_alive_timeout=1,
    )
    with _server(tmp_path_factory.mktemp("strict"), env) as server:
        yield server


def _address(url: str) -> tuple[str, int]:
    host, port = url.removeprefix("http://").split(":")
    return host, int(port)


def _basic() -> str:
    return "Basic " + base64.b64encode(f"{KEY[0]}:{KEY[1]}".encode()).decode()


def _unfinished_upload(url: str, path: str) -> socket.socket:
    """Start an upload of 100 bytes and send 3: its handler waits for the rest."""
    sock = socket.create_connection(_address(url))
    head = (
        f"POST /api/v1/repositories/{REPO}/branches/main/objects?path={path} HTTP/1.1\r\n"
        f"Host: x\r\nAuthorization: {_basic()}\r\nContent-Length: 100\r\n\r\n"
    )
    sock.sendall(head.encode() + b"abc")
    return sock


@contextmanager
def _held(url: str, count: int) -> Iterator[list[socket.socket]]:
    with ExitStack() as stack:
        yield [stack.enter_context(_unfinished_upload(url, f"held/{i}")) for i in range(count)]


def _metric(url: str, name: str, **labels: str) -> float:
    text = httpx.get(f"{url}/metrics", timeout=30).text
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == name and all(sample.labels.get(k) == v for k, v in labels.items()):
                return float(sample.value)
    return 0.0


def _saturated(url: str, serving: int, waiting: int) -> bool:
    in_flight = _metric(url, "lakemirror_http_requests_in_flight", method="POST")
    return in_flight == serving and _metric(url, "lakemirror_http_requests_waiting") == waiting


def _refused(url: str, reason: str) -> float:
    return _metric(url, "lakemirror_http_requests_refused_total", reason=reason)


def _read_to_end(sock: socket.socket, timeout: float = DEADLINE) -> bytes:
    """Read until the server closes the connection (fail after ``timeout`` seconds)."""
    sock.settimeout(timeout)
    data = b""
    while chunk := sock.recv(65536):
        data += chunk
    return data


def _s3(url: str) -> object:
    return boto3.client(
        "s3",
        endpoint_url=url,
        aws_access_key_id=KEY[0],
        aws_secret_access_key=KEY[1],
        region_name="us-east-1",
        # botocore retries SlowDown; one attempt shows the server's own answer
        config=Config(
            retries={"mode": "standard", "total_max_attempts": 1}, s3={"addressing_style": "path"}
        ),
    )


def test_a_saturated_server_answers_503_and_keeps_answering_health_checks(busy: Server) -> None:
    url = busy.url
    with _held(url, 4), httpx.Client(base_url=url, auth=KEY, timeout=30) as http:
        wait_for(lambda: _saturated(url, 2, 2), DEADLINE, "2 uploads served and 2 waiting")
        before = _refused(url, "overloaded")
        expected = {"message": overloaded_message(RETRY_AFTER)}
        # JSON routes, the fast read routes, uploads and the UI's pages: all refused alike
        stat = f"/api/v1/repositories/{REPO}/refs/main/objects/stat"
        for response in (
            http.get("/api/v1/repositories"),
            http.get(stat, params={"path": "held/0"}),
            http.get("/ui/login"),
        ):
            assert response.status_code == 503
            assert response.headers["retry-after"] == str(RETRY_AFTER)
            assert response.json() == expected
        upload = http.post(
            f"/api/v1/repositories/{REPO}/branches/main/objects",
            params={"path": "refused"},
            content=b"x" * 10,
        )
        assert upload.status_code == 503
        # its body was never read: the connection cannot carry another request
        assert upload.headers["connection"] == "close"
        with pytest.raises(ClientError) as info:
            _s3(url).get_object(Bucket=REPO, Key="main/held/0")  # type: ignore[attr-defined]
        error = info.value.response
        assert error["Error"]["Code"] == "SlowDown"
        assert error["Error"]["Message"] == "Please reduce your request rate."
        assert error["ResponseMetadata"]["HTTPStatusCode"] == 503
        assert error["ResponseMetadata"]["HTTPHeaders"]["retry-after"] == str(RETRY_AFTER)
        assert error["ResponseMetadata"]["HTTPHeaders"]["x-amz-request-id"]
        for path, status in (
            ("/healthz", 200),
            ("/readyz", 200),
            ("/metrics", 200),
            ("/api/v1/healthcheck", 204),
        ):
            assert http.get(path).status_code == status, path
        assert _refused(url, "overloaded") == before + 5
        assert _saturated(url, 2, 2)
    # the uploads' clients left: every turn comes back
    wait_for(lambda: _saturated(url, 0, 0), DEADLINE, "every turn given back")
    assert httpx.get(f"{url}/api/v1/repositories", auth=KEY).status_code == 200


def test_a_client_that_leaves_the_queue_frees_its_place(busy: Server) -> None:
    url = busy.url
    with _held(url, 4) as held:
        wait_for(lambda: _saturated(url, 2, 2), DEADLINE, "2 uploads served and 2 waiting")
        before = _refused(url, "overloaded")
        held[3].close()
        wait_for(lambda: _saturated(url, 2, 1), DEADLINE, "the departed client out of the queue")
        with _unfinished_upload(url, "held/late"):
            # the place is taken by a newcomer, not refused
            wait_for(lambda: _saturated(url, 2, 2), DEADLINE, "the newcomer waiting")
            assert _refused(url, "overloaded") == before
    wait_for(lambda: _saturated(url, 0, 0), DEADLINE, "every turn given back")


def test_json_bodies_are_bounded_and_uploads_are_not(busy: Server) -> None:
    url = busy.url
    before = _refused(url, "body_too_large")
    expected = {"message": too_large_message(JSON_LIMIT)}
    big = b'{"name": "' + b"x" * JSON_LIMIT + b'"}'
    with httpx.Client(base_url=url, auth=KEY, timeout=30) as http:
        stated = http.post(
            "/api/v1/repositories", content=big, headers={"content-type": "application/json"}
        )
        assert stated.status_code == 413 and stated.json() == expected
        assert stated.headers["connection"] == "close"

        def chunks() -> Iterator[bytes]:
            for start in range(0, len(big), 1000):
                yield big[start : start + 1000]

        chunked = http.post(
            "/api/v1/repositories", content=chunks(), headers={"content-type": "application/json"}
        )
        assert chunked.status_code == 413 and chunked.json() == expected
        assert chunked.headers["connection"] == "close"
        objects = f"/api/v1/repositories/{REPO}/branches/main/objects"
        body = b"y" * (4 * JSON_LIMIT)
        assert http.post(objects, params={"path": "big"}, content=body).status_code == 201
        read = http.get(f"/api/v1/repositories/{REPO}/refs/main/objects", params={"path": "big"})
        assert read.content == body
    assert _refused(url, "body_too_large") == before + 2


def _trickle(sock: socket.socket, head: bytes) -> tuple[bytes, float]:
    """Send ``head``, then one more header byte at a time; return the answer and its time."""
    sock.sendall(head)
    sock.settimeout(0.2)
    started = time.monotonic()
    answer = b""
    # one byte of the header at a time: each byte is no reason to wait longer
    while time.monotonic() - started < DEADLINE:
        try:
            sock.sendall(b"z")
            chunk = sock.recv(4096)
        except TimeoutError:
            continue
        except OSError:
            break
        if not chunk:
            break
        answer += chunk
    return answer, time.monotonic() - started


def test_a_slowloris_head_is_answered_408_within_the_header_timeout(strict: Server) -> None:
    before = _refused(strict.url, "header_timeout")
    slow = b"GET /api/v1/repositories HTTP/1.1\r\nHost: x\r\nX-Slow: "
    with socket.create_connection(_address(strict.url)) as sock:
        answer, cut_off = _trickle(sock, slow)
    assert answer.startswith(b"HTTP/1.1 408 Request Timeout\r\n"), answer[:100]
    assert b"connection: close\r\n" in answer
    assert b"the request's headers did not arrive within 1 seconds" in answer
    # well before the deadline: the clock ran from the first byte, not the last
    assert cut_off < DEADLINE / 2
    # the same on a keep-alive connection, after a request answered whole
    with socket.create_connection(_address(strict.url)) as sock:
        sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
        sock.settimeout(DEADLINE)
        first = b""
        while not first.endswith(b'{"status":"ok"}'):
            chunk = sock.recv(4096)
            assert chunk, first
            first += chunk
        assert first.startswith(b"HTTP/1.1 200 OK\r\n")
        answer, cut_off = _trickle(sock, slow)
    assert answer.startswith(b"HTTP/1.1 408 Request Timeout\r\n"), answer[:100]
    assert cut_off < DEADLINE / 2
    assert _refused(strict.url, "header_timeout") == before + 2
    assert httpx.get(f"{strict.url}/api/v1/repositories", auth=KEY).status_code == 200


def test_a_stalled_body_is_cut_off_and_its_turn_serves_the_next_request(strict: Server) -> None:
    before = _refused(strict.url, "body_timeout")
    with _unfinished_upload(strict.url, "stalled") as sock:
        answer = _read_to_end(sock)
    assert answer.startswith(b"HTTP/1.1 408 Request Timeout\r\n"), answer[:100]
    assert b"connection: close\r\n" in answer
    assert answer.endswith(
        b'{"message": "Request timeout: the request\'s body stalled for 1 seconds"}'
    )
    assert _refused(strict.url, "body_timeout") == before + 1
    # one turn in all and none queued: served again only because the stalled one gave it back
    listing = httpx.get(f"{strict.url}/api/v1/repositories", auth=KEY)
    assert listing.status_code == 200
    assert "Exception in ASGI application" not in strict.log()


def test_idle_connections_are_closed(strict: Server) -> None:
    with socket.create_connection(_address(strict.url)) as silent:
        # connected and never a byte: closed, unanswered
        assert _read_to_end(silent) == b""
    with socket.create_connection(_address(strict.url)) as kept:
        kept.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
        answer = _read_to_end(kept)
    # answered, then closed once idle for the keep-alive timeout
    assert answer.startswith(b"HTTP/1.1 200 OK\r\n") and answer.endswith(b'{"status":"ok"}')


def test_an_oversized_head_is_answered_431(strict: Server) -> None:
    before = _refused(strict.url, "head_too_large")
    with socket.create_connection(_address(strict.url)) as sock:
        sock.sendall(
            b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Big: " + b"a" * (1 << 20) + b"\r\n\r\n"
        )
        answer = _read_to_end(sock)
    assert answer.startswith(b"HTTP/1.1 431 Request Header Fields Too Large\r\n"), answer[:100]
    assert b"at most 1048576 bytes" in answer
    assert _refused(strict.url, "head_too_large") == before + 1


def test_the_replicant_refuses_beyond_its_limits_and_answers_health_checks(
    tmp_path: Path,
) -> None:
    port = free_port()
    config = tmp_path / "replicant.yaml"
    settings = {
        "data_dir": str(tmp_path / "d"),
        "server": {"max_concurrent_requests": 1, "max_queued_requests": 0, "retry_after": 3},
        "replicant": {"region": "b", "port": port, "replica_id": "solo"},
        "regions": {"b": {"server_url": "http://127.0.0.1:1"}},
    }
    config.write_text(yaml.safe_dump(settings))
    log = tmp_path / "replicant.log"
    command = [sys.executable, "-m", "mirror.cli.main", "replicant", "--config", str(config)]
    with open(log, "wb") as out:
        process = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    mirrors = "/service/replication/v1/mirrors"
    try:
        wait_healthy(process, url, log)
        with httpx.Client(base_url=url, timeout=30) as http:
            # a mirror creation whose JSON body never ends holds the one turn
            with socket.create_connection(("127.0.0.1", port)) as held:
                held.sendall(
                    b"POST /service/replication/v1/repositories/origin/mirrors HTTP/1.1\r\n"
                    b"Host: x\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{"
                )
                refused = wait_for(
                    lambda: (r := http.get(mirrors)).status_code == 503 and r,
                    DEADLINE,
                    "the replicant saturated",
                )
                assert refused.headers["retry-after"] == "3"
                assert refused.json() == {"message": overloaded_message(3)}
                for path in ("/healthz", "/readyz", "/metrics"):
                    assert http.get(path).status_code == 200, path
                scrape = http.get("/metrics").text
                assert 'lakemirror_http_requests_refused_total{reason="overloaded"}' in scrape
            # its client gone, the turn comes back: an anonymous caller is refused as such
            wait_for(lambda: http.get(mirrors).status_code == 401, DEADLINE, "the turn back")
    finally:
        process.terminate()
        process.wait(timeout=10)


def _answered(url: str, status: str) -> float:
    text = httpx.get(f"{url}/metrics", timeout=30).text
    return sum(
        sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
        if sample.name == "lakemirror_http_requests_total" and sample.labels.get("status") == status
    )


def _unfinished_put(url: str, key: str) -> socket.socket:
    """Start a gateway PutObject of 100 bytes (SigV4, unsigned payload) and send 3."""
    host, port = _address(url)
    request = AWSRequest(
        method="PUT",
        url=f"{url}/{REPO}/main/{key}",
        headers={"Content-Length": "100", "X-Amz-Content-SHA256": "UNSIGNED-PAYLOAD"},
    )
    SigV4Auth(Credentials(*KEY), "s3", "us-east-1").add_auth(request)
    head = f"PUT /{REPO}/main/{key} HTTP/1.1\r\nHost: {host}:{port}\r\n"
    head += "".join(f"{name}: {value}\r\n" for name, value in request.headers.items())
    sock = socket.create_connection((host, port))
    sock.sendall(head.encode() + b"\r\nabc")
    return sock


@pytest.mark.parametrize("door", ["POST", "PUT"], ids=["rest", "gateway"])
def test_a_client_that_hangs_up_mid_upload_is_no_server_error(busy: Server, door: str) -> None:
    url = busy.url
    errors, gone = _answered(url, "500"), _answered(url, "499")
    tracebacks = busy.log().count("Traceback")
    start = _unfinished_upload if door == "POST" else _unfinished_put
    with start(url, "hung-up"):
        wait_for(
            lambda: _metric(url, "lakemirror_http_requests_in_flight", method=door) == 1,
            DEADLINE,
            "the upload served",
        )
    wait_for(lambda: _answered(url, "499") == gone + 1, DEADLINE, "the hang-up counted as 499")
    assert _answered(url, "500") == errors
    assert busy.log().count("Traceback") == tracebacks
