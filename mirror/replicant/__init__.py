"""The replicant: mirrors repositories of other regions into read-only repositories of this one.

A :class:`~mirror.replicant.service.ReplicantService` keeps mirror configurations and leases in
the region's KV and runs a :class:`~mirror.replicant.worker.MirrorWorker` per leased mirror; the
app of :mod:`mirror.replicant.app` serves the configuration API and ``/metrics``.
"""

from mirror.replicant.client import LakeFSClient, RemoteCommit
from mirror.replicant.metrics import ReplicantMetrics
from mirror.replicant.service import MirrorRequest, ReplicantService, ServiceSettings
from mirror.replicant.state import BranchStatus, MirrorConfig, ReplicantStore
from mirror.replicant.worker import MirrorWorker, WorkerSettings

__all__ = [
    "BranchStatus",
    "LakeFSClient",
    "MirrorConfig",
    "MirrorRequest",
    "MirrorWorker",
    "RemoteCommit",
    "ReplicantMetrics",
    "ReplicantService",
    "ReplicantStore",
    "ServiceSettings",
    "WorkerSettings",
]
