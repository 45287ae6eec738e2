"""What the replicant's operations on mirrors (promotion, adoption) use of their replicant.

:class:`~mirror.replicant.service.ReplicantService` is such a host: it imports the operations'
modules and passes itself, never the reverse, so that no module imports the service back.
"""

from __future__ import annotations

from typing import Protocol

from mirror.replicant.client import LakeFSClient
from mirror.replicant.metrics import ReplicantMetrics
from mirror.replicant.state import ReplicantStore

__all__ = ["ReplicantHost"]


class ReplicantHost(Protocol):
    """The replicant of a region, as an operation on its mirrors sees it."""

    @property
    def store(self) -> ReplicantStore:
        """Return the replicant's records in the region's KV."""
        ...

    @property
    def metrics(self) -> ReplicantMetrics:
        """Return the replicant's metrics."""
        ...

    @property
    def local(self) -> LakeFSClient:
        """Return the client of the replicant's own region."""
        ...

    def client(self, region: str) -> LakeFSClient:
        """Return the API client of a configured region."""
        ...

    def now(self) -> float:
        """Return the replicant's wall-clock time (seconds since the epoch)."""
        ...
