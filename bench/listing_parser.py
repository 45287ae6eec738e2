"""CPU per listed key of a ``ListObjectsV2`` page: botocore's parse against the dedicated walker.

``python -m bench.listing_parser`` (options: ``--pages N``, default 200; ``--keys K``, default
1,000) builds one page of K keys shaped like S3's (and moto's) answers, then, interleaved in one
run, (a) parses it N times with botocore's rest-xml parser and with
:class:`~mirror.block.s3_listing.FastListingParser` (both with the fast timestamp parser), and
(b) calls ``list_objects_v2`` N times through a plain boto3 client and through
:func:`~mirror.block.s3.make_s3_client`, the answer served by botocore's ``before-send`` hook
(signing, retries' bookkeeping, url-decoding handler included; no network) and through a
client reading key lists (:func:`~mirror.block.s3_listing.key_list`), once taking its
entries as botocore hands them and once as the validator's asynchronous store reads a page
(``EncodingType`` asked for, keys and sizes read as columns by
:func:`~mirror.block.s3_listing.listed_keys` into one dictionary). It prints CPU
microseconds per listed key (``time.process_time``) and the 1-minute load average.
"""

from __future__ import annotations

import argparse
import os
import time
from collections.abc import Callable
from typing import Any

import boto3
import botocore.session
from botocore.awsrequest import AWSResponse
from botocore.parsers import RestXMLParser

from mirror.block.s3 import (
    S3Settings,
    client_config,
    make_s3_client,
    parse_timestamp,
    use_fast_timestamps,
)
from mirror.block.s3_listing import (
    FastListingParser,
    listed_keys,
    parse_listings_once,
    use_fast_listing,
)

HEADERS = {"x-amz-request-id": "R", "x-amz-id-2": "H", "content-type": "application/xml"}


def page_body(keys: int) -> bytes:
    """Return a truncated ListObjectsV2 page of ``keys`` url-encoded keys, as S3 writes it."""
    parts = [
        '<?xml version="1.0" encoding="UTF-8"?>'
        '<ListBucketResult xmlns="http://s3.amazonaws.com/doc/2006-03-01/">'
        f"<Name>bucket</Name><Prefix>data/</Prefix><KeyCount>{keys}</KeyCount>"
        "<MaxKeys>1000</MaxKeys><EncodingType>url</EncodingType><IsTruncated>true</IsTruncated>"
        "<NextContinuationToken>1ueGcxLPRx1Tr/XYExHnhbYLgveDs2J/wm36Hy4vbOwM=</NextContinuationToken>"
    ]
    for i in range(keys):
        parts.append(
            f"<Contents><Key>data/part-{i // 50:05d}/{i:09d}-{i * 7919 % 100003:x}</Key>"
            f"<LastModified>2026-11-24T10:{i % 60:02d}:{i % 59:02d}.000Z</LastModified>"
            f"<ETag>&quot;{i * 2654435761 % (1 << 128):032x}&quot;</ETag>"
            f"<Size>{1000 + i}</Size><StorageClass>STANDARD</StorageClass></Contents>"
        )
    parts.append("</ListBucketResult>")
    return "".join(parts).encode()


def _cpu(fn: Callable[[], Any], times: int) -> float:
    start = time.process_time()
    for _ in range(times):
        fn()
    return time.process_time() - start


def _serve(client: Any, body: bytes) -> None:
    class Raw:
        def stream(self, **_: Any) -> Any:
            yield body

    def answer(request: Any, **_: Any) -> AWSResponse:
        return AWSResponse(request.url, 200, dict(HEADERS), Raw())

    client.meta.events.register("before-send.s3.ListObjectsV2", answer)


def main(argv: list[str] | None = None) -> None:
    """Run the comparison and print one table."""
    parser = argparse.ArgumentParser(prog="python -m bench.listing_parser", description=__doc__)
    parser.add_argument("--pages", type=int, default=200)
    parser.add_argument("--keys", type=int, default=1000)
    args = parser.parse_args(argv)
    body = page_body(args.keys)
    shape = (
        botocore.session.get_session()
        .get_service_model("s3")
        .operation_model("ListObjectsV2")
        .output_shape
    )

    def response() -> dict[str, Any]:
        return {"body": body, "headers": dict(HEADERS), "status_code": 200, "context": {}}

    stock = RestXMLParser(timestamp_parser=parse_timestamp)
    fast = FastListingParser(timestamp_parser=parse_timestamp)
    assert stock.parse(response(), shape) == fast.parse(response(), shape)

    settings = S3Settings(
        endpoint_url="http://127.0.0.1:9",
        region="us-east-1",
        access_key_id="AKIAEXAMPLE",
        secret_access_key="bench",
        max_attempts=1,
    )
    plain = boto3.session.Session(
        aws_access_key_id="AKIAEXAMPLE",
        aws_secret_access_key="bench",
        region_name="us-east-1",
        botocore_session=use_fast_timestamps(botocore.session.get_session()),
    ).client("s3", endpoint_url=settings.endpoint_url, config=client_config(settings))
    ours = make_s3_client(settings)
    keys_only = boto3.session.Session(
        aws_access_key_id="AKIAEXAMPLE",
        aws_secret_access_key="bench",
        region_name="us-east-1",
        botocore_session=use_fast_listing(use_fast_timestamps(botocore.session.get_session())),
    ).client("s3", endpoint_url=settings.endpoint_url, config=client_config(settings))
    parse_listings_once(keys_only.meta.events, keys_only=True)
    for client in (plain, ours, keys_only):
        _serve(client, body)
    page = {"Bucket": "bucket", "Prefix": "data/"}
    assert plain.list_objects_v2(**page)["Contents"] == ours.list_objects_v2(**page)["Contents"]
    assert [
        (o["Key"], o["Size"], o["ETag"]) for o in plain.list_objects_v2(**page)["Contents"]
    ] == [(o["Key"], o["Size"], o["ETag"]) for o in keys_only.list_objects_v2(**page)["Contents"]]
    encoded = {**page, "EncodingType": "url"}

    def sizes() -> dict[str, int]:
        return dict(zip(*listed_keys(keys_only.list_objects_v2(**encoded), 5), strict=True))

    assert sizes() == {o["Key"][5:]: o["Size"] for o in plain.list_objects_v2(**page)["Contents"]}

    cases: dict[str, Callable[[], Any]] = {
        "parse only, botocore": lambda: stock.parse(response(), shape),
        "parse only, dedicated walker": lambda: fast.parse(response(), shape),
        "list_objects_v2 call, plain boto3 client": lambda: plain.list_objects_v2(**page),
        "list_objects_v2 call, make_s3_client": lambda: ours.list_objects_v2(**page),
        "list_objects_v2 call, key lists, entries": lambda: keys_only.list_objects_v2(**page),
        "list_objects_v2 call, key lists, keys and sizes (the validator's page)": sizes,
    }
    totals = dict.fromkeys(cases, 0.0)
    rounds = 4
    for _ in range(rounds):  # interleaved, so that load changes hit every case alike
        for name, fn in cases.items():
            totals[name] += _cpu(fn, max(1, args.pages // rounds))
    keys = args.keys * max(1, args.pages // rounds) * rounds
    print(f"{keys:,} listed keys per case, load average (1 min) {os.getloadavg()[0]:.2f}")
    print("| case | CPU µs per listed key |")
    print("|---|---:|")
    for name, total in totals.items():
        print(f"| {name} | {total / keys * 1e6:.2f} |")


if __name__ == "__main__":
    main()
