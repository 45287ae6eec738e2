"""HTTP/1.1 requests as bytes, the input form of the gateway's targets, and back.

An input reads as a request on the wire: ``METHOD target HTTP/1.1``, header lines, an empty line,
the body. The reading is lenient (it never raises): a part that is missing takes a default, a
header line without ``:`` is a header with an empty value, so every input reaches the parser
under test, which is what must hold against it. The body is handed over in pieces, as a server
receives it.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any
from urllib.parse import unquote

from starlette.requests import Request

__all__ = ["WireInput", "asgi_request", "read_input", "render"]


@dataclass(frozen=True)
class WireInput:
    """A request read from an input's bytes."""

    method: bytes
    target: bytes
    headers: tuple[tuple[bytes, bytes], ...]
    body: bytes


def read_input(data: bytes) -> WireInput:
    """Return the request ``data`` spells (see the module's docstring)."""
    for separator in (b"\r\n\r\n", b"\n\n"):
        head, found, body = data.partition(separator)
        if found:
            break
    else:
        head, body = data, b""
    lines = [line.removesuffix(b"\r") for line in head.split(b"\n")]
    request_line = lines[0].split(b" ")
    method = request_line[0] or b"GET"
    target = request_line[1] if len(request_line) > 1 and request_line[1] else b"/"
    headers = []
    for line in lines[1:]:
        name, _, value = line.partition(b":")
        headers.append((name.strip().lower(), value.strip()))
    return WireInput(method, target, tuple(headers), body)


def render(
    method: str, target: str, headers: Iterable[tuple[str, str]], body: bytes = b""
) -> bytes:
    """Return the input spelling a request (header values as UTF-8)."""
    lines = [f"{method} {target} HTTP/1.1", *(f"{k}: {v}" for k, v in headers)]
    return "\r\n".join(lines).encode() + b"\r\n\r\n" + body


def asgi_request(wire: WireInput, piece: int = 4096) -> Request:
    """Return the Starlette request a server would hand over for ``wire``."""
    raw_path, _, query = wire.target.partition(b"?")
    scope: dict[str, Any] = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": wire.method.decode("latin-1").upper(),
        "scheme": "http",
        "path": unquote(raw_path.decode("latin-1")),
        "raw_path": raw_path,
        "query_string": query,
        "root_path": "",
        "headers": list(wire.headers),
        "client": ("127.0.0.1", 50000),
        "server": ("127.0.0.1", 8000),
    }
    pieces = [wire.body[i : i + piece] for i in range(0, len(wire.body), max(piece, 1))]

    async def receive() -> dict[str, Any]:
        if pieces:
            return {"type": "http.request", "body": pieces.pop(0), "more_body": bool(pieces)}
        return {"type": "http.request", "body": b"", "more_body": False}

    return Request(scope, receive)
