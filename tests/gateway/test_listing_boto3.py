"""boto3's listings through the gateway of a live server: v1 and v2 paginators over a few
thousand keys, delimiters, start-after, keys that need URL encoding, the bucket root's branches,
listings at a tag and at a commit ID, and an empty continuation token (a listing from the start,
the token echoed)."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any
from urllib.parse import unquote_plus

import httpx
import pytest
from botocore.exceptions import ClientError

from tests.gateway.live import Live

PARTITIONS = 21
PER_PARTITION = 100
KEYS = [f"data/p={p:02d}/part-{i:04d}.csv" for p in range(PARTITIONS) for i in range(PER_PARTITION)]
ODD = sorted(
    [
        "odd/with space.txt",
        "odd/plus+sign.txt",
        "odd/percent%41.txt",
        "odd/ünïcødé/ファイル.txt",
        "odd/both +%20 kinds.txt",
        "odd/dir with space/inner.txt",
    ]
)


@dataclass(frozen=True)
class Repo:
    """A repository: KEYS and ODD committed (tagged ``v1``), then ``data/late.csv`` committed."""

    name: str
    first: str
    second: str


@pytest.fixture(scope="module")
def repo(live: Live) -> Repo:
    name = live.create_repository("listing")
    with ThreadPoolExecutor(8) as pool:
        list(pool.map(lambda k: live.upload(name, "main", k, k.encode()), KEYS + ODD))
    first = live.commit(name, message="a few thousand keys")
    live.create_tag(name, "v1", first)
    live.upload(name, "main", "data/late.csv", b"late")
    second = live.commit(name, message="one more")
    for branch in ("dev", "main-x", "feature2"):
        live.create_branch(name, branch)
    return Repo(name, first, second)


def _pages(s3: Any, operation: str, **params: Any) -> list[dict[str, Any]]:
    return list(s3.get_paginator(operation).paginate(**params))


def _keys(pages: list[dict[str, Any]]) -> list[str]:
    return [o["Key"] for p in pages for o in p.get("Contents", [])]


def _prefixes(pages: list[dict[str, Any]]) -> list[str]:
    return [c["Prefix"] for p in pages for c in p.get("CommonPrefixes", [])]


def test_v2_paginates_thousands_of_keys_in_order(s3: Any, repo: Repo) -> None:
    pages = _pages(s3, "list_objects_v2", Bucket=repo.name, Prefix="main/data/")
    expected = sorted([f"main/{k}" for k in KEYS] + ["main/data/late.csv"])
    assert _keys(pages) == expected
    assert [p["KeyCount"] for p in pages] == [1000, 1000, 101]
    assert [p["IsTruncated"] for p in pages] == [True, True, False]
    assert all(p["MaxKeys"] == 1000 for p in pages)
    # the token is opaque: not the last key
    token = pages[0]["NextContinuationToken"]
    assert token != pages[0]["Contents"][-1]["Key"] and "/" not in token
    small = _pages(
        s3,
        "list_objects_v2",
        Bucket=repo.name,
        Prefix="main/data/",
        PaginationConfig={"PageSize": 300},
    )
    assert _keys(small) == expected and len(small) == 8
    first = small[0]["Contents"][1]
    assert first["Key"] == f"main/{KEYS[0]}" and first["Size"] == len(KEYS[0])
    assert first["ETag"].startswith('"') and first["ETag"].endswith('"')
    assert first["StorageClass"] == "STANDARD"
    assert first["LastModified"].year >= 2024
    assert "Owner" not in first
    owned = s3.list_objects_v2(Bucket=repo.name, Prefix="main/data/", MaxKeys=1, FetchOwner=True)
    assert owned["Contents"][0]["Owner"]["ID"]


def test_v1_paginates_with_markers(s3: Any, repo: Repo) -> None:
    pages = _pages(
        s3, "list_objects", Bucket=repo.name, Prefix="v1/data/", PaginationConfig={"PageSize": 700}
    )
    assert _keys(pages) == sorted(f"v1/{k}" for k in KEYS)
    assert len(pages) == 3
    assert pages[1]["Marker"] == pages[0]["Contents"][-1]["Key"]
    assert "NextMarker" not in pages[0]  # S3 gives it only with a delimiter
    assert pages[0]["Contents"][0]["Owner"]["ID"]
    direct = s3.list_objects(
        Bucket=repo.name, Prefix="v1/data/", Marker="v1/data/p=20/part-0097.csv"
    )
    assert [o["Key"] for o in direct["Contents"]] == [
        "v1/data/p=20/part-0098.csv",
        "v1/data/p=20/part-0099.csv",
    ]
    assert direct["IsTruncated"] is False


def test_delimiters_fold_partitions_across_pages(s3: Any, repo: Repo) -> None:
    for operation in ("list_objects", "list_objects_v2"):
        pages = _pages(
            s3,
            operation,
            Bucket=repo.name,
            Prefix="main/data/",
            Delimiter="/",
            PaginationConfig={"PageSize": 4},
        )
        assert _prefixes(pages) == [f"main/data/p={p:02d}/" for p in range(PARTITIONS)]
        assert _keys(pages) == ["main/data/late.csv"]
        assert len(pages) == 6
    one = s3.list_objects(Bucket=repo.name, Prefix="main/data/", Delimiter="/", MaxKeys=2)
    assert one["NextMarker"] == "main/data/p=00/" and one["IsTruncated"] is True
    inner = s3.list_objects_v2(Bucket=repo.name, Prefix="main/data/p=03/part-000", Delimiter="/")
    assert [o["Key"] for o in inner["Contents"]] == [
        f"main/data/p=03/part-000{i}.csv" for i in range(10)
    ]
    top = s3.list_objects_v2(Bucket=repo.name, Prefix="main/", Delimiter="/")
    assert [c["Prefix"] for c in top["CommonPrefixes"]] == ["main/data/", "main/odd/"]
    assert top["KeyCount"] == 2 and "Contents" not in top


def test_start_after(s3: Any, repo: Repo) -> None:
    after = s3.list_objects_v2(
        Bucket=repo.name, Prefix="main/data/", StartAfter="main/data/p=20/part-0098.csv"
    )
    assert [o["Key"] for o in after["Contents"]] == ["main/data/p=20/part-0099.csv"]
    assert after["StartAfter"] == "main/data/p=20/part-0098.csv"
    pages = _pages(
        s3,
        "list_objects_v2",
        Bucket=repo.name,
        Prefix="main/data/",
        StartAfter="main/data/p=19/part-0099.csv",
        PaginationConfig={"PageSize": 30},
    )
    assert _keys(pages) == [f"main/data/p=20/part-{i:04d}.csv" for i in range(100)]
    # a start-after before the ref's keys lists them all, one after them lists none
    assert s3.list_objects_v2(Bucket=repo.name, Prefix="main/odd/", StartAfter="a")["KeyCount"] == 6
    assert s3.list_objects_v2(Bucket=repo.name, Prefix="main/odd/", StartAfter="z")["KeyCount"] == 0


def test_keys_that_need_encoding_round_trip(live: Live, s3: Any, repo: Repo) -> None:
    # botocore asks for encoding-type=url and decodes what comes back marked as encoded
    for operation in ("list_objects", "list_objects_v2"):
        pages = _pages(
            s3, operation, Bucket=repo.name, Prefix="main/odd/", PaginationConfig={"PageSize": 2}
        )
        assert _keys(pages) == [f"main/{k}" for k in ODD]
        assert all(p["EncodingType"] == "url" for p in pages)
        folded = s3.list_objects_v2(Bucket=repo.name, Prefix="main/odd/", Delimiter="/")
        assert [c["Prefix"] for c in folded["CommonPrefixes"]] == [
            "main/odd/dir with space/",
            "main/odd/ünïcødé/",
        ]
    marker = s3.list_objects(Bucket=repo.name, Prefix="main/odd/", Marker="main/odd/percent%41.txt")
    assert marker["Marker"] == "main/odd/percent%41.txt"
    assert [o["Key"] for o in marker["Contents"]] == [
        "main/odd/plus+sign.txt",
        "main/odd/with space.txt",
        "main/odd/ünïcødé/ファイル.txt",
    ]
    # every listed key reads back byte for byte
    for key in _keys(_pages(s3, "list_objects_v2", Bucket=repo.name, Prefix="main/odd/")):
        assert s3.get_object(Bucket=repo.name, Key=key)["Body"].read() == key[5:].encode()
    # on the wire: encoded keys (no raw space, "+" or "%" left as is) and EncodingType echoed
    raw: list[bytes] = []
    s3.meta.events.register(
        "after-call.s3.ListObjectsV2",
        lambda http_response, **_: raw.append(http_response.content),
    )
    s3.list_objects_v2(Bucket=repo.name, Prefix="main/odd/")
    body = raw[0].decode()
    assert "<EncodingType>url</EncodingType>" in body
    assert "<Key>main/odd/with+space.txt</Key>" in body
    assert "<Key>main/odd/plus%2Bsign.txt</Key>" in body
    assert "<Key>main/odd/percent%2541.txt</Key>" in body
    assert "ü" not in body


def test_the_bucket_root_lists_branches(s3: Any, repo: Repo) -> None:
    root = s3.list_objects_v2(Bucket=repo.name, Delimiter="/")
    assert [c["Prefix"] for c in root["CommonPrefixes"]] == [
        "dev/",
        "feature2/",
        "main-x/",
        "main/",
    ]
    assert "Contents" not in root
    some = s3.list_objects(Bucket=repo.name, Delimiter="/", Prefix="ma")
    assert [c["Prefix"] for c in some["CommonPrefixes"]] == ["main-x/", "main/"]
    paged = _pages(
        s3, "list_objects", Bucket=repo.name, Delimiter="/", PaginationConfig={"PageSize": 3}
    )
    assert _prefixes(paged) == ["dev/", "feature2/", "main-x/", "main/"] and len(paged) == 2


def test_listing_at_a_tag_and_a_commit(s3: Any, repo: Repo) -> None:
    for ref in ("v1", repo.first, "main~1"):
        pages = _pages(s3, "list_objects_v2", Bucket=repo.name, Prefix=f"{ref}/data/p=00/")
        assert _keys(pages) == [f"{ref}/data/p=00/part-{i:04d}.csv" for i in range(100)]
        late = s3.list_objects_v2(Bucket=repo.name, Prefix=f"{ref}/data/late")
        assert late["KeyCount"] == 0
    at_head = s3.list_objects_v2(Bucket=repo.name, Prefix=f"{repo.second}/data/late")
    assert [o["Key"] for o in at_head["Contents"]] == [f"{repo.second}/data/late.csv"]
    assert s3.list_objects_v2(Bucket=repo.name, Prefix="nosuchref/")["KeyCount"] == 0


def test_unknown_buckets_and_bad_tokens_answer_s3_errors(s3: Any, repo: Repo) -> None:
    with pytest.raises(ClientError) as missing:
        s3.list_objects_v2(Bucket="no-such-repository", Prefix="main/")
    assert missing.value.response["Error"]["Code"] == "NoSuchBucket"
    with pytest.raises(ClientError) as token:
        s3.list_objects_v2(Bucket=repo.name, Prefix="main/", ContinuationToken="bogus")
    assert token.value.response["Error"]["Code"] == "InvalidArgument"
    assert token.value.response["ResponseMetadata"]["HTTPStatusCode"] == 400


def test_an_empty_continuation_token_lists_from_the_start(live: Live, s3: Any, repo: Repo) -> None:
    listed = s3.list_objects_v2(Bucket=repo.name, Prefix="main/odd/", ContinuationToken="")
    assert [o["Key"] for o in listed["Contents"]] == [f"main/{k}" for k in ODD]
    assert listed["ContinuationToken"] == ""
    # the raw answer echoes the empty token as S3 does (boto3 reads an absent one as "" too)
    signed = live.s3(signature_version="s3v4")
    url = signed.generate_presigned_url(
        "list_objects_v2",
        Params={"Bucket": repo.name, "Prefix": "main/odd/", "ContinuationToken": "", "MaxKeys": 2},
        ExpiresIn=300,
    )
    assert "continuation-token=&" in url or url.endswith("continuation-token=")
    raw = httpx.get(url)
    assert raw.status_code == 200, raw.text
    assert "<ContinuationToken></ContinuationToken>" in raw.text
    assert "<KeyCount>2</KeyCount>" in raw.text
    root = ET.fromstring(raw.content)
    ns = "{http://s3.amazonaws.com/doc/2006-03-01/}"
    keys = [unquote_plus(k.text or "") for k in root.iter(f"{ns}Key")]
    assert keys == [f"main/{k}" for k in ODD[:2]]
    token = root.findtext(f"{ns}NextContinuationToken")
    assert token
    # with start-after, an empty token resumes after it
    after = s3.list_objects_v2(
        Bucket=repo.name, Prefix="main/odd/", ContinuationToken="", StartAfter=f"main/{ODD[2]}"
    )
    assert [o["Key"] for o in after["Contents"]] == [f"main/{k}" for k in ODD[3:]]
