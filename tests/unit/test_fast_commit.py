"""A plain commit takes the fast route and is answered exactly as the app's route answers it.

Two apps over two catalogs built alike (same clock, same objects) receive the same requests in
the same order: one serves plain commits by :mod:`mirror.api.fast_reads`, the other routes every
request through FastAPI. Status, headers and bytes must be equal, for commits that succeed and
for every kind of refusal: bad bodies (taken or declined), bad credentials, nothing to commit,
an unknown branch, a query parameter the route refuses.
"""

from __future__ import annotations

import base64
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from pydantic import BaseModel

import mirror.api.fast_reads as fast_reads
from mirror.api.app import create_app
from mirror.auth import AuthStore
from mirror.block import BlockResolver
from mirror.core.catalog import Catalog
from mirror.core.model import Entry
from mirror.kv.sqlite import SqliteKV

KEY = ("AKIAFASTCOMMIT000001", "fast-commit-secret")
ADMIN = {"authorization": "Basic " + base64.b64encode(f"{KEY[0]}:{KEY[1]}".encode()).decode()}
JSON = {"content-type": "application/json"}
COMMITS = "/api/v1/repositories/repo/branches/main/commits"
IGNORED_HEADERS = {"x-request-id"}

# (body, headers, query, whether the fast route takes the body (None: the query declines the
# request first), the answer's status); each case stages one object first
CASES: list[tuple[bytes, dict[str, str], dict[str, Any], bool | None, int]] = [
    (b'{"message": "plain", "date": 1700000000}', {**ADMIN, **JSON}, {}, True, 201),
    (
        b'{"message": "meta", "metadata": {"k": "v"}, "date": 1700000001, "unknown": 1}',
        {**ADMIN, "content-type": "application/json; charset=utf-8"},
        {},
        True,
        201,
    ),
    (b'{"message": "no date"}', {**ADMIN, **JSON}, {}, True, 201),
    (b'{"message": "bad source"}', {**ADMIN, **JSON}, {"source_metarange": "x"}, True, 400),
    (b'{"message": "nobody"}', {**JSON}, {}, True, 401),
    (b'{"message": "wrong"}', {**JSON, "authorization": "Basic !!!"}, {}, True, 401),
    (b"{}", {**ADMIN, **JSON}, {}, False, 400),
    (b'{"message": 5}', {**ADMIN, **JSON}, {}, False, 400),
    (b'{"message": "m", "metadata": {"k": 1}}', {**ADMIN, **JSON}, {}, False, 400),
    (b'{"message": "m", "date": "soon"}', {**ADMIN, **JSON}, {}, False, 400),
    (b'{"message": ', {**ADMIN, **JSON}, {}, False, 400),
    (b'["message"]', {**ADMIN, **JSON}, {}, False, 400),
    (b"", {**ADMIN, **JSON}, {}, False, 400),
    (b'{"message": "text"}', {**ADMIN, "content-type": "text/plain"}, {}, False, 400),
    (b'{"message": "untyped"}', {**ADMIN}, {}, False, 400),
    (b"{}", {**JSON}, {}, False, 401),  # declined body: the route asks for credentials first
    (b'{"message": "twice"}', {**ADMIN, **JSON}, {"source_metarange": ["a", "b"]}, None, 400),
    (b'{"message": "empty", "allow_empty": true, "date": 2}', {**ADMIN, **JSON}, {}, True, 201),
]


def _stage(catalog: Catalog, path: str) -> None:
    """Stage an object at ``path`` with an entry that is the same in every catalog."""
    entry = Entry(address=f"data/{path}", size=1, checksum="c" * 32, mtime=1_700_000_000)
    catalog.stage_object("repo", "main", path, entry)


def _catalog(root: Path) -> Catalog:
    kv = SqliteKV(root / "kv.db")
    catalog = Catalog(kv, BlockResolver(root / "data"), clock=lambda: 1_700_000_000.0)
    catalog.create_repository("repo", "local://repo")
    _stage(catalog, "a.txt")
    catalog.commit("repo", "main", "first")
    return catalog


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
async def apps(tmp_path: Path) -> AsyncIterator[list[tuple[Catalog, httpx.AsyncClient]]]:
    pairs = []
    clients = []
    for on in (True, False):
        root = tmp_path / ("fast" if on else "routed")
        root.mkdir()
        catalog = _catalog(root)
        auth = AuthStore(catalog.kv)
        auth.bootstrap_admin("admin", *KEY)
        app = create_app(catalog, auth, local_root=root / "data", fast_reads=on)
        client = httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://api")
        clients.append(client)
        pairs.append((catalog, client))
    yield pairs
    for client in clients:
        await client.aclose()


def _same(fast: httpx.Response, routed: httpx.Response) -> None:
    assert (fast.status_code, fast.content) == (routed.status_code, routed.content)
    drop = IGNORED_HEADERS
    assert [h for h in fast.headers.raw if h[0].decode().lower() not in drop] == [
        h for h in routed.headers.raw if h[0].decode().lower() not in drop
    ]


@pytest.mark.anyio
async def test_commits_are_answered_as_the_route_answers_them(
    apps: list[tuple[Catalog, httpx.AsyncClient]], monkeypatch: pytest.MonkeyPatch
) -> None:
    parsed: list[bool] = []
    parse = fast_reads.parse_body

    def recorded(headers: object, raw: bytes, model: type[BaseModel]) -> BaseModel | None:
        body = parse(headers, raw, model)
        parsed.append(body is not None)
        return body

    monkeypatch.setattr(fast_reads, "parse_body", recorded)
    for i, (body, headers, query, taken, status) in enumerate(CASES):
        answers = []
        for catalog, client in apps:
            _stage(catalog, f"staged/{i}.txt")
            answers.append(await client.post(COMMITS, content=body, headers=headers, params=query))
        _same(*answers)
        # only the fast app asks, once per request whose query it takes
        assert parsed == ([] if taken is None else [taken]), (body, headers, query)
        parsed.clear()
        assert answers[0].status_code == status, (body, answers[0].text)
    heads = [catalog.get_branch("repo", "main").commit_id for catalog, _ in apps]
    assert heads[0] == heads[1]
    messages = [c.message for c in apps[0][0].log("repo", "main")]
    assert messages == ["empty", "no date", "meta", "plain", "first", "Repository created"]


@pytest.mark.anyio
async def test_nothing_to_commit_and_an_unknown_branch(
    apps: list[tuple[Catalog, httpx.AsyncClient]],
) -> None:
    body = json.dumps({"message": "again", "date": 1700000003}).encode()
    for path in (COMMITS, COMMITS.replace("/main/", "/nobranch/")):
        answers = [
            await client.post(path, content=body, headers={**ADMIN, **JSON}) for _, client in apps
        ]
        _same(*answers)
        assert answers[0].status_code in (400, 404)
