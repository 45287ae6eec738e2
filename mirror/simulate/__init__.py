"""Stand-ins for the object store's cross-region replication, with fault injection."""

from mirror.simulate.replication import KeyPredicate, ReplicationSimulator, ReplicationStats

__all__ = ["KeyPredicate", "ReplicationSimulator", "ReplicationStats"]
