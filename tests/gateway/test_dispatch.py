"""The dispatch between the REST API and the gateway on one listener, and S3 addressing.

In process, through httpx's ASGI transport: API calls (with or without a signature under
``/api/``) reach the API unchanged; a request to a gateway host name, or an AWS-signed one, reaches
the gateway, which answers S3's XML (an unsigned one: AccessDenied), counted in the API's metrics
under its S3 operation.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any
from unittest import mock

import httpx
import pytest

from mirror.api.app import create_app
from mirror.auth.secrets import SecretCipher
from mirror.auth.store import AuthStore
from mirror.cli.repository_cleanups import register_repository_cleanups
from mirror.config import GatewaySettings
from mirror.core import open_memory
from mirror.gateway.app import parse_address, with_gateway
from mirror.gateway.context import GatewayState

ADMIN = ("AKIAADMIN00000000001", "admin-secret")


pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
async def client() -> AsyncIterator[httpx.AsyncClient]:
    catalog = open_memory()
    register_repository_cleanups(catalog)
    auth = AuthStore(catalog.kv, cipher=SecretCipher("test key"))
    auth.bootstrap_admin("admin", *ADMIN)
    api = create_app(catalog, auth)
    settings = GatewaySettings(domain_names=("s3.example.test",))
    app = with_gateway(api, GatewayState(catalog, auth, settings), api.state.metrics)
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://api.example.test") as c:
        yield c


def _code(response: httpx.Response) -> str:
    assert response.headers["content-type"].startswith("application/xml"), response.text
    code = ET.fromstring(response.content).findtext("Code")
    assert code is not None
    return code


async def test_api_requests_reach_the_api(client: httpx.AsyncClient) -> None:
    assert (await client.get("/api/v1/healthcheck")).status_code == 204
    listed = await client.get("/api/v1/repositories", auth=ADMIN)
    assert listed.status_code == 200 and listed.json()["results"] == []
    # an AWS-looking Authorization under /api/ is still the API's (it answers lakeFS's JSON 401)
    signed = await client.get(
        "/api/v1/repositories",
        headers={"Authorization": "AWS4-HMAC-SHA256 Credential=AKIA/x, Signature=00"},
    )
    assert signed.status_code == 401 and "message" in signed.json()
    # health checks and scrapes stay on the API whatever the Host
    healthz = await client.get("/healthz", headers={"Host": "s3.example.test"})
    assert healthz.status_code == 200
    metrics = await client.get("/metrics", headers={"Host": "s3.example.test"})
    assert metrics.status_code == 200
    # an unknown path without a signature is the API's 404 (JSON), not S3's
    plain = await client.get("/some-bucket/main/key")
    assert plain.status_code == 404 and "x-amz-request-id" not in plain.headers


@pytest.mark.parametrize(
    "host", ["s3.example.test", "s3.example.test:8000", "bucket.s3.example.test", "S3.Example.Test"]
)
async def test_gateway_host_without_signature_is_refused_as_s3(
    client: httpx.AsyncClient, host: str
) -> None:
    answer = await client.get("/bucket/main/key", headers={"Host": host})
    assert answer.status_code == 403
    assert _code(answer) == "AccessDenied"
    assert answer.headers["x-amz-request-id"]
    head = await client.head("/bucket/main/key", headers={"Host": host})
    assert head.status_code == 403 and head.content == b""


async def test_signed_requests_reach_the_gateway(client: httpx.AsyncClient) -> None:
    forged = await client.get(
        "/bucket/main/key",
        headers={
            "Authorization": "AWS4-HMAC-SHA256 Credential=AKIAUNKNOWN00000/20260101/us-east-1/"
            "s3/aws4_request, SignedHeaders=host, Signature=" + "0" * 64,
            "x-amz-date": "20260101T000000Z",
        },
    )
    # which refusal is the signature checks' business; here: S3's XML, not the API's JSON 404
    assert forged.status_code in (400, 403)
    assert _code(forged) and forged.headers["x-amz-request-id"]
    presigned = await client.get("/bucket/main/key", params={"X-Amz-Algorithm": "AWS4-HMAC-SHA256"})
    assert presigned.headers["content-type"].startswith("application/xml")
    assert presigned.headers["x-amz-request-id"]


async def test_gateway_requests_count_under_their_operation(client: httpx.AsyncClient) -> None:
    await client.get("/", headers={"Host": "s3.example.test"})
    await client.put("/bucket/main/a/b/c", headers={"Host": "s3.example.test"})
    scraped = (await client.get("/metrics")).text
    assert 'route="s3:ListBuckets"' in scraped
    assert 'route="s3:PutObject"' in scraped
    assert "main/a/b/c" not in scraped


def _scope(path: bytes, host: str = "localhost") -> dict[str, Any]:
    return {"raw_path": path, "path": path.decode(), "headers": [(b"host", host.encode())]}


@pytest.mark.parametrize(
    ("raw", "host", "bucket", "key"),
    [
        (b"/", "localhost", None, None),
        (b"/repo", "localhost", "repo", None),
        (b"/repo/", "localhost", "repo", None),
        (b"/repo/main", "localhost", "repo", "main"),
        (b"/repo/main/a%20b/c+d", "localhost", "repo", "main/a b/c+d"),
        (b"/repo/main/x%2Fy", "localhost", "repo", "main/x/y"),
        (b"/repo/main/%C3%BCn%C3%AF", "localhost", "repo", "main/ünï"),
        (b"/repo/main/100%2525", "localhost", "repo", "main/100%25"),
        (b"/repo/main/dir/", "localhost", "repo", "main/dir/"),
        (b"/main/k", "repo.s3.example.test", "repo", "main/k"),
        (b"/", "repo.s3.example.test:9000", "repo", None),
        (b"/repo/main/k", "s3.example.test", "repo", "main/k"),
    ],
)
def test_addressing(raw: bytes, host: str, bucket: str | None, key: str | None) -> None:
    assert parse_address(_scope(raw, host), ("s3.example.test",)) == (bucket, key)


async def test_unexpected_errors_answer_internal_error_with_the_request_id(
    client: httpx.AsyncClient, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    from mirror.gateway import app as gateway_app
    from mirror.gateway.routing import Operation

    async def signed_in(request: Any, auth: Any, settings: Any) -> Any:
        return mock.Mock(caller=mock.Mock(), body=None, content_length=None)

    async def broken(req: Any) -> Any:
        raise RuntimeError("internal detail /var/lib/secret-path")

    monkeypatch.setattr(gateway_app, "authenticate", signed_in)
    monkeypatch.setattr(gateway_app, "route", lambda *args: Operation("s3:GetObject", broken))
    answer = await client.get("/bucket/main/key", headers={"Host": "s3.example.test"})
    assert answer.status_code == 500 and _code(answer) == "InternalError"
    assert b"secret-path" not in answer.content and b"Traceback" not in answer.content
    request_id = answer.headers["x-amz-request-id"]
    assert ET.fromstring(answer.content).findtext("RequestId") == request_id
    logged = [r for r in caplog.records if r.name == "mirror.gateway"]
    assert any(request_id in r.getMessage() and r.exc_info for r in logged)


def test_the_server_serves_the_gateway_unless_disabled(tmp_path: Path) -> None:
    from fastapi import FastAPI

    from mirror.cli.server import build_app
    from mirror.config import LakeMirrorConfig
    from mirror.gateway.app import GatewayDispatch
    from mirror.httputil.admission import AdmissionMiddleware

    catalog = open_memory()
    enabled = build_app(LakeMirrorConfig(data_dir=tmp_path), catalog, ("local",))
    # the process's admission stands in front of every front door
    assert isinstance(enabled, AdmissionMiddleware)
    assert isinstance(enabled.app, GatewayDispatch)
    assert enabled.app.settings.domain_names == ("s3.local.lakefs.io",)
    assert enabled.refuse == enabled.app.refusal
    disabled = LakeMirrorConfig(
        data_dir=tmp_path, gateway={"enabled": False}, ui={"enabled": False}
    )
    served = build_app(disabled, catalog, ("local",))
    assert isinstance(served, AdmissionMiddleware)
    assert isinstance(served.app, FastAPI)
