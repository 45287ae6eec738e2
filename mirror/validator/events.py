"""Hooks a validation reports its work through (requests, object results, cache hits).

The replicant wires them to Prometheus counters (``lakemirror_validation_requests_total{op}``,
``lakemirror_validation_objects_total{result}``, ``lakemirror_cache_hits_total{cache}``); tests
and benchmarks count with :class:`CountingEvents`.
"""

from __future__ import annotations

from collections import Counter
from typing import Protocol, runtime_checkable

__all__ = ["CountingEvents", "NullEvents", "ValidationEvents"]


@runtime_checkable
class ValidationEvents(Protocol):
    """Receive one call per request, per object checked (or run of them) and per cache hit."""

    def request(self, op: str) -> None:
        """Report one request to the destination: ``"head"``, ``"get"`` or ``"list"``."""
        ...

    def object(self, result: str, count: int = 1) -> None:
        """Report ``count`` objects checked with one result.

        Results: ``present``, ``missing``, ``size_mismatch``, ``external``; ``external`` is an
        object outside the namespace that could not be checked.
        """
        ...

    def cache_hit(self, cache: str) -> None:
        """Report one thing known present without a request: ``range``, ``object`` or ``base``."""
        ...


class NullEvents:
    """Ignore every event."""

    def request(self, op: str) -> None:
        """Ignore a request."""

    def object(self, result: str, count: int = 1) -> None:
        """Ignore object results."""

    def cache_hit(self, cache: str) -> None:
        """Ignore a cache hit."""


class CountingEvents:
    """Count events by kind in three counters: ``requests``, ``objects`` and ``cache_hits``."""

    def __init__(self) -> None:
        self.requests: Counter[str] = Counter()
        self.objects: Counter[str] = Counter()
        self.cache_hits: Counter[str] = Counter()

    @property
    def total_requests(self) -> int:
        """Return the number of requests of every kind."""
        return sum(self.requests.values())

    def request(self, op: str) -> None:
        """Count a request by operation."""
        self.requests[op] += 1

    def object(self, result: str, count: int = 1) -> None:
        """Count objects by result."""
        self.objects[result] += count

    def cache_hit(self, cache: str) -> None:
        """Count a cache hit by cache."""
        self.cache_hits[cache] += 1

    def reset(self) -> None:
        """Set every counter back to zero."""
        self.requests.clear()
        self.objects.clear()
        self.cache_hits.clear()
