"""Garbage collection as a Spark job: mark what no retained commit and no branch holds, then sweep.

lakeFS collects garbage with a Spark job; so does LakeMirror. A run of :func:`run_gc`:

1. asks the server for every branch's staged addresses (``prepare_uncommited``, page by page)
   and then for the commits the repository's rules retain (``prepare_commits``; a repository
   without rules retains every commit). The server writes both into the namespace. Staging is
   listed first: a commit landing in between is then read with the commits;
2. reads the retained commits' metarange and range files straight from the namespace (they are
   Parquet) for their addresses: relative ones, and full ones inside the namespace (full
   addresses elsewhere are never touched);
3. lists ``data/`` of the namespace with modification times, one Spark task per partition
   (:mod:`mirror.spark.gc_storage`);
4. marks every listed object older than the cutoff (the run's start minus the grace period) that
   no live address names;
5. writes the report under ``<ns>/_lakefs/retention/gc/unified/<run>/`` as lakeFS does
   (``summary.json``, the marked addresses as Parquet in ``deleted/`` and as text in
   ``deleted.text/``), and with ``sweep`` deletes the marked objects. A later run can sweep a
   dry run's marks instead (``mark_id``).

Spark reads ``file://`` for ``local://`` namespaces and ``s3a://`` for ``s3://`` ones. Files of
the report are written through the session's Hadoop file system, like Spark's own output.
"""

from __future__ import annotations

import functools
import json
import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

from mirror.client.client import LakeFSClient
from mirror.client.config import load_config
from mirror.client.errors import AuthError, NotFoundError, UsageError
from mirror.core.committed import METADATA_PREFIX
from mirror.gc.layout import DATA_PREFIX, is_run_id, unified_prefix
from mirror.spark.gc_storage import S3Options, StorageRoot
from mirror.spark.io import spark_uri

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

__all__ = ["DEFAULT_SAMPLE", "GCRun", "gc_session", "rfc3339", "run_gc"]

DEFAULT_SAMPLE = 20
"""Marked addresses a run names in its report and output."""

_FULL = "full"
_DEDUPLICATE_IN_SPARK = 16


def rfc3339(seconds: float) -> str:
    """Return Unix seconds as an RFC 3339 UTC time (whole seconds)."""
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(seconds))


@dataclass(frozen=True, slots=True)
class GCRun:
    """What one run found and did.

    Attributes:
        run_id: The run (``prepare_uncommited``'s run ID, as in lakeFS), or the mark swept.
        repository: The repository collected.
        namespace: Its storage namespace.
        start_time: When the run started (Unix seconds).
        cutoff_time: Objects modified before this are old enough to collect.
        grace_period: ``start_time - cutoff_time``, in seconds.
        has_rules: Whether the repository has rules (without, every commit is retained).
        commits_run_id: The run ID of ``prepare_commits`` (``None`` without rules).
        retained_commits: Commits the rules retain (``None`` without rules: all of them).
        ranges_read: Range files read for their addresses.
        uncommitted_addresses: Staged addresses the branches hold.
        objects_listed: Objects listed under ``data/``.
        bytes_listed: Their bytes.
        marked: Objects marked as garbage.
        marked_bytes: Their bytes.
        swept: Whether the marked objects were deleted.
        deleted: Objects deleted (or already gone) by the sweep.
        sample: The first marked addresses, sorted.
        report_location: The URI of the run's report (ends with ``/``).
        first_slice: The first partition of ``data/`` listed (lakeFS's ``first_slice``).
        seconds: Wall-clock time of the run.
    """

    run_id: str
    repository: str
    namespace: str
    start_time: int
    cutoff_time: int
    grace_period: int
    has_rules: bool
    commits_run_id: str | None
    retained_commits: int | None
    ranges_read: int
    uncommitted_addresses: int
    objects_listed: int
    bytes_listed: int
    marked: int
    marked_bytes: int
    swept: bool
    deleted: int
    sample: tuple[str, ...]
    report_location: str
    first_slice: str
    seconds: float

    def summary(self) -> dict[str, Any]:
        """Return ``summary.json``: lakeFS's fields first (times in RFC 3339), then LakeMirror's.

        ``num_deleted_objects`` counts the marked objects, swept or not, as lakeFS's does.
        """
        ours = asdict(self)
        for key in ("run_id", "first_slice", "start_time", "cutoff_time"):
            del ours[key]
        ours["sample"] = list(self.sample)
        ours["seconds"] = round(self.seconds, 3)
        return {
            "run_id": self.run_id,
            "success": True,
            "first_slice": self.first_slice,
            "start_time": rfc3339(self.start_time),
            "cutoff_time": rfc3339(self.cutoff_time),
            "num_deleted_objects": self.marked,
            "start_time_unix": self.start_time,
            "cutoff_time_unix": self.cutoff_time,
            **ours,
        }

    @classmethod
    def from_summary(cls, data: dict[str, Any]) -> GCRun:
        """Rebuild a run from its ``summary.json``."""
        values = {k: v for k, v in data.items() if k in cls.__dataclass_fields__}
        values["start_time"] = int(data["start_time_unix"])
        values["cutoff_time"] = int(data["cutoff_time_unix"])
        values["sample"] = tuple(data.get("sample", ()))
        return cls(**values)

    def updated(self, **changes: Any) -> GCRun:
        """Return a copy with ``changes``."""
        return GCRun(**{**asdict(self), "sample": self.sample, **changes})


def gc_session(master: str | None = "local[*]", app_name: str = "lakemirror-gc") -> SparkSession:
    """Return a Spark session for a run on ``master``.

    Local mode by default; ``None`` takes whatever ``spark-submit`` or the environment set.
    """
    import os
    import sys

    from pyspark.sql import SparkSession

    builder = SparkSession.builder.appName(app_name)
    if master is not None:
        builder = builder.master(master)
    if master is not None and master.startswith("local"):
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
        builder = (
            builder.config("spark.ui.enabled", "false")
            .config("spark.ui.showConsoleProgress", "false")
            .config("spark.driver.host", "127.0.0.1")
            .config("spark.driver.bindAddress", "127.0.0.1")
            .config("spark.sql.shuffle.partitions", str(max(2, 2 * (os.cpu_count() or 1))))
        )
    session = builder.getOrCreate()
    session.sparkContext.setLogLevel("ERROR")
    return session


@contextmanager
def _connect(client: LakeFSClient | None) -> Iterator[LakeFSClient]:
    if client is not None:
        yield client
        return
    with LakeFSClient(load_config()) as own:
        yield own


def _repo_path(repository: str) -> str:
    return f"/repositories/{quote(repository, safe='')}"


def _default_local_root() -> Path:
    from mirror.config import load_config as load_process_config

    return load_process_config().local_root().resolve()


def _spark_location(uri: str, local_root: str | Path | None) -> str:
    if uri.startswith("local://") and not uri.startswith("local:///") and local_root is None:
        local_root = _default_local_root()
    return spark_uri(uri, local_root).rstrip("/")


def _hadoop_write(spark: SparkSession, uri: str, data: bytes) -> None:
    sc: Any = spark.sparkContext
    path = sc._jvm.org.apache.hadoop.fs.Path(uri)
    fs = path.getFileSystem(sc._jsc.hadoopConfiguration())
    out = fs.create(path, True)
    try:
        out.write(bytearray(data))
    finally:
        out.close()


def _prepare_uncommitted(api: LakeFSClient, repository: str) -> tuple[str, str, int]:
    """Return the run ID, the location of the staged addresses ("" for none), and the pages."""
    token: str | None = None
    run_id, location, pages = "", "", 0
    while True:
        body = {"continuation_token": token} if token else {}
        page = api.request(
            "POST", f"{_repo_path(repository)}/gc/prepare_uncommited", json=body
        ).json()
        pages += 1
        run_id = str(page["run_id"])
        location = str(page.get("gc_uncommitted_location") or "") or location
        token = page.get("continuation_token") or None
        if token is None:
            return run_id, location, pages


def _prepare_commits(api: LakeFSClient, repository: str) -> tuple[str, str] | None:
    """Return the run ID and the CSV location of the retained commits; ``None``: no rules."""
    try:
        prepared = api.request("POST", f"{_repo_path(repository)}/gc/prepare_commits").json()
    except NotFoundError:
        return None
    return str(prepared["run_id"]), str(prepared["gc_commits_location"])


def _addresses(ranges: DataFrame, namespace: str) -> DataFrame:
    """Return ``address`` of range rows, relative to the namespace; full ones elsewhere drop."""
    from pyspark.sql import functions as F

    prefix = namespace.rstrip("/") + "/"
    address, kind = F.col("address"), F.col("address_type")
    inside = F.when(address.startswith(prefix), address.substr(len(prefix) + 1, 1 << 30))
    relative = F.when(kind == _FULL, inside).otherwise(address)
    return ranges.select(relative.alias("address")).where(F.col("address").isNotNull())


def _committed(
    spark: SparkSession,
    store: StorageRoot,
    namespace: str,
    commits_location: str | None,
    local_root: str | Path | None,
) -> tuple[DataFrame | None, int | None, int]:
    """Return the addresses of the retained commits, how many commits, and ranges read.

    Without rules (``commits_location`` is ``None``) every commit is retained: every range
    file of the namespace is read (metarange files have no ``address`` and drop out).
    """
    from pyspark.sql.types import StringType, StructField, StructType

    schema = StructType(
        [StructField("address", StringType()), StructField("address_type", StringType())]
    )
    root = store.uri
    retained: int | None = None
    if commits_location is None:
        _, files = store.list_level(METADATA_PREFIX)
        # ranges and metaranges are named by their SHA-256; other files there are not ranges
        paths = [f"{root}/{key}" for key, _, _ in files if _is_tree_file(key)]
    else:
        # schemas given, so that Spark runs no job to infer them
        commits = spark.read.schema("commit_id string, expired string, metarange_id string")
        rows = (
            commits.option("header", "true")
            .csv(_spark_location(commits_location, local_root))
            .select("metarange_id")
            .collect()
        )
        retained = len(rows)
        metaranges = sorted({str(r[0]) for r in rows if r[0]})
        paths = []
        if metaranges:
            listed = spark.read.schema("range_id string").parquet(
                *(f"{root}/{METADATA_PREFIX}{m}" for m in metaranges)
            )
            # retained commits share most ranges: many metaranges are deduplicated by Spark,
            # a few (a few thousand rows each) here, without a shuffle
            if len(metaranges) > _DEDUPLICATE_IN_SPARK:
                listed = listed.distinct()
            ranges = sorted({str(r[0]) for r in listed.collect()})
            paths = [f"{root}/{METADATA_PREFIX}{r}" for r in ranges]
    if not paths:
        return None, retained, 0
    return _addresses(spark.read.schema(schema).parquet(*paths), namespace), retained, len(paths)


def _is_tree_file(key: str) -> bool:
    name = key[len(METADATA_PREFIX) :]
    return len(name) == 64 and all(c in "0123456789abcdef" for c in name)


def _listing(spark: SparkSession, store: StorageRoot) -> tuple[DataFrame, str]:
    """Return every object under ``data/`` (address, size, mtime) and the first partition."""
    from pyspark.sql.types import LongType, StringType, StructField, StructType

    schema = StructType(
        [
            StructField("address", StringType(), False),
            StructField("size", LongType(), False),
            StructField("mtime", LongType(), False),
        ]
    )
    partitions, files = store.list_level(DATA_PREFIX)
    sc = spark.sparkContext
    slices = max(1, min(len(partitions), 4 * sc.defaultParallelism))
    listed = sc.parallelize(partitions, slices).flatMap(store.walk)
    frame = spark.createDataFrame(listed, schema)
    if files:
        frame = frame.unionByName(spark.createDataFrame(files, schema))
    first = partitions[0][len(DATA_PREFIX) :].rstrip("/") if partitions else ""
    return frame, first


def _delete_rows(store: StorageRoot, rows: Iterable[Any]) -> Iterator[tuple[int, int]]:
    """Delete one Spark partition's marked objects; yield ``(deleted, refused)``."""
    keys = [str(row[0]) for row in rows]
    yield store.delete(keys)


def _sweep(store: StorageRoot, marked: DataFrame) -> int:
    counts = (
        marked.select("address").rdd.mapPartitions(functools.partial(_delete_rows, store)).collect()
    )
    refused = sum(r for _, r in counts)
    if refused:
        raise RuntimeError(f"{refused} marked addresses lie outside data/ and were not deleted")
    return sum(d for d, _ in counts)


def _totals(frame: DataFrame) -> tuple[int, int]:
    """Return the rows of ``frame`` and the sum of their ``size``."""
    from pyspark.sql import functions as F

    row = frame.agg(F.count(F.lit(1)), F.sum("size")).first()
    if row is None:
        return 0, 0
    return int(row[0]), int(row[1] or 0)


def _sorted_sample(frame: DataFrame, limit: int) -> tuple[str, ...]:
    if limit <= 0:
        return ()
    return tuple(
        str(r[0]) for r in frame.select("address").orderBy("address").limit(limit).collect()
    )


def _sweep_mark(
    spark: SparkSession, store: StorageRoot, repository: str, mark_id: str, started: float
) -> GCRun:
    """Delete what an earlier (dry) run marked, and record the sweep in its summary."""
    if not is_run_id(mark_id):
        raise UsageError(f"--mark-id {mark_id!r}: not a run ID")
    report = f"{store.uri}/{unified_prefix(mark_id)}"
    try:
        text = spark.read.text(report + "summary.json", wholetext=True).first()
    except Exception as exc:  # Spark's AnalysisException: the path does not exist
        raise NotFoundError(f"no garbage collection run {mark_id!r} in {store.uri}") from exc
    if text is None:
        raise NotFoundError(f"no garbage collection run {mark_id!r} in {store.uri}")
    run = GCRun.from_summary(json.loads(text[0]))
    if run.repository != repository:
        raise UsageError(
            f"run {mark_id!r} collected repository {run.repository!r}, not {repository!r}"
        )
    marked = spark.read.schema("address string").parquet(report + "deleted")
    deleted = _sweep(store, marked)
    done = run.updated(swept=True, deleted=deleted, seconds=time.time() - started)
    _hadoop_write(spark, report + "summary.json", json.dumps(done.summary(), indent=2).encode())
    return done


def run_gc(
    spark: SparkSession,
    repository: str,
    *,
    client: LakeFSClient | None = None,
    sweep: bool = False,
    mark_id: str | None = None,
    grace_period: int | None = None,
    sample: int = DEFAULT_SAMPLE,
    local_root: str | Path | None = None,
    now: float | None = None,
) -> GCRun:
    """Collect the garbage of ``repository``: mark (always, unless sweeping ``mark_id``), sweep.

    Args:
        spark: The session to run the job in.
        repository: The repository to collect (never a mirror: 403).
        client: The API client; default: one configured like lakectl (``LAKECTL_*``).
        sweep: Delete the marked objects (otherwise a dry run: only the report is written).
        mark_id: Sweep what the run ``mark_id`` marked instead of marking anew (needs ``sweep``).
        grace_period: Seconds an object must be old to be collected; default: the server's
            (``GET /config/garbage-collection``, 24 hours unless configured).
        sample: Marked addresses to name in the report.
        local_root: The server's root of relative ``local://`` namespaces (its data directory);
            default: the one of ``LAKEMIRROR_*`` / ``$LAKEMIRROR_CONFIG``.
        now: The run's start time (Unix seconds); default: now.

    Raises:
        CLIError: the server refused or failed (``AuthError`` 403 ``read-only repository`` on
            a mirror, ``NotFoundError`` for an unknown repository or mark, ``UsageError``
            for bad arguments).
    """
    from pyspark import StorageLevel
    from pyspark.sql import functions as F

    if mark_id is not None and not sweep:
        raise UsageError("--mark-id sweeps an earlier run's marks: give --sweep too")
    if grace_period is not None and grace_period < 0:
        raise UsageError(f"grace period {grace_period}: must not be negative")
    started = time.time()
    start = int(now if now is not None else started)
    with _connect(client) as api:
        repo = api.get_repository(repository)
        namespace = str(repo["storage_namespace"]).rstrip("/")
        conf = dict(spark.sparkContext.getConf().getAll())
        store = StorageRoot(_spark_location(namespace, local_root), S3Options.from_spark_conf(conf))
        if mark_id is not None:
            if repo.get("read_only"):
                raise AuthError(
                    f"read-only repository: repository {repository!r} is read-only (a mirror?): "
                    "garbage collection runs on its source",
                    status=403,
                )
            return _sweep_mark(spark, store, repository, mark_id, started)
        if grace_period is None:
            config = api.request("GET", "/config/garbage-collection").json()
            grace_period = int(config.get("grace_period") or 0)
        run_id, uncommitted_location, _ = _prepare_uncommitted(api, repository)
        commits = _prepare_commits(api, repository)
    cutoff = start - grace_period
    committed, retained, ranges_read = _committed(
        spark, store, namespace, commits[1] if commits else None, local_root
    )
    live = committed
    uncommitted_count = 0
    if uncommitted_location:
        staged = spark.read.parquet(_spark_location(uncommitted_location, local_root))
        uncommitted_count = staged.count()
        staged = staged.select(F.col("physical_address").alias("address"))
        live = staged if live is None else live.unionByName(staged)
    listing, first_slice = _listing(spark, store)
    listing = listing.persist(StorageLevel.MEMORY_AND_DISK)
    marked_frame: DataFrame | None = None
    try:
        listed, listed_bytes = _totals(listing)
        candidates = listing.where(F.col("mtime") < cutoff).select("address", "size")
        marked_frame = (
            candidates if live is None else candidates.join(live, "address", "left_anti")
        ).persist(StorageLevel.MEMORY_AND_DISK)
        marked, marked_bytes = _totals(marked_frame)
        report = f"{store.uri}/{unified_prefix(run_id)}"
        marked_frame.select("address").write.mode("overwrite").parquet(report + "deleted")
        marked_frame.select("address").write.mode("overwrite").text(report + "deleted.text")
        run = GCRun(
            run_id=run_id,
            repository=repository,
            namespace=namespace,
            start_time=start,
            cutoff_time=cutoff,
            grace_period=grace_period,
            has_rules=commits is not None,
            commits_run_id=commits[0] if commits else None,
            retained_commits=retained,
            ranges_read=ranges_read,
            uncommitted_addresses=uncommitted_count,
            objects_listed=listed,
            bytes_listed=listed_bytes,
            marked=marked,
            marked_bytes=marked_bytes,
            swept=False,
            deleted=0,
            sample=_sorted_sample(marked_frame, sample),
            report_location=f"{namespace}/{unified_prefix(run_id)}",
            first_slice=first_slice,
            seconds=time.time() - started,
        )
        _hadoop_write(spark, report + "summary.json", json.dumps(run.summary(), indent=2).encode())
        if sweep:
            deleted = _sweep(store, marked_frame)
            run = run.updated(swept=True, deleted=deleted, seconds=time.time() - started)
            _hadoop_write(
                spark, report + "summary.json", json.dumps(run.summary(), indent=2).encode()
            )
        return run
    finally:
        listing.unpersist()
        if marked_frame is not None:
            marked_frame.unpersist()
