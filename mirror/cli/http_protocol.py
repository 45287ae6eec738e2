"""The HTTP/1.1 protocol every LakeMirror process serves with: httptools, bounded in time and size.

uvicorn's httptools protocol parses requests in C and costs about 0.1 ms of CPU less per
request than its pure-Python h11 one, but it lowercases every response header name, and it
bounds neither how long a client may take to send a request nor how large its head may be.
:class:`HttpToolsProtocol` adds:

- **Header names as the app spelt them.** The ASGI apps here send lowercase names (Starlette's)
  except where a client needs the exact spelling: lakeFS's Python client looks
  ``Content-Range`` up case-sensitively. The response head is written with each name as the app
  sent it, as h11 does, so the faster parser changes nothing on the wire; and it leaves with the
  first bytes of the body, in one write (uvicorn writes them in two).
- **Refusals for load before any handler starts**: a request that arrives while the process's
  admission (:class:`~mirror.httputil.admission.AdmissionMiddleware`, in front of the app) has
  its capacity taken is answered the admission's 503 by the protocol itself.
- **A header timeout** (``server.header_timeout``): from a connection's start, or from the first
  byte of its next request, the request line and headers must be complete within this time. A
  client that trickles its headers (slowloris) is answered ``408 Request Timeout`` and the
  connection closed; one that never sent a byte is closed without an answer.
- **A body timeout** (``server.body_timeout``): a handler waiting for the next bytes of its
  request's body waits at most this long; then the client gets ``408`` (or, with its answer
  under way, a closed connection), and the handler sees the client gone, so its turn
  (:mod:`mirror.httputil.admission`) is freed. Only the wait for the client counts: a body the
  handler has not asked for yet (a request queued for a turn, ``Expect: 100-continue`` not yet
  answered) runs no clock.
- **A keep-alive idle timeout** (``server.keep_alive_timeout``): an idle connection waits this
  long for its next request, then is closed.
- **A bound on the request head**: a request line and headers of more than
  :data:`MAX_HEAD_BYTES` (1 MiB, the bound of Go's ``net/http`` that lakeFS serves with) are
  answered ``431 Request Header Fields Too Large``, and the connection closed.
- **The client's departure** as the :data:`~mirror.httputil.admission.CLIENT_GONE` scope
  extension, so a request waiting for a turn leaves the queue when its client hangs up, and
  **the requests in progress when a request arrived** as the
  :data:`~mirror.httputil.admission.ARRIVAL` extension, so that a burst is admitted in the
  order it arrived.

Those answers are lakeFS's JSON error (``{"message": ...}``) with ``Connection: close``; each
counts in ``lakemirror_http_requests_refused_total``
(:func:`~mirror.httputil.metrics.count_refused`).
"""

from __future__ import annotations

import asyncio
import json
import urllib.parse
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, cast

import httptools
from uvicorn.protocols.http.httptools_impl import STATUS_LINE, RequestResponseCycle
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol as _UvicornHttpTools

from mirror.httputil.admission import ARRIVAL, CLIENT_GONE, AdmissionMiddleware, has_body
from mirror.httputil.metrics import count_refused

if TYPE_CHECKING:
    from asyncio import TimerHandle

    from starlette.types import ASGIApp, Message, Receive, Scope, Send

    from mirror.config import ServerSettings

__all__ = ["DEFAULT_LIMITS", "MAX_HEAD_BYTES", "ConnectionLimits", "HttpToolsProtocol"]

MAX_HEAD_BYTES = 1 << 20
"""The most bytes of a request line and headers (Go's ``http.DefaultMaxHeaderBytes``)."""


@dataclass(frozen=True, slots=True)
class ConnectionLimits:
    """How long a client may take, and how large a request head may be.

    Attributes:
        header_timeout: Seconds to send a request line and headers, from the first byte (or the
            connection's start).
        body_timeout: Seconds a handler waits for the next bytes of a request body.
        keep_alive_timeout: Seconds an idle keep-alive connection waits for its next request.
        max_head_bytes: The most bytes of a request line and headers.
    """

    header_timeout: float = 60.0
    body_timeout: float = 60.0
    keep_alive_timeout: float = 5.0
    max_head_bytes: int = MAX_HEAD_BYTES

    @classmethod
    def from_settings(cls, settings: ServerSettings) -> ConnectionLimits:
        """Return the limits the ``server`` section configures."""
        return cls(
            header_timeout=settings.header_timeout,
            body_timeout=settings.body_timeout,
            keep_alive_timeout=settings.keep_alive_timeout,
        )


DEFAULT_LIMITS = ConnectionLimits()
"""The limits of a uvicorn configuration that names none (``connection_limits``)."""


def _admission_of(app: object) -> AdmissionMiddleware | None:
    """Return the admission standing in front of ``app``, behind uvicorn's own wrappers."""
    for _ in range(4):
        if isinstance(app, AdmissionMiddleware):
            return app
        app = getattr(app, "app", None)
    return None


class _InProgress:
    """The requests of this process whose heads were read and whose handlers have not ended."""

    count = 0


class _HeadTooLargeError(Exception):
    """Stops the parser once a request head passed its bound (already answered 431)."""


class _HeadWriter:
    """The transport a response is written through: its head leaves with its first body bytes.

    uvicorn writes a response's head and its body in two writes, two ``send`` system calls and
    two TCP segments (``TCP_NODELAY``); held back, the head goes out with the first write of the
    body, in one. The head's header names are spelt as the app sent them (``spelt``: lowercased
    name to given spelling).
    """

    def __init__(self, transport: asyncio.Transport, spelt: dict[bytes, bytes]) -> None:
        self._transport = transport
        self._spelt = spelt
        self._head: bytes | None = None
        self.held = False

    def write(self, data: bytes) -> None:
        """Hold the head (the first write); write it with the next."""
        if self._head is None and not self.held:
            for lower, given in self._spelt.items():
                data = data.replace(b"\r\n" + lower + b": ", b"\r\n" + given + b": ")
            self._head, self.held = data, True
            return
        self._transport.write(self.release() + data)

    def release(self) -> bytes:
        """Return the head still held (once), or nothing."""
        head, self._head = self._head or b"", None
        return head

    def flush(self) -> None:
        """Write the head if it is still held (an answer whose body wrote nothing: ``HEAD``)."""
        head = self.release()
        if head and not self._transport.is_closing():
            self._transport.write(head)

    def close(self) -> None:
        """Write what is held, then close the transport."""
        self.flush()
        self._transport.close()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._transport, name)


class _ConnectionApp:
    """Wrap an ASGI app: heads spelt as sent and written with their bodies, body reads timed."""

    def __init__(self, app: ASGIApp, protocol: HttpToolsProtocol) -> None:
        self.app = app
        self.protocol = protocol

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            await self._serve(scope, receive, send)
        finally:
            if scope["type"] == "http":
                _InProgress.count -= 1

    async def _serve(self, scope: Scope, receive: Receive, send: Send) -> None:
        cycle = getattr(send, "__self__", None)
        if scope["type"] != "http" or not isinstance(cycle, RequestResponseCycle):
            await self.app(scope, receive, send)
            return

        writer: _HeadWriter | None = None

        async def send_spelt(message: Message) -> None:
            nonlocal writer
            kind = message["type"]
            if kind == "http.response.start":
                spelt = {
                    bytes(name).lower(): bytes(name)
                    for name, _ in message.get("headers", ())
                    if name != name.lower()
                }
                writer = _HeadWriter(cycle.transport, spelt)
            if writer is None or kind not in ("http.response.start", "http.response.body"):
                await send(message)
                return
            transport = cycle.transport
            cycle.transport = writer  # type: ignore[assignment]
            try:
                await send(message)
            finally:
                cycle.transport = transport
            if kind == "http.response.body" and not message.get("more_body", False):
                writer.flush()
                writer = None

        try:
            await self.app(scope, self.protocol.timed_receive(cycle, receive), send_spelt)
        except Exception:
            if cycle is not self.protocol.cut_off:
                raise
            # the handler found the client gone: the body timeout's doing, answered already


class HttpToolsProtocol(_UvicornHttpTools):
    """uvicorn's httptools protocol, with header names as spelt and the limits of the module.

    The limits are the ``connection_limits`` attribute of uvicorn's configuration
    (:class:`mirror.cli.serving.ServingConfig`), or :data:`DEFAULT_LIMITS`.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.limits: ConnectionLimits = getattr(self.config, "connection_limits", DEFAULT_LIMITS)
        # uvicorn's own keep-alive timer, armed after each answer, with our setting
        self.timeout_keep_alive = self.limits.keep_alive_timeout  # type: ignore[assignment]
        self.app = _ConnectionApp(self.app, self)
        self._head_timer: TimerHandle | None = None
        self._head_bytes = 0
        self._in_head = False
        self._head_began = 0.0
        self._answered = False
        self._gone = asyncio.Event()
        self.cut_off: RequestResponseCycle | None = None
        """The request whose body stalled past the body timeout (answered 408)."""
        self._gate = _admission_of(self.config.loaded_app)

    # the connection

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        """Start serving a connection: its first request's head is due in time."""
        super().connection_made(transport)
        self._arm_head_timer()

    def connection_lost(self, exc: Exception | None) -> None:
        """Tell waiting requests their client is gone; stop the clocks."""
        self._cancel_head_timer()
        self._gone.set()
        # pipelined requests not started yet never will be (uvicorn starts none once closed)
        _InProgress.count -= len(self.pipeline)
        self.pipeline.clear()
        super().connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        """Parse more bytes, unless the connection was answered and is closing."""
        if self._answered:
            return
        super().data_received(data)
        if self._in_head and self._head_timer is None and not self.transport.is_closing():
            # a head that did not come whole in one read: its clock runs from its first byte
            elapsed = self.loop.time() - self._head_began
            self._arm_head_timer(max(0.0, self.limits.header_timeout - elapsed))

    def send_400_response(self, msg: str) -> None:
        """Answer a malformed request with uvicorn's 400, unless answered already (431)."""
        if self._answered:
            return
        super().send_400_response(msg)

    # the request head

    def on_message_begin(self) -> None:
        """Start a request: its head is due within the header timeout from now."""
        super().on_message_begin()
        self._head_bytes = 0
        self._in_head = True
        # the clock is armed only if the head is not whole at the end of this read (most are)
        self._head_began = self.loop.time()
        gone: dict[object, object] = {"event": self._gone}
        self.scope["extensions"] = {CLIENT_GONE: gone}

    def on_url(self, url: bytes) -> None:
        """Take more of the request's URL."""
        self._count_head(len(url))
        super().on_url(url)

    def on_header(self, name: bytes, value: bytes) -> None:
        """Take one header."""
        self._count_head(len(name) + len(value) + 4)
        super().on_header(name, value)

    def on_headers_complete(self) -> None:
        """Stop the header clock and start the request, telling it how many are in progress."""
        self._cancel_head_timer()
        self._in_head = False
        scope, previous = self.scope, self.cycle
        if self._refused_for_load():
            return
        super().on_headers_complete()
        if self.cycle is previous:
            return  # an upgrade, which this server does not serve
        _InProgress.count += 1
        # its task, just created (or queued behind the connection's previous request), has not
        # run yet: it reads this when it does
        arrival: dict[object, object] = {"in_progress": _InProgress.count}
        scope.setdefault("extensions", {})[ARRIVAL] = arrival

    def on_body(self, body: bytes) -> None:
        """Take body bytes (none for a request refused before it had a cycle)."""
        if self.cycle is not None:
            super().on_body(body)

    def on_message_complete(self) -> None:
        """End the request (nothing to do for one refused before it had a cycle)."""
        if self.cycle is not None:
            super().on_message_complete()

    def _refused_for_load(self) -> bool:
        """Answer the request 503 at once when it arrives with the process's capacity taken.

        The admission (:mod:`mirror.httputil.admission`) would refuse it anyway; answered here,
        before any task or handler starts, a refusal costs little more than parsing its head,
        which keeps a flood from eating the time of the requests admitted.
        """
        gate = self._gate
        if gate is None or _InProgress.count < gate.capacity:
            return False
        cycle = self.cycle
        if (cycle is not None and not cycle.response_complete) or self.pipeline:
            return False  # an answer is under way on this connection: this one waits its turn
        try:
            parsed = httptools.parse_url(self.url)
        except httptools.HttpParserInvalidURLError:
            return False  # uvicorn answers it
        scope = self.scope
        scope["method"] = method = self.parser.get_method().decode("ascii")
        path = parsed.path.decode("ascii")
        scope["path"] = self.root_path + (urllib.parse.unquote(path) if "%" in path else path)
        scope["raw_path"] = self.root_path.encode("ascii") + parsed.path
        scope["query_string"] = parsed.query or b""
        asgi_scope = cast("Scope", scope)
        response = gate.refusal(asgi_scope)
        if response is None:
            return False  # a health check: always served
        keep_alive = (
            self.parser.get_http_version() != "1.0"
            and self.parser.should_keep_alive()
            and not has_body(asgi_scope)
        )
        head = [STATUS_LINE[response.status_code]]
        for name, value in [*self.server_state.default_headers, *response.raw_headers]:
            head += [name, b": ", value, b"\r\n"]
        if not keep_alive and b"connection" not in dict(response.raw_headers):
            head.append(b"connection: close\r\n")
        head.append(b"\r\n")
        self.transport.write(b"".join(head) + (b"" if method == "HEAD" else response.body))
        if keep_alive:
            self.timeout_keep_alive_task = self.loop.call_later(
                self.timeout_keep_alive, self.timeout_keep_alive_handler
            )
        else:
            self._answered = True
            self.transport.close()
        return True

    def _count_head(self, size: int) -> None:
        self._head_bytes += size
        if self._head_bytes > self.limits.max_head_bytes:
            count_refused("head_too_large")
            self._answer(
                431,
                "Request header fields too large: a request line and headers hold at most "
                f"{self.limits.max_head_bytes} bytes",
            )
            raise _HeadTooLargeError

    def _arm_head_timer(self, seconds: float | None = None) -> None:
        delay = self.limits.header_timeout if seconds is None else seconds
        self._head_timer = self.loop.call_later(delay, self._head_timed_out)

    def _cancel_head_timer(self) -> None:
        if self._head_timer is not None:
            self._head_timer.cancel()
            self._head_timer = None

    def _head_timed_out(self) -> None:
        self._head_timer = None
        if self.transport.is_closing():
            return
        cycle = self.cycle
        if cycle is not None and not cycle.response_complete:
            # a pipelined request's head is late while the one before it is answered: the
            # connection closes after that answer
            cycle.keep_alive = False
            return
        count_refused("header_timeout")
        if self._in_head:
            self._answer(
                408,
                "Request timeout: the request's headers did not arrive within "
                f"{self.limits.header_timeout:g} seconds",
            )
        else:
            self.transport.close()

    # the request body

    def timed_receive(self, cycle: RequestResponseCycle, receive: Receive) -> Receive:
        """Return ``receive`` for ``cycle``'s app, waiting at most the body timeout for bytes."""
        timeout = self.limits.body_timeout

        async def receive_timed() -> Message:
            if (
                cycle.more_body
                and not cycle.body
                and not cycle.disconnected
                and not cycle.response_complete
            ):
                # the handler waits for bytes the client has yet to send: as uvicorn's receive
                # does, ask for them (100 Continue) and read on, but on a clock
                if cycle.waiting_for_100_continue and not cycle.transport.is_closing():
                    cycle.transport.write(b"HTTP/1.1 100 Continue\r\n\r\n")
                    cycle.waiting_for_100_continue = False
                cycle.flow.resume_reading()
                timer = self.loop.call_later(timeout, self._body_timed_out, cycle)
                try:
                    await cycle.message_event.wait()
                finally:
                    timer.cancel()
            message: Message = await receive()
            return message

        return receive_timed

    def _body_timed_out(self, cycle: RequestResponseCycle) -> None:
        if cycle.disconnected or cycle.response_complete or self.transport.is_closing():
            return
        count_refused("body_timeout")
        self.cut_off = cycle
        if not cycle.response_started:
            self._answer(
                408,
                "Request timeout: the request's body stalled for "
                f"{self.limits.body_timeout:g} seconds",
            )
        else:
            self.transport.close()
        # the handler reads the client as gone; what it still sends goes nowhere
        cycle.disconnected = True
        cycle.keep_alive = False
        cycle.message_event.set()

    # answers of the protocol itself

    def _answer(self, status: int, message: str) -> None:
        """Answer lakeFS's JSON error with ``status`` and close the connection."""
        self._answered = True
        self._cancel_head_timer()
        body = json.dumps({"message": message}).encode()
        head = [STATUS_LINE[status]]
        for name, value in self.server_state.default_headers:
            head += [name, b": ", value, b"\r\n"]
        head += [
            b"content-type: application/json\r\n",
            b"content-length: " + str(len(body)).encode("ascii") + b"\r\n",
            b"connection: close\r\n\r\n",
        ]
        self.transport.write(b"".join(head) + body)
        self.transport.close()
