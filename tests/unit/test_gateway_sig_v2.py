"""SigV2 through :func:`mirror.gateway.auth.authenticate`: botocore's HmacV1Auth (header) and
HmacV1QueryAuth (presigned ``Expires``), path style and virtual-hosted."""

from __future__ import annotations

import base64
import hashlib
import time
from typing import Any

import pytest

from mirror.gateway.auth import authenticate
from mirror.gateway.errors import S3Code, S3Error
from tests.unit.gateway_signing import (
    KEY_ID,
    SETTINGS,
    USER,
    Recorder,
    asgi_request,
    drain,
    presign_v2,
    sign_v2,
    store,
)

pytestmark = pytest.mark.anyio

BASE = "http://127.0.0.1:8000"
AUTH = store()


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


async def verify(method: str, url: str, headers: Any, body: bytes = b"", **kw: Any) -> Any:
    now = kw.pop("now", None)
    request = asgi_request(method, url, headers, [body] if body else [], kw.pop("recorder", None))
    return await authenticate(
        request, AUTH, SETTINGS, now=(lambda: now) if now is not None else time.time
    )


async def refused(code: S3Code, *args: Any, **kwargs: Any) -> S3Error:
    with pytest.raises(S3Error) as caught:
        await verify(*args, **kwargs)
    assert caught.value.code is code, caught.value
    return caught.value


def replace(headers: list[tuple[str, str]], name: str, value: str) -> list[tuple[str, str]]:
    return [(k, value if k.lower() == name else v) for k, v in headers]


async def test_header_signed_requests() -> None:
    url, headers = sign_v2("GET", f"{BASE}/repo/main/a%20b%2Bc.txt")
    recorder = Recorder()
    result = await verify("GET", url, headers, recorder=recorder)
    assert result.access_key_id == KEY_ID
    assert result.caller.user.id == USER
    assert not recorder.read
    body = b"old client body"
    md5 = base64.b64encode(hashlib.md5(body).digest()).decode()
    url, headers = sign_v2(
        "PUT",
        f"{BASE}/repo/main/k?partNumber=2&uploadId=abc",
        body=body,
        headers={"Content-Type": "text/plain", "Content-MD5": md5, "x-amz-meta-Color": "blue"},
    )
    result = await verify("PUT", url, headers, body)
    assert await drain(result.body) == body


async def test_virtual_hosted_resource_names_the_bucket() -> None:
    domain = SETTINGS.domain_names[0]
    url, headers = sign_v2("GET", f"http://repo.{domain}/main/a", auth_path="/repo/main/a")
    assert (await verify("GET", url, headers)).access_key_id == KEY_ID


async def test_tampering_and_skew() -> None:
    url, headers = sign_v2("GET", f"{BASE}/repo/main/a?versionId=7", headers={"x-amz-meta-a": "1"})
    code = S3Code.SIGNATURE_DOES_NOT_MATCH
    await refused(code, "GET", url.replace("/a?", "/b?"), headers)
    await refused(code, "GET", url.replace("versionId=7", "versionId=8"), headers)
    await refused(code, "DELETE", url, headers)
    await refused(code, "GET", url, replace(headers, "x-amz-meta-a", "2"))
    await refused(code, "GET", url, [*headers, ("x-amz-meta-b", "3")])
    await refused(S3Code.REQUEST_TIME_TOO_SKEWED, "GET", url, headers, now=time.time() + 1000)
    await refused(S3Code.REQUEST_TIME_TOO_SKEWED, "GET", url, headers, now=time.time() - 1000)
    no_date = [(k, v) for k, v in headers if k.lower() != "date"]
    await refused(S3Code.ACCESS_DENIED, "GET", url, no_date)
    malformed = replace(headers, "authorization", "AWS no-colon")
    await refused(S3Code.AUTHORIZATION_HEADER_MALFORMED, "GET", url, malformed)


async def test_unknown_key_and_wrong_md5() -> None:
    url, headers = sign_v2("GET", f"{BASE}/repo/main/a")
    auth = dict(headers)["Authorization"].replace(KEY_ID, "AKIAUNKNOWN000000001")
    await refused(S3Code.INVALID_ACCESS_KEY_ID, "GET", url, replace(headers, "authorization", auth))
    md5 = base64.b64encode(hashlib.md5(b"other").digest()).decode()
    url, headers = sign_v2("PUT", f"{BASE}/repo/main/a", body=b"x", headers={"Content-MD5": md5})
    result = await verify("PUT", url, headers, b"x")
    with pytest.raises(S3Error) as caught:
        await drain(result.body)
    assert caught.value.code is S3Code.BAD_DIGEST


async def test_presigned_expires() -> None:
    url = presign_v2("GET", f"{BASE}/repo/main/a%20b.txt", expires=600)
    assert (await verify("GET", url, [])).caller.user.id == USER
    # a presigned URL keeps working until it expires, whatever its age
    await verify("GET", url, [], now=time.time() + 590)
    error = await refused(S3Code.ACCESS_DENIED, "GET", url, [], now=time.time() + 700)
    assert error.message == "Request has expired"
    await refused(S3Code.SIGNATURE_DOES_NOT_MATCH, "GET", url.replace("/a%20b", "/c%20b"), [])
    later = url.replace("Expires=", "Expires=1")
    await refused(S3Code.SIGNATURE_DOES_NOT_MATCH, "GET", later, [])
    await refused(
        S3Code.AUTHORIZATION_QUERY_PARAMETERS_ERROR,
        "GET",
        url.split("&Expires=")[0],
        [],
    )


async def test_a_path_style_bucket_is_signed_with_its_trailing_slash() -> None:
    # botocore signs ``/repo/`` for a request sent to ``/repo?...`` (a bucket-level call)
    url, headers = sign_v2(
        "GET", f"{BASE}/repo?prefix=main%2Fdir%2F&encoding-type=url", auth_path="/repo/"
    )
    assert (await verify("GET", url, headers)).access_key_id == KEY_ID
    url, headers = sign_v2("GET", f"{BASE}/repo?uploads", auth_path="/other/")
    await refused(S3Code.SIGNATURE_DOES_NOT_MATCH, "GET", url, headers)
