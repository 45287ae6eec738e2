"""An API answer handed on to the browser chunk by chunk, never held whole.

:class:`~mirror.ui.api.ApiClient` reads each answer whole (httpx's ASGI transport collects the
body before it returns), which suits JSON and the bounded reads of a preview but not an object's
bytes: a download may be larger than the server's memory. :func:`open_relay` calls the API app
itself as ASGI, in process and as the signed-in person like every other call, and hands on each
body chunk as the API sends it; a small queue between the two lets the API run ahead by a few
chunks only.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from urllib.parse import urlencode

import httpx
import structlog
from starlette.responses import StreamingResponse

from mirror.ui.api import API_PREFIX, ApiClient, ApiError, SignedOut, error_text

if TYPE_CHECKING:
    from starlette.types import Message, Receive, Scope, Send

__all__ = ["Relay", "RelayResponse", "open_relay"]

_HOST = "lakemirror.internal"
_AHEAD = 4
"""Body chunks the API may send before the browser took the first of them."""
_ERROR_BODY_LIMIT = 64 << 10
"""An error answer's body is read whole to show its message; it is never larger than this."""


@dataclass(frozen=True, slots=True)
class Relay:
    """A successful API answer whose body is still arriving.

    Attributes:
        status: The API's status (200, 206).
        headers: The API's headers, names lower-cased.
        body: The body's chunks; iterating to the end (or closing it) releases the call.
    """

    status: int
    headers: dict[str, str]
    body: AsyncIterator[bytes]


def _scope(path: str, params: Mapping[str, str], headers: Mapping[str, str]) -> Scope:
    query = urlencode(params).encode("ascii")
    return {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": "GET",
        "scheme": "http",
        "path": path,
        "raw_path": path.encode(),
        "query_string": query,
        "root_path": "",
        "headers": [(k.lower().encode("latin-1"), v.encode("latin-1")) for k, v in headers.items()],
        "server": (_HOST, 80),
        "client": ("127.0.0.1", 0),
    }


async def _next(queue: asyncio.Queue[Message], call: asyncio.Task[None]) -> Message | None:
    """Return the API's next message, or ``None`` once it finished sending them."""
    if queue.empty() and not call.done():
        getter = asyncio.ensure_future(queue.get())
        await asyncio.wait({getter, call}, return_when=asyncio.FIRST_COMPLETED)
        if getter.done():
            return getter.result()
        getter.cancel()  # an item a cancelled getter was woken for stays in the queue
    return queue.get_nowait() if not queue.empty() else None


async def _chunks(
    queue: asyncio.Queue[Message], call: asyncio.Task[None], done: asyncio.Event
) -> AsyncIterator[bytes]:
    try:
        while True:
            message = await _next(queue, call)
            if message is None:
                return
            body: bytes = message.get("body", b"")
            if body:
                yield body
            if not message.get("more_body", False):
                return
    finally:
        done.set()
        call.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            # the API logged whatever failed; the browser sees the answer cut short
            await call


async def _read_error(first: Message, body: AsyncIterator[bytes]) -> tuple[int, str]:
    content = bytearray()
    async for chunk in body:
        content += chunk
        if len(content) > _ERROR_BODY_LIMIT:
            break
    headers = [(k.decode("latin-1"), v.decode("latin-1")) for k, v in first.get("headers", ())]
    answer = httpx.Response(first["status"], headers=headers, content=bytes(content))
    return answer.status_code, error_text(answer)


async def open_relay(
    api: ApiClient,
    path: str,
    token: str,
    *,
    params: Mapping[str, str] | None = None,
    headers: Mapping[str, str] | None = None,
) -> Relay:
    """Send ``GET /api/v1<path>`` as the session's user; return the answer as it arrives.

    Raises:
        SignedOut: the API answered 401.
        ApiError: any other refusal, with the API's message.
    """
    sent = {"host": _HOST, **(headers or {}), "authorization": f"Bearer {token}"}
    request_id = structlog.contextvars.get_contextvars().get("request_id")
    if isinstance(request_id, str):
        sent["x-request-id"] = request_id
    queue: asyncio.Queue[Message] = asyncio.Queue(maxsize=_AHEAD)
    done = asyncio.Event()
    asked = False

    async def receive() -> Message:
        nonlocal asked
        if not asked:
            asked = True
            return {"type": "http.request", "body": b"", "more_body": False}
        # a streamed answer listens for the browser going away: that is when the relay closes
        await done.wait()
        return {"type": "http.disconnect"}

    async def send(message: Message) -> None:
        if message["type"] in ("http.response.start", "http.response.body"):
            await queue.put(message)

    scope = _scope(API_PREFIX + path, params or {}, sent)

    async def run() -> None:
        await api.app(scope, receive, send)

    call = asyncio.create_task(run())
    first = await _next(queue, call)
    if first is None:
        await call  # raises what the API raised before answering
        raise ApiError(502, "the API gave no answer")
    body = _chunks(queue, call, done)
    status: int = first["status"]
    if status >= 400:
        status, message = await _read_error(first, body)
        if status == 401:
            raise SignedOut(message)
        raise ApiError(status, message)
    names = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in first["headers"]}
    return Relay(status, names, body)


class RelayResponse(StreamingResponse):
    """A streamed answer that always releases its API call, even if the browser went away."""

    def __init__(self, relay: Relay, headers: Mapping[str, str], media_type: str) -> None:
        self._relay = relay
        super().__init__(
            relay.body, status_code=relay.status, headers=dict(headers), media_type=media_type
        )

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Send the answer; close the API's body whatever happens."""
        try:
            await super().__call__(scope, receive, send)
        finally:
            closing: Any = self._relay.body
            await closing.aclose()
