"""mirror.spark.read / write against a `lakemirror server` process, with Spark in local mode."""

from __future__ import annotations

import secrets
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import LongType, StringType, StructField, StructType

from mirror import spark as lakespark
from mirror.client.client import LakeFSClient
from mirror.client.config import ClientConfig, api_base_url
from mirror.core.errors import InvalidURIError
from tests.integration.harness import Server, running_server, unique

SCHEMA = StructType(
    [
        StructField("id", LongType()),
        StructField("k", StringType()),
        StructField("value", StringType()),
    ]
)


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    root = tmp_path_factory.mktemp("spark-server")
    with running_server(
        root / "data",
        root / "server.log",
        access_key_id="AKIASPARK" + secrets.token_hex(6).upper(),
        secret_access_key=secrets.token_urlsafe(30),
    ) as running:
        yield running


@pytest.fixture(scope="module")
def api(server: Server) -> Iterator[LakeFSClient]:
    config = ClientConfig(api_base_url(server.url), server.access_key_id, server.secret_access_key)
    with LakeFSClient(config) as client:
        yield client


@pytest.fixture(scope="module")
def http(server: Server) -> Iterator[httpx.Client]:
    with httpx.Client(
        base_url=f"{server.url}/api/v1",
        auth=(server.access_key_id, server.secret_access_key),
        timeout=30.0,
    ) as client:
        yield client


@pytest.fixture
def repo(server: Server, api: LakeFSClient) -> str:
    name = unique("sparkrepo")
    api.create_repository(name, server.namespace(name), "main")
    return name


class NoJobs:
    """Tag Spark jobs started inside a block, to prove that none started."""

    def __init__(self, spark: SparkSession) -> None:
        self.spark = spark
        self.group = unique("guard")

    def __enter__(self) -> NoJobs:
        self.spark.sparkContext.setJobGroup(self.group, "must not run")
        return self

    def __exit__(self, *exc: object) -> None:
        jobs = self.spark.sparkContext.statusTracker().getJobIdsForGroup(self.group)
        self.spark.sparkContext.setJobGroup("", "")
        assert list(jobs) == [], f"Spark jobs started: {jobs}"


def rows(df: DataFrame) -> list[tuple[int, str, str]]:
    return sorted((r["id"], r["k"], r["value"]) for r in df.select("id", "k", "value").collect())


def frame(spark: SparkSession, ids: range, tag: str) -> DataFrame:
    data = [(i, f"p{i % 3}", f"{tag}-{i}") for i in ids]
    return spark.createDataFrame(data, SCHEMA)


def namespace_files(server: Server, repo: str) -> set[str]:
    root = server.data_dir / repo / "data"
    return (
        {str(p.relative_to(root)) for p in root.rglob("*") if p.is_file()}
        if root.exists()
        else set()
    )


def test_write_partitioned_parquet_commit_and_read_at_the_commit(
    spark: SparkSession, server: Server, api: LakeFSClient, repo: str
) -> None:
    df = frame(spark, range(40), "v1")
    written = lakespark.write(
        df,
        f"lakefs://{repo}/main/tables/events/",
        partition_by=["k"],
        commit_message="events v1",
        commit_metadata={"job": "test"},
        client=api,
        local_root=server.data_dir,
    )
    assert written.commit_id is not None
    assert written.path == "tables/events/"
    assert written.staged and all(
        p.startswith("tables/events/k=p") and p.endswith(".parquet") for p in written.staged
    )
    assert {p.split("/")[2] for p in written.staged} == {"k=p0", "k=p1", "k=p2"}
    assert written.deleted == ()
    assert written.location.startswith(f"file://{server.data_dir.resolve()}/{repo}/data/")
    commit = api.get_commit(repo, "main")
    assert (commit["id"], commit["message"], commit["metadata"]) == (
        written.commit_id,
        "events v1",
        {"job": "test"},
    )
    listed = [o["path"] for o in api.list_objects(repo, "main", prefix="tables/events/")]
    assert listed == sorted(written.staged)

    got = lakespark.read_at(
        spark, f"lakefs://{repo}/main/tables/events/", client=api, local_root=server.data_dir
    )
    assert got.commit_id == written.commit_id
    assert got.uri == f"lakefs://{repo}/{written.commit_id}/tables/events/"
    assert len(got.files) == len(written.staged)
    assert rows(got.dataframe) == rows(df)
    assert dict(got.dataframe.dtypes)["k"] == "string"
    # the pinned URI reads the same rows after the branch moves on
    lakespark.write(
        frame(spark, range(5), "v2"),
        f"lakefs://{repo}/main/tables/events/",
        mode="overwrite",
        commit_message="events v2",
        client=api,
        local_root=server.data_dir,
    )
    again = lakespark.read(spark, got.uri, client=api, local_root=server.data_dir)
    assert rows(again) == rows(df)
    # one column of one partition, Spark's own pruning on the partition column
    p1 = again.where(F.col("k") == "p1").count()
    assert p1 == len([i for i in range(40) if i % 3 == 1])


def test_append_and_overwrite_produce_the_right_objects_and_commits(
    spark: SparkSession, server: Server, api: LakeFSClient, repo: str
) -> None:
    uri = f"lakefs://{repo}/main/t/"
    kw = {"client": api, "local_root": server.data_dir}
    first = lakespark.write(frame(spark, range(0, 10), "a"), uri, partition_by=["k"], **kw)
    assert first.commit_id is None
    assert sorted(d["path"] for d in api.diff_uncommitted(repo, "main")) == sorted(first.staged)
    c1 = api.commit(repo, "main", "first", {})["id"]
    second = lakespark.write(
        frame(spark, range(10, 25), "b"),
        uri,
        mode="append",
        partition_by=["k"],
        commit_message="append",
        **kw,
    )
    assert second.commit_id is not None
    assert not set(first.staged) & set(second.staged)
    assert second.deleted == ()
    objects = {o["path"] for o in api.list_objects(repo, "main", prefix="t/")}
    assert objects == set(first.staged) | set(second.staged)
    appended = lakespark.read_at(spark, uri, **kw)
    assert appended.commit_id == second.commit_id
    assert rows(appended.dataframe) == rows(
        frame(spark, range(25), "x").withColumn(
            "value",
            F.when(F.col("id") < 10, F.concat(F.lit("a-"), F.col("id"))).otherwise(
                F.concat(F.lit("b-"), F.col("id"))
            ),
        )
    )
    third = lakespark.write(
        frame(spark, range(100, 104), "c"), uri, mode="overwrite", commit_message="replace", **kw
    )
    assert set(third.deleted) == set(first.staged) | set(second.staged)
    assert {o["path"] for o in api.list_objects(repo, "main", prefix="t/")} == set(third.staged)
    replaced = lakespark.read_at(spark, uri, **kw)
    assert rows(replaced.dataframe) == rows(frame(spark, range(100, 104), "c"))
    history = [c["message"] for c in api.log(repo, "main", limit=4)]
    assert history == ["replace", "append", "first", "Repository created"]
    assert c1 in [c["id"] for c in api.log(repo, "main")]
    # the older commits still read as they were
    assert rows(lakespark.read(spark, f"lakefs://{repo}/{c1}/t/", **kw)) == rows(
        frame(spark, range(10), "a")
    )


def test_error_and_ignore_modes_check_before_spark_runs(
    spark: SparkSession, server: Server, api: LakeFSClient, repo: str
) -> None:
    kw = {"client": api, "local_root": server.data_dir}
    uri = f"lakefs://{repo}/main/once/"
    done = lakespark.write(frame(spark, range(3), "x"), uri, format="json", **kw)
    before = namespace_files(server, repo)
    with NoJobs(spark):
        with pytest.raises(lakespark.DatasetExistsError, match="already holds objects"):
            lakespark.write(frame(spark, range(3), "y"), uri, format="json", mode="error", **kw)
        skipped = lakespark.write(
            frame(spark, range(3), "y"), uri, format="json", mode="ignore", **kw
        )
    assert skipped.skipped and skipped.staged == ()
    assert namespace_files(server, repo) == before
    assert sorted(d["path"] for d in api.diff_uncommitted(repo, "main")) == sorted(done.staged)
    # ignore writes when nothing is there
    fresh = lakespark.write(
        frame(spark, range(2), "z"),
        f"lakefs://{repo}/main/new/",
        mode="ignore",
        format="json",
        **kw,
    )
    assert not fresh.skipped and fresh.staged


def test_a_failed_spark_job_stages_nothing(
    spark: SparkSession, server: Server, api: LakeFSClient, repo: str
) -> None:
    def explode(value: str) -> str:
        if value.endswith("-7"):
            raise RuntimeError("boom in the job")
        return value

    failing = F.udf(explode, StringType(), useArrow=False)
    df = frame(spark, range(20), "f").withColumn("value", failing(F.col("value")))
    with pytest.raises(Exception, match="boom in the job"):
        lakespark.write(
            df,
            f"lakefs://{repo}/main/broken/",
            commit_message="never",
            client=api,
            local_root=server.data_dir,
        )
    assert list(api.diff_uncommitted(repo, "main")) == []
    assert list(api.list_objects(repo, "main", prefix="broken/")) == []
    assert [c["message"] for c in api.log(repo, "main")] == ["Repository created"]


def test_bad_input_fails_clearly_before_any_spark_job(
    spark: SparkSession, server: Server, api: LakeFSClient, http: httpx.Client, repo: str
) -> None:
    kw = {"client": api, "local_root": server.data_dir}
    df = frame(spark, range(3), "x")
    lakespark.write(df, f"lakefs://{repo}/main/d/", commit_message="d", **kw)
    head = api.get_branch(repo, "main")["commit_id"]
    api.create_tag(repo, "v1", "main")
    readonly = unique("readonly")
    created = http.post(
        "/repositories",
        json={"name": readonly, "storage_namespace": server.namespace(readonly), "read_only": True},
    )
    assert created.status_code == 201, created.text
    missing = unique("nope")
    before = namespace_files(server, repo)
    with NoJobs(spark):
        with pytest.raises(lakespark.RepositoryNotFoundError, match=missing):
            lakespark.read(spark, f"lakefs://{missing}/main/d/", **kw)
        with pytest.raises(lakespark.RepositoryNotFoundError, match=missing):
            lakespark.write(df, f"lakefs://{missing}/main/d/", **kw)
        with pytest.raises(lakespark.RefNotFoundError, match="'no-such-ref'"):
            lakespark.read(spark, f"lakefs://{repo}/no-such-ref/d/", **kw)
        with pytest.raises(lakespark.RefNotFoundError, match="'no-such-ref'"):
            lakespark.write(df, f"lakefs://{repo}/no-such-ref/d/", mode="append", **kw)
        for ref in ("v1", head, "main~1"):
            with pytest.raises(lakespark.NotABranchError, match="is not a branch"):
                lakespark.write(df, f"lakefs://{repo}/{ref}/d/", mode="append", **kw)
        with pytest.raises(lakespark.RepositoryReadOnlyError, match=readonly):
            lakespark.write(df, f"lakefs://{readonly}/main/d/", **kw)
        for call in (
            lambda: lakespark.read(spark, f"lakefs://{repo}/main/d/", format="avro", **kw),
            lambda: lakespark.write(df, f"lakefs://{repo}/main/d/", format="delta", **kw),
        ):
            with pytest.raises(lakespark.UnsupportedFormatError, match="supported: csv, json"):
                call()
        with pytest.raises(lakespark.UnsupportedModeError, match="'upsert'"):
            lakespark.write(df, f"lakefs://{repo}/main/d/", mode="upsert", **kw)
        for uri in ("s3://bucket/key", f"lakefs://{repo}", f"lakefs://{repo}/main/", "d/"):
            with pytest.raises(InvalidURIError):
                lakespark.write(df, uri, **kw)
        with pytest.raises(InvalidURIError):
            lakespark.read(spark, f"lakefs://{repo}", **kw)
        with pytest.raises(lakespark.EmptyDatasetError, match="no objects under"):
            lakespark.read(spark, f"lakefs://{repo}/main/nothing/", **kw)
    assert namespace_files(server, repo) == before
    empty = lakespark.read(spark, f"lakefs://{repo}/main/nothing/", schema=SCHEMA, **kw)
    assert empty.count() == 0 and empty.schema == SCHEMA


def test_csv_json_and_text_round_trip(
    spark: SparkSession, server: Server, api: LakeFSClient, repo: str
) -> None:
    kw = {"client": api, "local_root": server.data_dir}
    df = frame(spark, range(12), "t")
    lakespark.write(df, f"lakefs://{repo}/main/csv/", format="csv", header="true", **kw)
    # reads see commits only: the staged files are not there yet
    with pytest.raises(lakespark.EmptyDatasetError):
        lakespark.read(spark, f"lakefs://{repo}/main/csv/", format="csv", **kw)
    api.commit(repo, "main", "csv", {})
    back = lakespark.read(
        spark, f"lakefs://{repo}/main/csv/", format="csv", header="true", schema=SCHEMA, **kw
    )
    assert rows(back) == rows(df)
    lakespark.write(
        df,
        f"lakefs://{repo}/main/json/",
        format="JSON",
        partition_by=["k"],
        commit_message="j",
        **kw,
    )
    assert rows(lakespark.read(spark, f"lakefs://{repo}/main/json/", format="json", **kw)) == rows(
        df
    )
    lines = spark.createDataFrame([(f"line {i}",) for i in range(5)], "value string")
    lakespark.write(lines, f"lakefs://{repo}/main/text/", format="text", commit_message="t", **kw)
    text = lakespark.read(spark, f"lakefs://{repo}/main/text/", format="text", **kw)
    assert sorted(r["value"] for r in text.collect()) == [f"line {i}" for i in range(5)]


def test_single_objects_and_defaults_from_the_environment(
    spark: SparkSession,
    server: Server,
    api: LakeFSClient,
    repo: str,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:
    # an object uploaded through the API (not by write) reads by its own path
    data = b"id,k,value\n1,p1,one\n2,p2,two\n"
    api.upload_object(repo, "main", "raw/one.csv", data)
    api.commit(repo, "main", "raw", {})
    monkeypatch.setenv("LAKECTL_SERVER_ENDPOINT_URL", server.url)
    monkeypatch.setenv("LAKECTL_CREDENTIALS_ACCESS_KEY_ID", server.access_key_id)
    monkeypatch.setenv("LAKECTL_CREDENTIALS_SECRET_ACCESS_KEY", server.secret_access_key)
    monkeypatch.setenv("LAKECTL_CONFIG_FILE", "")
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.delenv("LAKEMIRROR_CONFIG", raising=False)
    monkeypatch.setenv("LAKEMIRROR_DATA_DIR", str(server.data_dir))
    got = lakespark.read_at(spark, f"lakefs://{repo}/main/raw/one.csv", format="csv", header="true")
    assert sorted((r["id"], r["value"]) for r in got.dataframe.collect()) == [
        ("1", "one"),
        ("2", "two"),
    ]
    physical = api.stat_object(repo, "main", "raw/one.csv")["physical_address"]
    local = server.data_dir.resolve() / physical.removeprefix("local://")
    assert got.files == (f"file://{local}",)
    # the whole directory too
    assert (
        lakespark.read(spark, f"lakefs://{repo}/main/raw/", format="csv", header="true").count()
        == 2
    )
    assert lakespark.spark_uri("s3://bucket/ns/data/x") == "s3a://bucket/ns/data/x"
    assert lakespark.spark_uri("local:///abs/ns/data/x") == "file:///abs/ns/data/x"
    assert lakespark.spark_uri("local://ns/data/x", "/root") == "file:///root/ns/data/x"
    with pytest.raises(lakespark.UnsupportedAddressError, match="mem"):
        lakespark.spark_uri("mem://ns/data/x")
    with pytest.raises(lakespark.UnsupportedAddressError, match="local_root"):
        lakespark.spark_uri("local://ns/data/x")


def test_public_names() -> None:
    assert sorted(lakespark.__all__) == sorted(set(lakespark.__all__))
    for name in lakespark.__all__:
        assert getattr(lakespark, name) is not None, name
    for name in ("read", "read_at", "write", "spark_uri", "SparkRead", "SparkWrite"):
        assert name in lakespark.__all__
    for error in (lakespark.NotABranchError, lakespark.UnsupportedFormatError):
        assert issubclass(error, lakespark.SparkIOError)
        assert issubclass(error, ValueError)
