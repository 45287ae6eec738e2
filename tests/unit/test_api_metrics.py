"""The API's request metrics: route templates, statuses, in-flight requests, one registry per
app, and the sum over worker processes in multiprocess mode."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import anyio
import httpx
import pytest
from fastapi import FastAPI
from prometheus_client.parser import text_string_to_metric_families
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import PlainTextResponse
from starlette.routing import Route

from mirror.api.app import create_app
from mirror.auth.store import AuthStore
from mirror.core import open_memory
from mirror.httputil.metrics import (
    MULTIPROCESS_ENV,
    UNMATCHED_ROUTE,
    HttpMetrics,
    MetricsMiddleware,
)
from mirror.kv.memory import MemoryKV

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def _app() -> FastAPI:
    return create_app(open_memory(), AuthStore(MemoryKV(), clock=lambda: 1_700_000_000.0))


def _client(app: FastAPI) -> httpx.AsyncClient:
    transport = httpx.ASGITransport(app=app, raise_app_exceptions=False)
    return httpx.AsyncClient(transport=transport, base_url="http://test")


async def _requests(client: httpx.AsyncClient) -> dict[tuple[str, str, str], float]:
    scraped = await client.get("/metrics")
    assert scraped.status_code == 200
    assert scraped.headers["content-type"].startswith("text/plain")
    found: dict[tuple[str, str, str], float] = {}
    for family in text_string_to_metric_families(scraped.text):
        for s in family.samples:
            if s.name == "lakemirror_http_requests_total":
                found[(s.labels["method"], s.labels["route"], s.labels["status"])] = s.value
    return found


@pytest.mark.anyio
async def test_requests_are_counted_by_route_template_and_status() -> None:
    async with _client(_app()) as client:
        assert (await client.get("/healthz")).status_code == 200
        for name in ("one", "two"):
            response = await client.get(f"/api/v1/repositories/{name}")
            assert response.status_code == 401
        assert (await client.get("/no/such/path")).status_code == 404
        counts = await _requests(client)
        assert counts[("GET", "/healthz", "200")] == 1
        assert counts[("GET", "/api/v1/repositories/{repository}", "401")] == 2
        assert counts[("GET", UNMATCHED_ROUTE, "404")] == 1
        assert not any("one" in route or "/no/such" in route for _, route, _ in counts)
        again = await _requests(client)
        assert again[("GET", "/metrics", "200")] == counts.get(("GET", "/metrics", "200"), 0) + 1
        text = (await client.get("/metrics")).text
        assert (
            'lakemirror_http_request_duration_seconds_count{method="GET",route="/healthz",'
            'status="200"} 1.0' in text
        )
        assert (
            'lakemirror_http_request_duration_seconds_count{method="GET",'
            'route="/api/v1/repositories/{repository}",status="401"} 2.0' in text
        )
        assert "# TYPE lakemirror_http_requests_in_flight gauge" in text


@pytest.mark.anyio
async def test_each_app_has_its_own_registry() -> None:
    async with _client(_app()) as first, _client(_app()) as second:
        for _ in range(3):
            assert (await first.get("/healthz")).status_code == 200
        assert (await _requests(first))[("GET", "/healthz", "200")] == 3
        assert ("GET", "/healthz", "200") not in await _requests(second)


def _samples(text: str, name: str) -> dict[tuple[tuple[str, str], ...], float]:
    return {
        tuple(sorted(s.labels.items())): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
        if s.name == name
    }


@pytest.mark.anyio
async def test_requests_in_flight_are_counted_while_they_run() -> None:
    metrics = HttpMetrics()
    arrived, release = anyio.Event(), anyio.Event()

    async def slow(request: Request) -> PlainTextResponse:
        arrived.set()
        await release.wait()
        return PlainTextResponse("done", status_code=201)

    app = MetricsMiddleware(Starlette(routes=[Route("/slow", slow, methods=["POST"])]), metrics)
    transport = httpx.ASGITransport(app=app)
    in_flight = "lakemirror_http_requests_in_flight"
    async with httpx.AsyncClient(transport=transport, base_url="http://test") as client:
        responses: list[httpx.Response] = []

        async def post() -> None:
            responses.append(await client.post("/slow"))

        async with anyio.create_task_group() as tasks:
            tasks.start_soon(post)
            tasks.start_soon(post)
            with anyio.fail_after(10):
                await arrived.wait()
                while (
                    _samples(metrics.render().decode(), in_flight).get((("method", "POST"),)) != 2.0
                ):
                    await anyio.sleep(0.01)
            release.set()
    assert [r.status_code for r in responses] == [201, 201]
    text = metrics.render().decode()
    assert _samples(text, in_flight)[(("method", "POST"),)] == 0.0
    counts = _samples(text, "lakemirror_http_request_duration_seconds_count")
    assert counts[(("method", "POST"), ("route", "/slow"), ("status", "201"))] == 2.0


_WORKER = """
import sys
from mirror.httputil.metrics import HttpMetrics
metrics = HttpMetrics()
for _ in range(int(sys.argv[1])):
    metrics.observe("GET", "/healthz", 200, 0.01)
metrics.in_flight.labels("GET").inc()
if sys.argv[2] == "stop":
    metrics.process_stopped()
print(metrics.render().decode())
"""


def test_several_processes_add_up_in_multiprocess_mode(tmp_path: Path) -> None:
    env = {**os.environ, MULTIPROCESS_ENV: str(tmp_path)}

    def worker(requests: int, then: str) -> str:
        done = subprocess.run(
            [sys.executable, "-c", _WORKER, str(requests), then],
            env=env,
            cwd=ROOT,
            capture_output=True,
            text=True,
            check=True,
            timeout=60,
        )
        return done.stdout

    worker(3, "stop")  # served three requests, then stopped
    text = worker(4, "run")  # serving, one request in flight: renders every worker's files
    requests = _samples(text, "lakemirror_http_requests_total")
    assert requests[(("method", "GET"), ("route", "/healthz"), ("status", "200"))] == 7.0
    counts = _samples(text, "lakemirror_http_request_duration_seconds_count")
    assert counts[(("method", "GET"), ("route", "/healthz"), ("status", "200"))] == 7.0
    # the stopped worker's in-flight request left the sum; the live one's is there
    assert _samples(text, "lakemirror_http_requests_in_flight")[(("method", "GET"),)] == 1.0
