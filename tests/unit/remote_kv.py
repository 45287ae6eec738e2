"""What the tests of where reads run share: a KV treated as remote, and answers to compare."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Callable, Collection
from pathlib import Path
from typing import Any

import httpx
import pytest

from mirror.core.catalog import Catalog
from mirror.kv.sqlite import SqliteKV

__all__ = ["RemoteReadsKV", "both_kvs", "comparable", "record_reads"]


class RemoteReadsKV(SqliteKV):
    """SQLite that the API and the gateway treat as a remote KV: their reads run on threads."""

    local_reads = False  # type: ignore[misc]


def comparable(
    answer: httpx.Response, ignored: Collection[str]
) -> tuple[int, list[tuple[bytes, bytes]], bytes]:
    """Return an answer's status, headers (but the ``ignored`` names, lower case) and bytes."""
    headers = [h for h in answer.headers.raw if h[0].decode().lower() not in ignored]
    return answer.status_code, headers, answer.content


@contextlib.asynccontextmanager
async def both_kvs(
    root: Path, serve: Callable[[Path, SqliteKV], tuple[Catalog, Any]], base_url: str
) -> AsyncIterator[list[tuple[Catalog, httpx.AsyncClient]]]:
    """Yield a catalog and a client of its app over SQLite, then the same over RemoteReadsKV.

    ``serve(directory, kv)`` builds a catalog in ``directory`` over ``kv`` and returns it with
    the ASGI app to send requests to; each KV is closed at the end.
    """
    made = []
    async with contextlib.AsyncExitStack() as stack:
        for name, kv_class in (("local", SqliteKV), ("remote", RemoteReadsKV)):
            kv = kv_class(root / name / "kv.db")
            stack.callback(kv.close)
            catalog, app = serve(root / name, kv)
            client = httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url=base_url)
            await stack.enter_async_context(client)
            made.append((catalog, client))
        yield made


def record_reads(monkeypatch: pytest.MonkeyPatch) -> list[bytes]:
    """Return the list the key of every ``SqliteKV.get`` from now on joins."""
    keys: list[bytes] = []
    get = SqliteKV.get

    def recorded(self: SqliteKV, key: bytes) -> bytes:
        keys.append(key)
        return get(self, key)

    monkeypatch.setattr(SqliteKV, "get", recorded)
    return keys
