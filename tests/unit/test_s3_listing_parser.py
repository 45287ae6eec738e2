"""The dedicated ListObjectsV2 parser gives exactly botocore's result on the same bodies."""

from __future__ import annotations

import copy
from typing import Any
from urllib.parse import quote
from xml.sax.saxutils import escape

import boto3
import botocore.session
import pytest
from botocore.awsrequest import AWSResponse
from botocore.compat import unquote_str
from botocore.exceptions import ClientError
from botocore.parsers import ResponseParserError, RestXMLParser

from mirror.block.s3 import (
    S3Settings,
    client_config,
    make_s3_client,
    parse_timestamp,
    use_fast_timestamps,
)
from mirror.block.s3_async import AsyncFastListingParserFactory
from mirror.block.s3_listing import (
    FastListingParser,
    FastListingParserFactory,
    check_200_error_once,
    compile_walker,
    key_list,
    listed_keys,
    parse_listings_once,
    use_fast_listing,
)

NS = "http://s3.amazonaws.com/doc/2006-03-01/"
TRICKY = [
    "a&b",
    "less<than>",
    "quote\"and'apos",
    "sp ace",
    "plus+sign",
    "per%20cent",
    "ünïcödé/日本/🙂",
    "tab\there",
    "trailing ",
    "a/b/c.parquet",
]


def _obj(key: str, i: int, *, owner: bool, storage: bool, extra: str = "") -> str:
    parts = [
        f"<Key>{escape(key)}</Key>",
        f"<LastModified>2026-11-{1 + i % 28:02d}T10:11:{i % 60:02d}.{i % 1000:03d}Z</LastModified>",
        f"<ETag>&quot;{i:032x}&quot;</ETag>",
        f"<Size>{i * 7}</Size>",
    ]
    if storage:
        parts.append("<StorageClass>STANDARD</StorageClass>")
    if owner:
        parts.append("<Owner><ID>abc123</ID><DisplayName>me &amp; you</DisplayName></Owner>")
    return "<Contents>" + "".join(parts) + extra + "</Contents>"


def _body(
    contents: list[str],
    *,
    prefixes: tuple[str, ...] = (),
    truncated: bool = False,
    token: str | None = None,
    encoding: str | None = None,
    delimiter: str | None = None,
    namespace: bool = True,
    prefix: str = "",
) -> bytes:
    head = f'<ListBucketResult xmlns="{NS}">' if namespace else "<ListBucketResult>"
    parts = [
        '<?xml version="1.0" encoding="UTF-8"?>',
        head,
        "<Name>bucket</Name>",
        f"<Prefix>{escape(prefix)}</Prefix>" if prefix else "<Prefix/>",
        f"<KeyCount>{len(contents) + len(prefixes)}</KeyCount>",
        "<MaxKeys>1000</MaxKeys>",
        f"<IsTruncated>{'true' if truncated else 'false'}</IsTruncated>",
    ]
    if delimiter is not None:
        parts.append(f"<Delimiter>{escape(delimiter)}</Delimiter>")
    if encoding is not None:
        parts.append(f"<EncodingType>{encoding}</EncodingType>")
    if token is not None:
        parts.append("<ContinuationToken>previous/token==</ContinuationToken>")
        parts.append(f"<NextContinuationToken>{escape(token)}</NextContinuationToken>")
    parts.extend(contents)
    parts.extend(f"<CommonPrefixes><Prefix>{escape(p)}</Prefix></CommonPrefixes>" for p in prefixes)
    parts.append("</ListBucketResult>")
    return "\n  ".join(parts).encode()


def _quote(key: str) -> str:
    return quote(key, safe="/")


BODIES: dict[str, bytes] = {
    "tricky keys, owner and storage class": _body(
        [_obj(k, i, owner=True, storage=True) for i, k in enumerate(TRICKY)]
    ),
    "no owner, no storage class, no namespace": _body(
        [_obj(k, i, owner=False, storage=False) for i, k in enumerate(TRICKY)], namespace=False
    ),
    "url-encoded answer": _body(
        [_obj(_quote(k), i, owner=False, storage=True) for i, k in enumerate(TRICKY)],
        encoding="url",
        prefix=_quote("ünï/"),
    ),
    "delimiter and common prefixes": _body(
        [_obj("top&file", 1, owner=False, storage=True)],
        prefixes=("dir one/", "dir&two/", "ü/"),
        delimiter="/",
    ),
    "empty page": _body([]),
    "truncated with token": _body(
        [_obj(f"k/{i:04d}", i, owner=False, storage=True) for i in range(1000)],
        truncated=True,
        token="1ueGcxLPRx1Tr/XYExHnhbYLgveDs2J/wm36Hy4vbOwM=<&>",
    ),
    "checksums, restore status, unknown elements, CDATA": _body(
        [
            _obj(
                "cs",
                3,
                owner=True,
                storage=True,
                extra="<ChecksumAlgorithm>CRC32</ChecksumAlgorithm>"
                "<ChecksumAlgorithm>SHA256</ChecksumAlgorithm><ChecksumType>FULL_OBJECT</ChecksumType>"
                "<RestoreStatus><IsRestoreInProgress>true</IsRestoreInProgress>"
                "<RestoreExpiryDate>2026-12-01T00:00:00.000Z</RestoreExpiryDate></RestoreStatus>"
                "<Unknown><Key>not-a-key</Key></Unknown>",
            ),
            "<Contents><Key><![CDATA[cdata <&> key]]></Key><Size>0</Size>"
            '<ETag>"e"</ETag><LastModified>2026-01-01T00:00:00+00:00</LastModified></Contents>',
            "<Contents><Key></Key><Size>1</Size><ETag/></Contents>",
        ]
    ),
    "CRLF and entities in keys": b"<ListBucketResult><Contents><Key>a\r\nb&#13;&#x1F600;&amp;"
    b"</Key><Size>5</Size></Contents><IsTruncated>true</IsTruncated></ListBucketResult>",
    "empty body": b"",
}

REPEATED = (
    b"<ListBucketResult><Contents><Key>a</Key><Size>1</Size><Size>2</Size></Contents>"
    b"<IsTruncated>false</IsTruncated></ListBucketResult>"
)

HEADERS = {
    "x-amz-request-id": "REQ123",
    "x-amz-id-2": "host-id",
    "x-amz-request-charged": "requester",
    "content-type": "application/xml",
}


def _shape() -> Any:
    model = botocore.session.get_session().get_service_model("s3")
    return model.operation_model("ListObjectsV2").output_shape


def _response(body: bytes, status: int = 200) -> dict[str, Any]:
    return {"body": body, "headers": dict(HEADERS), "status_code": status, "context": {}}


@pytest.mark.parametrize("name", sorted(BODIES))
def test_fast_parser_equals_botocore(name: str) -> None:
    shape = _shape()
    body = BODIES[name]
    expected = RestXMLParser(timestamp_parser=parse_timestamp).parse(_response(body), shape)
    fast = FastListingParser(timestamp_parser=parse_timestamp).parse(_response(body), shape)
    assert fast == expected
    assert {k: type(v) for k, v in fast.items()} == {k: type(v) for k, v in expected.items()}
    for ours, theirs in zip(fast.get("Contents", []), expected.get("Contents", []), strict=True):
        assert {k: type(v) for k, v in ours.items()} == {k: type(v) for k, v in theirs.items()}


def test_compiled_walk_is_used_and_yields_the_expected_values() -> None:
    shape = _shape()
    walker = compile_walker(shape)
    assert walker is not None
    parser = FastListingParser(timestamp_parser=parse_timestamp)
    root = parser._initial_body_parse(BODIES["delimiter and common prefixes"])
    walked = walker.walk(root, parse_timestamp)
    assert walked is not None
    assert walked["CommonPrefixes"] == [
        {"Prefix": "dir one/"},
        {"Prefix": "dir&two/"},
        {"Prefix": "ü/"},
    ]
    assert walked["Contents"][0]["Key"] == "top&file"
    assert walked["Contents"][0]["ETag"] == '"00000000000000000000000000000001"'
    assert walked["IsTruncated"] is False and walked["KeyCount"] == 4
    repeated = parser._initial_body_parse(REPEATED)
    assert walker.walk(repeated, parse_timestamp) is None
    # ...so botocore's walker decides, and fails the same way.
    with pytest.raises(TypeError):
        RestXMLParser().parse(_response(REPEATED), shape)
    with pytest.raises(TypeError):
        parser.parse(_response(REPEATED), shape)
    # Other shapes keep botocore's walker.
    model = botocore.session.get_session().get_service_model("s3")
    assert compile_walker(model.operation_model("ListObjects").output_shape) is None
    assert compile_walker(model.operation_model("HeadObject").output_shape) is None


def test_errors_still_go_through_botocore() -> None:
    shape = _shape()
    error = (
        b'<?xml version="1.0" encoding="UTF-8"?><Error><Code>NoSuchBucket</Code>'
        b"<Message>The specified bucket does not exist</Message><BucketName>b</BucketName>"
        b"<RequestId>R1</RequestId></Error>"
    )
    expected = RestXMLParser().parse(_response(error, 404), shape)
    fast = FastListingParser().parse(_response(error, 404), shape)
    assert fast == expected and fast["Error"]["Code"] == "NoSuchBucket"
    with pytest.raises(ResponseParserError) as plain:
        RestXMLParser().parse(_response(b"<ListBucketResult><Key>"), shape)
    with pytest.raises(ResponseParserError) as ours:
        FastListingParser().parse(_response(b"<ListBucketResult><Key>"), shape)
    assert str(ours.value) == str(plain.value)


def test_factories_hand_out_the_fast_parser_only_for_rest_xml() -> None:
    factory = FastListingParserFactory()
    factory.set_parser_defaults(timestamp_parser=parse_timestamp)
    assert isinstance(factory.create_parser("rest-xml"), FastListingParser)
    assert not isinstance(factory.create_parser("json"), FastListingParser)
    aio = AsyncFastListingParserFactory()
    assert type(aio.create_parser("rest-xml")).__name__ == "AsyncFastListingParser"
    # A plain session keeps botocore's parser: the change is scoped to our clients.
    plain = botocore.session.get_session().get_component("response_parser_factory")
    assert not isinstance(plain.create_parser("rest-xml"), FastListingParser)


def _canned(client: Any, bodies: list[tuple[int, bytes]], seen: list[str]) -> None:
    """Answer the client's requests with ``bodies`` through botocore's ``before-send`` hook."""

    def answer(request: Any, **_: Any) -> AWSResponse:
        seen.append(request.url)
        status, body = bodies.pop(0)

        class Raw:
            def stream(self, **_: Any) -> Any:
                yield body

        return AWSResponse(request.url, status, dict(HEADERS), Raw())

    client.meta.events.register("before-send.s3.ListObjectsV2", answer)


@pytest.mark.parametrize("name", sorted(set(BODIES) - {"empty body"}))
def test_whole_client_path_equals_plain_boto3(name: str) -> None:
    """Signing, the url-decoding handler and metadata: our client equals a plain boto3 one."""
    options: dict[str, Any] = {
        "region_name": "us-east-1",
        "aws_access_key_id": "AKIAEXAMPLE",
        "aws_secret_access_key": "secret",
    }
    plain_session = boto3.session.Session(
        botocore_session=use_fast_timestamps(botocore.session.get_session()), **options
    )
    settings = S3Settings(
        endpoint_url="http://127.0.0.1:9",
        region="us-east-1",
        access_key_id="AKIAEXAMPLE",
        secret_access_key="secret",
        max_attempts=1,
    )
    plain = plain_session.client(
        "s3", endpoint_url=settings.endpoint_url, config=client_config(settings)
    )
    ours = make_s3_client(settings)
    results = []
    for client in (plain, ours):
        urls: list[str] = []
        _canned(client, [(200, BODIES[name])], urls)
        result = client.list_objects_v2(Bucket="bucket", Prefix="p")
        result["ResponseMetadata"].pop("HTTPHeaders", None)
        results.append((copy.deepcopy(result), urls))
    assert results[0] == results[1]
    assert "encoding-type=url" in results[1][1][0]


def test_client_errors_unchanged() -> None:
    ours = make_s3_client(
        S3Settings(
            endpoint_url="http://127.0.0.1:9",
            region="us-east-1",
            access_key_id="AKIAEXAMPLE",
            secret_access_key="secret",
            max_attempts=1,
        )
    )
    error = b"<Error><Code>AccessDenied</Code><Message>Access Denied</Message></Error>"
    _canned(ours, [(403, error)], [])
    with pytest.raises(ClientError) as raised:
        ours.list_objects_v2(Bucket="bucket")
    assert raised.value.response["Error"] == {"Code": "AccessDenied", "Message": "Access Denied"}


RETRYING = S3Settings(
    endpoint_url="http://127.0.0.1:9",
    region="us-east-1",
    access_key_id="AKIAEXAMPLE",
    secret_access_key="secret",
    max_attempts=2,
)


def _boto3_client(botocore_session: Any) -> Any:
    return boto3.session.Session(
        aws_access_key_id="AKIAEXAMPLE",
        aws_secret_access_key="secret",
        region_name="us-east-1",
        botocore_session=botocore_session,
    ).client("s3", endpoint_url=RETRYING.endpoint_url, config=client_config(RETRYING))


def _client_pair() -> tuple[Any, Any]:
    plain = _boto3_client(use_fast_timestamps(botocore.session.get_session()))
    return plain, make_s3_client(RETRYING)


@pytest.mark.parametrize(
    "first",
    [
        b"<Error><Code>InternalError</Code><Message>inside a 200</Message></Error>",
        BODIES["tricky keys, owner and storage class"][:-40],  # cut by the network
    ],
    ids=["error inside 200", "truncated body"],
)
def test_200_errors_are_retried_as_by_botocore(first: bytes) -> None:
    """botocore's check of 200 answers still runs: a retry, then the same page as plain boto3."""
    results = []
    for client in _client_pair():
        urls: list[str] = []
        _canned(client, [(200, first), (200, BODIES["url-encoded answer"])], urls)
        result = client.list_objects_v2(Bucket="bucket")
        result["ResponseMetadata"].pop("HTTPHeaders", None)
        results.append((result, len(urls)))
    assert results[0] == results[1]
    assert results[1][1] == 2 and results[1][0]["ResponseMetadata"]["RetryAttempts"] == 1


def test_200_error_twice_raises_as_botocore() -> None:
    error = b"<Error><Code>SlowDown</Code><Message>Reduce your rate</Message></Error>"
    raised = []
    for client in _client_pair():
        _canned(client, [(200, error), (200, error)], [])
        with pytest.raises(ClientError) as caught:
            client.list_objects_v2(Bucket="bucket")
        caught.value.response["ResponseMetadata"].pop("HTTPHeaders", None)
        raised.append(caught.value.response)
    assert raised[0] == raised[1] and raised[1]["Error"]["Code"] == "SlowDown"


def test_checked_tree_is_handed_to_the_parser() -> None:
    model = botocore.session.get_session().get_service_model("s3")
    operation = model.operation_model("ListObjectsV2")
    response = _response(BODIES["delimiter and common prefixes"])
    check_200_error_once(operation, response)
    assert response["status_code"] == 200 and "lakemirror_listing_root" in response
    parsed = FastListingParser(timestamp_parser=parse_timestamp).parse(
        response, operation.output_shape
    )
    assert "lakemirror_listing_root" not in response
    assert parsed["CommonPrefixes"][1] == {"Prefix": "dir&two/"}
    other = _response(b"<Error><Code>X</Code></Error>")
    check_200_error_once(model.operation_model("GetBucketTagging"), other)
    assert other["status_code"] == 500 and "lakemirror_listing_root" not in other


FAST_PATH = {
    "tricky keys, owner and storage class",
    "no owner, no storage class, no namespace",
    "url-encoded answer",
    "delimiter and common prefixes",
    "empty page",
    "truncated with token",
}


def _keys_only(parsed: dict[str, Any]) -> dict[str, Any]:
    projected = dict(parsed)
    if "Contents" in parsed:
        projected["Contents"] = [
            {name: o[name] for name in ("Key", "Size", "ETag") if name in o}
            for o in parsed["Contents"]
        ]
    return projected


@pytest.mark.parametrize("name", sorted(BODIES))
def test_key_lists_equal_botocore_for_keys_sizes_and_etags(name: str) -> None:
    """Read by the expression or, where it cannot vouch, by the walker: botocore's values."""
    shape = _shape()
    body = BODIES[name]
    assert (key_list(body) is not None) == (name in FAST_PATH)
    expected = RestXMLParser(timestamp_parser=parse_timestamp).parse(_response(body), shape)
    operation = (
        botocore.session.get_session().get_service_model("s3").operation_model("ListObjectsV2")
    )
    response = _response(body)
    check_200_error_once(operation, response, keys_only=True)
    if response["status_code"] != 200:
        assert name == "empty body"
        return
    parsed = FastListingParser(timestamp_parser=parse_timestamp).parse(response, shape)
    assert _keys_only(parsed) == _keys_only(expected)
    if name in FAST_PATH and expected.get("Contents"):
        assert set(parsed["Contents"][0]) == {"Key", "Size", "ETag"}


@pytest.mark.parametrize(
    "contents",
    [
        # Size before ETag, whitespace inside, an unknown entity, a non-UTF-8 prolog, a key that
        # is no text, a size past 19 digits
        "<Contents><Key>a</Key><Size>1</Size><ETag>e</ETag></Contents>",
        "<Contents>\n <Key>a</Key>\n <ETag>e</ETag>\n <Size>1</Size>\n</Contents>",
        "<Contents><Key>a&nbsp;</Key><ETag>e</ETag><Size>1</Size></Contents>",
        "<Contents><Key>a&#1114112;</Key><ETag>e</ETag><Size>1</Size></Contents>",
        "<Contents><Key>a</Key><ETag>e</ETag><Size>12345678901234567890</Size></Contents>",
    ],
)
def test_what_the_expression_does_not_read_exactly_goes_to_the_walker(contents: str) -> None:
    body = _body([contents])
    listed = key_list(body)
    if listed is None:
        return
    # whitespace the expression allows: it must read what the XML parser reads
    expected = RestXMLParser(timestamp_parser=parse_timestamp).parse(_response(body), _shape())
    assert _keys_only({"Contents": listed[0]})["Contents"] == _keys_only(expected)["Contents"]


def test_key_lists_keep_botocore_checks_on_the_rest_of_the_body() -> None:
    operation = (
        botocore.session.get_session().get_service_model("s3").operation_model("ListObjectsV2")
    )
    body = BODIES["truncated with token"]
    for cut in (body[:-30], body[: len(body) // 2], body[: body.rfind(b"</Contents>")]):
        response = _response(cut)
        check_200_error_once(operation, response, keys_only=True)
        assert response["status_code"] == 500
    error = _response(b"<Error><Code>InternalError</Code><Message>x</Message></Error>")
    check_200_error_once(operation, error, keys_only=True)
    assert error["status_code"] == 500


@pytest.mark.parametrize("seed", range(20))
def test_key_lists_of_random_keys_equal_botocore(seed: int) -> None:
    import random

    rng = random.Random(seed)
    alphabet = "ab/_-. &<>\"'%+~*日🙂\t"
    keys = sorted(
        {"".join(rng.choice(alphabet) for _ in range(rng.randint(1, 12))) for _ in range(50)}
    )
    encode = rng.random() < 0.5
    body = _body(
        [
            _obj(_quote(k) if encode else k, i, owner=False, storage=True)
            for i, k in enumerate(keys)
        ],
        encoding="url" if encode else None,
    )
    listed = key_list(body)
    assert listed is not None
    expected = RestXMLParser(timestamp_parser=parse_timestamp).parse(_response(body), _shape())
    assert _keys_only({"Contents": listed[0]})["Contents"] == _keys_only(expected)["Contents"]
    # read as columns by a caller that asked for the encoding: the keys as they were written
    page: dict[str, Any] = {"Contents": listed[0]}
    if encode:
        page["EncodingType"] = "url"
    assert listed_keys(page) == (keys, [i * 7 for i in range(len(keys))])
    assert listed_keys(page, cut=1) == ([k[1:] for k in keys], [i * 7 for i in range(len(keys))])


@pytest.mark.parametrize("name", sorted(FAST_PATH))
def test_a_key_listing_client_equals_plain_boto3_on_keys_sizes_and_etags(name: str) -> None:
    """Signing, retries and the url-decoding handler run as for any client."""
    plain, _ = _client_pair()
    ours = _boto3_client(use_fast_listing(use_fast_timestamps(botocore.session.get_session())))
    parse_listings_once(ours.meta.events, keys_only=True)
    results = []
    for client in (plain, ours):
        urls: list[str] = []
        cut = BODIES[name][:-20]  # the first answer is cut by the network: retried
        _canned(client, [(200, cut), (200, BODIES[name])], urls)
        result = client.list_objects_v2(Bucket="bucket", Prefix="p")
        result["ResponseMetadata"].pop("HTTPHeaders", None)
        results.append((_keys_only(result), urls))
    assert results[0] == results[1]


def test_key_columns_are_entries_botocore_can_change_and_columns_read_after() -> None:
    listed = key_list(BODIES["url-encoded answer"])
    assert listed is not None
    columns = listed[0]
    keys, sizes = columns.keys_and_sizes()
    assert keys == [_quote(k) for k in TRICKY]
    assert sizes == [i * 7 for i in range(len(TRICKY))]
    assert len(columns) == len(TRICKY)
    assert columns[1] == {"Key": _quote(TRICKY[1]), "Size": 7, "ETag": f'"{1:032x}"'}
    # botocore's url-decoding handler changes the entries in place: the columns follow
    for entry in columns:
        entry["Key"] = unquote_str(entry["Key"])
    assert columns.keys_and_sizes() == (TRICKY, sizes)
    assert [entry["Key"] for entry in columns] == TRICKY
    assert listed_keys({"Contents": [dict(e) for e in columns]}) == (TRICKY, sizes)
    assert listed_keys({}) == ([], [])


@pytest.mark.parametrize(
    ("etag", "read"),
    [
        ("&quot;abc&quot;", '"abc"'),
        ("abc", "abc"),
        ("a&amp;b&#x41;", "a&bA"),
        ("caf\u00e9", "caf\u00e9"),
        ("a&nbsp;", None),
        ("a&#0;", None),
    ],
)
def test_key_list_etags_read_as_xml_reads_them(etag: str, read: str | None) -> None:
    """ETags are decoded when an entry is built; what XML would not read goes to the walker."""
    body = _body(
        [
            f"<Contents><Key>k{i}</Key><ETag>{etag}</ETag><Size>{i}</Size></Contents>"
            for i in range(3)
        ]
    )
    listed = key_list(body)
    if read is None:
        assert listed is None
        return
    assert listed is not None
    assert [entry["ETag"] for entry in listed[0]] == [read] * 3
    expected = RestXMLParser(timestamp_parser=parse_timestamp).parse(_response(body), _shape())
    assert [o["ETag"] for o in expected["Contents"]] == [read] * 3


def test_key_list_cuts_out_contents_wherever_they_stand() -> None:
    """S3 writes its ``<Contents>`` in one run; a body that does not is read the same."""
    one = _obj("a", 1, owner=False, storage=False)
    two = _obj("b", 2, owner=False, storage=False)
    together = _body([one, two], prefixes=("p/",))
    apart = together.replace(two.encode(), b"").replace(
        b"</ListBucketResult>", two.encode() + b"</ListBucketResult>"
    )
    assert apart != together
    for body in (together, apart):
        listed = key_list(body)
        assert listed is not None
        assert listed[0].keys_and_sizes() == (["a", "b"], [7, 14])
        assert b"<Contents>" not in listed[1] and b"<CommonPrefixes>" in listed[1]
