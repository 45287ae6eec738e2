"""A Spark pipeline across two regions: write a dataset in one, read the mirror in the other.

Run it from the repository root, with the ``spark`` extra installed::

    python examples/spark_pipeline.py [--data-dir DIR] [--rows N]

It starts what ``lakemirror demo`` starts (a server per region, the replicant of region ``b``,
and a simulator of S3 Replication copying region ``a``'s files late and out of order), creates
a Spark user in each region, then:

1. writes a partitioned Parquet dataset into ``lakefs://origin/main/events/`` of region ``a``
   and commits it (``mirror.spark.write``);
2. appends a second day and commits again;
3. waits until the mirror ``origin-mirror`` of region ``b`` has caught up;
4. reads the mirror at each commit ID (``mirror.spark.read_at``) from region ``b``'s own files
   and checks that it holds exactly the source's rows at that commit.

Exit status 0 when every check passes.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

import httpx
from pyspark.sql import DataFrame, SparkSession

from mirror import spark as lakespark
from mirror.cli.demo import demo_regions
from mirror.client.client import LakeFSClient
from mirror.client.config import ClientConfig


def spark_user(admin: httpx.Client, group: str) -> ClientConfig:
    """Create a user in ``group`` of one region and return a client configuration for it."""
    user = f"spark-{os.getpid()}-{time.monotonic_ns() % 100_000}"
    admin.post("/auth/users", json={"id": user}).raise_for_status()
    admin.put(f"/auth/groups/{group}/members/{user}").raise_for_status()
    key = admin.post(f"/auth/users/{user}/credentials").raise_for_status().json()
    return ClientConfig(
        str(admin.base_url).rstrip("/"), key["access_key_id"], key["secret_access_key"]
    )


def events(spark: SparkSession, day: str, count: int) -> DataFrame:
    """Return ``count`` events of one day."""
    rows = [(day, i, f"user-{i % 7}", i * 1.5) for i in range(count)]
    return spark.createDataFrame(rows, "day string, id int, user string, amount double")


def wait_for_mirror(mirror: httpx.Client, repo: str, commit: str, timeout: float = 120.0) -> None:
    """Poll the mirror branch until it points at ``commit``."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        head = mirror.get(f"/repositories/{repo}/branches/main")
        if head.status_code == 200 and head.json()["commit_id"] == commit:
            return
        time.sleep(0.2)
    raise SystemExit(f"the mirror did not reach {commit[:12]} within {timeout:.0f}s")


def main() -> int:
    """Run the pipeline; return the exit status."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--data-dir", type=Path, default=None, help="where the regions live")
    parser.add_argument("--rows", type=int, default=1000, help="events per day")
    args = parser.parse_args()
    data_dir = args.data_dir or Path(tempfile.mkdtemp(prefix="lakemirror-spark-"))
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    spark = (
        SparkSession.builder.master("local[2]")
        .appName("lakemirror-pipeline")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "4")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    # the servers keep `local://` namespaces under their data directories
    root_a, root_b = data_dir / "region-a", data_dir / "region-b"
    try:
        with demo_regions(data_dir, delay=(0.0, 1.0), seed=1) as regions:
            with (
                LakeFSClient(spark_user(regions.source, "Writers")) as source,
                LakeFSClient(spark_user(regions.mirror, "Readers")) as mirror,
            ):
                dataset = f"lakefs://{regions.source_repo}/{regions.branch}/events/"
                commits = []
                for day, mode in (("2026-11-20", "overwrite"), ("2026-11-21", "append")):
                    written = lakespark.write(
                        events(spark, day, args.rows),
                        dataset,
                        mode=mode,
                        partition_by=["day"],
                        commit_message=f"events of {day}",
                        client=source,
                        local_root=root_a,
                    )
                    assert written.commit_id is not None
                    commits.append(written.commit_id)
                    print(
                        f"region a: {mode} {len(written.staged)} files -> {written.commit_id[:12]}"
                    )
                wait_for_mirror(regions.mirror, regions.mirror_repo, commits[-1])
                print(f"region b: {regions.mirror_repo}/main is at {commits[-1][:12]}")
                for commit in commits:
                    path = f"{commit}/events/"
                    at_mirror = lakespark.read_at(
                        spark,
                        f"lakefs://{regions.mirror_repo}/{path}",
                        client=mirror,
                        local_root=root_b,
                    )
                    at_source = lakespark.read(
                        spark,
                        f"lakefs://{regions.source_repo}/{path}",
                        client=source,
                        local_root=root_a,
                    )
                    same = at_mirror.dataframe.exceptAll(at_source).isEmpty() and (
                        at_source.exceptAll(at_mirror.dataframe).isEmpty()
                    )
                    days = sorted(
                        r["day"] for r in at_mirror.dataframe.select("day").distinct().collect()
                    )
                    verdict = "same as the source" if same else "DIFFERENT from the source"
                    print(
                        f"region b at {commit[:12]}: {at_mirror.dataframe.count()} rows, "
                        f"days {days}, {len(at_mirror.files)} files of region b -> {verdict}"
                    )
                    if not same:
                        return 1
    finally:
        spark.stop()
    print(f"done; the regions' files are under {data_dir}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
