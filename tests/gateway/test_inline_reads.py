"""The gateway's reads run on the event loop when the KV and the bucket are local, and answer alike.

Two gateways over two catalogs built alike (same clock, same objects) receive the same signed
requests in the same order: one over SQLite (its reads are local: the key's look-up, a stat,
the first chunk of a GET and a PUT's checks run on the event loop), one over a SQLite the
gateway must treat as a remote KV (everything on worker threads). Status, headers and bytes
must be equal, for answers and refusals alike, and the catalog's stat must run on the thread
the rule says.
"""

from __future__ import annotations

import re
import threading
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from mirror.api.app import create_app
from mirror.auth.secrets import SecretCipher
from mirror.auth.store import AuthStore
from mirror.block import BlockResolver
from mirror.config import GatewaySettings
from mirror.core.catalog import Catalog
from mirror.gateway.app import with_gateway
from mirror.gateway.context import GatewayState
from mirror.kv.sqlite import SqliteKV
from tests.unit.gateway_signing import KEY_ID, SECRET, sign_v4
from tests.unit.remote_kv import RemoteReadsKV, both_kvs, comparable, record_reads

pytestmark = pytest.mark.anyio

HOST = "s3.example.test"
BASE = f"http://{HOST}"
IGNORED_HEADERS = {"x-amz-request-id", "x-amz-id-2", "x-request-id"}


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def _catalog(root: Path, kv: SqliteKV) -> Catalog:
    catalog = Catalog(kv, BlockResolver(root / "data"), clock=lambda: 1_700_000_000.0)
    catalog.create_repository("repo", "local://repo")
    catalog.upload_object("repo", "main", "a.txt", b"0123456789", metadata={"color": "red"})
    catalog.upload_object("repo", "main", "big.bin", bytes(range(256)) * 5000)
    catalog.commit("repo", "main", "first")
    catalog.upload_object("repo", "main", "staged.txt", b"staged")
    return catalog


def _serve(root: Path, kv: SqliteKV) -> tuple[Catalog, Any]:
    catalog = _catalog(root, kv)
    auth = AuthStore(kv, cipher=SecretCipher("inline reads key"))
    auth.bootstrap_admin("admin", KEY_ID, SECRET)
    api = create_app(catalog, auth, local_root=root / "data")
    state = GatewayState(catalog, auth, GatewaySettings(domain_names=(HOST,)))
    assert state.inline_reads is not isinstance(kv, RemoteReadsKV)
    return catalog, with_gateway(api, state, api.state.metrics)


@pytest.fixture
async def gateways(tmp_path: Path) -> AsyncIterator[list[tuple[Catalog, httpx.AsyncClient]]]:
    async with both_kvs(tmp_path, _serve, BASE) as made:
        yield made


# (method, path, headers, body, expected status)
REQUESTS: list[tuple[str, str, dict[str, str], bytes, int]] = [
    ("GET", "/repo/main/a.txt", {}, b"", 200),
    ("HEAD", "/repo/main/a.txt", {}, b"", 200),
    ("GET", "/repo/main/a.txt", {"range": "bytes=2-5"}, b"", 206),
    ("GET", "/repo/main/a.txt", {"range": "bytes=20-"}, b"", 416),
    ("GET", "/repo/main/a.txt", {"if-none-match": '"781e5e245d69b566979b86e28d23f2c7"'}, b"", 304),
    ("GET", "/repo/main/big.bin", {}, b"", 200),
    ("GET", "/repo/main/staged.txt", {}, b"", 200),
    ("GET", "/repo/main/missing", {}, b"", 404),
    ("GET", "/repo/nobranch/a.txt", {}, b"", 404),
    ("GET", "/nobucket/main/a.txt", {}, b"", 404),
    ("HEAD", "/nobucket/main/a.txt", {}, b"", 404),
    ("PUT", "/repo/main/new.txt", {}, b"new body", 200),
    ("PUT", "/repo/main/a.txt", {"if-none-match": "*"}, b"again", 412),
    ("PUT", "/repo/nobranch/new.txt", {}, b"x", 404),
    ("PUT", "/repo/main/", {}, b"", 200),
    ("PUT", "/nobucket/main/new.txt", {}, b"x", 404),
    ("GET", "/repo/main/new.txt", {}, b"", 200),
    ("GET", "/repo?list-type=2&prefix=main%2F", {}, b"", 200),
    ("GET", "/repo?list-type=2&prefix=main%2F&delimiter=%2F&max-keys=1", {}, b"", 200),
    ("GET", "/repo?delimiter=%2F", {}, b"", 200),
    ("GET", "/nobucket?list-type=2&prefix=main%2F", {}, b"", 404),
    ("HEAD", "/repo", {}, b"", 200),
    ("HEAD", "/nobucket", {}, b"", 404),
]


def _comparable(answer: httpx.Response) -> tuple[int, list[tuple[bytes, bytes]], bytes]:
    status, headers, content = comparable(answer, IGNORED_HEADERS)
    return status, headers, re.sub(rb"<(RequestId|HostId)>[^<]*</(RequestId|HostId)>", b"", content)


async def test_reads_run_where_the_rule_says_and_answer_alike(
    gateways: list[tuple[Catalog, httpx.AsyncClient]], monkeypatch: pytest.MonkeyPatch
) -> None:
    loop_thread = threading.get_ident()
    # (bucket, whether on the event loop) of each stat and listing, per catalog
    threads: dict[int, list[tuple[str, bool]]] = {id(catalog): [] for catalog, _ in gateways}

    def recording(name: str) -> Any:
        read = getattr(Catalog, name)

        def recorded(self: Catalog, *args: Any, **kwargs: Any) -> Any:
            bucket = args[0] if isinstance(args[0], str) else args[0].id
            threads[id(self)].append((bucket, threading.get_ident() == loop_thread))
            return read(self, *args, **kwargs)

        return recorded

    for name in ("stat_object", "list_objects", "list_branches"):
        monkeypatch.setattr(Catalog, name, recording(name))
    for method, path, headers, body, status in REQUESTS:
        answers = []
        for _, client in gateways:
            url, signed = sign_v4(method, BASE + path, body=body, headers=headers)
            answer = await client.request(method, url, headers=signed, content=body)
            answers.append(answer)
        assert answers[0].status_code == status, (method, path, answers[0].text)
        assert _comparable(answers[0]) == _comparable(answers[1]), (method, path)
    local, remote = (threads[id(catalog)] for catalog, _ in gateways)
    # an unknown bucket is read on a worker thread, which answers its error
    assert sorted(set(local)) == [("nobucket", False), ("repo", True)], local
    assert sorted(set(remote)) == [("nobucket", False), ("repo", False)], remote


@pytest.mark.parametrize(
    ("method", "path", "headers", "body"),
    [
        ("GET", "/repo/main/a.txt", {}, b""),
        ("HEAD", "/repo/main/a.txt", {}, b""),
        ("GET", "/repo/main/big.bin", {}, b""),
        ("GET", "/repo?list-type=2&prefix=main%2F", {}, b""),
        ("GET", "/repo?delimiter=%2F", {}, b""),
        ("HEAD", "/repo", {}, b""),
        ("PUT", "/repo/main/put.txt", {"if-none-match": "*"}, b"body"),
        ("PUT", "/repo/main/", {}, b""),
    ],
)
async def test_a_request_reads_its_buckets_record_once(
    gateways: list[tuple[Catalog, httpx.AsyncClient]],
    monkeypatch: pytest.MonkeyPatch,
    method: str,
    path: str,
    headers: dict[str, str],
    body: bytes,
) -> None:
    catalog, client = gateways[0]  # over SQLite: the record read to choose serves the reads
    keys = record_reads(monkeypatch)
    written = 0
    if method == "PUT" and body:
        # the write itself, on its worker thread, reads the record as the core's upload does
        catalog.upload_object("repo", "main", "other.txt", body)
        written = keys.count(b"repos/repo")
        keys.clear()
    url, signed = sign_v4(method, BASE + path, body=body, headers=headers)
    answer = await client.request(method, url, headers=signed, content=body)
    assert answer.status_code in (200, 206), answer.text
    assert keys.count(b"repos/repo") == 1 + written, keys
