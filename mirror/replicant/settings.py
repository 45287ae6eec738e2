"""How a replicant replica works: its region, the regions it reaches, and its tuning."""

from __future__ import annotations

import os
import socket
from dataclasses import dataclass, field

from mirror.config import RegionSettings

__all__ = ["ServiceSettings"]


@dataclass(frozen=True, slots=True)
class ServiceSettings:
    """How a replicant replica works."""

    region: str
    regions: dict[str, RegionSettings]
    poll_interval: float = 1.0
    lease_seconds: float = 15.0
    concurrency: int = 32
    list_threshold: int = 8
    object_cache_size: int = 1_000_000
    validated_heads_kept: int = 3
    bulk_threshold: int = 0
    shutdown_timeout: float = 25.0
    replica_id: str = field(default_factory=lambda: f"{socket.gethostname()}:{os.getpid()}")
