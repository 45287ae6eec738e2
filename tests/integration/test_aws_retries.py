"""S3BlockStore and DynamoKV under injected 5xx and throttling answers, on moto_server.

Faults are injected with botocore ``before-send`` hooks on a client of the test's own: the first
``times`` requests of one operation get a canned error answer instead of reaching moto, the rest
go through over HTTP.
"""

from __future__ import annotations

import io
import json
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from botocore.awsrequest import AWSRequest, AWSResponse

from mirror.block import BlockUnavailableError
from mirror.block.s3 import S3BlockStore, make_s3_client
from mirror.kv import KVUnavailableError
from mirror.kv.dynamodb import DynamoKV, create_table, make_dynamodb_client
from tests.integration.moto_fixtures import (
    MotoServer,
    create_bucket,
    dynamo_settings,
    s3_settings,
    unique_name,
)

pytestmark = pytest.mark.s3


class _Raw:
    def __init__(self, body: bytes) -> None:
        self._body = io.BytesIO(body)

    def stream(self, **kwargs: Any) -> Iterator[bytes]:
        yield self._body.read()

    def read(self, amt: int | None = None) -> bytes:
        return self._body.read(amt)


class Faults:
    """Answer the first ``times`` requests with ``status`` and ``body``; count every request."""

    def __init__(self, times: int, status: int, body: bytes, headers: dict[str, str]) -> None:
        self.left = times
        self.status, self.body, self.headers = status, body, headers
        self.requests = 0

    def __call__(self, request: AWSRequest, **kwargs: Any) -> AWSResponse | None:
        self.requests += 1
        if self.left <= 0:
            return None
        self.left -= 1
        return AWSResponse(request.url, self.status, self.headers, _Raw(self.body))


def s3_fault(times: int, status: int = 503, code: str = "SlowDown") -> Faults:
    body = f"<Error><Code>{code}</Code><Message>injected</Message></Error>".encode()
    return Faults(times, status, body, {"Content-Type": "application/xml"})


def dynamo_throttle(times: int) -> Faults:
    body = json.dumps(
        {
            "__type": "com.amazonaws.dynamodb.v20120810#ProvisionedThroughputExceededException",
            "message": "injected",
        }
    ).encode()
    return Faults(times, 400, body, {"Content-Type": "application/x-amz-json-1.0"})


@pytest.fixture
def s3_store(moto_region: MotoServer, s3_client: Any) -> Callable[[str, Faults], S3BlockStore]:
    bucket = create_bucket(moto_region, s3_client)
    settings = s3_settings(moto_region, max_attempts=2)

    def make(operation: str, faults: Faults) -> S3BlockStore:
        client = make_s3_client(settings)
        client.meta.events.register(f"before-send.s3.{operation}", faults)
        return S3BlockStore(f"s3://{bucket}/ns", client, settings)

    return make


@pytest.mark.parametrize(("status", "code"), [(503, "SlowDown"), (500, "InternalError")])
def test_s3_put_succeeds_after_transient_errors(
    s3_store: Callable[[str, Faults], S3BlockStore], status: int, code: str
) -> None:
    faults = s3_fault(1, status, code)
    store = s3_store("PutObject", faults)
    store.put("k", b"acknowledged")
    assert faults.requests == 2
    assert store.get("k") == b"acknowledged"


def test_s3_gives_up_with_unavailable(s3_store: Callable[[str, Faults], S3BlockStore]) -> None:
    faults = s3_fault(10)
    store = s3_store("GetObject", faults)
    store.put("k", b"v")
    with pytest.raises(BlockUnavailableError, match="SlowDown"):
        store.get("k")
    assert faults.requests == 2


def test_s3_conditional_write_after_throttling(
    s3_store: Callable[[str, Faults], S3BlockStore],
) -> None:
    store = s3_store("PutObject", s3_fault(1))
    assert store.put_if_absent("k", b"first") is True
    assert store.put_if_absent("k", b"second") is False
    assert store.get("k") == b"first"


@pytest.fixture
def dynamo_kv(moto_region: MotoServer) -> Iterator[Callable[[str, Faults], DynamoKV]]:
    settings = dynamo_settings(moto_region, unique_name("faults"), max_attempts=2)
    create_table(settings)
    opened: list[DynamoKV] = []

    def make(operation: str, faults: Faults) -> DynamoKV:
        client = make_dynamodb_client(settings)
        client.meta.events.register(f"before-send.dynamodb.{operation}", faults)
        opened.append(DynamoKV(settings, client))
        return opened[-1]

    yield make
    for kv in opened:
        kv.close()


def test_dynamo_cas_succeeds_after_throttling(
    dynamo_kv: Callable[[str, Faults], DynamoKV],
) -> None:
    faults = dynamo_throttle(1)
    kv = dynamo_kv("PutItem", faults)
    kv.set_if(b"ref", b"c1", None)
    assert faults.requests == 2
    assert kv.get(b"ref") == b"c1"


def test_dynamo_gives_up_with_unavailable(dynamo_kv: Callable[[str, Faults], DynamoKV]) -> None:
    faults = dynamo_throttle(10)
    kv = dynamo_kv("Query", faults)
    kv.set(b"k", b"v")
    with pytest.raises(KVUnavailableError, match="ProvisionedThroughputExceeded"):
        list(kv.scan(b""))
    assert faults.requests == 2
