"""Every input the fuzzing found crashing or hanging a parser, with the refusal it now gets.

Inputs the fuzzers wrote are kept as they were found, in the corpus as ``bad-found-*`` files;
the others are the smallest input showing the same fault. Each test names the fault it guards.
"""

from __future__ import annotations

import datetime
import time
from urllib.parse import quote, urlencode

import httpx
import pytest
from botocore.auth import S3SigV4QueryAuth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials

from mirror.actions.glob import path_match
from mirror.actions.model import ActionFileError, ActionHook, parse_action
from mirror.actions.webhook import call_hook
from mirror.core.errors import InvalidRefError
from mirror.core.protection import InvalidPatternError, compile_pattern
from mirror.core.refexpr import parse_ref
from mirror.gateway.errors import S3Code, S3Error
from mirror.gateway.multipart import _limit, _part_number
from mirror.gateway.sig.canonical import parse_http_date
from mirror.httputil.streams import parse_range
from mirror.imports.links import LinkAddressInvalidError, LinkSigner
from tests.fuzz.harness import FUZZ_NOW, load, seeds
from tests.fuzz.seeds import _frozen_clock
from tests.fuzz.targets import (
    action_file,
    aws_chunked,
    complete_multipart,
    range_header,
    ref_expr,
    sigv2,
    sigv4,
)
from tests.fuzz.targets.http_input import render
from tests.fuzz.targets.s3_request import s3_request
from tests.fuzz.targets.signed import KEY_ID, REGION, SECRET

FOUND = [
    # hmac.compare_digest refused a signature with a non-ASCII character: TypeError (500)
    ("sigv4", "bad-found-header-signature-not-ascii", "S3Error:SignatureDoesNotMatch"),
    ("sigv4", "bad-found-presigned-signature-not-ascii", "S3Error:SignatureDoesNotMatch"),
    # a Date past year 9999, or minutes or days overflowing it: ValueError, OverflowError (500)
    ("sigv2", "bad-found-date-year-22024", "S3Error:AccessDenied"),
    ("sigv2", "bad-found-date-minutes-overflow", "S3Error:AccessDenied"),
    ("sigv2", "bad-found-date-day-overflow", "S3Error:AccessDenied"),
    # PyYAML's int constructor indexed the empty scalar of "!!int :": IndexError
    ("action_file", "bad-found-empty-int-key", "ActionFileError"),
]


@pytest.mark.parametrize(("target", "name", "refusal"), FOUND)
def test_inputs_found_by_the_fuzzers(target: str, name: str, refusal: str) -> None:
    data = dict(seeds(target))[name]
    assert load(target).check(data) == refusal


def _signature_replaced(seed: str, value: str) -> bytes:
    data = dict(seeds("sigv4"))[seed]
    head, sep, rest = data.partition(b"Signature=")
    return head + sep + value.encode() + rest[64:]


def test_a_v4_signature_with_any_character_does_not_match() -> None:
    assert sigv4.check(_signature_replaced("ok-get-object", "é" * 64)) == (
        "S3Error:SignatureDoesNotMatch"
    )


def test_a_v2_signature_with_any_character_does_not_match() -> None:
    data = dict(seeds("sigv2"))["ok-get-object"]
    head, sep, rest = data.partition(f"AWS {KEY_ID}:".encode())
    forged = head + sep + "é".encode() + rest[28:]
    assert sigv2.check(forged) == "S3Error:SignatureDoesNotMatch"


class _StatedPayload(S3SigV4QueryAuth):
    """Presign with the payload hash the URL states, as the gateway (and minio, lakeFS) read it."""

    def payload(self, request: AWSRequest) -> str:
        return "é" * 64


def test_a_presigned_content_sha256_of_any_character_does_not_match_the_body() -> None:
    # signed, so the request verifies; the body is then compared with a digest of "é"s
    url = "http://127.0.0.1:8000/repo/main/up.bin?" + urlencode(
        {"X-Amz-Content-Sha256": "é" * 64}, quote_via=quote
    )
    request = AWSRequest(method="PUT", url=url)
    with _frozen_clock(FUZZ_NOW):
        _StatedPayload(Credentials(KEY_ID, SECRET), "s3", REGION, expires=60).add_auth(request)
    target = request.prepare().url.removeprefix("http://127.0.0.1:8000")
    data = render("PUT", target, [("Host", "127.0.0.1:8000"), ("Content-Length", "4")], b"body")
    assert sigv4.check(data) == "S3Error:XAmzContentSHA256Mismatch"


@pytest.mark.parametrize(
    ("line", "trailer"),
    [
        (b"4;chunk-signature=" + "é".encode() * 32, None),
        (None, "x-amz-trailer-signature:" + "é" * 64),
    ],
)
def test_chunk_and_trailer_signatures_of_any_character_do_not_match(
    line: bytes | None, trailer: str | None
) -> None:
    if line is not None:
        body = line + b"\r\ndata\r\n0;chunk-signature=" + b"0" * 64 + b"\r\n\r\n"
        payload_hash, announced = "STREAMING-AWS4-HMAC-SHA256-PAYLOAD", None
    else:
        payload_hash = "STREAMING-AWS4-HMAC-SHA256-PAYLOAD-TRAILER"
        announced = "x-amz-checksum-crc32"
        framed = aws_chunked.encode(b"data", payload_hash, [4], announced)
        assert trailer is not None
        body = framed.rpartition(b"x-amz-trailer-signature:")[0] + trailer.encode() + b"\r\n\r\n"
    with pytest.raises(S3Error) as caught:
        aws_chunked.decode(payload_hash, announced, body, 7)
    assert caught.value.code is S3Code.SIGNATURE_DOES_NOT_MATCH


@pytest.mark.parametrize(
    "value",
    [
        "Wed, 01 May 22024 12:00:00 GMT",
        "Wed, 01 May 2024 12:4444444444444444444444400:00 GMT",
        "Wed, 099999999999999999999999999999999999999991 May 2024 12:00:00 GMT",
        "Wed, 01 May 2024 12:00:00 +9999999999999999",
    ],
)
def test_dates_out_of_range_are_invalid(value: str) -> None:
    with pytest.raises(S3Error) as caught:
        parse_http_date(value)
    assert caught.value.code is S3Code.ACCESS_DENIED
    assert "invalid date" in caught.value.message


def test_a_link_address_signature_with_any_character_is_invalid() -> None:
    # the same hmac.compare_digest TypeError, in the staging API's signed addresses (found by
    # looking for the fault the signature targets found wherever a signature is compared)
    signer = LinkSigner(b"k" * 32)
    signed = signer.sign("repo", "main", "p", "data/g0123")
    with pytest.raises(LinkAddressInvalidError, match="was not issued"):
        signer.verify("repo", "main", "p", signed[:-2] + "é")


def test_a_ref_that_is_not_utf8_is_invalid() -> None:
    # the fuzzer's input: "mani\xe5x", read with surrogateescape, reached the KV key's encoding
    assert ref_expr.check(b"mani\xe5x") == "InvalidRefError"
    with pytest.raises(InvalidRefError, match="not valid UTF-8"):
        parse_ref("main\udce5~1")


@pytest.mark.parametrize("number", ["²", "①", "٣", "1" * 5000, "1" * 19])
def test_part_numbers_that_are_not_ascii_digits_are_malformed(number: str) -> None:
    body = (
        f"<CompleteMultipartUpload><Part><PartNumber>{number}</PartNumber>"
        f"<ETag>{complete_multipart.PARTS[1].md5}</ETag></Part></CompleteMultipartUpload>"
    ).encode()
    assert complete_multipart.check(body) == "S3Error:MalformedXML"


@pytest.mark.parametrize("number", ["²", "1" * 5000])
def test_part_numbers_and_limits_in_queries_that_are_not_ascii_digits(number: str) -> None:
    value = quote(number)
    upload = s3_request("PUT", f"/repo/main/x?partNumber={value}&uploadId=u", b"", key="main/x")
    with pytest.raises(S3Error) as caught:
        _part_number(upload, "x")
    assert caught.value.code is S3Code.INVALID_ARGUMENT
    listing = s3_request("GET", f"/repo/main/x?uploadId=u&max-parts={value}", b"", key="main/x")
    with pytest.raises(S3Error) as caught:
        _limit(listing, "max-parts")
    assert caught.value.code is S3Code.INVALID_ARGUMENT


@pytest.mark.parametrize(
    ("header", "expected"),
    [
        # int() refuses more than 4,300 digits: ValueError (500) on every GetObject path
        ("bytes=" + "1" * 5000 + "-", "InvalidRangeError"),
        ("bytes=0-" + "1" * 5000, None),
        ("bytes=-" + "9" * 5000, None),
    ],
)
def test_range_numbers_longer_than_int_reads(header: str, expected: str | None) -> None:
    assert range_header.check(range_header.frame(1000, header)) == expected


def test_range_digits_are_ascii() -> None:
    # \d took "٣" (Arabic-Indic three) as 3; RFC 9110's DIGIT is ASCII: the whole object
    assert parse_range("bytes=\u0663-", 10) is None


def test_deeply_nested_braces_are_an_invalid_pattern() -> None:
    # the parser recursed once per "{": RecursionError
    with pytest.raises(InvalidPatternError, match="nested more than 32 deep"):
        compile_pattern("{" * 2000)
    with pytest.raises(InvalidPatternError, match="more than 256 patterns"):
        compile_pattern("{a,b}" * 9)
    assert compile_pattern("{" * 32 + "}" * 32).fullmatch("")


STARS = [
    "?*?*?*?*c",
    "*?*?*?*?*?*?*?*?*?*?*?*?x",
    "*a*a*a*a*a*a*a*a*b",
    "{a,b*}{a,b*}{a,b*}{a,b*}{a,b*}-x",
]
LONG_NAMES = ["a-" * 200, "a" * 300 + "b", "ab" * 150 + "-"]


@pytest.mark.parametrize("pattern", STARS)
def test_many_stars_against_long_names_end(pattern: str) -> None:
    # backtracking over the stars took seconds for 400 characters, and doubled with each one
    # more; before, this test did not end
    matcher = compile_pattern(pattern)
    expected = {"*a*a*a*a*a*a*a*a*b": [False, True, False]}.get(pattern, [False] * 3)
    assert [bool(matcher.fullmatch(n)) for n in LONG_NAMES] == expected
    if "{" not in pattern:
        assert [path_match(pattern, n) for n in LONG_NAMES] == expected


BOMB = b"""name: bomb
on: {pre-commit: }
hooks:
  - id: h1
    type: webhook
    properties: {url: "http://h/x"}
a: &a [x, x, x, x, x, x, x, x, x, x]
b: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a, *a]
c: &c [*b, *b, *b, *b, *b, *b, *b, *b, *b, *b]
d: &d [*c, *c, *c, *c, *c, *c, *c, *c, *c, *c]
e: &e [*d, *d, *d, *d, *d, *d, *d, *d, *d, *d]
f: &f [*e, *e, *e, *e, *e, *e, *e, *e, *e, *e]
g: &g [*f, *f, *f, *f, *f, *f, *f, *f, *f, *f]
description: *g
"""


@pytest.mark.parametrize(
    ("data", "why"),
    [
        # PyYAML's constructors raise ValueError for these
        (b"name: 2001-13-01\n", "month must be in 1..12"),
        (b"name: !!int x\n", "invalid literal"),
        # and IndexError, KeyError, AttributeError for an empty !!int, !!bool, !!timestamp
        (b"name: a1\n!!float : x\n", "cannot read '' as tag:yaml.org,2002:float"),
        (b"name: !!bool\n", "cannot read '' as tag:yaml.org,2002:bool"),
        (b"name: !!timestamp\n", "cannot read '' as tag:yaml.org,2002:timestamp"),
        # PyYAML composes recursively: RecursionError
        (b"[" * 1000, "nested too deeply"),
        (b"name: a1\non: {pre-commit: }\nhooks: [{id: h1, type: [1]}]\n", "unknown hook type"),
        # description: str() of 10^7 repetitions of a small list never ended
        (BOMB, "excessive aliasing"),
        (b"name: a1\non: &o {pre-commit: {branches: *o}}\nhooks: []\n", "contains it"),
        (b"name: a1\nhooks:\n" + b"  - " * 100 + b"x\n", "nested more than 64"),
        (b'name: "a\\ud800b"\n', "invalid Unicode character"),
        (
            b"name: a1\non: {pre-commit: }\nhooks: [{id: h1, type: webhook, if: [x], "
            b"properties: {url: http://h}}]\n",
            "'if' must be a string",
        ),
    ],
)
def test_action_files_that_broke_the_loader_are_refused(data: bytes, why: str) -> None:
    started = time.monotonic()
    with pytest.raises(ActionFileError, match=why):
        parse_action("_lakefs_actions/a.yaml", data)
    assert action_file.check(data) == "ActionFileError"
    assert time.monotonic() - started < 60  # the bomb took hours; this is no timing assertion


def _airflow(conf: object) -> ActionHook:
    props = {"url": "http://airflow", "dag_id": "d", "username": "u", "password": "p"}
    return ActionHook("h1", "airflow", {**props, "dag_conf": conf})


def _call(hook: ActionHook) -> tuple[str, list[httpx.Request]]:
    """Call ``hook`` through a mock transport answering 200; return its error and requests."""
    sent: list[httpx.Request] = []

    def answer(request: httpx.Request) -> httpx.Response:
        sent.append(request)
        return httpx.Response(200)

    client = httpx.Client(transport=httpx.MockTransport(answer))
    outcome = call_hook(hook, {"e": 1}, env_prefix="X_", environ={}, client=client)
    return outcome.error, sent


@pytest.mark.parametrize(
    ("conf", "error"),
    [
        # dict("x"), dict(5): ValueError, TypeError out of call_hook, which never raises
        ("x", "'dag_conf' must be a mapping"),
        (5, "'dag_conf' must be a mapping"),
        # json.dumps: NaN is no JSON (Go refuses it too), a set none either
        ({"at": float("nan")}, "cannot be sent as JSON"),
        ({"set": {1, 2}}, "cannot be sent as JSON"),
    ],
)
def test_airflow_confs_json_lacks_fail_the_hook(conf: object, error: str) -> None:
    failed, sent = _call(_airflow(conf))
    assert error in failed
    assert sent == []


def test_airflow_confs_with_timestamps_and_binary_are_sent_as_text() -> None:
    # json.dumps raised TypeError for a YAML timestamp or !!binary value
    failed, sent = _call(_airflow({"day": datetime.date(2001, 12, 14), "raw": b"bytes"}))
    assert failed == ""
    assert b'"day": "2001-12-14"' in sent[0].content
    assert b'"raw": "bytes"' in sent[0].content


def test_webhook_header_values_are_sent_as_utf8() -> None:
    # httpx encodes str header values as ASCII: UnicodeEncodeError out of call_hook
    failed, sent = _call(
        ActionHook("h1", "webhook", {"url": "http://h/x", "headers": {"X-Name": "café"}})
    )
    assert failed == ""
    assert (b"X-Name", "café".encode()) in sent[0].headers.raw
