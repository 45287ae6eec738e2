"""What the tests of :mod:`mirror.api.fast_reads` share: which requests a fast route took."""

from __future__ import annotations

from typing import Any

import pytest

from mirror.api.fast_reads import FastRead

__all__ = ["record_taken"]


def record_taken(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Return the list the path of every request a :class:`FastRead` takes from now on joins."""
    taken: list[str] = []
    handle = FastRead.handle

    async def counted(self: FastRead, scope: Any, receive: Any, send: Any) -> None:
        taken.append(scope["path"])
        await handle(self, scope, receive, send)

    monkeypatch.setattr(FastRead, "handle", counted)
    return taken
