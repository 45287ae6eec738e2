"""The HTTP/1.1 protocol every LakeMirror process serves with: httptools, bounded in time and size.

uvicorn's httptools protocol parses requests in C and costs about 0.1 ms of CPU less per
request than its pure-Python h11 one, but it lowercases every response header name, and it
bounds neither how long a client may take to send a request nor how large its head may be.
:class:`HttpToolsProtocol` adds:

- **Header names as the app spelt them.** The ASGI apps here send lowercase names (Starlette's)
  except where a client needs the exact spelling: lakeFS's Python client looks
  ``Content-Range`` up case-sensitively. The response head is written with each name as the app
  sent it, as h11 does, so the faster parser changes nothing on the wire.
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
  extension, so a request waiting for a turn leaves the queue when its client hangs up.

Those answers are lakeFS's JSON error (``{"message": ...}``) with ``Connection: close``; each
counts in ``lakemirror_http_requests_refused_total``
(:func:`~mirror.httputil.metrics.count_refused`).
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from uvicorn.protocols.http.httptools_impl import STATUS_LINE, RequestResponseCycle
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol as _UvicornHttpTools

from mirror.httputil.admission import CLIENT_GONE
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


class _HeadTooLargeError(Exception):
    """Stops the parser once a request head passed its bound (already answered 431)."""


class _HeadWriter:
    """A transport for the one write of a response's head: restores the spelling of names."""

    def __init__(self, transport: asyncio.Transport, spelt: dict[bytes, bytes]) -> None:
        self._transport = transport
        self._spelt = spelt

    def write(self, data: bytes) -> None:
        """Write the head with every lowercased name of :attr:`_spelt` spelt as given."""
        for lower, given in self._spelt.items():
            data = data.replace(b"\r\n" + lower + b": ", b"\r\n" + given + b": ")
        self._transport.write(data)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._transport, name)


class _ConnectionApp:
    """Wrap an ASGI app: heads written with names as sent, body reads bounded in time."""

    def __init__(self, app: ASGIApp, protocol: HttpToolsProtocol) -> None:
        self.app = app
        self.protocol = protocol

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        cycle = getattr(send, "__self__", None)
        if scope["type"] != "http" or not isinstance(cycle, RequestResponseCycle):
            await self.app(scope, receive, send)
            return

        async def send_spelt(message: Message) -> None:
            if message["type"] == "http.response.start":
                spelt = {
                    bytes(name).lower(): bytes(name)
                    for name, _ in message.get("headers", ())
                    if name != name.lower()
                }
                if spelt:
                    transport = cycle.transport
                    cycle.transport = _HeadWriter(transport, spelt)  # type: ignore[assignment]
                    try:
                        await send(message)
                    finally:
                        cycle.transport = transport
                    return
            await send(message)

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
        self._answered = False
        self._gone = asyncio.Event()
        self.cut_off: RequestResponseCycle | None = None
        """The request whose body stalled past the body timeout (answered 408)."""

    # the connection

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        """Start serving a connection: its first request's head is due in time."""
        super().connection_made(transport)
        self._arm_head_timer()

    def connection_lost(self, exc: Exception | None) -> None:
        """Tell waiting requests their client is gone; stop the clocks."""
        self._cancel_head_timer()
        self._gone.set()
        super().connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        """Parse more bytes, unless the connection was answered and is closing."""
        if self._answered:
            return
        super().data_received(data)

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
        if self._head_timer is None:
            self._arm_head_timer()
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
        """Stop the header clock and start the request."""
        self._cancel_head_timer()
        self._in_head = False
        super().on_headers_complete()

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

    def _arm_head_timer(self) -> None:
        self._head_timer = self.loop.call_later(self.limits.header_timeout, self._head_timed_out)

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
