"""SigV4 and SigV2: whatever botocore signs verifies; forged signature parts only get S3 errors.

The round trips sign requests with botocore's own signers (the ones boto3 and the AWS CLI use)
at the targets' clock, for keys, query parameters and metadata Hypothesis draws, and hand them
to the targets, which must accept them.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from urllib.parse import quote, urlencode

from botocore.auth import HmacV1Auth, HmacV1QueryAuth, S3SigV4Auth, S3SigV4QueryAuth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials
from hypothesis import given
from hypothesis import strategies as st

from tests.fuzz.harness import FUZZ_NOW
from tests.fuzz.seeds import _as_input, _frozen_clock
from tests.fuzz.strategies import fuzz_settings
from tests.fuzz.targets import sigv2, sigv4
from tests.fuzz.targets.http_input import render
from tests.fuzz.targets.signed import KEY_ID, REGION, SECRET

ENDPOINT = "http://127.0.0.1:8000"
CREDENTIALS = Credentials(KEY_ID, SECRET)

# object keys: any character but the C0 controls, as S3 allows (NUL and newlines included
# would be refused by the gateway's path checks, not by the signature)
keys = st.text(st.characters(blacklist_categories=("Cs", "Cc")), min_size=1, max_size=40).map(
    lambda k: f"main/{k}"
)
header_text = st.text(
    st.characters(blacklist_categories=("Cs", "Cc"), blacklist_characters="\x7f"), max_size=30
)
metadata = st.dictionaries(
    st.text("abcdefghijklmnopqrstuvwxyz0123456789-", min_size=1, max_size=10).map(
        lambda n: f"x-amz-meta-{n}"
    ),
    header_text,
    max_size=3,
)
params = st.dictionaries(
    st.sampled_from(["prefix", "delimiter", "marker", "max-keys", "list-type", "x-id", "k"]),
    st.text(st.characters(blacklist_categories=("Cs",)), max_size=20),
    max_size=3,
)
methods = st.sampled_from(["GET", "HEAD", "PUT", "DELETE", "POST"])


def url_of(key: str, query: dict[str, str]) -> str:
    """Return the URL boto3 would use for ``key`` in bucket ``repo`` (path style)."""
    url = f"{ENDPOINT}/repo/{quote(key, safe='/~')}"
    return f"{url}?{urlencode(query, quote_via=quote)}" if query else url


@contextmanager
def at_fuzz_now() -> Iterator[None]:
    with _frozen_clock(FUZZ_NOW):
        yield


@fuzz_settings(40)
@given(methods, keys, params, metadata, st.binary(max_size=64))
def test_v4_header_signatures_from_botocore_verify(
    method: str, key: str, query: dict[str, str], meta: dict[str, str], body: bytes
) -> None:
    request = AWSRequest(method=method, url=url_of(key, query), data=body, headers=meta)
    with at_fuzz_now():
        S3SigV4Auth(CREDENTIALS, "s3", REGION).add_auth(request)
    assert sigv4.check(_as_input(request.prepare())) is None


@fuzz_settings(40)
@given(keys, params, st.integers(1, 604800))
def test_v4_presigned_urls_from_botocore_verify(
    key: str, query: dict[str, str], expires: int
) -> None:
    request = AWSRequest(method="GET", url=url_of(key, query))
    with at_fuzz_now():
        S3SigV4QueryAuth(CREDENTIALS, "s3", REGION, expires=expires).add_auth(request)
    prepared = request.prepare()
    target = prepared.url.removeprefix(ENDPOINT)
    assert sigv4.check(render("GET", target, [("Host", "127.0.0.1:8000")])) is None


@fuzz_settings(40)
@given(methods, keys, st.sampled_from(["", "acl", "tagging", "uploads", "versionId=v1"]), metadata)
def test_v2_header_signatures_from_botocore_verify(
    method: str, key: str, sub_resource: str, meta: dict[str, str]
) -> None:
    url = url_of(key, {}) + (f"?{sub_resource}" if sub_resource else "")
    request = AWSRequest(method=method, url=url, headers=meta)
    with at_fuzz_now():
        HmacV1Auth(CREDENTIALS).add_auth(request)
    assert sigv2.check(_as_input(request.prepare())) is None


@fuzz_settings(40)
@given(keys, st.integers(1, 10**6))
def test_v2_presigned_urls_from_botocore_verify(key: str, expires: int) -> None:
    request = AWSRequest(method="GET", url=url_of(key, {}))
    with at_fuzz_now():
        HmacV1QueryAuth(CREDENTIALS, expires=expires).add_auth(request)
    target = request.prepare().url.removeprefix(ENDPOINT)
    assert sigv2.check(render("GET", target, [("Host", "127.0.0.1:8000")])) is None


# forged signature parts: any text where a client puts credentials, dates and signatures
anything = st.text(max_size=80).map(lambda t: t.replace("\r", "").replace("\n", ""))
scopes = st.tuples(anything, anything, anything, anything, anything).map("/".join)
dates = st.one_of(
    anything,
    st.integers(0, 99999999).map(lambda y: f"Wed, 01 May {y} 12:00:00 GMT"),
    st.integers(-(10**8), 10**8).map(lambda z: f"Wed, 01 May 2024 12:00:00 {z:+05d}"),
    st.integers(0, 99999).map(lambda y: f"{y:04d}0501T120000Z"),
)


@fuzz_settings(40)
@given(scopes, anything, anything, dates, dates, anything)
def test_forged_v4_headers_get_s3_errors(
    credential: str, signed: str, signature: str, amz_date: str, date: str, sha: str
) -> None:
    authorization = (
        f"AWS4-HMAC-SHA256 Credential={credential}, SignedHeaders={signed}, Signature={signature}"
    )
    headers = [("Host", "127.0.0.1:8000"), ("Authorization", authorization), ("Date", date)]
    headers += [("x-amz-date", amz_date)] if amz_date else []
    headers += [("x-amz-content-sha256", sha)]
    assert sigv4.check(render("GET", "/repo/main/a.txt", headers)) is not None


@fuzz_settings(40)
@given(scopes, anything, dates, anything, anything)
def test_forged_v4_presigned_queries_get_s3_errors(
    credential: str, expires: str, amz_date: str, signed: str, signature: str
) -> None:
    query = urlencode(
        {
            "X-Amz-Algorithm": "AWS4-HMAC-SHA256",
            "X-Amz-Credential": credential,
            "X-Amz-Date": amz_date,
            "X-Amz-Expires": expires,
            "X-Amz-SignedHeaders": signed,
            "X-Amz-Signature": signature,
        },
        quote_via=quote,
    )
    data = render("GET", f"/repo/main/a.txt?{query}", [("Host", "127.0.0.1:8000")])
    assert sigv4.check(data) is not None


@fuzz_settings(40)
@given(anything, anything, dates, anything)
def test_forged_v2_signatures_get_s3_errors(
    key: str, signature: str, date: str, expires: str
) -> None:
    headers = [("Host", "127.0.0.1:8000"), ("Authorization", f"AWS {key}:{signature}")]
    assert sigv2.check(render("GET", "/repo/main/a.txt", [*headers, ("Date", date)])) is not None
    query = urlencode(
        {"AWSAccessKeyId": key, "Signature": signature, "Expires": expires}, quote_via=quote
    )
    assert sigv2.check(render("GET", f"/repo/main/a.txt?{query}", headers[:1])) is not None
