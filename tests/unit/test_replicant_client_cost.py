"""The replicant's API client over a real socket: a request imports nothing.

httpcore asks which async library runs on every request by importing ``sniffio``; when that
package is missing, each ask is a failed import that searches ``sys.path`` again (about 1 ms of
the replicant's CPU a request). A poll round makes four such requests per mirror, so the
client is held to importing nothing once warm.
"""

from __future__ import annotations

import asyncio
import importlib.abc
import importlib.machinery
import sys
from collections.abc import Sequence
from types import ModuleType

from mirror.replicant.client import LakeFSClient

_BODY = b'{"pagination":{"has_more":false},"results":[{"id":"main","commit_id":"c1"}]}'
_ANSWER = (
    b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n"
    b"content-length: " + str(len(_BODY)).encode() + b"\r\n\r\n" + _BODY
)


class _Recorder(importlib.abc.MetaPathFinder):
    """Record every import that reaches the finders (modules not yet in ``sys.modules``)."""

    def __init__(self) -> None:
        self.names: list[str] = []

    def find_spec(
        self,
        fullname: str,
        path: Sequence[str] | None,
        target: ModuleType | None = None,
    ) -> importlib.machinery.ModuleSpec | None:
        self.names.append(fullname)
        return None


async def _serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while await reader.readuntil(b"\r\n\r\n"):
            writer.write(_ANSWER)
            await writer.drain()
    except (asyncio.IncompleteReadError, ConnectionError):
        pass
    finally:
        writer.close()


async def _requests_importing() -> list[str]:
    server = await asyncio.start_server(_serve, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    recorder = _Recorder()
    try:
        async with LakeFSClient(f"http://127.0.0.1:{port}", "AKIAEXAMPLE", "secret") as client:
            assert await client.list_branches("repo") == {"main": "c1"}  # warm: lazy imports
            sys.meta_path.insert(0, recorder)
            try:
                for _ in range(3):
                    assert await client.list_branches("repo") == {"main": "c1"}
            finally:
                sys.meta_path.remove(recorder)
    finally:
        server.close()
        await server.wait_closed()
    return recorder.names


def test_a_warm_client_request_imports_nothing() -> None:
    assert asyncio.run(_requests_importing()) == []
