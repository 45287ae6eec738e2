"""lakefs-spec (fsspec) and pandas against the server: write Parquet, commit, read it back."""

from __future__ import annotations

from pathlib import Path

import lakefs
import pandas as pd
import pytest
from lakefs_spec import LakeFSFileSystem

from tests.integration.harness import Server


@pytest.fixture
def fs(server: Server) -> LakeFSFileSystem:
    LakeFSFileSystem.clear_instance_cache()
    return LakeFSFileSystem(
        host=server.url, username=server.access_key_id, password=server.secret_access_key
    )


@pytest.mark.both_backends
def test_pandas_parquet_round_trip_at_a_commit(
    server: Server, fs: LakeFSFileSystem, repo: lakefs.Repository
) -> None:
    options = {
        "host": server.url,
        "username": server.access_key_id,
        "password": server.secret_access_key,
    }
    frame = pd.DataFrame({"id": [1, 2, 3], "city": ["Oslo", "Lima", "Pune"]})
    frame.to_parquet(f"lakefs://{repo.id}/main/tables/cities.parquet", storage_options=options)
    commit = lakefs.Branch(repo.id, "main", client=fs.client).commit("add cities").get_commit()
    # change the branch afterwards: reading at the commit ID must not see it
    frame.iloc[:1].to_parquet(
        f"lakefs://{repo.id}/main/tables/cities.parquet", storage_options=options
    )
    back = pd.read_parquet(
        f"lakefs://{repo.id}/{commit.id}/tables/cities.parquet", storage_options=options
    )
    pd.testing.assert_frame_equal(back, frame)
    assert (
        len(
            pd.read_parquet(
                f"lakefs://{repo.id}/main/tables/cities.parquet", storage_options=options
            )
        )
        == 1
    )


@pytest.mark.both_backends
def test_filesystem_basics(fs: LakeFSFileSystem, repo: lakefs.Repository, tmp_path: Path) -> None:
    base = f"{repo.id}/main"
    fs.pipe(f"{base}/dir/a.txt", b"alpha")
    fs.pipe(f"{base}/dir/sub/b.txt", b"beta")
    assert fs.cat(f"{base}/dir/a.txt") == b"alpha"
    assert fs.exists(f"{base}/dir/a.txt") and not fs.exists(f"{base}/dir/zzz")
    assert fs.info(f"{base}/dir/a.txt")["size"] == 5
    listed = sorted(fs.ls(f"{base}/dir", detail=False))
    assert listed == [f"{base}/dir/a.txt", f"{base}/dir/sub/"]
    local = tmp_path / "b.txt"
    fs.get_file(f"{base}/dir/sub/b.txt", str(local))
    assert local.read_bytes() == b"beta"
    fs.put_file(str(local), f"{repo.id}/feature/copied.txt")
    assert fs.cat(f"{repo.id}/feature/copied.txt") == b"beta"
    fs.rm(f"{base}/dir", recursive=True)
    assert not fs.exists(f"{base}/dir/a.txt")


@pytest.mark.both_backends
def test_filesystem_transaction(fs: LakeFSFileSystem, repo: lakefs.Repository) -> None:
    with fs.transaction(repo.id, "main") as tx:
        fs.pipe(f"{repo.id}/{tx.branch.id}/tx.txt", b"in a transaction")
        tx.commit(message="from a transaction")
    assert fs.cat(f"{repo.id}/main/tx.txt") == b"in a transaction"
    assert [b.id for b in repo.branches()] == ["main"]
