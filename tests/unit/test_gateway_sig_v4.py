"""SigV4 through :func:`mirror.gateway.auth.authenticate`: requests signed by botocore's signers.

Each part of a signed request is tampered with in turn (header, path, query, body, date, key,
secret) and the precise S3 code is checked.
"""

from __future__ import annotations

import base64
import calendar
import hashlib
import time
import zlib
from typing import Any

import pytest

from mirror.auth.permissions import Permission
from mirror.gateway.auth import Authenticated, authenticate
from mirror.gateway.errors import S3Code, S3Error
from mirror.gateway.sig.checksums import encoded, new_checksum
from tests.unit.gateway_signing import (
    KEY_ID,
    SETTINGS,
    USER,
    Recorder,
    asgi_request,
    drain,
    presign_v4,
    sign_v4,
    store,
)

BASE = "http://127.0.0.1:8000"


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


pytestmark = pytest.mark.anyio


async def verify(
    method: str,
    url: str,
    headers: Any,
    pieces: list[bytes] | None = None,
    *,
    now: float | None = None,
    recorder: Recorder | None = None,
) -> Authenticated:
    request = asgi_request(method, url, headers, pieces or [], recorder)
    clock = (lambda: now) if now is not None else time.time
    return await authenticate(request, AUTH, SETTINGS, now=clock)


async def refused(code: S3Code, *args: Any, **kwargs: Any) -> S3Error:
    with pytest.raises(S3Error) as caught:
        await verify(*args, **kwargs)
    assert caught.value.code is code, caught.value
    return caught.value


AUTH = store()


def replace(headers: list[tuple[str, str]], name: str, value: str) -> list[tuple[str, str]]:
    return [(k, value if k.lower() == name else v) for k, v in headers]


async def test_signed_get_authenticates_with_the_keys_policies() -> None:
    url, headers = sign_v4("GET", f"{BASE}/repo/main/a.txt", headers={"Range": "bytes=0-9"})
    recorder = Recorder()
    result = await verify("GET", url, headers, recorder=recorder)
    assert result.access_key_id == KEY_ID
    assert result.caller.user.id == USER
    assert result.user.id == USER
    result.caller.require(Permission("fs:WriteObject", "arn:lakefs:fs:::repository/repo/object/a"))
    assert not recorder.read
    assert await drain(result.body) == b""


async def test_signed_put_streams_its_body_and_nothing_is_read_before() -> None:
    body = b"x" * 100_000
    url, headers = sign_v4("PUT", f"{BASE}/repo/main/big.bin", body=body)
    recorder = Recorder()
    result = await verify(
        "PUT", url, headers, [body[:30_000], body[30_000:60_000], body[60_000:]], recorder=recorder
    )
    assert not recorder.read
    assert result.content_length == len(body)
    assert await drain(result.body) == body
    assert recorder.read


@pytest.mark.parametrize(
    "path",
    [
        "/repo/main/with%20space.txt",
        "/repo/main/plus%2Bsign.txt",
        "/repo/main/unicode-%C3%A9t%C3%A9/%E6%97%A5%E6%9C%AC.txt",
        "/repo/main/dir/~tilde_-.txt",
        "/repo/main/raw+plus",
    ],
)
async def test_keys_with_spaces_unicode_and_plus(path: str) -> None:
    url, headers = sign_v4("GET", BASE + path)
    assert (await verify("GET", url, headers)).access_key_id == KEY_ID


async def test_query_parameters_are_canonicalised() -> None:
    url, headers = sign_v4(
        "GET",
        f"{BASE}/repo?list-type=2&prefix=main%2Fa%20b&delimiter=%2F&encoding-type=url&max-keys=5",
    )
    assert (await verify("GET", url, headers)).access_key_id == KEY_ID
    url, headers = sign_v4("POST", f"{BASE}/repo/main/key?uploads")
    assert (await verify("POST", url, headers)).access_key_id == KEY_ID


async def test_any_region_is_accepted() -> None:
    url, headers = sign_v4("GET", f"{BASE}/repo/main/a", region="ap-southeast-2")
    assert (await verify("GET", url, headers)).access_key_id == KEY_ID


async def test_tampered_parts_do_not_match() -> None:
    url, headers = sign_v4(
        "GET", f"{BASE}/repo/main/a.txt?versionId=1", headers={"Range": "bytes=0-9"}
    )
    code = S3Code.SIGNATURE_DOES_NOT_MATCH
    await refused(code, "GET", url, replace(headers, "range", "bytes=0-10"))
    await refused(code, "GET", url.replace("/a.txt", "/b.txt"), headers)
    await refused(code, "GET", url.replace("versionId=1", "versionId=2"), headers)
    await refused(code, "GET", url + "&extra=1", headers)
    await refused(code, "HEAD", url, headers)
    await refused(code, "GET", url, [*headers, ("Range", "bytes=5-6")])
    host = [(k, v) for k, v in headers if k.lower() != "host"]
    await refused(code, "GET", url, [("host", "other:8000"), *host])
    signature = dict(headers)["Authorization"]
    flipped = signature[:-1] + ("0" if signature[-1] != "0" else "1")
    await refused(code, "GET", url, replace(headers, "authorization", flipped))


async def test_a_changed_date_does_not_match() -> None:
    url, headers = sign_v4("GET", f"{BASE}/repo/main/a")
    amz_date = dict(headers)["X-Amz-Date"]
    signed_at = calendar.timegm(time.strptime(amz_date, "%Y%m%dT%H%M%SZ"))
    # a second later, or earlier at the end of a day: the scope's date stays the same
    moved_at = signed_at + 1 if amz_date[9:] != "235959Z" else signed_at - 1
    moved = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime(moved_at))
    await refused(
        S3Code.SIGNATURE_DOES_NOT_MATCH, "GET", url, replace(headers, "x-amz-date", moved)
    )


async def test_clock_skew_beyond_15_minutes_is_refused_either_way() -> None:
    url, headers = sign_v4("GET", f"{BASE}/repo/main/a")
    await verify("GET", url, headers, now=time.time() + 14 * 60)
    await verify("GET", url, headers, now=time.time() - 14 * 60)
    await refused(S3Code.REQUEST_TIME_TOO_SKEWED, "GET", url, headers, now=time.time() + 16 * 60)
    await refused(S3Code.REQUEST_TIME_TOO_SKEWED, "GET", url, headers, now=time.time() - 16 * 60)


async def test_unknown_key_wrong_secret_and_no_signature() -> None:
    url, headers = sign_v4("GET", f"{BASE}/repo/main/a", key_id="AKIAUNKNOWN000000001")
    await refused(S3Code.INVALID_ACCESS_KEY_ID, "GET", url, headers)
    url, headers = sign_v4("GET", f"{BASE}/repo/main/a", secret="not-the-secret")
    await refused(S3Code.SIGNATURE_DOES_NOT_MATCH, "GET", url, headers)
    error = await refused(S3Code.ACCESS_DENIED, "GET", f"{BASE}/repo/main/a", [])
    assert error.message.startswith("Access Denied")


async def test_malformed_authorization_headers() -> None:
    url, headers = sign_v4("GET", f"{BASE}/repo/main/a")
    auth = dict(headers)["Authorization"]
    code = S3Code.AUTHORIZATION_HEADER_MALFORMED
    await refused(code, "GET", url, replace(headers, "authorization", auth.split(",")[0]))
    wrong_service = auth.replace("/s3/aws4_request", "/sts/aws4_request")
    await refused(code, "GET", url, replace(headers, "authorization", wrong_service))
    wrong_day = auth.replace(
        "Credential=AKIAGATEWAYTEST00001/2", "Credential=AKIAGATEWAYTEST00001/1"
    )
    await refused(code, "GET", url, replace(headers, "authorization", wrong_day))
    no_sha = [(k, v) for k, v in headers if k.lower() != "x-amz-content-sha256"]
    await refused(S3Code.INVALID_REQUEST, "GET", url, no_sha)


async def test_body_not_matching_the_signed_sha256() -> None:
    body = b"the signed body"
    url, headers = sign_v4("PUT", f"{BASE}/repo/main/a", body=body)
    result = await verify("PUT", url, headers, [b"the signed bodY"])
    with pytest.raises(S3Error) as caught:
        await drain(result.body)
    assert caught.value.code is S3Code.XAMZ_CONTENT_SHA256_MISMATCH


async def test_unsigned_payload_accepts_any_body() -> None:
    url, headers = sign_v4("PUT", f"{BASE}/repo/main/a", body=b"abc", payload="UNSIGNED-PAYLOAD")
    assert dict(headers)["X-Amz-Content-SHA256"] == "UNSIGNED-PAYLOAD"
    result = await verify("PUT", url, headers, [b"abc"])
    assert await drain(result.body) == b"abc"


async def test_body_shorter_than_content_length() -> None:
    body = b"0123456789"
    url, headers = sign_v4("PUT", f"{BASE}/repo/main/a", body=body, payload="UNSIGNED-PAYLOAD")
    result = await verify("PUT", url, replace(headers, "content-length", "20"), [body])
    with pytest.raises(S3Error) as caught:
        await drain(result.body)
    assert caught.value.code is S3Code.INCOMPLETE_BODY


async def test_content_md5() -> None:
    body = b"digest me"
    good = base64.b64encode(hashlib.md5(body).digest()).decode()
    bad = base64.b64encode(hashlib.md5(b"other").digest()).decode()
    for md5, code in ((good, None), (bad, S3Code.BAD_DIGEST)):
        url, headers = sign_v4("PUT", f"{BASE}/k/main/a", body=body, headers={"Content-MD5": md5})
        result = await verify("PUT", url, headers, [body])
        if code is None:
            assert await drain(result.body) == body
        else:
            with pytest.raises(S3Error) as caught:
                await drain(result.body)
            assert caught.value.code is code
    url, headers = sign_v4("PUT", f"{BASE}/k/main/a", body=body, headers={"Content-MD5": "nope"})
    await refused(S3Code.INVALID_DIGEST, "PUT", url, headers, [body])


@pytest.mark.parametrize("algorithm", ["crc32", "crc32c", "crc64nvme", "sha1", "sha256"])
async def test_checksum_headers(algorithm: str) -> None:
    body = b"checksummed body " * 100
    checksum = new_checksum(algorithm)
    checksum.update(body)
    name = f"x-amz-checksum-{algorithm}"
    url, headers = sign_v4("PUT", f"{BASE}/k/main/a", body=body, headers={name: encoded(checksum)})
    assert await drain((await verify("PUT", url, headers, [body])).body) == body
    wrong = new_checksum(algorithm)
    wrong.update(body + b"!")
    url, headers = sign_v4("PUT", f"{BASE}/k/main/a", body=body, headers={name: encoded(wrong)})
    result = await verify("PUT", url, headers, [body])
    with pytest.raises(S3Error) as caught:
        await drain(result.body)
    assert caught.value.code is S3Code.BAD_DIGEST
    url, headers = sign_v4("PUT", f"{BASE}/k/main/a", body=body, headers={name: "!!"})
    await refused(S3Code.INVALID_REQUEST, "PUT", url, headers, [body])


def test_crc32_matches_zlib() -> None:
    checksum = new_checksum("crc32")
    checksum.update(b"123456789")
    assert checksum.digest() == zlib.crc32(b"123456789").to_bytes(4, "big")


@pytest.mark.parametrize(
    ("algorithm", "check"), [("crc32c", "e3069283"), ("crc64nvme", "ae8b14860a799888")]
)
def test_crc_check_values(algorithm: str, check: str) -> None:
    checksum = new_checksum(algorithm)
    checksum.update(b"1234")
    checksum.update(b"56789")
    assert checksum.digest().hex() == check


# presigned URLs


async def test_presigned_get() -> None:
    url = presign_v4("GET", f"{BASE}/repo/main/with%20space%2Bplus.txt")
    recorder = Recorder()
    result = await verify("GET", url, [], recorder=recorder)
    assert result.caller.user.id == USER
    assert not recorder.read
    # an hour-old URL valid for two hours: the expiry decides, not the 15-minute skew
    url = presign_v4("GET", f"{BASE}/repo/main/a", expires=7200)
    await verify("GET", url, [], now=time.time() + 3600)


async def test_presigned_expired_and_not_yet_valid() -> None:
    url = presign_v4("GET", f"{BASE}/repo/main/a", expires=60)
    error = await refused(S3Code.ACCESS_DENIED, "GET", url, [], now=time.time() + 120)
    assert error.message == "Request has expired"
    await refused(S3Code.ACCESS_DENIED, "GET", url, [], now=time.time() - 3600)


async def test_presigned_tampering() -> None:
    url = presign_v4("GET", f"{BASE}/repo/main/a?partNumber=1")
    code = S3Code.SIGNATURE_DOES_NOT_MATCH
    await refused(code, "GET", url.replace("partNumber=1", "partNumber=2"), [])
    await refused(code, "GET", url.replace("/main/a", "/main/b"), [])
    await refused(code, "PUT", url, [])
    await refused(code, "GET", url.replace("X-Amz-Expires=3600", "X-Amz-Expires=3601"), [])
    await refused(
        S3Code.AUTHORIZATION_QUERY_PARAMETERS_ERROR,
        "GET",
        url.replace("X-Amz-Expires=3600", "X-Amz-Expires=604801"),
        [],
    )
    await refused(
        S3Code.AUTHORIZATION_QUERY_PARAMETERS_ERROR,
        "GET",
        url.replace("X-Amz-Algorithm=AWS4-HMAC-SHA256", "X-Amz-Algorithm=AWS4-ECDSA-P256-SHA256"),
        [],
    )


async def test_presigned_unknown_key() -> None:
    url = presign_v4("GET", f"{BASE}/repo/main/a", key_id="AKIAUNKNOWN000000001")
    await refused(S3Code.INVALID_ACCESS_KEY_ID, "GET", url, [])
