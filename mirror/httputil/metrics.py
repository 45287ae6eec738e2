"""Prometheus metrics of the HTTP API: requests by route and status, latency, requests in flight.

``GET /metrics`` needs no authentication, like ``/healthz``: Prometheus scrapes it without
credentials, and it carries no secret and no object name — its labels are the method, the route
template (``/api/v1/repositories/{repository}/refs/{ref}/objects``, never the raw path) and the
status. Each app has a registry of its own, so several apps can live in one process.

With several worker processes (``server.workers``) each worker writes its values to files in
the directory ``PROMETHEUS_MULTIPROC_DIR`` names (prometheus_client's multiprocess mode), and a
scrape, whichever worker answers it, shows the sum over the workers: counters and histograms of
every worker that ever served, the in-flight gauge of the live ones.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterable
from typing import TYPE_CHECKING

from fastapi import APIRouter, Request, Response
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client import multiprocess as prometheus_multiprocess
from prometheus_client.exposition import generate_latest
from starlette.routing import BaseRoute

if TYPE_CHECKING:
    from starlette.types import ASGIApp, Message, Receive, Scope, Send

__all__ = ["MULTIPROCESS_ENV", "UNMATCHED_ROUTE", "HttpMetrics", "MetricsMiddleware", "router"]

MULTIPROCESS_ENV = "PROMETHEUS_MULTIPROC_DIR"
"""prometheus_client's variable naming the directory of the workers' metric files."""

UNMATCHED_ROUTE = "<unmatched>"
"""The ``route`` label of requests no route matched (so unknown paths cannot grow the label set)."""

router = APIRouter(tags=["health"])


class HttpMetrics:
    """The request counter, duration histogram and in-flight gauge of one app.

    Attributes:
        registry: Where the metrics live; ``GET /metrics`` renders it (in multiprocess mode,
            the files of every worker instead).
        requests: ``lakemirror_http_requests_total{method,route,status}``.
        duration: ``lakemirror_http_request_duration_seconds{method,route,status}``.
        in_flight: ``lakemirror_http_requests_in_flight{method}``.
    """

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry if registry is not None else CollectorRegistry()
        self.requests = Counter(
            "lakemirror_http_requests",
            "HTTP requests answered, by method, route template and status.",
            ("method", "route", "status"),
            registry=self.registry,
        )
        self.duration = Histogram(
            "lakemirror_http_request_duration_seconds",
            "Time from a request's arrival to the end of its response, by method, route "
            "template and status.",
            ("method", "route", "status"),
            registry=self.registry,
        )
        self.in_flight = Gauge(
            "lakemirror_http_requests_in_flight",
            "HTTP requests being served now, by method.",
            ("method",),
            registry=self.registry,
            multiprocess_mode="livesum",
        )
        self._templates: dict[int, str] = {}
        self._children: dict[tuple[str, str, int], tuple[Counter, Histogram]] = {}

    def name_routes(self, routes: Iterable[BaseRoute], prefix: str) -> None:
        """Label requests served by ``routes`` with ``prefix`` before their path template.

        A route of a router included with a prefix knows only its own part of the path.
        """
        for route in routes:
            path = getattr(route, "path", None)
            if isinstance(path, str):
                self._templates[id(route)] = prefix + path

    def route_label(self, route: object) -> str:
        """Return the ``route`` label of a request that ``route`` served (``None``: no route)."""
        known = self._templates.get(id(route))
        if known is not None:
            return known
        path = getattr(route, "path", None)
        return path if isinstance(path, str) else UNMATCHED_ROUTE

    def observe(self, method: str, route: str, status: int, seconds: float) -> None:
        """Count one answered request and record its duration."""
        slot = (method, route, status)
        children = self._children.get(slot)
        if children is None:
            # ``labels`` validates and looks the labels up on every call; the label sets are
            # few (routes x methods x statuses), so each pair of children is kept
            labels = (method, route, str(status))
            children = (self.requests.labels(*labels), self.duration.labels(*labels))
            self._children[slot] = children
        children[0].inc()
        children[1].observe(seconds)

    def render(self) -> bytes:
        """Return every metric in Prometheus's text format (summed over workers, if several)."""
        directory = os.environ.get(MULTIPROCESS_ENV)
        if not directory:
            return generate_latest(self.registry)
        registry = CollectorRegistry()
        prometheus_multiprocess.MultiProcessCollector(registry, path=directory)  # type: ignore[no-untyped-call]
        return generate_latest(registry)

    def process_stopped(self) -> None:
        """Drop this process's live gauges from the workers' sum (it serves no more requests)."""
        if os.environ.get(MULTIPROCESS_ENV):
            prometheus_multiprocess.mark_process_dead(os.getpid())  # type: ignore[no-untyped-call]


class MetricsMiddleware:
    """Count each HTTP request and time it, labelled by its route template and status.

    A request that fails with an unhandled error counts as status 500.
    """

    def __init__(self, app: ASGIApp, metrics: HttpMetrics) -> None:
        self.app = app
        self.metrics = metrics

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Serve one ASGI connection."""
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        status = 500
        method = scope.get("method", "")
        in_flight = self.metrics.in_flight.labels(method)
        in_flight.inc()
        started = time.perf_counter()

        async def send_seeing_status(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = int(message["status"])
            await send(message)

        try:
            await self.app(scope, receive, send_seeing_status)
        finally:
            in_flight.dec()
            route = self.metrics.route_label(scope.get("route"))
            self.metrics.observe(method, route, status, time.perf_counter() - started)


@router.get("/metrics", response_class=Response)
async def metrics(request: Request) -> Response:
    """Return the app's metrics in Prometheus's text format (no authentication)."""
    registry: HttpMetrics = request.app.state.metrics
    return Response(registry.render(), media_type=CONTENT_TYPE_LATEST)
