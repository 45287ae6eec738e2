"""Bulk validation: prove a whole tree present in a namespace with one Spark job.

The first sync of a huge repository checks every object of its head commit. The async
:class:`~mirror.validator.Validator` does that at about one listing request per thousand objects;
:func:`bulk_validate` does it as a Spark job instead (DESIGN.md §6, "Bulk mode"):

1. read the metarange file with pyarrow (it is small) and list the ``_lakefs/`` files, so that
   missing range files are named without reading them;
2. read every range file present with Spark (``key``, ``address``, ``address_type``, ``size``);
3. list the destination once: the namespace is walked into a Parquet listing of ``key`` and
   ``size``, or a listing is given (``listing``: such a Parquet dataset, or an S3 Inventory in
   Parquet, whose ``bucket`` column makes its keys bucket keys);
4. anti-join the entries on ``address`` with the listing, comparing sizes.

Objects with full (absolute) addresses lie outside the namespace and its listing: they are
reported apart, unchecked. :func:`bulk_first_sync` runs the job for the replicant in a worker
thread, records the ranges found whole as validated, and lets an async validator finish what the
job could not prove (stragglers, objects outside the namespace).

Spark reads ``file://`` URIs for ``local://`` namespaces and ``s3a://`` URIs for ``s3://`` ones.
"""

from __future__ import annotations

import os
import tempfile
import time
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio.to_thread
import pyarrow as pa
import pyarrow.parquet as pq

from mirror.block.errors import BlockNotFoundError, InvalidNamespaceError
from mirror.block.local import LocalBlockStore
from mirror.block.protocol import BlockStore
from mirror.block.resolver import BlockResolver, split_namespace
from mirror.core.committed import METADATA_PREFIX, RangeInfo, decode_metarange
from mirror.core.model import AddressType
from mirror.errors import InvalidValueError
from mirror.validator import (
    MISSING_SAMPLE_SIZE,
    ValidatedRanges,
    ValidationReport,
    Validator,
)

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

__all__ = [
    "LISTING_SCHEMA",
    "BulkReport",
    "bulk_first_sync",
    "bulk_validate",
    "local_spark_session",
    "physical_root",
    "stage_ranges",
    "write_listing",
]

_LISTING_FIELDS: list[pa.Field[Any]] = [pa.field("key", pa.string()), pa.field("size", pa.int64())]
LISTING_SCHEMA = pa.schema(_LISTING_FIELDS)
"""The columns of a namespace listing: keys relative to the namespace, and sizes in bytes."""

_LISTING_BATCH = 100_000
_TMP_DIR = ".lakemirror-tmp"
_STAGING_THREADS = 16
_FULL = AddressType.FULL.value
_MISSING, _MISMATCH, _EXTERNAL = "missing", "size_mismatch", "external"


@dataclass(frozen=True, slots=True)
class BulkReport:
    """What one bulk validation found.

    Attributes:
        metarange_id: The tree validated.
        complete: Whether the metarange, every range and every object are present with their
            recorded sizes, and no object lies outside the namespace (those are not checked).
        missing_count: Files missing or of the wrong size: metarange, ranges, data objects.
        missing: The first of them in key order, at most the sample size asked for: keys
            relative to the namespace (``_lakefs/<id>`` for committed files).
        size_mismatches: Objects of ``missing_count`` present with another size.
        external_count: Entries with a full address, outside the namespace: not checked.
        external: The first of their addresses in order, at most the sample size.
        ranges_total: Ranges the metarange lists.
        ranges_read: Range files present and read by the job.
        whole_ranges: Range IDs whose file and every object are present (none external): what
            a :class:`~mirror.validator.ValidatedRanges` set may record.
        objects_checked: Entries with a relative address, checked against the listing.
        listed: Objects in the listing the job wrote, or ``None`` for a listing given to it.
        seconds: Wall-clock time of the whole validation.
    """

    metarange_id: str
    complete: bool
    missing_count: int
    missing: tuple[str, ...]
    size_mismatches: int
    external_count: int
    external: tuple[str, ...]
    ranges_total: int
    ranges_read: int
    whole_ranges: tuple[str, ...]
    objects_checked: int
    listed: int | None
    seconds: float

    def as_validation_report(self) -> ValidationReport:
        """Return the report the async validator would give without a reader for full addresses.

        Objects outside the namespace count as missing there, as that validator reports them.
        """
        sample = (self.missing + self.external)[:MISSING_SAMPLE_SIZE]
        return ValidationReport(
            metarange_id=self.metarange_id,
            complete=self.complete,
            missing_count=self.missing_count + self.external_count,
            missing=sample,
            ranges_total=self.ranges_total,
            ranges_read=self.ranges_read,
            ranges_skipped=0,
            objects_checked=self.objects_checked + self.external_count,
            objects_cached=0,
        )


def physical_root(store: BlockStore) -> str:
    """Return the URI Spark reads the namespace of ``store`` under, without a trailing slash.

    ``file://`` for a local directory, ``s3a://`` for ``s3://bucket/prefix``.

    Raises:
        InvalidNamespaceError: Spark cannot read the namespace (``mem://``, say).
    """
    if isinstance(store, LocalBlockStore):
        return store.root.as_uri()
    scheme, rest = split_namespace(store.namespace)
    if scheme == "s3":
        return f"s3a://{rest}"
    raise InvalidNamespaceError(
        f"namespace {store.namespace!r}: Spark reads only local:// and s3:// namespaces"
    )


def _spark_reads(spark: SparkSession, root: str) -> bool:
    """Return whether the session has a Hadoop filesystem for ``root``'s scheme."""
    scheme = root.partition(":")[0]
    if scheme == "file":
        return True
    try:
        jvm: Any = spark.sparkContext._jvm
        conf = spark.sparkContext._jsc.hadoopConfiguration()
        jvm.org.apache.hadoop.fs.FileSystem.getFileSystemClass(scheme, conf)
    except Exception:  # py4j raises its own error for a class it cannot load
        return False
    return True


def stage_ranges(store: BlockStore, ranges: Sequence[RangeInfo], directory: Path) -> str:
    """Copy the range files of ``ranges`` from ``store`` under ``directory``; return its URI.

    For a Spark in local mode without the S3A filesystem (the ``hadoop-aws`` jars), which
    cannot read ``s3a://`` itself: the files are read through ``store``, several at a time, as
    the async validator reads them, and Spark reads the copies. A file keeps its range ID as its
    name, which is how the job tells ranges apart.
    """
    target = directory / METADATA_PREFIX
    target.mkdir(parents=True, exist_ok=True)

    def copy(info: RangeInfo) -> None:
        (target / info.id).write_bytes(store.get(METADATA_PREFIX + info.id))

    with ThreadPoolExecutor(_STAGING_THREADS) as pool:
        for _ in pool.map(copy, ranges):
            pass
    return directory.as_uri()


def _walk_local(root: Path) -> Iterator[tuple[str, int]]:
    """Yield ``(key, size)`` of every file under ``root``, in no particular order."""
    stack = [(str(root), "")]
    while stack:
        directory, rel = stack.pop()
        try:
            entries = os.scandir(directory)
        except (FileNotFoundError, NotADirectoryError):
            continue
        with entries:
            for entry in entries:
                if not rel and entry.name == _TMP_DIR:
                    continue
                if entry.is_dir(follow_symlinks=False):
                    stack.append((entry.path, rel + entry.name + "/"))
                    continue
                try:
                    size = entry.stat(follow_symlinks=False).st_size
                except FileNotFoundError:
                    continue
                yield rel + entry.name, size


def _objects(store: BlockStore) -> Iterator[tuple[str, int]]:
    if isinstance(store, LocalBlockStore):
        # a walk without the sorting and per-directory lists of LocalBlockStore.list
        yield from _walk_local(store.root)
    else:
        for info in store.list():
            yield info.key, info.size


def write_listing(store: BlockStore, path: str | Path) -> int:
    """Write every object of ``store``'s namespace to a Parquet file; return how many.

    The file has the columns of :data:`LISTING_SCHEMA`. A local namespace is walked with
    ``os.scandir``; any other is listed through the store (one request per 1,000 keys on S3).

    Raises:
        BlockUnavailableError: the store failed transiently.
    """
    count = 0
    keys: list[str] = []
    sizes: list[int] = []
    with pq.ParquetWriter(str(path), LISTING_SCHEMA, compression="zstd") as writer:

        def flush() -> None:
            writer.write_table(pa.table({"key": keys, "size": sizes}, schema=LISTING_SCHEMA))
            keys.clear()
            sizes.clear()

        for key, size in _objects(store):
            keys.append(key)
            sizes.append(size)
            count += 1
            if len(keys) >= _LISTING_BATCH:
                flush()
        if keys or count == 0:
            flush()
    return count


def _present_metadata(store: BlockStore) -> set[str]:
    """Return the keys under ``_lakefs/`` in the namespace (ranges of every commit: few)."""
    local = store.root / METADATA_PREFIX if isinstance(store, LocalBlockStore) else None
    if local is not None:
        try:
            with os.scandir(local) as entries:
                return {METADATA_PREFIX + e.name for e in entries if e.is_file()}
        except FileNotFoundError:
            return set()
    return {info.key for info in store.list(METADATA_PREFIX)}


def _listing_frame(spark: SparkSession, listing: str, store: BlockStore) -> DataFrame:
    """Read a given listing as ``(l_key, l_size)``, keys relative to the namespace, each once.

    A ``bucket`` column marks an S3 Inventory: keys are bucket keys, so rows of other buckets
    and keys outside the namespace's prefix are dropped and the prefix is cut.
    """
    from pyspark.sql import functions as F

    frame = spark.read.parquet(listing)
    if "key" not in frame.columns or "size" not in frame.columns:
        raise InvalidValueError(f"listing {listing!r} has no key and size columns")
    key = F.col("key")
    if "bucket" in frame.columns:
        scheme, rest = split_namespace(store.namespace)
        if scheme != "s3":
            raise InvalidValueError(
                f"listing {listing!r} is an S3 Inventory, but {store.namespace!r} is not on S3"
            )
        bucket, _, prefix = rest.partition("/")
        prefix = prefix.strip("/") + "/" if prefix.strip("/") else ""
        frame = frame.where(F.col("bucket") == bucket)
        # a versioned bucket's inventory lists every version: keep the current objects
        if "is_latest" in frame.columns:
            frame = frame.where(F.col("is_latest"))
        if "is_delete_marker" in frame.columns:
            frame = frame.where(~F.col("is_delete_marker"))
        if prefix:
            frame = frame.where(key.startswith(prefix))
            key = F.expr(f"substring(key, {len(prefix) + 1})")
    frame = frame.select(key.alias("l_key"), F.col("size").cast("long").alias("l_size"))
    return frame.dropDuplicates(["l_key"])


def _sorted_sample(frame: DataFrame, column: str, limit: int | None) -> list[str]:
    ordered = frame.select(column).orderBy(column)
    rows = ordered.collect() if limit is None else ordered.limit(limit).collect()
    return [str(row[0]) for row in rows]


def _check_entries(
    spark: SparkSession,
    root: str,
    ranges: list[RangeInfo],
    listing: DataFrame,
    sample: int | None,
) -> tuple[dict[str, int], list[str], list[str], set[str]]:
    """Run the anti-join over the range files of ``ranges``.

    Returns counts by problem kind, the sorted samples of missing relative addresses and of
    full addresses, and the IDs of ranges holding any problem.
    """
    from pyspark import StorageLevel
    from pyspark.sql import functions as F
    from pyspark.sql.types import LongType, StringType, StructField, StructType

    schema = StructType(
        [
            StructField("key", StringType()),
            StructField("address", StringType()),
            StructField("address_type", StringType()),
            StructField("size", LongType()),
        ]
    )
    paths = [f"{root}/{METADATA_PREFIX}{r.id}" for r in ranges]
    entries = (
        spark.read.schema(schema)
        .parquet(*paths)
        .select(
            F.col("_metadata.file_name").alias("range_id"),
            "address",
            "address_type",
            "size",
        )
    )
    is_full = F.col("address_type") == _FULL
    joined = entries.join(
        listing, (F.col("address") == F.col("l_key")) & ~is_full, "left_outer"
    ).select(
        "range_id",
        "address",
        F.when(is_full, F.lit(_EXTERNAL))
        .when(F.col("l_size").isNull(), F.lit(_MISSING))
        .when(F.col("l_size") != F.col("size"), F.lit(_MISMATCH))
        .alias("problem"),
    )
    problems = joined.where(F.col("problem").isNotNull()).persist(StorageLevel.MEMORY_AND_DISK)
    try:
        counts = {
            str(row["problem"]): int(row["count"])
            for row in problems.groupBy("problem").count().collect()
        }
        if not counts:
            return counts, [], [], set()
        relative = problems.where(F.col("problem") != _EXTERNAL)
        external = problems.where(F.col("problem") == _EXTERNAL)
        missing = _sorted_sample(relative, "address", sample) if counts.keys() - {_EXTERNAL} else []
        outside = _sorted_sample(external, "address", sample) if _EXTERNAL in counts else []
        bad = {str(row[0]) for row in problems.select("range_id").distinct().collect()}
        return counts, missing, outside, bad
    finally:
        problems.unpersist()


def _open_store(namespace: str) -> BlockStore:
    scheme, _ = split_namespace(namespace)
    if scheme != "local":
        raise InvalidNamespaceError(
            f"namespace {namespace!r}: pass the store to read it with (only absolute "
            "local:// namespaces open without one)"
        )
    return BlockResolver().open(namespace)


def bulk_validate(
    spark: SparkSession,
    namespace: str,
    metarange_id: str,
    *,
    listing: str | None = None,
    store: BlockStore | None = None,
    sample: int | None = MISSING_SAMPLE_SIZE,
    work_dir: str | Path | None = None,
) -> BulkReport:
    """Check with one Spark job that tree ``metarange_id`` is whole in ``namespace``.

    Args:
        spark: The session to run the job in.
        namespace: The destination namespace (``local://`` or ``s3://``).
        metarange_id: The tree to check; ``""`` (the empty tree) is trivially complete.
        listing: A Parquet listing of the namespace Spark can read (columns ``key``, ``size``;
            or an S3 Inventory in Parquet with ``bucket``, ``key``, ``size``). Without it, the
            namespace is listed now into a Parquet file under ``work_dir``, which only a Spark
            running on this machine (local mode) can read.
        store: Reads the metarange and lists ``_lakefs/``; opened from ``namespace`` when
            ``None`` (absolute ``local://`` namespaces only).
        sample: Missing keys and full addresses to name at most, each; ``None`` names all.
        work_dir: Where to write the listing (a temporary directory inside it, removed after).

    Raises:
        InvalidNamespaceError: Spark cannot read the namespace, or no store was given for it.
        InvalidValueError: ``sample`` is negative, or the listing lacks the columns it needs.
        BlockUnavailableError: the store failed transiently.
    """
    if sample is not None and sample < 0:
        raise InvalidValueError(f"sample must not be negative, got {sample}")
    started = time.perf_counter()
    store = store if store is not None else _open_store(namespace)
    root = physical_root(store)

    def report(
        *,
        missing: list[str],
        missing_count: int,
        ranges: Sequence[RangeInfo] = (),
        read: Sequence[RangeInfo] = (),
        mismatches: int = 0,
        outside: tuple[list[str], int] = ([], 0),
        whole: tuple[str, ...] = (),
        checked: int = 0,
        listed: int | None = None,
    ) -> BulkReport:
        missing.sort()
        return BulkReport(
            metarange_id=metarange_id,
            complete=missing_count == 0 and outside[1] == 0,
            missing_count=missing_count,
            missing=tuple(missing if sample is None else missing[:sample]),
            size_mismatches=mismatches,
            external_count=outside[1],
            external=tuple(outside[0]),
            ranges_total=len(ranges),
            ranges_read=len(read),
            whole_ranges=whole,
            objects_checked=checked,
            listed=listed,
            seconds=time.perf_counter() - started,
        )

    if not metarange_id:
        return report(missing=[], missing_count=0)
    try:
        ranges = decode_metarange(store.get(METADATA_PREFIX + metarange_id))
    except BlockNotFoundError:
        return report(missing=[METADATA_PREFIX + metarange_id], missing_count=1)
    present = _present_metadata(store)
    read = [r for r in ranges if METADATA_PREFIX + r.id in present]
    absent = [METADATA_PREFIX + r.id for r in ranges if METADATA_PREFIX + r.id not in present]
    if not read:
        return report(missing=absent, missing_count=len(absent), ranges=ranges)
    with tempfile.TemporaryDirectory(prefix="lakemirror-listing-", dir=work_dir) as tmp:
        listed: int | None = None
        if listing is None:
            path = Path(tmp) / "listing.parquet"
            listed = write_listing(store, path)
            frame = spark.read.parquet(path.as_uri()).selectExpr("key AS l_key", "size AS l_size")
        else:
            frame = _listing_frame(spark, listing, store)
        if not _spark_reads(spark, root):
            root = stage_ranges(store, read, Path(tmp) / "committed")
        counts, missing, outside, bad = _check_entries(spark, root, read, frame, sample)
    external_count = counts.get(_EXTERNAL, 0)
    mismatches = counts.get(_MISMATCH, 0)
    missing_count = len(absent) + counts.get(_MISSING, 0) + mismatches
    return report(
        missing=missing + absent,
        missing_count=missing_count,
        ranges=ranges,
        read=read,
        mismatches=mismatches,
        outside=(outside, external_count),
        whole=tuple(r.id for r in read if r.id not in bad),
        checked=sum(r.count for r in read) - external_count,
        listed=listed,
    )


async def bulk_first_sync(
    namespace: str,
    metarange_id: str,
    *,
    spark: SparkSession,
    validated: ValidatedRanges,
    validator: Validator | None = None,
    store: BlockStore | None = None,
    listing: str | None = None,
    work_dir: str | Path | None = None,
) -> ValidationReport:
    """Validate a first sync in bulk: the Spark job, then the async validator for the rest.

    The job runs in a worker thread. Every range it finds whole is added to ``validated``, so
    that ``validator`` (which must use that same set) skips it unread; ``validator`` then checks
    what the job could not prove — ranges with missing objects (only the stragglers arrived
    since the listing are found present), objects with full addresses — and its report,
    counting the job's reads and checks too, is returned. Without ``validator``, the job's
    report is returned as :meth:`BulkReport.as_validation_report` gives it.

    Raises:
        InvalidNamespaceError: Spark cannot read the namespace, or no store was given for it.
        BlockUnavailableError: the destination failed transiently.
    """

    def job() -> BulkReport:
        return bulk_validate(
            spark, namespace, metarange_id, listing=listing, store=store, work_dir=work_dir
        )

    bulk = await anyio.to_thread.run_sync(job)
    if bulk.whole_ranges:
        await anyio.to_thread.run_sync(validated.add_many, bulk.whole_ranges)
    if validator is None:
        return bulk.as_validation_report()
    report = await validator.validate(metarange_id)
    whole = len(bulk.whole_ranges)
    return ValidationReport(
        metarange_id=report.metarange_id,
        complete=report.complete,
        missing_count=report.missing_count,
        missing=report.missing,
        ranges_total=report.ranges_total,
        ranges_read=report.ranges_read + bulk.ranges_read,
        ranges_skipped=max(0, report.ranges_skipped - whole),
        objects_checked=report.objects_checked + bulk.objects_checked,
        objects_cached=report.objects_cached,
    )


def local_spark_session(app_name: str = "lakemirror", cores: int | None = None) -> SparkSession:
    """Return a Spark session in local mode on this machine (``local[cores]``; all cores).

    Workers run this interpreter; the UI is off and shuffles use one partition per core.
    """
    import sys

    from pyspark.sql import SparkSession

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    n = cores if cores is not None else (os.cpu_count() or 1)
    session = (
        SparkSession.builder.master(f"local[{n}]")
        .appName(app_name)
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", str(max(2, 2 * n)))
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    return session
