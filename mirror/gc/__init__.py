"""Garbage collection: lakeFS's rules, the commits they retain, and what a run needs to know.

:mod:`mirror.gc.rules` holds the rules and keeps them in the KV; :mod:`mirror.gc.retention`
decides which commits the rules retain; :func:`prepare_commits` and :func:`prepare_uncommitted`
write what a run needs into the namespace (the retained commits as CSV, the staged addresses as
Parquet), as lakeFS's ``prepare_commits`` and ``prepare_uncommited`` do. The job that marks and
sweeps is a Spark job, :mod:`mirror.spark.gc`.
"""

from __future__ import annotations

from mirror.gc.commits import COMMITS_HEADER, PreparedCommits, gc_repository, prepare_commits
from mirror.gc.errors import (
    GCReadOnlyError,
    GCRulesNotFoundError,
    InvalidContinuationTokenError,
    InvalidGCRulesError,
)
from mirror.gc.layout import (
    DATA_PREFIX,
    GC_PREFIX,
    commits_key,
    is_run_id,
    new_run_id,
    uncommitted_prefix,
    unified_prefix,
)
from mirror.gc.retention import DAY, CommitNode, dangling_commits, retained_commits
from mirror.gc.rules import MAX_RETENTION_DAYS, GCRules, GCRulesStore
from mirror.gc.uncommitted import (
    DEFAULT_PAGE_SECONDS,
    DEFAULT_PAGE_SIZE,
    UNCOMMITTED_SCHEMA,
    PreparedUncommitted,
    prepare_uncommitted,
    relative_address,
)

__all__ = [
    "COMMITS_HEADER",
    "DATA_PREFIX",
    "DAY",
    "DEFAULT_PAGE_SECONDS",
    "DEFAULT_PAGE_SIZE",
    "GC_PREFIX",
    "MAX_RETENTION_DAYS",
    "UNCOMMITTED_SCHEMA",
    "CommitNode",
    "GCReadOnlyError",
    "GCRules",
    "GCRulesNotFoundError",
    "GCRulesStore",
    "InvalidContinuationTokenError",
    "InvalidGCRulesError",
    "PreparedCommits",
    "PreparedUncommitted",
    "commits_key",
    "dangling_commits",
    "gc_repository",
    "is_run_id",
    "new_run_id",
    "prepare_commits",
    "prepare_uncommitted",
    "relative_address",
    "retained_commits",
    "uncommitted_prefix",
    "unified_prefix",
]
