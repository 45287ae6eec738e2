"""Stat, read and list take a shorter way for plain requests, and answer exactly as their routes do.

:mod:`mirror.api.fast_reads` takes a request only when its query parameters are plain;
each request below is sent twice, once plain and once with a parameter spelt so that the fast
route declines it (``presign=False``, read as false by the app's route; the endpoints ignore
it), and the two answers must be the same bytes, status and headers. Credentials are read by
the app's own HTTP Basic scheme either way, so undecodable ones get the same 401.
"""

from __future__ import annotations

import base64
import threading
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from mirror.api.app import create_app
from mirror.api.fast_reads import REQUIRED, FastRead, QueryParam, parse_query
from mirror.auth import AuthStore
from mirror.block import BlockResolver
from mirror.cli.serving import FAST_READS_ENV, fast_reads
from mirror.core.catalog import Catalog
from mirror.kv.sqlite import SqliteKV
from tests.unit.fast_routes import record_taken
from tests.unit.remote_kv import RemoteReadsKV, record_reads

KEY = ("AKIAFASTREAD00000001", "fast-read-secret")
REF = "/api/v1/repositories/repo/refs"
IGNORED_HEADERS = {"x-request-id"}

PARAMS = (
    QueryParam("path", str, REQUIRED),
    QueryParam("amount", int, 0),
    QueryParam("user_metadata", bool, True),
)


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        (b"path=a", {"path": "a", "amount": 0, "user_metadata": True}),
        (b"path=a%20b&amount=7", {"path": "a b", "amount": 7, "user_metadata": True}),
        (
            b"path=&amount=-3&user_metadata=false",
            {"path": "", "amount": -3, "user_metadata": False},
        ),
        (b"path=x&other=1&other=2", {"path": "x", "amount": 0, "user_metadata": True}),
        (b"path=x&user_metadata=1", {"path": "x", "amount": 0, "user_metadata": True}),
        # declined: the app's route answers (its validation, its choice of value)
        (b"", None),
        (b"amount=1", None),
        (b"path=a&path=b", None),
        (b"path=a&amount=", None),
        (b"path=a&amount=1.5", None),
        (b"path=a&amount=+1", None),
        (b"path=a&amount=12345678901", None),
        (b"path=a&user_metadata=False", None),
        (b"path=a&user_metadata=maybe", None),
    ],
)
def test_queries_are_read_plainly_or_declined(
    query: bytes, expected: dict[str, Any] | None
) -> None:
    assert parse_query(query, PARAMS) == expected


@pytest.fixture
def catalog(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[Catalog]:
    kv = getattr(request, "param", SqliteKV)(tmp_path / "kv.db")
    catalog = Catalog(kv, BlockResolver(tmp_path / "data"))
    catalog.create_repository("repo", "local://repo")
    catalog.upload_object("repo", "main", "a.txt", b"0123456789", metadata={"color": "red"})
    for n in range(5):
        catalog.upload_object("repo", "main", f"dir/{n}.csv", b"x,y\n")
    catalog.commit("repo", "main", "first")
    yield catalog
    kv.close()


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
async def client(catalog: Catalog, tmp_path: Path) -> AsyncIterator[httpx.AsyncClient]:
    auth = AuthStore(catalog.kv)
    auth.bootstrap_admin("admin", *KEY)
    app = create_app(catalog, auth, local_root=tmp_path / "data")
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://api") as client:
        yield client


def _basic(key: str, secret: str) -> dict[str, str]:
    return {"authorization": "Basic " + base64.b64encode(f"{key}:{secret}".encode()).decode()}


ADMIN = _basic(*KEY)

REQUESTS: list[tuple[str, dict[str, str], dict[str, str]]] = [
    # (path, query, headers)
    ("/main/objects/stat", {"path": "a.txt"}, ADMIN),
    ("/main/objects/stat", {"path": "a.txt", "user_metadata": "false"}, ADMIN),
    ("/main~0/objects/stat", {"path": "dir/3.csv"}, ADMIN),
    ("/main/objects/stat", {"path": "missing"}, ADMIN),
    ("/nobranch/objects/stat", {"path": "a.txt"}, ADMIN),
    ("/main/objects/stat", {"path": "a.txt"}, {}),
    ("/main/objects/stat", {"path": "a.txt"}, _basic(KEY[0], "wrong")),
    ("/main/objects/stat", {"path": "a.txt"}, {"authorization": "Bearer not-a-token"}),
    ("/main/objects/stat", {"path": "a.txt"}, {"authorization": "Basic !!!"}),
    ("/main/objects/ls", {}, {"authorization": "Basic " + base64.b64encode(b"no-colon").decode()}),
    ("/main/objects", {"path": "a.txt"}, ADMIN),
    ("/main/objects", {"path": "a.txt"}, {**ADMIN, "range": "bytes=2-4"}),
    ("/main/objects", {"path": "a.txt"}, {**ADMIN, "range": "bytes=20-"}),
    ("/main/objects", {"path": "a.txt"}, {**ADMIN, "if-none-match": "*"}),
    ("/main/objects", {"path": "gone"}, ADMIN),
    ("/main/objects/ls", {}, ADMIN),
    ("/main/objects/ls", {"prefix": "dir/", "amount": "2", "after": "dir/0.csv"}, ADMIN),
    ("/main/objects/ls", {"delimiter": "/"}, ADMIN),
    ("/main/objects/ls", {"amount": "-1", "user_metadata": "false"}, ADMIN),
]


def _same(fast: httpx.Response, routed: httpx.Response) -> None:
    assert fast.status_code == routed.status_code
    assert fast.content == routed.content
    drop = IGNORED_HEADERS
    assert [h for h in fast.headers.raw if h[0].decode().lower() not in drop] == [
        h for h in routed.headers.raw if h[0].decode().lower() not in drop
    ]


@pytest.mark.anyio
@pytest.mark.parametrize(("path", "query", "headers"), REQUESTS)
async def test_a_plain_request_is_answered_as_the_route_answers_it(
    client: httpx.AsyncClient,
    monkeypatch: pytest.MonkeyPatch,
    path: str,
    query: dict[str, str],
    headers: dict[str, str],
) -> None:
    taken = record_taken(monkeypatch)
    fast = await client.get(REF + path, params=query, headers=headers)
    assert taken == [REF + path]
    routed = await client.get(REF + path, params={**query, "presign": "False"}, headers=headers)
    assert taken == [REF + path]
    _same(fast, routed)


@pytest.mark.anyio
async def test_undecodable_basic_credentials_get_the_routes_answer(
    client: httpx.AsyncClient,
) -> None:
    for header in ("Basic !!!", "Basic " + base64.b64encode(b"no-colon").decode()):
        answer = await client.get(
            REF + "/main/objects/stat", params={"path": "a.txt"}, headers={"authorization": header}
        )
        assert answer.status_code == 401
        assert answer.json()["message"] == "error authenticating request"


@pytest.mark.anyio
async def test_fast_requests_count_under_their_route_template(client: httpx.AsyncClient) -> None:
    await client.get(REF + "/main/objects/stat", params={"path": "a.txt"}, headers=ADMIN)
    metrics = (await client.get("/metrics")).text
    template = "/api/v1/repositories/{repository}/refs/{ref}/objects/stat"
    assert f'method="GET",route="{template}",status="200"' in metrics


def test_the_fast_routes_can_be_left_out(
    catalog: Catalog, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    auth = AuthStore(catalog.kv)
    for on in (True, False):
        app = create_app(catalog, auth, fast_reads=on)
        fast = [r for r in app.router.routes if isinstance(r, FastRead)]
        assert [r.path.rsplit("/", 1)[-1] for r in fast] == (
            ["stat", "objects", "ls", "objects", "commits"] if on else []
        )
    monkeypatch.setenv(FAST_READS_ENV, "off")
    assert fast_reads() is False
    monkeypatch.delenv(FAST_READS_ENV)
    assert fast_reads() is True


@pytest.mark.anyio
@pytest.mark.parametrize("catalog", [SqliteKV, RemoteReadsKV], indirect=True)
@pytest.mark.parametrize(
    ("path", "query"),
    [
        ("/main/objects/stat", {"path": "a.txt"}),
        ("/main/objects/stat", {"path": "a.txt", "presign": "False"}),
        ("/main/objects", {"path": "a.txt"}),
        ("/main/objects", {"path": "a.txt", "presign": "False"}),
        ("/main/objects/ls", {}),
    ],
)
async def test_a_read_reads_no_record_twice(
    client: httpx.AsyncClient,
    catalog: Catalog,
    monkeypatch: pytest.MonkeyPatch,
    path: str,
    query: dict[str, str],
) -> None:
    """A read reads the repository record once, inline or on a worker thread.

    Inline, the record read to choose where the read runs is the one the read uses.
    """
    await client.get(REF + path, params=query, headers=ADMIN)  # warm: sign-in remembered
    keys = record_reads(monkeypatch)
    answer = await client.get(REF + path, params=query, headers=ADMIN)
    assert answer.status_code == 200
    assert keys.count(b"repos/repo") == 1, keys
    # the branch is read again once the read is done, to see that it did not move meanwhile
    branch = [k for k in keys if k.endswith(b"/branches/main")]
    assert 1 <= len(branch) <= 2, keys
    others = [k for k in keys if not k.endswith(b"/branches/main")]
    assert len(others) == len(set(others)), keys


@pytest.mark.anyio
@pytest.mark.parametrize("catalog", [SqliteKV, RemoteReadsKV], indirect=True)
@pytest.mark.parametrize(
    ("path", "branch", "headers", "status"),
    [
        ("new.txt", "main", {}, 201),
        ("a.txt", "main", {"if-none-match": "*"}, 412),
        ("new.txt", "nobranch", {}, 404),
    ],
)
async def test_an_uploads_checks_run_where_reads_run(
    client: httpx.AsyncClient,
    catalog: Catalog,
    monkeypatch: pytest.MonkeyPatch,
    path: str,
    branch: str,
    headers: dict[str, str],
    status: int,
) -> None:
    """An upload's checks only read: on a local KV they run on the event loop, not on a thread.

    The store's write stays on a worker thread either way; the answers are the same.
    """
    loop_thread = threading.get_ident()
    threads: list[int] = []
    get_branch = Catalog.get_branch

    def recorded(self: Catalog, repository: Any, name: str) -> Any:
        threads.append(threading.get_ident())
        return get_branch(self, repository, name)

    monkeypatch.setattr(Catalog, "get_branch", recorded)
    url = f"/api/v1/repositories/repo/branches/{branch}/objects"
    answer = await client.post(
        url, params={"path": path}, content=b"body", headers={**ADMIN, **headers}
    )
    assert answer.status_code == status, answer.text
    assert threads, "the branch was not checked"
    inline = isinstance(catalog.kv, SqliteKV) and not isinstance(catalog.kv, RemoteReadsKV)
    assert all((t == loop_thread) == inline for t in threads), (threads, loop_thread)
    if status == 201:
        assert catalog.stat_object("repo", "main", path).entry.size == 4
