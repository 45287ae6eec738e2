"""What the tests of where reads run share: a KV treated as remote, and answers to compare."""

from __future__ import annotations

from collections.abc import Collection

import httpx

from mirror.kv.sqlite import SqliteKV

__all__ = ["RemoteReadsKV", "comparable"]


class RemoteReadsKV(SqliteKV):
    """SQLite that the API and the gateway treat as a remote KV: their reads run on threads."""

    local_reads = False  # type: ignore[misc]


def comparable(
    answer: httpx.Response, ignored: Collection[str]
) -> tuple[int, list[tuple[bytes, bytes]], bytes]:
    """Return an answer's status, headers (but the ``ignored`` names, lower case) and bytes."""
    headers = [h for h in answer.headers.raw if h[0].decode().lower() not in ignored]
    return answer.status_code, headers, answer.content
