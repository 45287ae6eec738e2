"""Prometheus metrics of the HTTP API: requests by route and status, latency, requests in flight.

``GET /metrics`` needs no authentication, like ``/healthz``: Prometheus scrapes it without
credentials, and it carries no secret and no object name — its labels are the method, the route
template (``/api/v1/repositories/{repository}/refs/{ref}/objects``, never the raw path) and the
status. Each app has a registry of its own, so several apps can live in one process.

With several worker processes (``server.workers``) each worker writes its values to files in
the directory ``PROMETHEUS_MULTIPROC_DIR`` names (prometheus_client's multiprocess mode), and a
scrape, whichever worker answers it, shows the sum over the workers: counters and histograms of
every worker that ever served, the in-flight gauge of the live ones.

What a process refuses to serve (:class:`OverloadMetrics`) is counted beside: requests answered
503 for load, bodies too large, clients too slow to send their request.
"""

from __future__ import annotations

import os
import time
import weakref
from collections.abc import Iterable
from typing import TYPE_CHECKING

from fastapi import APIRouter, Request, Response
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client import multiprocess as prometheus_multiprocess
from prometheus_client.exposition import generate_latest
from starlette.routing import BaseRoute

if TYPE_CHECKING:
    from starlette.types import ASGIApp, Message, Receive, Scope, Send

__all__ = [
    "MULTIPROCESS_ENV",
    "REFUSAL_REASONS",
    "UNMATCHED_ROUTE",
    "HttpMetrics",
    "MetricsMiddleware",
    "OverloadMetrics",
    "count_refused",
    "router",
]

MULTIPROCESS_ENV = "PROMETHEUS_MULTIPROC_DIR"
"""prometheus_client's variable naming the directory of the workers' metric files."""

UNMATCHED_ROUTE = "<unmatched>"
"""The ``route`` label of requests no route matched (so unknown paths cannot grow the label set)."""

router = APIRouter(tags=["health"])

REFUSAL_REASONS = (
    "overloaded",
    "body_too_large",
    "head_too_large",
    "header_timeout",
    "body_timeout",
)
"""The ``reason`` label values of ``lakemirror_http_requests_refused_total``:

- ``overloaded``: answered 503 with ``Retry-After`` (every slot busy, the queue full);
- ``body_too_large``: a REST body over ``server.max_json_body``, answered 413;
- ``head_too_large``: a request line and headers over 1 MiB, answered 431;
- ``header_timeout``: headers not complete within ``server.header_timeout`` (408, or closed);
- ``body_timeout``: a body stalled for ``server.body_timeout`` (408, or closed).
"""

_live: weakref.WeakSet[OverloadMetrics] = weakref.WeakSet()


class OverloadMetrics:
    """What one app refuses to serve, and the requests waiting for a turn.

    Attributes:
        refused: ``lakemirror_http_requests_refused_total{reason}`` (:data:`REFUSAL_REASONS`).
        waiting: ``lakemirror_http_requests_waiting``, requests queued for a turn now.
    """

    def __init__(self, registry: CollectorRegistry) -> None:
        self.refused = Counter(
            "lakemirror_http_requests_refused",
            "HTTP requests refused before being served, by reason: overloaded (503), "
            "body_too_large (413), head_too_large (431), header_timeout and body_timeout (408).",
            ("reason",),
            registry=registry,
        )
        self.waiting = Gauge(
            "lakemirror_http_requests_waiting",
            "HTTP requests waiting for a turn to be served now.",
            registry=registry,
            multiprocess_mode="livesum",
        )
        self._reasons = {reason: self.refused.labels(reason) for reason in REFUSAL_REASONS}
        _live.add(self)

    def count(self, reason: str) -> None:
        """Count one refusal (``reason``: one of :data:`REFUSAL_REASONS`)."""
        self._reasons[reason].inc()


def count_refused(reason: str) -> None:
    """Count a refusal decided below the apps (the HTTP protocol: slow or oversized heads).

    The connection belongs to no app yet, so the refusal counts in every live app's
    :class:`OverloadMetrics` of this process (a server process has one).
    """
    for metrics in list(_live):
        metrics.count(reason)


class HttpMetrics:
    """The request counter, duration histogram and in-flight gauge of one app.

    Attributes:
        registry: Where the metrics live; ``GET /metrics`` renders it (in multiprocess mode,
            the files of every worker instead).
        requests: ``lakemirror_http_requests_total{method,route,status}``.
        duration: ``lakemirror_http_request_duration_seconds{method,route,status}``.
        in_flight: ``lakemirror_http_requests_in_flight{method}``.
        overload: What the app refuses to serve (:class:`OverloadMetrics`).
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
        self.overload = OverloadMetrics(self.registry)
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
