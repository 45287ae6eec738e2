"""Spark on LakeMirror: read and write ``lakefs://`` datasets with Spark's own file formats.

:func:`read` / :func:`read_at` pin a ref to a commit and read the local region's physical files;
:func:`write` writes under a fresh ``data/`` prefix and stages every file in one bulk call.
pyspark is imported only by the functions that need it.
"""

from __future__ import annotations

from mirror.spark.bulk_validator import (
    LISTING_SCHEMA,
    BulkReport,
    bulk_first_sync,
    bulk_validate,
    local_spark_session,
    physical_root,
    write_listing,
)
from mirror.spark.errors import (
    DatasetExistsError,
    EmptyDatasetError,
    NotABranchError,
    RefNotFoundError,
    RepositoryNotFoundError,
    RepositoryReadOnlyError,
    ServerAuthError,
    ServerError,
    ServerUnavailableError,
    SparkIOError,
    UnsupportedAddressError,
    UnsupportedFormatError,
    UnsupportedModeError,
)
from mirror.spark.io import (
    FORMATS,
    MODES,
    SparkRead,
    SparkWrite,
    read,
    read_at,
    spark_uri,
    write,
)

__all__ = [
    "FORMATS",
    "LISTING_SCHEMA",
    "MODES",
    "BulkReport",
    "DatasetExistsError",
    "EmptyDatasetError",
    "NotABranchError",
    "RefNotFoundError",
    "RepositoryNotFoundError",
    "RepositoryReadOnlyError",
    "ServerAuthError",
    "ServerError",
    "ServerUnavailableError",
    "SparkIOError",
    "SparkRead",
    "SparkWrite",
    "UnsupportedAddressError",
    "UnsupportedFormatError",
    "UnsupportedModeError",
    "bulk_first_sync",
    "bulk_validate",
    "local_spark_session",
    "physical_root",
    "read",
    "read_at",
    "spark_uri",
    "write",
    "write_listing",
]
