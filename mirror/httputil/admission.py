"""Bounded concurrency per process: a few requests served at once, a few more waiting, no more.

Each server process (each worker of ``server.workers``) serves at most ``max_active`` requests
at a time; up to ``max_queued`` more wait for a turn, first come first served; beyond that a
request is refused at once with ``503 Service Unavailable`` and ``Retry-After``, before any of its
work is done and before its body is read. Memory and latency stay bounded under a flood, and
what is admitted keeps its throughput, instead of every request slowing down together until
clients time out and the process runs out of memory.

A request holds its turn until its answer is sent, streamed bodies included. Requests arriving
together are judged in the order they arrived, even when the handlers ahead of them never yield
to the event loop (a read served from local disk runs start to end in one go, so a burst read off
the sockets in one turn of the loop would otherwise be served whole, one after the other, with
no request ever finding another in progress): the server's HTTP protocol tells each request, in
the :data:`ARRIVAL` scope extension, how many of the process's requests were in progress when it
arrived, itself included, and one that found the capacity (``max_active + max_queued``) taken is
refused before its handler runs. Health checks and
``/metrics`` (``always``) never wait and are never refused, so probes and scrapes keep answering
while the process is saturated. A waiting request whose client hangs up leaves the queue when
the server's HTTP protocol reports the lost connection through the :data:`CLIENT_GONE` scope
extension (LakeMirror's protocol does, :mod:`mirror.cli.http_protocol`); without it, the request
waits for its turn and its handler finds the client gone.

The refusal's body is the front door's: lakeFS's JSON error for the REST API
(:func:`overloaded_json`), S3's ``SlowDown`` for the gateway (the caller passes ``refuse``).
Refusals count in ``lakemirror_http_requests_refused_total{reason="overloaded"}`` and the queue's
length is ``lakemirror_http_requests_waiting`` (:class:`~mirror.httputil.metrics.OverloadMetrics`).
This runs on asyncio (what uvicorn serves with).
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from starlette.responses import Response

from mirror.httputil.errors import error_response

if TYPE_CHECKING:
    from starlette.types import ASGIApp, Receive, Scope, Send

    from mirror.config import ServerSettings
    from mirror.httputil.metrics import OverloadMetrics

__all__ = [
    "ARRIVAL",
    "CLIENT_GONE",
    "HEALTH_PATHS",
    "Admission",
    "AdmissionLimits",
    "AdmissionMiddleware",
    "Refusal",
    "has_body",
    "overloaded_json",
    "overloaded_message",
]

CLIENT_GONE = "lakemirror.client_gone"
"""The scope extension (``scope["extensions"]``) a server's HTTP protocol may offer:
``{"event": asyncio.Event}``, the event set when the request's connection is lost."""

ARRIVAL = "lakemirror.arrival"
"""The scope extension a server's HTTP protocol may offer: ``{"in_progress": int}``, the requests
of the process in progress (started or not) when this one's head was read, itself included."""

HEALTH_PATHS = frozenset({"/healthz", "/readyz", "/metrics", "/_health", "/api/v1/healthcheck"})
"""Paths served whatever the load: the probes, lakeFS's health checks and the scrape."""

Refusal = Callable[["Scope", int], Response]
"""Build the answer to a request refused for load, given its scope and ``Retry-After`` seconds."""


@dataclass(frozen=True, slots=True)
class AdmissionLimits:
    """How much one process takes on.

    Attributes:
        max_active: Requests served at once.
        max_queued: Requests waiting for a turn at most (0: none wait).
        retry_after: Seconds a refused client is told to wait (``Retry-After``).
    """

    max_active: int
    max_queued: int
    retry_after: int

    def __post_init__(self) -> None:
        if self.max_active < 1 or self.max_queued < 0 or self.retry_after < 1:
            raise ValueError(f"invalid admission limits: {self}")

    @classmethod
    def from_settings(cls, settings: ServerSettings) -> AdmissionLimits:
        """Return the limits the ``server`` section configures."""
        return cls(
            max_active=settings.max_concurrent_requests,
            max_queued=settings.max_queued_requests,
            retry_after=settings.retry_after,
        )


class Admission:
    """The turns of one process: taken at once, waited for in order, or refused.

    A turn given back goes straight to the first waiter, so a late arrival never overtakes the
    queue.
    """

    def __init__(self, limits: AdmissionLimits) -> None:
        self.limits = limits
        self.active = 0
        self._waiters: deque[asyncio.Future[None]] = deque()

    @property
    def waiting(self) -> int:
        """Return how many requests wait for a turn."""
        return len(self._waiters)

    def try_acquire(self) -> bool:
        """Take a turn if one is free and nobody waits; return whether one was taken."""
        if self.active < self.limits.max_active and not self._waiters:
            self.active += 1
            return True
        return False

    def can_wait(self) -> bool:
        """Return whether the queue has room for one more request."""
        return len(self._waiters) < self.limits.max_queued

    async def wait(self, gone: asyncio.Event | None = None) -> bool:
        """Wait for a turn; return ``False`` if ``gone`` was set first (the turn is not held).

        Cancelled while waiting, the request leaves the queue (and gives back a turn it had
        just been handed).
        """
        turn: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiters.append(turn)
        admitted = False
        try:
            if gone is None:
                await turn
            else:
                await _first_of(turn, gone)
            admitted = turn.done() and not (gone is not None and gone.is_set())
            return admitted
        finally:
            if not turn.done():
                turn.cancel()
                self._waiters.remove(turn)
            elif not admitted and not turn.cancelled():
                self.release()

    def release(self) -> None:
        """Give a turn back: to the first waiter, or to the free ones."""
        while self._waiters:
            turn = self._waiters.popleft()
            if not turn.done():
                turn.set_result(None)
                return
        self.active -= 1


async def _first_of(turn: asyncio.Future[None], gone: asyncio.Event) -> None:
    if gone.is_set():
        return
    watcher = asyncio.ensure_future(gone.wait())
    try:
        await asyncio.wait((turn, watcher), return_when=asyncio.FIRST_COMPLETED)
    finally:
        watcher.cancel()


def has_body(scope: Scope) -> bool:
    """Return whether a request announces a body (a non-zero length, or chunked)."""
    for name, value in scope.get("headers", ()):
        if name == b"content-length":
            return value.strip() not in (b"0", b"")
        if name == b"transfer-encoding":
            return True
    return False


def overloaded_message(retry_after: int) -> str:
    """Return the text of a 503 for load."""
    unit = "second" if retry_after == 1 else "seconds"
    return (
        "Service unavailable: the server is busy with too many requests; "
        f"retry after {retry_after} {unit}"
    )


def overloaded_json(scope: Scope, retry_after: int) -> Response:
    """Return the REST API's 503 for load: lakeFS's ``{"message": ...}`` and ``Retry-After``."""
    return error_response(
        503, overloaded_message(retry_after), headers={"Retry-After": str(retry_after)}
    )


class AdmissionMiddleware:
    """Serve each HTTP request when :class:`Admission` gives it a turn; refuse it when it cannot.

    Args:
        app: The app served.
        admission: The process's turns.
        metrics: Where refusals and the queue's length are counted.
        refuse: Builds the 503 (default :func:`overloaded_json`); it gets ``Retry-After``, and
            ``Connection: close`` is added when the request has a body (left unread).
        always: Paths served whatever the load.
    """

    def __init__(
        self,
        app: ASGIApp,
        admission: Admission,
        metrics: OverloadMetrics,
        *,
        refuse: Refusal = overloaded_json,
        always: frozenset[str] = HEALTH_PATHS,
    ) -> None:
        self.app = app
        self.admission = admission
        self.metrics = metrics
        self.refuse = refuse
        self.always = always

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Serve one ASGI connection."""
        if scope["type"] != "http" or scope.get("path") in self.always:
            await self.app(scope, receive, send)
            return
        admission = self.admission
        limits = admission.limits
        extensions = scope.get("extensions") or {}
        arrived = extensions.get(ARRIVAL, {}).get("in_progress")
        if isinstance(arrived, int) and arrived > limits.max_active + limits.max_queued:
            # the capacity was taken when it arrived, by requests that have yet to run
            await self._refuse(scope, receive, send)
            return
        if not admission.try_acquire():
            if not admission.can_wait():
                await self._refuse(scope, receive, send)
                return
            gone = extensions.get(CLIENT_GONE, {}).get("event")
            self.metrics.waiting.inc()
            try:
                admitted = await admission.wait(gone if isinstance(gone, asyncio.Event) else None)
            finally:
                self.metrics.waiting.dec()
            if not admitted:
                return  # the client went away while waiting: nobody to answer
        try:
            await self.app(scope, receive, send)
        finally:
            admission.release()

    @property
    def capacity(self) -> int:
        """Return how many requests the process takes on: served at once plus queued."""
        limits = self.admission.limits
        return limits.max_active + limits.max_queued

    def refusal(self, scope: Scope) -> Response | None:
        """Count and return the 503 for a request refused for load (``None``: always served).

        The server's HTTP protocol calls it for a request that arrives with :attr:`capacity`
        taken, and writes the answer itself, without starting the request's handler at all:
        a refusal then costs the parsing of a head and one write.
        """
        if scope.get("path") in self.always:
            return None
        return self._refusal(scope)

    def _refusal(self, scope: Scope) -> Response:
        self.metrics.count("overloaded")
        response = self.refuse(scope, self.admission.limits.retry_after)
        if has_body(scope):
            # the body stays unread: its bytes must not be taken for the next request
            response.headers["connection"] = "close"
        return response

    async def _refuse(self, scope: Scope, receive: Receive, send: Send) -> None:
        await self._refusal(scope)(scope, receive, send)
