"""The Spark bulk validator: agreement with the async validator, and every kind of absence."""

from __future__ import annotations

import bisect
import os
import random
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import anyio
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from bench.core import Layout
from bench.spark import LocalLake, address_of, build_lake, size_of
from mirror.block import MemoryBlockStore
from mirror.block.errors import InvalidNamespaceError
from mirror.block.local import LocalBlockStore
from mirror.block.resolver import BlockResolver
from mirror.core import Entry, open_embedded
from mirror.core.committed import METADATA_PREFIX, CommittedStore
from mirror.core.model import AddressType
from mirror.errors import InvalidValueError
from mirror.spark.bulk_validator import (
    LISTING_SCHEMA,
    _listing_frame,
    bulk_first_sync,
    bulk_validate,
    physical_root,
    write_listing,
)
from mirror.validator import (
    AsyncObjectReader,
    MemoryValidatedRanges,
    ObjectCache,
    ThreadedObjectReader,
    ValidationReport,
    Validator,
)

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

BIG = 200_000
SMALL = 3_000


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def committed(lake: LocalLake) -> CommittedStore:
    return CommittedStore(LocalBlockStore(lake.destination))


def async_report(lake: LocalLake | Path, metarange_id: str = "") -> ValidationReport:
    destination = lake.destination if isinstance(lake, LocalLake) else lake
    mid = lake.metarange_id if isinstance(lake, LocalLake) else metarange_id
    validator = Validator(
        ThreadedObjectReader(LocalBlockStore(destination)), validated=MemoryValidatedRanges()
    )
    return anyio.run(validator.validate, mid)


def resize(path: Path, size: int) -> None:
    """Give the object at ``path`` another size (its hard link to the template is broken)."""
    path.unlink()
    path.write_bytes(b"y" * size)


@dataclass(frozen=True)
class BigLake:
    """A lake whose destination lacks objects and a range file, and holds one wrong size.

    ``expected`` are the sorted keys missing (or of a wrong size); ``incomplete`` the IDs of the
    ranges that cannot be whole.
    """

    lake: LocalLake
    expected: list[str]
    incomplete: set[str]


@pytest.fixture(scope="module")
def big(tmp_path_factory: pytest.TempPathFactory) -> BigLake:
    rng = random.Random(7)
    withheld = rng.sample(range(BIG), 40)
    lake = build_lake(tmp_path_factory.mktemp("big"), BIG, withhold=withheld)
    ranges = committed(lake).read_metarange(lake.metarange_id)
    gone = ranges[len(ranges) // 2]
    (lake.destination / METADATA_PREFIX / gone.id).unlink()
    layout = Layout(BIG)
    max_keys = [r.max_key for r in ranges]

    def range_of(i: int) -> str:
        return ranges[bisect.bisect_left(max_keys, layout.key_at(i))].id

    wrong = next(i for i in range(BIG) if range_of(i) != gone.id and i not in withheld)
    resize(lake.destination / address_of(wrong), size_of(wrong) + 10)
    visible = [i for i in [*withheld, wrong] if range_of(i) != gone.id]
    expected = sorted([address_of(i) for i in visible] + [METADATA_PREFIX + gone.id])
    return BigLake(lake, expected, {gone.id, *(range_of(i) for i in visible)})


def test_bulk_and_async_validators_agree_on_a_200k_commit(
    spark: SparkSession, big: BigLake
) -> None:
    lake = big.lake
    bulk = bulk_validate(spark, lake.namespace, lake.metarange_id)
    report = async_report(lake)
    assert not bulk.complete and not report.complete
    assert bulk.missing_count == report.missing_count == len(big.expected)
    assert list(bulk.missing) == sorted(report.missing) == big.expected
    assert bulk.size_mismatches == 1
    assert bulk.external_count == 0
    assert bulk.ranges_total == report.ranges_total == lake.ranges
    assert bulk.ranges_read == lake.ranges - 1
    assert bulk.listed is not None and bulk.listed > BIG - 40
    ranges = {r.id for r in committed(lake).read_metarange(lake.metarange_id)}
    assert ranges - set(bulk.whole_ranges) == big.incomplete


def test_sample_bounds_the_missing_keys_not_their_count(
    spark: SparkSession, tmp_path: Path
) -> None:
    withheld = [2_999, 7, 1_234, 100, 2_000]
    lake = build_lake(tmp_path / "lake", SMALL, withhold=withheld)
    expected = sorted(address_of(i) for i in withheld)
    bulk = bulk_validate(spark, lake.namespace, lake.metarange_id, sample=2)
    assert (bulk.missing_count, bulk.missing) == (5, tuple(expected[:2]))
    everything = bulk_validate(spark, lake.namespace, lake.metarange_id, sample=None)
    assert everything.missing == tuple(expected)


@pytest.fixture(scope="module")
def small_lake(tmp_path_factory: pytest.TempPathFactory) -> LocalLake:
    return build_lake(tmp_path_factory.mktemp("small"), SMALL)


def test_complete_copy_is_complete(spark: SparkSession, small_lake: LocalLake) -> None:
    bulk = bulk_validate(spark, small_lake.namespace, small_lake.metarange_id)
    assert bulk.complete
    assert (bulk.missing_count, bulk.missing, bulk.external_count) == (0, (), 0)
    ranges = committed(small_lake).read_metarange(small_lake.metarange_id)
    assert set(bulk.whole_ranges) == {r.id for r in ranges}
    assert bulk.objects_checked == SMALL
    assert bulk.as_validation_report() == ValidationReport(
        metarange_id=small_lake.metarange_id,
        complete=True,
        missing_count=0,
        missing=(),
        ranges_total=len(ranges),
        ranges_read=len(ranges),
        ranges_skipped=0,
        objects_checked=SMALL,
        objects_cached=0,
    )
    assert async_report(small_lake).complete


def test_missing_metarange(spark: SparkSession, small_lake: LocalLake) -> None:
    mid = "0" * 64
    bulk = bulk_validate(spark, small_lake.namespace, mid)
    assert not bulk.complete
    assert (bulk.missing_count, bulk.missing) == (1, (METADATA_PREFIX + mid,))
    assert async_report(small_lake.destination, mid).missing == bulk.missing


def test_every_range_missing(spark: SparkSession, tmp_path: Path, small_lake: LocalLake) -> None:
    only_meta = tmp_path / "dest"
    (only_meta / METADATA_PREFIX).mkdir(parents=True)
    name = METADATA_PREFIX + small_lake.metarange_id
    os.link(small_lake.destination / name, only_meta / name)
    bulk = bulk_validate(spark, f"local://{only_meta}", small_lake.metarange_id)
    ranges = committed(small_lake).read_metarange(small_lake.metarange_id)
    assert bulk.missing == tuple(sorted(METADATA_PREFIX + r.id for r in ranges))
    assert (bulk.ranges_read, bulk.objects_checked, bulk.listed) == (0, 0, None)
    assert sorted(async_report(only_meta, small_lake.metarange_id).missing) == list(bulk.missing)


def test_empty_tree_is_complete(spark: SparkSession, small_lake: LocalLake) -> None:
    bulk = bulk_validate(spark, small_lake.namespace, "")
    assert bulk.complete and bulk.ranges_total == 0


def test_a_given_listing_is_what_counts(
    spark: SparkSession, tmp_path: Path, small_lake: LocalLake
) -> None:
    path = tmp_path / "listing.parquet"
    assert write_listing(LocalBlockStore(small_lake.destination), path) > SMALL
    table = pq.read_table(path)
    assert table.schema == LISTING_SCHEMA
    dropped = address_of(17)
    pq.write_table(table.filter(pc.not_equal(table["key"], dropped)), path)
    bulk = bulk_validate(
        spark, small_lake.namespace, small_lake.metarange_id, listing=path.as_uri()
    )
    assert (bulk.missing, bulk.listed) == ((dropped,), None)


def test_objects_outside_the_namespace_are_reported_apart(
    spark: SparkSession, tmp_path: Path
) -> None:
    catalog = open_embedded(tmp_path / "catalog")
    repo = catalog.create_repository("outside", "local://ns")
    outside = f"local://{tmp_path}/elsewhere/obj"
    changes: list[tuple[str, Entry | None]] = [
        ("a", Entry(address="data/p/a", size=1, checksum="c", mtime=1, content_type="t")),
        (
            "b",
            Entry(
                address=outside,
                size=2,
                checksum="c",
                mtime=1,
                content_type="t",
                address_type=AddressType.FULL,
            ),
        ),
    ]
    mid = catalog.commit_tree("outside", "main", changes, "one inside, one outside").commit
    store = catalog.block_store(repo)
    store.put("data/p/a", b"x")
    bulk = bulk_validate(spark, store.namespace, mid.metarange_id, store=store)
    assert not bulk.complete
    assert (bulk.missing_count, bulk.external_count, bulk.external) == (0, 1, (outside,))
    assert bulk.whole_ranges == ()  # the range holding it is not proven whole
    as_async = bulk.as_validation_report()
    assert (as_async.missing_count, as_async.missing) == (1, (outside,))


def test_bad_input(spark: SparkSession, tmp_path: Path, small_lake: LocalLake) -> None:
    with pytest.raises(InvalidNamespaceError):
        bulk_validate(spark, "mem://nowhere", "0" * 64)
    with pytest.raises(InvalidNamespaceError):
        bulk_validate(spark, "s3://bucket/prefix", "0" * 64)  # no store to read it with
    with pytest.raises(InvalidNamespaceError):
        bulk_validate(spark, "not a uri", "0" * 64)
    with pytest.raises(InvalidNamespaceError):
        physical_root(MemoryBlockStore("mem://x"))
    with pytest.raises(InvalidValueError):
        bulk_validate(spark, small_lake.namespace, small_lake.metarange_id, sample=-1)
    wrong = tmp_path / "wrong.parquet"
    pq.write_table(pa.table({"name": ["a"], "bytes": [1]}), wrong)
    with pytest.raises(InvalidValueError):
        bulk_validate(spark, small_lake.namespace, small_lake.metarange_id, listing=wrong.as_uri())


@pytest.mark.anyio
async def test_bulk_first_sync_feeds_the_async_validator(
    spark: SparkSession, tmp_path: Path
) -> None:
    withheld = [5, 1_500]
    lake = build_lake(tmp_path / "lake", SMALL, withhold=withheld)
    validated = MemoryValidatedRanges()
    validator = Validator(
        ThreadedObjectReader(LocalBlockStore(lake.destination)),
        validated=validated,
        objects=ObjectCache(),
    )
    report = await bulk_first_sync(
        lake.namespace, lake.metarange_id, spark=spark, validated=validated, validator=validator
    )
    assert not report.complete
    assert sorted(report.missing) == [address_of(i) for i in withheld]
    assert report.ranges_total == lake.ranges
    whole = lake.ranges - 2
    assert len(validated) == whole
    # the validator read only the two incomplete ranges, after the job read them all
    assert report.ranges_read == lake.ranges + 2
    assert report.ranges_skipped == 0

    for i in withheld:  # replication delivers the stragglers
        (lake.destination / address_of(i)).write_bytes(b"x" * size_of(i))
    again = await validator.validate(lake.metarange_id)
    assert again.complete
    # only the stragglers of the two incomplete ranges were checked again
    assert (again.ranges_total - again.ranges_skipped, again.objects_checked) == (2, 2)
    assert len(validated) == lake.ranges


@pytest.mark.anyio
async def test_bulk_first_sync_without_a_validator(
    spark: SparkSession, small_lake: LocalLake
) -> None:
    validated = MemoryValidatedRanges()
    report = await bulk_first_sync(
        small_lake.namespace, small_lake.metarange_id, spark=spark, validated=validated
    )
    assert report.complete and report.objects_checked == SMALL
    assert len(validated) == report.ranges_total == report.ranges_read


@pytest.mark.anyio
async def test_bulk_first_sync_checks_outside_objects_through_the_validator(
    spark: SparkSession, tmp_path: Path
) -> None:
    catalog = open_embedded(tmp_path / "catalog")
    repo = catalog.create_repository("outside", "local://ns")
    elsewhere = LocalBlockStore(tmp_path / "elsewhere")
    elsewhere.put("obj", b"xy")
    entry = Entry(
        address=f"local://{tmp_path}/elsewhere/obj",
        size=2,
        checksum="c",
        mtime=1,
        content_type="t",
        address_type=AddressType.FULL,
    )
    mid = catalog.commit_tree("outside", "main", [("b", entry)], "outside").commit.metarange_id
    store = catalog.block_store(repo)

    opened: list[str] = []

    def open_external(namespace: str) -> AsyncObjectReader:
        opened.append(namespace)
        return ThreadedObjectReader(BlockResolver().open(namespace))

    validated = MemoryValidatedRanges()
    validator = Validator(
        ThreadedObjectReader(store), validated=validated, open_external=open_external
    )
    report = await bulk_first_sync(
        store.namespace, mid, spark=spark, validated=validated, validator=validator, store=store
    )
    assert report.complete
    assert entry.address.startswith(opened[0] + "/")
    assert len(validated) == 1  # checked by the validator, which found the range whole


def test_an_s3_inventory_listing_is_cut_to_the_namespace(
    spark: SparkSession, tmp_path: Path
) -> None:
    inventory = tmp_path / "inventory.parquet"
    pq.write_table(
        pa.table(
            {
                "bucket": ["lake", "lake", "lake", "other", "lake", "lake"],
                "key": [
                    "ns/data/a",
                    "ns/_lakefs/r",
                    "elsewhere/data/b",
                    "ns/data/c",
                    "ns/data/a",  # an older version
                    "ns/data/d",  # deleted
                ],
                "size": [1, 2, 3, 4, 5, 6],
                "is_latest": [True, True, True, True, False, True],
                "is_delete_marker": [False, False, False, False, False, True],
            }
        ),
        inventory,
    )
    store = MemoryBlockStore("s3://lake/ns")
    frame = _listing_frame(spark, inventory.as_uri(), store)
    assert sorted((r["l_key"], r["l_size"]) for r in frame.collect()) == [
        ("_lakefs/r", 2),
        ("data/a", 1),
    ]
    with pytest.raises(InvalidValueError):  # an inventory names S3 keys
        _listing_frame(spark, inventory.as_uri(), MemoryBlockStore("mem://lake"))


def test_bench_spark_prints_both_validators(tmp_path: Path) -> None:
    """``python -m bench.spark`` on a small commit (its own process: it stops its session)."""
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "bench.spark",
            "--objects",
            "3000",
            "--withhold",
            "5",
            "--cache-dir",
            str(tmp_path),
        ],
        capture_output=True,
        text=True,
        cwd=Path(__file__).resolve().parents[2],
        env=dict(os.environ, PYSPARK_PYTHON=sys.executable, SPARK_LOCAL_IP="127.0.0.1"),
        timeout=300,
    )
    assert result.returncode == 0, result.stderr
    rows = {
        line.split("|")[1].strip(): [cell.strip() for cell in line.split("|")[2:-1]]
        for line in result.stdout.splitlines()
        if line.startswith("| ")
    }
    assert rows["Spark bulk validator, warm (listing + job)"][0] == "5"
    assert rows["async validator (ThreadedObjectReader, LocalBlockStore)"][0] == "5"
    assert "3,000 objects in" in result.stdout
