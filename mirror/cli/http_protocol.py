"""The HTTP/1.1 protocol every LakeMirror process serves with: httptools, header names as given.

uvicorn's httptools protocol parses requests in C and costs about 0.1 ms of CPU less per
request than its pure-Python h11 one, but it lowercases every response header name. The ASGI
apps here send lowercase names (Starlette's) except where a client needs the exact spelling:
lakeFS's Python client looks ``Content-Range`` up case-sensitively. :class:`HttpToolsProtocol`
writes a response's head with each name spelt as the app sent it, as h11 does, so the faster
parser changes nothing on the wire.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol as _UvicornHttpTools
from uvicorn.protocols.http.httptools_impl import RequestResponseCycle

if TYPE_CHECKING:
    import asyncio

    from starlette.types import ASGIApp, Message, Receive, Scope, Send

__all__ = ["HttpToolsProtocol"]


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


class _KeepHeaderCase:
    """Wrap an ASGI app so that uvicorn's cycle writes the head with the names as sent."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

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

        await self.app(scope, receive, send_spelt)


class HttpToolsProtocol(_UvicornHttpTools):
    """uvicorn's httptools protocol, writing response header names as the app spelt them."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.app = _KeepHeaderCase(self.app)
