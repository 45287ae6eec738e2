"""The bulk validator on an ``s3://`` namespace, served by a moto server process over HTTP.

This Spark has no S3A filesystem (no ``hadoop-aws`` jars), so the job reads the range files it
needs from copies the store fetched (:func:`stage_ranges`); the listing goes through the store.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pytest

from bench.s3_server import data_address, data_size
from mirror.block import BlockResolver
from mirror.block.s3 import S3BlockStore, make_s3_client, s3_store_factory
from mirror.core import Catalog, ChunkingParams, Entry
from mirror.kv import MemoryKV
from mirror.spark.bulk_validator import bulk_validate
from tests.integration.moto_fixtures import (  # noqa: F401  (fixtures of the moto server)
    MotoServer,
    create_bucket,
    moto_log_dir,
    moto_region,
    s3_settings,
)

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

pytestmark = pytest.mark.s3

OBJECTS = 400
WITHHELD = (7, 251)


def _records() -> Any:
    for i in range(OBJECTS):
        entry = Entry(address=data_address(i), size=data_size(i), checksum=f"{i:032x}", mtime=1)
        yield f"t/part-{i:05d}", entry


def test_an_s3_namespace_is_validated_from_staged_range_files(
    spark: SparkSession,
    moto_region: MotoServer,  # noqa: F811
) -> None:
    settings = s3_settings(moto_region)
    client = make_s3_client(settings)
    bucket = create_bucket(moto_region, client)
    namespace = f"s3://{bucket}/lake"
    resolver = BlockResolver()
    resolver.register("s3", s3_store_factory(settings))
    catalog = Catalog(MemoryKV(), resolver, chunking=ChunkingParams(raggedness=64))
    catalog.create_repository("lake", namespace)
    commit = catalog.commit_tree("lake", "main", _records(), "load").commit
    for i in range(OBJECTS):
        if i not in WITHHELD:
            client.put_object(
                Bucket=bucket, Key=f"lake/{data_address(i)}", Body=b"x" * data_size(i)
            )

    report = bulk_validate(
        spark, namespace, commit.metarange_id, store=S3BlockStore(namespace, client, settings)
    )

    assert not report.complete
    assert report.missing == tuple(data_address(i) for i in WITHHELD)
    assert report.ranges_total == report.ranges_read > 2
    assert report.objects_checked == OBJECTS
    assert len(report.whole_ranges) == report.ranges_total - 2
