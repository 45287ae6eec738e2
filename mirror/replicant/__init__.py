"""The replicant: mirrors repositories of other regions into read-only repositories of this one.

A :class:`~mirror.replicant.service.ReplicantService` keeps mirror configurations and leases in
the region's KV and runs a :class:`~mirror.replicant.worker.MirrorWorker` per leased mirror; the
app of :mod:`mirror.replicant.app` serves the configuration API and ``/metrics``.
:mod:`mirror.replicant.promotion` makes a mirror its region's writable repository, and
:mod:`mirror.replicant.adoption` makes an existing repository a mirror (fail-back).
"""

from mirror.replicant.adoption import DivergedError, PreservedBranch
from mirror.replicant.client import LakeFSClient, RemoteCommit
from mirror.replicant.metrics import ReplicantMetrics
from mirror.replicant.mirror_request import MirrorRequest
from mirror.replicant.promotion import AlreadyPromotedError, NotSyncedError, PromotionReport
from mirror.replicant.service import ReplicantService
from mirror.replicant.settings import ServiceSettings
from mirror.replicant.state import BranchStatus, MirrorConfig, ReplicantStore
from mirror.replicant.worker import MirrorWorker, WorkerSettings

__all__ = [
    "AlreadyPromotedError",
    "BranchStatus",
    "DivergedError",
    "LakeFSClient",
    "MirrorConfig",
    "MirrorRequest",
    "MirrorWorker",
    "NotSyncedError",
    "PreservedBranch",
    "PromotionReport",
    "RemoteCommit",
    "ReplicantMetrics",
    "ReplicantService",
    "ReplicantStore",
    "ServiceSettings",
    "WorkerSettings",
]
