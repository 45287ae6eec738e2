"""pyarrow's S3FileSystem and s3fs + pandas against the gateway of a live server: a partitioned
Parquet dataset written at a branch, committed, and read back at the branch and at the commit."""

from __future__ import annotations

from typing import Any

import pandas as pd
import pyarrow as pa
import pyarrow.dataset as ds
import pytest
from botocore.exceptions import ClientError
from pyarrow import fs as pafs

from tests.gateway.live import REGION, Live


def _arrow_fs(live: Live) -> pafs.S3FileSystem:
    return pafs.S3FileSystem(
        access_key=live.key[0],
        secret_key=live.key[1],
        endpoint_override=live.url.removeprefix("http://"),
        scheme="http",
        region=REGION,
    )


def _storage_options(live: Live) -> dict[str, Any]:
    return {
        "key": live.key[0],
        "secret": live.key[1],
        "client_kwargs": {"endpoint_url": live.url, "region_name": REGION},
    }


def _events(n: int) -> pa.Table:
    return pa.table(
        {
            "id": list(range(n)),
            "country": [["fr", "jp", "us"][i % 3] for i in range(n)],
            "amount": [i * 1.5 for i in range(n)],
        }
    )


def _read(fs: pafs.S3FileSystem, path: str) -> pa.Table:
    dataset = ds.dataset(path, filesystem=fs, format="parquet", partitioning="hive")
    table = dataset.to_table()
    return table.select(["id", "country", "amount"]).sort_by("id")


def test_pyarrow_writes_a_partitioned_dataset_and_reads_it_at_the_branch_and_commit(
    live: Live, repo: str
) -> None:
    fs = _arrow_fs(live)
    first = _events(300)
    ds.write_dataset(
        first,
        f"{repo}/main/tables/events",
        filesystem=fs,
        format="parquet",
        partitioning=["country"],
        partitioning_flavor="hive",
        basename_template="part-{i}.parquet",
    )
    files = [p for p in live.paths(repo, "main", "tables/events/") if p.endswith(".parquet")]
    assert sorted(files) == [
        f"tables/events/country={c}/part-0.parquet" for c in ("fr", "jp", "us")
    ]
    commit = live.commit(repo, message="events")
    # the branch moves on; the commit keeps what was committed
    ds.write_dataset(
        _events(30),
        f"{repo}/main/tables/events",
        filesystem=fs,
        format="parquet",
        partitioning=["country"],
        partitioning_flavor="hive",
        basename_template="more-{i}.parquet",
        existing_data_behavior="overwrite_or_ignore",
    )
    at_commit = _read(fs, f"{repo}/{commit}/tables/events")
    assert at_commit.column("id").to_pylist() == list(range(300))
    assert at_commit.column("country").to_pylist() == first.column("country").to_pylist()
    at_branch = _read(fs, f"{repo}/main/tables/events")
    assert at_branch.num_rows == 330
    info = fs.get_file_info(f"{repo}/{commit}/tables/events/country=fr/part-0.parquet")
    assert info.type == pafs.FileType.File and info.size > 0
    listed = fs.get_file_info(pafs.FileSelector(f"{repo}/{commit}/tables/events", recursive=True))
    assert sorted(i.path for i in listed if i.type == pafs.FileType.File) == [
        f"{repo}/{commit}/tables/events/country={c}/part-0.parquet" for c in ("fr", "jp", "us")
    ]


def test_pandas_reads_and_writes_through_s3fs(live: Live, repo: str) -> None:
    options = _storage_options(live)
    live.upload(repo, "main", "x.csv", b"a,b\n1,x y\n2,z\n")
    frame = pd.read_csv(f"s3://{repo}/main/x.csv", storage_options=options)
    assert frame.to_dict("list") == {"a": [1, 2], "b": ["x y", "z"]}
    out = pd.DataFrame({"n": range(1000), "s": [f"row {i}" for i in range(1000)]})
    out.to_parquet(f"s3://{repo}/main/out/frame.parquet", storage_options=options, index=False)
    commit = live.commit(repo, message="frame")
    for ref in ("main", commit):
        back = pd.read_parquet(f"s3://{repo}/{ref}/out/frame.parquet", storage_options=options)
        pd.testing.assert_frame_equal(back, out)
    out.to_csv(f"s3://{repo}/main/out/frame.csv", storage_options=options, index=False)
    assert live.read(repo, "main", "out/frame.csv") == out.to_csv(index=False).encode()


def test_a_marker_of_the_branch_root_stores_nothing(live: Live, repo: str) -> None:
    # pyarrow's create_dir writes "<branch>/" before anything under it
    s3 = live.s3()
    assert s3.put_object(Bucket=repo, Key="main/", Body=b"")["ETag"] == (
        '"d41d8cd98f00b204e9800998ecf8427e"'
    )
    assert live.paths(repo, "main") == []
    with pytest.raises(ClientError) as missing:
        s3.put_object(Bucket=repo, Key="no-such-branch/", Body=b"")
    assert missing.value.response["Error"]["Code"] == "NoSuchBucket"
    with pytest.raises(ClientError) as data:
        s3.put_object(Bucket=repo, Key="main/", Body=b"data")
    assert data.value.response["Error"]["Code"] == "InvalidArgument"
