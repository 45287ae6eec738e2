"""A plain upload takes the fast route and is answered as the app's route answers it.

Each upload is sent twice: once plain (the fast route takes it) and once with ``force=False``
spelt so that the fast route declines it (the app's route reads it as false, and ignores it).
The two go to different paths of the same branch; their answers must be equal but for those
paths and the objects' physical addresses, which are new for every upload.
"""

from __future__ import annotations

import base64
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from mirror.api.app import create_app
from mirror.auth import AuthStore
from mirror.block import BlockResolver
from mirror.core.catalog import Catalog
from mirror.kv.sqlite import SqliteKV
from tests.unit.fast_routes import record_taken

KEY = ("AKIAFASTUPLOAD000001", "fast-upload-secret")
ADMIN = {"authorization": "Basic " + base64.b64encode(f"{KEY[0]}:{KEY[1]}".encode()).decode()}
OBJECTS = "/api/v1/repositories/repo/branches/main/objects"
IGNORED_HEADERS = {"x-request-id", "content-length"}
FORM = "multipart/form-data; boundary=xyz"


def _form(field: str, data: bytes) -> bytes:
    return (
        b'--xyz\r\nContent-Disposition: form-data; name="' + field.encode() + b'"; '
        b'filename="f.csv"\r\nContent-Type: text/csv\r\n\r\n' + data + b"\r\n--xyz--\r\n"
    )


# (query without the path, headers, body, expected status); "{p}" in a query is the path
CASES: list[tuple[dict[str, str], dict[str, str], bytes, int]] = [
    ({}, {**ADMIN, "content-type": "application/octet-stream"}, b"0123456789", 201),
    ({}, {**ADMIN, "x-lakefs-meta-Color": "red"}, b"with metadata", 201),
    ({"storage_class": "cold"}, ADMIN, b"", 201),
    ({}, {**ADMIN, "content-type": FORM}, _form("content", b"a,b\n1,2\n"), 201),
    ({}, {**ADMIN, "content-type": FORM}, _form("other", b"a,b\n"), 400),
    ({}, {**ADMIN, "if-none-match": "*"}, b"new", 201),
    ({"existing": "1"}, {**ADMIN, "if-none-match": "*"}, b"again", 412),
    ({}, {}, b"no credentials", 401),
    ({}, {"authorization": "Basic !!!"}, b"bad credentials", 401),
    ({"branch": "nobranch"}, ADMIN, b"no branch", 404),
]


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
async def client(tmp_path: Path) -> AsyncIterator[httpx.AsyncClient]:
    kv = SqliteKV(tmp_path / "kv.db")
    catalog = Catalog(kv, BlockResolver(tmp_path / "data"), clock=lambda: 1_700_000_000.0)
    catalog.create_repository("repo", "local://repo")
    auth = AuthStore(kv)
    auth.bootstrap_admin("admin", *KEY)
    app = create_app(catalog, auth, local_root=tmp_path / "data")
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://api") as client:
        yield client
    kv.close()


def _normal(answer: httpx.Response, path: str) -> tuple[int, Any, list[tuple[bytes, bytes]]]:
    try:
        body: Any = answer.json()
    except json.JSONDecodeError:
        body = answer.content
    if isinstance(body, dict) and "physical_address" in body:
        body = {**body, "physical_address": "-", "path": body["path"].replace(path, "P")}
    if isinstance(body, dict) and "message" in body:
        body = {**body, "message": body["message"].replace(path, "P")}
    headers = [h for h in answer.headers.raw if h[0].decode().lower() not in IGNORED_HEADERS]
    return answer.status_code, body, headers


@pytest.mark.anyio
@pytest.mark.parametrize(("query", "headers", "body", "status"), CASES)
async def test_an_upload_is_answered_as_the_route_answers_it(
    client: httpx.AsyncClient,
    monkeypatch: pytest.MonkeyPatch,
    query: dict[str, str],
    headers: dict[str, str],
    body: bytes,
    status: int,
) -> None:
    query = dict(query)
    url = OBJECTS.replace("/main/", f"/{query.pop('branch')}/") if "branch" in query else OBJECTS
    paths = ["dir/object-0.bin", "dir/object-1.bin"]
    if query.pop("existing", None):
        for path in paths:
            await client.post(OBJECTS, params={"path": path}, content=b"first", headers=ADMIN)
    taken = record_taken(monkeypatch)
    answers = []
    for path, extra in zip(paths, ({}, {"force": "False"}), strict=True):
        params = query
        answer = await client.post(
            url, params={"path": path, **params, **extra}, content=body, headers=headers
        )
        answers.append(_normal(answer, path))
    assert taken == [url], "the plain upload is taken, the other declined"
    assert answers[0] == answers[1]
    assert answers[0][0] == status


@pytest.mark.anyio
async def test_an_upload_without_a_path_is_the_routes_to_refuse(
    client: httpx.AsyncClient,
) -> None:
    answer = await client.post(OBJECTS, content=b"x", headers=ADMIN)
    assert answer.status_code == 400
    assert "path" in answer.text
