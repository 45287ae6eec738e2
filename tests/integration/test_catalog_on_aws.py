"""The versioning core end to end over DynamoKV and S3BlockStore on moto_server."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from mirror.block import BlockResolver
from mirror.block.s3 import s3_store_factory
from mirror.core import Catalog, ChunkingParams
from mirror.kv.dynamodb import DynamoKV, create_table
from tests.integration.moto_fixtures import (
    MotoServer,
    create_bucket,
    dynamo_settings,
    s3_settings,
    unique_name,
)

pytestmark = pytest.mark.s3


@pytest.fixture
def catalog(moto_region: MotoServer, s3_client: Any) -> Iterator[Catalog]:
    settings = dynamo_settings(moto_region, unique_name("catalog"))
    create_table(settings)
    blocks = BlockResolver()
    blocks.register("s3", s3_store_factory(s3_settings(moto_region)))
    kv = DynamoKV(settings)
    yield Catalog(kv, blocks, chunking=ChunkingParams(raggedness=3))
    kv.close()


def test_repository_lifecycle(catalog: Catalog, moto_region: MotoServer, s3_client: Any) -> None:
    bucket = create_bucket(moto_region, s3_client)
    catalog.create_repository("repo", f"s3://{bucket}/repo")
    for i in range(20):
        catalog.upload_object("repo", "main", f"data/{i:02d}.csv", b"row %d\n" % i)
    first = catalog.commit("repo", "main", "twenty files").commit
    catalog.create_branch("repo", "feature", "main")
    catalog.upload_object("repo", "feature", "data/05.csv", b"changed\n")
    catalog.upload_object("repo", "feature", "new/file.bin", bytes(range(256)))
    catalog.delete_object("repo", "feature", "data/19.csv")
    catalog.commit("repo", "feature", "edit on a branch")
    catalog.upload_object("repo", "main", "other/side.txt", b"main moved on")
    catalog.commit("repo", "main", "main moves")

    merged = catalog.merge("repo", "feature", "main").commit

    tree = {
        s.path: catalog.read_object("repo", "main", s.path)
        for s in catalog.iter_objects("repo", "main")
    }
    want = {f"data/{i:02d}.csv": b"row %d\n" % i for i in range(19)}
    want |= {"data/05.csv": b"changed\n", "new/file.bin": bytes(range(256))}
    want["other/side.txt"] = b"main moved on"
    assert tree == want
    assert catalog.read_object("repo", "main", "new/file.bin", 10, 20) == bytes(range(10, 20))
    assert catalog.read_object("repo", first.id, "data/19.csv") == b"row 19\n"
    assert next(c.id for c in catalog.log("repo", "main")) == merged.id

    # the objects and the committed ranges live in the bucket under the namespace's prefix
    keys = [o["Key"] for o in s3_client.list_objects_v2(Bucket=bucket)["Contents"]]
    assert keys and all(k.startswith("repo/") for k in keys)

    # a second catalog over the same table and bucket sees the same history
    assert isinstance(catalog.kv, DynamoKV)
    kv = DynamoKV(catalog.kv.settings)
    try:
        second = Catalog(kv, catalog.blocks)
        assert second.get_branch("repo", "main").commit_id == merged.id
        assert second.read_object("repo", "main", "data/05.csv") == b"changed\n"
    finally:
        kv.close()
