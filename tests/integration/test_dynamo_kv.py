"""The KV conformance suite and DynamoDB specifics against DynamoKV on moto_server."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from mirror.errors import InvalidValueError
from mirror.kv import KV, KeyNotFoundError, KVPreconditionFailedError, KVUnavailableError
from mirror.kv.dynamodb import DynamoKV, DynamoSettings, create_table
from tests.conformance.kv_suite import KVConformance, KVDriver
from tests.integration.moto_fixtures import MotoServer, dynamo_settings, unique_name

pytestmark = pytest.mark.s3


@pytest.fixture
def table(moto_region: MotoServer, dynamodb_client: Any) -> str:
    name = unique_name("kv")
    assert create_table(dynamo_settings(moto_region, name), dynamodb_client) is True
    return name


@pytest.fixture
def kv_driver(moto_region: MotoServer, dynamodb_client: Any, table: str) -> Iterator[KVDriver]:
    handles: list[KV] = []
    settings = dynamo_settings(moto_region, table, page_size=500)

    def open_handle() -> KV:
        # the first handle shares the session's client (making a client is slow); later ones
        # get a client of their own, as another server process would
        client = None if handles else dynamodb_client
        handles.append(DynamoKV(settings, client))
        return handles[-1]

    driver = KVDriver("dynamodb", open_handle, handles)
    yield driver
    driver.close()


class TestDynamoKV(KVConformance):
    # eight threads still race on every increment; fewer rounds keep moto's serial server quick
    race_increments = 10


def test_create_table_is_idempotent(moto_region: MotoServer, table: str) -> None:
    assert create_table(dynamo_settings(moto_region, table)) is False


def test_partitions_share_a_table(
    moto_region: MotoServer, dynamodb_client: Any, table: str
) -> None:
    one = DynamoKV(dynamo_settings(moto_region, table, partition="one"), dynamodb_client)
    two = DynamoKV(dynamo_settings(moto_region, table, partition="two"), dynamodb_client)
    one.set(b"k", b"1")
    two.set_many([(b"k", b"2"), (b"k2", b"2")])
    assert (one.get(b"k"), two.get(b"k")) == (b"1", b"2")
    assert list(one.scan(b"")) == [(b"k", b"1")]
    assert [k for k, _ in two.scan(b"")] == [b"k", b"k2"]
    one.close()
    assert two.get(b"k2") == b"2"


def test_empty_key_and_limits(moto_region: MotoServer, table: str) -> None:
    kv = DynamoKV(dynamo_settings(moto_region, table))
    try:
        kv.set(b"", b"root")
        kv.set(b"x" * 1023, b"long")
        assert kv.get(b"") == b"root"
        assert kv.get(b"x" * 1023) == b"long"
        with pytest.raises(InvalidValueError):
            kv.set(b"x" * 1024, b"too long")
    finally:
        kv.close()


def test_set_many_with_repeated_keys_and_many_batches(moto_region: MotoServer, table: str) -> None:
    kv = DynamoKV(dynamo_settings(moto_region, table))
    try:
        pairs = [(b"r/%03d" % (i % 40), b"%d" % i) for i in range(100)]
        kv.set_many(pairs)
        # the last pair of each key wins: i = j + 80 for j < 20, else i = j + 40
        want = {b"r/%03d" % j: b"%d" % (j + 80 if j < 20 else j + 40) for j in range(40)}
        assert dict(kv.scan(b"r/")) == want
    finally:
        kv.close()


def test_precondition_failure_reports_found_value(moto_region: MotoServer, table: str) -> None:
    kv = DynamoKV(dynamo_settings(moto_region, table))
    try:
        kv.set(b"ref", b"c1")
        with pytest.raises(KVPreconditionFailedError) as info:
            kv.delete_if(b"ref", b"c0")
        assert info.value.found == b"c1"
        with pytest.raises(KeyNotFoundError):
            kv.get(b"absent")
    finally:
        kv.close()


def test_missing_table_is_a_clear_error(moto_region: MotoServer) -> None:
    kv = DynamoKV(dynamo_settings(moto_region, unique_name("absent")))
    try:
        for call in (kv.check, lambda: kv.get(b"k"), lambda: kv.set(b"k", b"v")):
            with pytest.raises(KVUnavailableError, match="missing"):
                call()
    finally:
        kv.close()


def test_unreachable_endpoint_is_unavailable() -> None:
    settings = DynamoSettings(
        table="t",
        endpoint_url="http://127.0.0.1:9",
        region="us-east-1",
        access_key_id="x",
        secret_access_key="y",
        max_attempts=2,
    )
    kv = DynamoKV(settings)
    try:
        with pytest.raises(KVUnavailableError):
            kv.get(b"k")
        with pytest.raises(KVUnavailableError):
            list(kv.scan(b""))
    finally:
        kv.close()


def test_regions_are_independent(moto_region: MotoServer, moto_second_region: MotoServer) -> None:
    name = unique_name("twin")
    first_settings = dynamo_settings(moto_region, name)
    second_settings = dynamo_settings(moto_second_region, name)
    create_table(first_settings)
    create_table(second_settings)
    first, second = DynamoKV(first_settings), DynamoKV(second_settings)
    try:
        first.set(b"k", b"1")
        with pytest.raises(KeyNotFoundError):
            second.get(b"k")
    finally:
        first.close()
        second.close()
