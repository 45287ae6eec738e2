"""A replicant worker hands a large first sync to the Spark bulk validator, then goes on alone."""

from __future__ import annotations

import asyncio
import shutil
from pathlib import Path
from typing import TYPE_CHECKING

from fastapi import FastAPI

from mirror.block import BlockResolver
from mirror.core.catalog import Catalog
from mirror.kv import MemoryKV
from mirror.replicant.bulk import BulkFirstSync
from mirror.replicant.metrics import ReplicantMetrics
from mirror.replicant.state import MirrorConfig, ReplicantStore
from mirror.replicant.worker import MirrorWorker, WorkerSettings
from mirror.validator import CountingEvents, MemoryValidatedRanges, ThreadedObjectReader, Validator
from tests.inprocess import ADMIN, REPLICATOR, app_client, region_app

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


def _region(root: Path) -> tuple[Catalog, FastAPI]:
    return region_app(BlockResolver(root), local_root=root)


async def _first_sync(tmp_path: Path, spark: SparkSession, threshold: int) -> dict[str, float]:
    a_root, b_root = tmp_path / "a", tmp_path / "b"
    a_root.mkdir()
    b_root.mkdir()
    a, a_app = _region(a_root)
    b, b_app = _region(b_root)
    a.create_repository("origin", "local://origin")
    for i in range(3000):
        a.upload_object("origin", "main", f"rows/{i:05}.csv", f"{i}\n".encode())
    a.commit("origin", "main", "3,000 rows")
    source = app_client(a_app, "a", ADMIN)
    dest = app_client(b_app, "b", REPLICATOR)
    await dest.create_mirror_repository("origin-mirror", "local://mirror", "main", "a/origin")
    shutil.copytree(a_root / "origin", b_root / "mirror", dirs_exist_ok=True)
    store = BlockResolver(b_root).open("local://mirror")
    events = CountingEvents()
    validated = MemoryValidatedRanges()
    validator = Validator(ThreadedObjectReader(store), validated=validated, events=events)
    bulk = BulkFirstSync(threshold, spark_factory=lambda: spark)
    metrics = ReplicantMetrics()
    worker = MirrorWorker(
        MirrorConfig("origin-mirror", "a", "origin", "b", "local://mirror"),
        source,
        dest,
        validator,
        ReplicantStore(MemoryKV()),
        metrics,
        WorkerSettings(poll_interval=0.01),
        first_sync=lambda mid: bulk.validate("local://mirror", store, validated, validator, mid),
    )
    moved = await worker.sync_branch("main")
    head = b.get_branch("origin-mirror", "main").commit_id
    await source.aclose()
    await dest.aclose()
    sample = metrics.registry.get_sample_value
    return {
        "moved": float(moved),
        "at_source_head": float(head == a.get_branch("origin", "main").commit_id),
        "bulk_runs": float(bulk.runs),
        "bulk_metric": sample("lakemirror_bulk_validations_total", {"mirror": "origin-mirror"})
        or 0.0,
        "heads": float(events.requests.get("head", 0)),
        "lists": float(events.requests.get("list", 0)),
    }


def test_a_large_first_sync_goes_to_spark(tmp_path: Path, spark: SparkSession) -> None:
    result = asyncio.run(_first_sync(tmp_path, spark, threshold=1000))
    assert result["moved"] == result["at_source_head"] == 1.0
    assert result["bulk_runs"] == result["bulk_metric"] == 1.0
    # every range was proven whole by the job: the validator listed and headed nothing
    assert result["lists"] == result["heads"] == 0.0


def test_a_small_first_sync_stays_with_the_validator(tmp_path: Path, spark: SparkSession) -> None:
    result = asyncio.run(_first_sync(tmp_path, spark, threshold=10_000))
    assert result["moved"] == result["at_source_head"] == 1.0
    assert result["bulk_runs"] == 0.0
    assert result["lists"] > 0
