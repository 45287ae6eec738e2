"""The asynchronous store's direct GET requests: botocore's requests, and botocore when they fail.

The signature test needs no network: botocore's own request is caught before it is sent and
compared with the direct one, signed at the same frozen instant. The rest runs against a moto
server process, through a proxy that answers the next requests with a fault of the test's choice.
"""

from __future__ import annotations

import base64
import datetime
import zlib
from collections.abc import Iterator
from typing import Any
from urllib.parse import parse_qsl, urlsplit

import botocore.auth
import pytest

from mirror.block import BlockNotFoundError, InvalidRangeError
from mirror.block.s3 import make_s3_client
from mirror.block.s3_async import _DIRECT, AsyncS3BlockStore, async_s3_client
from mirror.block.s3_config import S3Settings
from mirror.block.s3_direct import DirectGets
from tests.integration.moto_fixtures import MotoServer, create_bucket, s3_settings
from tests.integration.test_server_s3_faults import FaultyProxy, running_proxy

pytestmark = [pytest.mark.s3, pytest.mark.anyio]


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


class _Caught(Exception):
    """Stops botocore's request before it is sent."""


SETTINGS = {
    "custom endpoint, path style": (
        S3Settings(
            endpoint_url="http://127.0.0.1:9",
            access_key_id="AKIAEXAMPLE",
            secret_access_key="secret",
            region="us-east-1",
            max_attempts=1,
        ),
        "bucket-one",
    ),
    "AWS, virtual hosts": (
        S3Settings(
            access_key_id="AKIAEXAMPLE",
            secret_access_key="secret",
            region="eu-west-1",
            addressing_style="virtual",
            max_attempts=1,
        ),
        "bucket-one",
    ),
    "AWS, dotted bucket, session token": (
        S3Settings(
            access_key_id="AKIAEXAMPLE",
            secret_access_key="secret",
            session_token="token",
            region="eu-west-1",
            max_attempts=1,
        ),
        "bucket.with.dots",
    ),
}

KEY = "ns/sp ace+plus%/ünï~*(x)"


@pytest.mark.parametrize("name", sorted(SETTINGS))
async def test_direct_requests_are_signed_as_botocore_signs_its_own(
    name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    settings, bucket = SETTINGS[name]
    now = datetime.datetime(2026, 11, 28, 12, 0, 0)
    monkeypatch.setattr(botocore.auth, "get_current_datetime", lambda: now)
    listing = {
        "Prefix": "ns/a b",
        "MaxKeys": 4,
        "EncodingType": "url",
        "StartAfter": "ns/x+y",
        "ContinuationToken": "ab/c+d=",
    }
    query = {
        "list-type": "2",
        "prefix": "ns/a b",
        "max-keys": "4",
        "encoding-type": "url",
        "start-after": "ns/x+y",
        "continuation-token": "ab/c+d=",
    }
    async with async_s3_client(settings) as client:
        caught: list[Any] = []

        def catch(request: Any, **_: Any) -> None:
            caught.append(request)
            raise _Caught

        client.meta.events.register("before-send.s3", catch)
        direct = _DIRECT[client]
        cases = [
            ("GetObject", KEY, None, None, {"Key": KEY}),
            (
                "GetObject",
                "ns/k",
                None,
                {"Range": "bytes=2-4"},
                {"Key": "ns/k", "Range": "bytes=2-4"},
            ),
            ("ListObjectsV2", "", query, None, listing),
        ]
        for operation, key, params, headers, arguments in cases:
            caught.clear()
            call = client.get_object if operation == "GetObject" else client.list_objects_v2
            with pytest.raises(_Caught):
                await call(Bucket=bucket, **arguments)
            theirs = caught[0]
            asked = {**(headers or {})}
            if operation == "GetObject":
                asked["x-amz-checksum-mode"] = "ENABLED"  # botocore asks by default
            ours = await direct._signed(operation, bucket, key, params, asked)
            # the same resource; the query's order aside, the same parameters
            assert urlsplit(ours.url)[:3] == urlsplit(theirs.url)[:3]
            assert sorted(parse_qsl(urlsplit(ours.url).query)) == sorted(
                parse_qsl(urlsplit(theirs.url).query)
            )

            def text(value: str | bytes) -> str:
                return value.decode() if isinstance(value, bytes) else value

            # every header botocore signed, with the same signature
            signed = {k.lower(): text(v) for k, v in theirs.headers.items()}
            for skipped in ("user-agent", "amz-sdk-invocation-id", "amz-sdk-request"):
                signed.pop(skipped, None)
            assert {k.lower(): text(v) for k, v in ours.headers.items()} == signed
            assert "Signature=" in signed["authorization"]


@pytest.fixture
def moto_bucket(moto_region: MotoServer) -> str:
    client = make_s3_client(s3_settings(moto_region))
    bucket = create_bucket(moto_region, client)
    client.put_object(Bucket=bucket, Key="ns/file", Body=b"0123456789")
    client.put_object(Bucket=bucket, Key="ns/empty", Body=b"")
    for i in range(7):
        client.put_object(Bucket=bucket, Key=f"ns/list/{i:02d}", Body=b"x" * i)
    return bucket


@pytest.fixture
def faulty(moto_region: MotoServer) -> Iterator[FaultyProxy]:
    with running_proxy(moto_region.url) as proxy:
        yield proxy


class Counted:
    """Counts the requests botocore sends and those the direct path answered."""

    def __init__(self, client: Any, monkeypatch: pytest.MonkeyPatch) -> None:
        self.by_botocore: list[str] = []
        self.direct: list[str] = []
        client.meta.events.register(
            "before-send.s3", lambda request, **_: self.by_botocore.append(request.method)
        )
        original = DirectGets.get
        direct = self.direct

        async def counted(self: DirectGets, operation: str, *args: Any, **kwargs: Any) -> Any:
            found = await original(self, operation, *args, **kwargs)
            if found is not None:
                direct.append(operation)
            return found

        monkeypatch.setattr(DirectGets, "get", counted)

    def clear(self) -> None:
        self.by_botocore.clear()
        self.direct.clear()


def _settings(server: MotoServer, proxy: FaultyProxy) -> S3Settings:
    return s3_settings(server, page_size=3, endpoint_url=proxy.url)


async def test_reads_go_direct_and_answer_as_botocore_answers(
    moto_region: MotoServer,
    moto_bucket: str,
    faulty: FaultyProxy,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    bucket = moto_bucket
    settings = _settings(moto_region, faulty)
    async with async_s3_client(settings) as client:
        count = Counted(client, monkeypatch)
        store = AsyncS3BlockStore(f"s3://{bucket}/ns", client, settings)
        assert await store.get("file") == b"0123456789"
        assert await store.get("file", 2, 5) == b"234"
        assert await store.get("file", 8) == b"89"
        assert await store.list_sizes("list/", "", 10) == {f"list/{i:02d}": i for i in range(7)}
        # three reads and three pages of 3 keys, none of them by botocore
        assert (count.direct, count.by_botocore) == (["GetObject"] * 3 + ["ListObjectsV2"] * 3, [])
        count.clear()
        # what S3 refuses goes to botocore, which raises as the store always did
        with pytest.raises(BlockNotFoundError):
            await store.get("missing")
        with pytest.raises(InvalidRangeError):
            await store.get("file", 11)
        assert count.direct == []
        assert await store.get("empty") == b""  # a whole empty object: a 200 like any other
        assert count.direct == ["GetObject"]
        assert _DIRECT[client].enabled
        assert faulty.failed == 0


SLOW_DOWN = (503, {"Content-Type": "application/xml"}, b"<Error><Code>SlowDown</Code></Error>")
DENIED = (403, {"Content-Type": "application/xml"}, b"<Error><Code>AccessDenied</Code></Error>")


@pytest.mark.parametrize(
    ("fault", "stays_on", "requests"),
    [
        (SLOW_DOWN, True, ("get", "list")),
        ((500, {}, b""), True, ("get", "list")),
        (DENIED, False, ("get",)),
        ((400, {}, b"<Error><Code>AuthorizationHeaderMalformed</Code></Error>"), False, ("get",)),
        ((301, {"Location": "http://elsewhere.invalid/"}, b""), False, ("get",)),
        (DENIED, False, ("list",)),
        # a whole object whose checksum does not match its bytes: botocore reads it again
        ((200, {"x-amz-checksum-crc32": "AAAAAA=="}, b"0123456789"), True, ("get",)),
        # an answer to a listing that is no page (an <Error> in a 200, a body cut short)
        ((200, {}, b"<Error><Code>InternalError</Code></Error>"), True, ("list",)),
        ((200, {}, b"<ListBucketResult><Contents><Key>a</Key>"), True, ("list",)),
    ],
)
async def test_a_failed_direct_request_is_sent_again_by_botocore(
    moto_region: MotoServer,
    moto_bucket: str,
    fault: tuple[int, dict[str, str], bytes],
    stays_on: bool,
    requests: tuple[str, ...],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    bucket = moto_bucket
    with running_proxy(moto_region.url, fault=fault) as proxy:
        settings = _settings(moto_region, proxy)
        async with async_s3_client(settings) as client:
            count = Counted(client, monkeypatch)
            store = AsyncS3BlockStore(f"s3://{bucket}/ns", client, settings)
            for request in requests:
                count.clear()
                proxy.fail_next(1)
                if request == "get":
                    assert await store.get("file") == b"0123456789"
                else:
                    assert await store.list_sizes("list/", "", 3) == {
                        f"list/{i:02d}": i for i in range(3)
                    }
                # the direct request met the fault; botocore sent it again and got the answer
                assert (proxy.failed, count.by_botocore) == (1, ["GET"])
                proxy.failed = 0
            assert _DIRECT[client].enabled == stays_on
            count.clear()
            # the next requests: direct again, unless the fault turned the path off
            assert await store.get("file") == b"0123456789"
            assert await store.list_sizes("list/", "", 3) == {f"list/{i:02d}": i for i in range(3)}
            if stays_on:
                assert (count.direct, count.by_botocore) == (["GetObject", "ListObjectsV2"], [])
            else:
                assert (count.direct, count.by_botocore) == ([], ["GET", "GET"])


async def test_a_store_on_another_client_reads_through_botocore(
    moto_region: MotoServer, moto_bucket: str
) -> None:
    """Only clients opened by ``async_s3_client`` have a direct path (and close it)."""
    import aiobotocore.session

    bucket = moto_bucket
    settings = s3_settings(moto_region)
    session = aiobotocore.session.get_session()
    async with session.create_client(
        "s3",
        endpoint_url=settings.endpoint_url,
        region_name=settings.region,
        aws_access_key_id=settings.access_key_id,
        aws_secret_access_key=settings.secret_access_key,
    ) as client:
        store = AsyncS3BlockStore(f"s3://{bucket}/ns", client, settings)
        assert store._direct is None
        assert await store.get("file") == b"0123456789"
    async with async_s3_client(settings) as client:
        direct = _DIRECT[client]
        assert await AsyncS3BlockStore(f"s3://{bucket}/ns", client, settings).get("file")
        assert direct._session is not None
    assert direct._session is None


def test_checksums_are_checked_as_botocore_checks_them() -> None:
    from mirror.block.s3_direct import _checksum_matches

    body = b"range file bytes"
    crc = base64.b64encode(zlib.crc32(body).to_bytes(4, "big")).decode()
    assert _checksum_matches({"x-amz-checksum-crc32": crc}, body)
    assert not _checksum_matches({"x-amz-checksum-crc32": crc}, body + b"!")
    # a checksum of parts is not the object's: not checked, as botocore does not
    assert _checksum_matches({"x-amz-checksum-crc32": "abcd-3"}, body)
    assert _checksum_matches({}, body)
