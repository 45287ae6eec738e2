"""The API's request metrics, in process: route templates, statuses, one registry per app."""

from __future__ import annotations

import httpx
import pytest
from fastapi import FastAPI
from prometheus_client.parser import text_string_to_metric_families

from mirror.api.app import create_app
from mirror.api.auth.store import AuthStore
from mirror.api.metrics import UNMATCHED_ROUTE
from mirror.core import open_memory
from mirror.kv.memory import MemoryKV


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
            'lakemirror_http_request_duration_seconds_count{method="GET",route="/healthz"} 1.0'
            in (text)
        )


@pytest.mark.anyio
async def test_each_app_has_its_own_registry() -> None:
    async with _client(_app()) as first, _client(_app()) as second:
        for _ in range(3):
            assert (await first.get("/healthz")).status_code == 200
        assert (await _requests(first))[("GET", "/healthz", "200")] == 3
        assert ("GET", "/healthz", "200") not in await _requests(second)
