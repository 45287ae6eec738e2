"""Turns of a process (:mod:`mirror.httputil.admission`): in order, handed on, left, refused."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
import pytest
from prometheus_client import CollectorRegistry
from starlette.types import Receive, Scope, Send

from mirror.httputil.admission import (
    CLIENT_GONE,
    Admission,
    AdmissionLimits,
    AdmissionMiddleware,
    has_body,
)
from mirror.httputil.metrics import OverloadMetrics

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


async def _settle() -> None:
    # let every ready task run up to its next wait
    for _ in range(5):
        await asyncio.sleep(0)


def test_limits_are_checked() -> None:
    for bad in ((0, 1, 1), (1, -1, 1), (1, 1, 0)):
        with pytest.raises(ValueError):
            AdmissionLimits(*bad)


async def test_turns_go_to_waiters_in_order_and_the_rest_is_refused() -> None:
    admission = Admission(AdmissionLimits(max_active=2, max_queued=2, retry_after=1))
    assert admission.try_acquire() and admission.try_acquire()
    assert not admission.try_acquire()
    order: list[str] = []

    async def waiter(name: str) -> None:
        assert await admission.wait()
        order.append(name)

    first = asyncio.create_task(waiter("first"))
    await _settle()
    second = asyncio.create_task(waiter("second"))
    await _settle()
    assert admission.waiting == 2 and not admission.can_wait()
    admission.release()
    await _settle()
    assert order == ["first"] and admission.active == 2
    # a turn given back while someone waits is never taken by a newcomer
    assert not admission.try_acquire()
    admission.release()
    await asyncio.gather(first, second)
    assert order == ["first", "second"] and admission.waiting == 0
    admission.release()
    admission.release()
    assert admission.active == 0 and admission.try_acquire()


async def test_a_waiter_whose_client_left_gives_up_its_place() -> None:
    admission = Admission(AdmissionLimits(max_active=1, max_queued=1, retry_after=1))
    assert admission.try_acquire()
    gone = asyncio.Event()
    leaving = asyncio.create_task(admission.wait(gone))
    await _settle()
    assert admission.waiting == 1 and not admission.can_wait()
    gone.set()
    assert await leaving is False
    assert admission.waiting == 0 and admission.can_wait()
    admission.release()
    assert admission.active == 0


async def test_a_cancelled_waiter_handed_a_turn_gives_it_back() -> None:
    admission = Admission(AdmissionLimits(max_active=1, max_queued=2, retry_after=1))
    assert admission.try_acquire()
    cancelled = asyncio.create_task(admission.wait())
    await _settle()
    admission.release()  # handed to the waiter, which is cancelled before it runs
    cancelled.cancel()
    with pytest.raises(asyncio.CancelledError):
        await cancelled
    assert admission.active == 0 and admission.waiting == 0


def test_a_body_is_announced_by_its_length_or_chunking() -> None:
    def scope(*headers: tuple[bytes, bytes]) -> Scope:
        return {"type": "http", "headers": list(headers)}

    assert not has_body(scope())
    assert not has_body(scope((b"content-length", b"0")))
    assert has_body(scope((b"content-length", b"12")))
    assert has_body(scope((b"transfer-encoding", b"chunked")))


class _Gate:
    """An app whose requests to ``/slow`` wait until the test opens the gate."""

    def __init__(self) -> None:
        self.open = asyncio.Event()
        self.entered = 0

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["path"] == "/slow":
            self.entered += 1
            await self.open.wait()
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"ok"})


async def test_the_middleware_refuses_beyond_the_queue_and_serves_health_checks() -> None:
    gate = _Gate()
    metrics = OverloadMetrics(CollectorRegistry())
    admission = Admission(AdmissionLimits(max_active=1, max_queued=1, retry_after=4))
    app = AdmissionMiddleware(gate, admission, metrics)
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://t") as client:
        slow = [asyncio.create_task(client.get("/slow")) for _ in range(2)]
        await _settle()
        assert gate.entered == 1 and admission.waiting == 1
        assert metrics.waiting._value.get() == 1
        refused = await client.post("/other", content=b"body")
        assert refused.status_code == 503
        assert refused.headers["retry-after"] == "4"
        assert refused.headers["connection"] == "close"
        assert refused.json() == {
            "message": "Service unavailable: the server is busy with too many requests; "
            "retry after 4 seconds"
        }
        for path in ("/healthz", "/readyz", "/metrics", "/api/v1/healthcheck", "/_health"):
            assert (await client.get(path)).status_code == 200
        gate.open.set()
        assert [r.status_code for r in await asyncio.gather(*slow)] == [200, 200]
        assert (await client.get("/other")).status_code == 200
    assert metrics.refused.labels("overloaded")._value.get() == 1
    assert metrics.waiting._value.get() == 0
    assert admission.active == 0


async def test_a_request_waiting_leaves_when_the_protocol_reports_its_client_gone() -> None:
    gate = _Gate()
    metrics = OverloadMetrics(CollectorRegistry())
    admission = Admission(AdmissionLimits(max_active=1, max_queued=1, retry_after=1))
    app = AdmissionMiddleware(gate, admission, metrics)
    sent: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message: Any) -> None:
        sent.append(message)

    def scope(gone: asyncio.Event) -> Scope:
        ext: dict[object, object] = {"event": gone}
        return {"type": "http", "path": "/slow", "headers": [], "extensions": {CLIENT_GONE: ext}}

    holder = asyncio.create_task(app(scope(asyncio.Event()), receive, send))
    await _settle()
    gone = asyncio.Event()
    waiter = asyncio.create_task(app(scope(gone), receive, send))
    await _settle()
    assert admission.waiting == 1
    gone.set()
    await waiter
    # it left the queue, answered nothing, and never reached the app
    assert admission.waiting == 0 and gate.entered == 1 and sent == []
    gate.open.set()
    await holder
    assert admission.active == 0


def test_the_protocol_s_refusal_is_counted_and_spares_health_checks() -> None:
    metrics = OverloadMetrics(CollectorRegistry())
    admission = Admission(AdmissionLimits(max_active=3, max_queued=4, retry_after=2))
    app = AdmissionMiddleware(_Gate(), admission, metrics)
    assert app.capacity == 7

    def scope(path: str, *headers: tuple[bytes, bytes]) -> Scope:
        return {"type": "http", "method": "GET", "path": path, "headers": list(headers)}

    assert app.refusal(scope("/healthz")) is None
    plain = app.refusal(scope("/api/v1/repositories"))
    assert plain is not None and plain.status_code == 503
    assert plain.headers["retry-after"] == "2" and "connection" not in plain.headers
    with_body = app.refusal(scope("/api/v1/repositories", (b"content-length", b"5")))
    assert with_body is not None and with_body.headers["connection"] == "close"
    assert metrics.refused.labels("overloaded")._value.get() == 2
