"""A Spark pipeline across two regions: write in the source, read the mirror at the same commit."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from dataclasses import dataclass

import pytest
from pyspark.sql import DataFrame, SparkSession

from mirror import spark as lakespark
from mirror.client.client import LakeFSClient
from mirror.client.config import ClientConfig, api_base_url
from tests.e2e.regions import Region, SafetyChecker, TwoRegions, two_regions, unique, wait_for

Row = tuple[int, int, str]


@dataclass
class Side:
    """One region as Spark sees it: its API client and its root of ``local://`` namespaces."""

    region: Region
    api: LakeFSClient

    def kw(self) -> dict[str, object]:
        return {"client": self.api, "local_root": self.region.server.data_dir}


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TwoRegions]:
    with two_regions(tmp_path_factory.mktemp("spark-regions")) as regions:
        yield regions


def _side(region: Region) -> Iterator[Side]:
    server = region.server
    config = ClientConfig(api_base_url(server.url), server.access_key_id, server.secret_access_key)
    with LakeFSClient(config) as api:
        yield Side(region, api)


@pytest.fixture(scope="module")
def source(world: TwoRegions) -> Iterator[Side]:
    yield from _side(world.a)


@pytest.fixture(scope="module")
def mirror(world: TwoRegions) -> Iterator[Side]:
    yield from _side(world.b)


def rows(df: DataFrame) -> list[Row]:
    return sorted((r["batch"], r["id"], r["name"]) for r in df.collect())


def batch(spark: SparkSession, number: int, size: int) -> DataFrame:
    data = [(number, i, f"b{number}-r{i}") for i in range(size)]
    return spark.createDataFrame(data, "batch int, id int, name string")


def test_spark_writes_the_source_and_reads_the_mirror_at_the_same_commit(
    spark: SparkSession, world: TwoRegions, source: Side, mirror: Side
) -> None:
    repo, ns = world.source_repo("sparkpipe")
    name = unique("sparkmirror")
    namespace = world.b.namespace(name)
    world.simulator(ns, namespace, seed=11, delay=(0.0, 0.5))
    with world.replicant("spark-1") as replicant:
        assert world.create_mirror(replicant, repo.id, name, namespace).status_code == 201
        checker = SafetyChecker(world.b, name).start()
        try:
            df = batch(spark, 1, 30).unionByName(batch(spark, 2, 20))
            written = lakespark.write(
                df,
                f"lakefs://{repo.id}/main/events/",
                partition_by=["batch"],
                commit_message="events",
                **source.kw(),
            )
            assert written.commit_id is not None
            wait_for(lambda: world.b.head(name, "main") == written.commit_id, 60, "mirror head")
            at_mirror = lakespark.read_at(
                spark, f"lakefs://{name}/{written.commit_id}/events/", **mirror.kw()
            )
            assert at_mirror.commit_id == written.commit_id
            # the mirror region's own files, not the source's
            mirror_root = f"file://{world.b.server.data_dir.resolve()}/{name}/data/"
            assert at_mirror.files and all(f.startswith(mirror_root) for f in at_mirror.files)
            at_source = lakespark.read(
                spark, f"lakefs://{repo.id}/{written.commit_id}/events/", **source.kw()
            )
            assert rows(at_mirror.dataframe) == rows(at_source) == rows(df)
            # mirrors are read-only: writes are refused before Spark runs
            with pytest.raises(lakespark.RepositoryReadOnlyError, match=name):
                lakespark.write(df, f"lakefs://{name}/main/events/", mode="append", **mirror.kw())
            staged = world.b.http.post(
                f"/repositories/{name}/branches/main/staging/bulk",
                json={"objects": [{"path": "x", "physical_address": f"{namespace}/data/x"}]},
            )
            assert staged.status_code == 403 and name in staged.json()["message"]
        finally:
            checker.stop()
    assert checker.violations == []


def test_reads_of_the_mirror_branch_during_mirroring_see_whole_commits(
    spark: SparkSession, world: TwoRegions, source: Side, mirror: Side
) -> None:
    repo, ns = world.source_repo("sparkstorm")
    name = unique("sparkmirror")
    namespace = world.b.namespace(name)
    # big files late, small ones early: a commit's files arrive spread over a second
    world.simulator(ns, namespace, seed=5, delay=(0.0, 1.0), small_first=True)
    expected: dict[str, list[Row]] = {source.api.get_branch(repo.id, "main")["commit_id"]: []}
    seen: list[tuple[str, list[Row]]] = []
    failures: list[BaseException] = []
    stop = threading.Event()

    def read_mirror() -> None:
        while not stop.is_set():
            try:
                got = lakespark.read_at(spark, f"lakefs://{name}/main/table/", **mirror.kw())
                seen.append((got.commit_id, rows(got.dataframe)))
            except lakespark.EmptyDatasetError as exc:
                seen.append((exc.commit_id, []))
            except lakespark.RepositoryNotFoundError:
                continue  # the mirror repository is not created yet
            except lakespark.RefNotFoundError:
                continue  # its branch appears with its first validated commit
            except BaseException as exc:
                failures.append(exc)
                return

    with world.replicant("spark-2") as replicant:
        assert world.create_mirror(replicant, repo.id, name, namespace).status_code == 201
        checker = SafetyChecker(world.b, name).start()
        reader = threading.Thread(target=read_mirror, name="mirror-reader", daemon=True)
        reader.start()
        try:
            total: list[Row] = []
            for number in range(1, 5):
                # each commit appends a batch of its own size: the row count names the commit
                df = batch(spark, number, 7 * number)
                written = lakespark.write(
                    df,
                    f"lakefs://{repo.id}/main/table/",
                    mode="append",
                    commit_message=f"batch {number}",
                    **source.kw(),
                )
                assert written.commit_id is not None
                total = sorted(total + rows(df))
                expected[written.commit_id] = total
            last = written.commit_id
            wait_for(lambda: world.b.head(name, "main") == last, 90, "the last commit mirrored")
            wait_for(lambda: any(c == last for c, _ in seen) or failures, 90, "a read of it")
        finally:
            stop.set()
            reader.join(timeout=120)
            checker.stop()
    assert failures == []
    assert checker.violations == []
    assert seen and seen[-1][0] == last
    for commit_id, got in seen:
        # a mirror shows source commits only, from its first read on
        assert commit_id in expected, f"read {commit_id}: not a source commit"
        assert got == expected[commit_id], f"read at {commit_id} is not that commit's rows"
    assert len({c for c, _ in seen}) >= 2, "the reads saw one state only"
