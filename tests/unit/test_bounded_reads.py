"""Bounded reads of refs run on the event loop where the KV and the namespace are local.

A repository, a branch, a page of branches, a commit, a page of tags and a tag are read on the
event loop when the KV's reads are local and the repository's namespace is a local directory
(:func:`mirror.api.deps.run_read`), and on a worker thread otherwise. Two apps over two
catalogs built alike (same clock, same history) receive the same requests: one over SQLite, one
over a SQLite the app must treat as a remote KV. Status, headers and bytes must be equal, for
answers and refusals alike, and the catalog's reads must run on the thread the rule says.
"""

from __future__ import annotations

import base64
import threading
from collections import defaultdict
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from mirror.api.app import create_app
from mirror.auth import AuthStore
from mirror.block import BlockResolver
from mirror.core import protection
from mirror.core.catalog import Catalog
from mirror.core.model import Entry
from mirror.core.pulls import PullRequestStore, new_pull_request_id
from mirror.kv.sqlite import SqliteKV
from tests.unit.remote_kv import both_kvs, comparable, record_reads

pytestmark = pytest.mark.anyio

KEY = ("AKIABOUNDEDREAD00001", "bounded-read-secret")
ADMIN = {"authorization": "Basic " + base64.b64encode(f"{KEY[0]}:{KEY[1]}".encode()).decode()}
REPO = "/api/v1/repositories/repo"
IGNORED_HEADERS = {"x-request-id"}
READS = ("get_branch", "list_branches", "get_tag", "list_tags", "resolve_ref", "log")


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def _catalog(root: Path, kv: SqliteKV) -> Catalog:
    catalog = Catalog(kv, BlockResolver(root / "data"), clock=lambda: 1_700_000_000.0)
    catalog.create_repository("repo", "local://repo")
    # an entry of fixed address and time: both catalogs make the same commit IDs
    entry = Entry(address="data/a.txt", size=1, checksum="c" * 32, mtime=1_700_000_000)
    catalog.stage_object("repo", "main", "a.txt", entry)
    catalog.commit("repo", "main", "first")
    for name in ("dev", "feature-1", "feature-2"):
        catalog.create_branch("repo", name, "main")
    catalog.create_tag("repo", "v1", "main")
    catalog.create_tag("repo", "v2", "main")
    return catalog


def _serve(root: Path, kv: SqliteKV) -> tuple[Catalog, Any]:
    catalog = _catalog(root, kv)
    auth = AuthStore(kv)
    auth.bootstrap_admin("admin", *KEY)
    return catalog, create_app(catalog, auth, local_root=root / "data")


@pytest.fixture
async def apps(tmp_path: Path) -> AsyncIterator[list[tuple[Catalog, httpx.AsyncClient]]]:
    async with both_kvs(tmp_path, _serve, "http://t") as made:
        yield made


# (path, query, headers, expected status)
REQUESTS: list[tuple[str, dict[str, str], dict[str, str], int]] = [
    ("", {}, ADMIN, 200),
    ("/branches/main", {}, ADMIN, 200),
    ("/branches/nobranch", {}, ADMIN, 404),
    ("/branches", {}, ADMIN, 200),
    ("/branches", {"prefix": "feature-", "amount": "1"}, ADMIN, 200),
    ("/branches", {"after": "dev", "show_hidden": "true"}, ADMIN, 200),
    ("/branches", {"amount": "-1"}, ADMIN, 200),
    ("/branches", {"amount": "many"}, ADMIN, 400),
    ("/commits/main", {}, ADMIN, 200),
    ("/commits/v1", {}, ADMIN, 200),
    ("/commits/main~1", {}, ADMIN, 200),
    ("/commits/main~5", {}, ADMIN, 404),
    ("/commits/nothing", {}, ADMIN, 404),
    ("/tags", {}, ADMIN, 200),
    ("/tags", {"after": "v1"}, ADMIN, 200),
    ("/tags/v2", {}, ADMIN, 200),
    ("/tags/v9", {}, ADMIN, 404),
    ("/refs/main/commits", {}, ADMIN, 200),
    ("/refs/main/commits", {"amount": "1", "first_parent": "true"}, ADMIN, 200),
    (
        "/refs/v1/commits",
        {"limit": "true", "amount": "1", "since": "2020-01-01T00:00:00Z"},
        ADMIN,
        200,
    ),
    ("/refs/nobranch/commits", {}, ADMIN, 404),
    ("/settings/branch_protection", {}, ADMIN, 200),
    ("/branch_protection", {}, ADMIN, 200),
    ("/pulls/" + new_pull_request_id(1_700_000_000.0), {}, ADMIN, 404),
    ("/pulls/nothing", {}, ADMIN, 400),
    ("/branches/main", {}, {}, 401),
    ("/tags", {}, {"authorization": "Basic " + base64.b64encode(b"x:y").decode()}, 401),
]


def _comparable(answer: httpx.Response) -> tuple[int, list[tuple[bytes, bytes]], bytes]:
    return comparable(answer, IGNORED_HEADERS)


@pytest.mark.parametrize("repo", ["repo", "norepo", "Bad_Name"])
async def test_reads_run_where_the_rule_says_and_answer_alike(
    apps: list[tuple[Catalog, httpx.AsyncClient]], monkeypatch: pytest.MonkeyPatch, repo: str
) -> None:
    loop_thread = threading.get_ident()
    # whether each of the catalog's reads ran on the event loop, per catalog
    placed: dict[int, list[bool]] = {id(catalog): [] for catalog, _ in apps}

    def recording(name: str) -> Any:
        read = getattr(Catalog, name)

        def recorded(self: Catalog, *args: Any, **kwargs: Any) -> Any:
            placed[id(self)].append(threading.get_ident() == loop_thread)
            return read(self, *args, **kwargs)

        return recorded

    for name in READS:
        monkeypatch.setattr(Catalog, name, recording(name))
    by_kv = {id(catalog.kv): id(catalog) for catalog, _ in apps}
    get_rules, get_pull = protection.get_rules, PullRequestStore.get

    def rules_recorded(kv: Any, *args: Any) -> Any:
        placed[by_kv[id(kv)]].append(threading.get_ident() == loop_thread)
        return get_rules(kv, *args)

    def pull_recorded(self: PullRequestStore, *args: Any) -> Any:
        placed[by_kv[id(self.kv)]].append(threading.get_ident() == loop_thread)
        return get_pull(self, *args)

    monkeypatch.setattr(protection, "get_rules", rules_recorded)
    monkeypatch.setattr(PullRequestStore, "get", pull_recorded)
    for path, query, headers, status in REQUESTS:
        url = REPO.replace("/repo", f"/{repo}") + path
        answers = [await client.get(url, params=query, headers=headers) for _, client in apps]
        if repo == "repo":
            assert answers[0].status_code == status, (path, answers[0].text)
        else:
            assert answers[0].status_code in (400, 401, 404), (path, answers[0].text)
        assert _comparable(answers[0]) == _comparable(answers[1]), path
    local, remote = (placed[id(catalog)] for catalog, _ in apps)
    if repo == "repo":
        assert local and all(local), local
        assert remote and not any(remote), remote
    else:
        # a repository that cannot be read is read on a worker thread, which answers its error
        assert not any(local) and not any(remote), (local, remote)


def _placements(monkeypatch: pytest.MonkeyPatch, name: str) -> dict[int, list[bool]]:
    """Record, per catalog, whether each call of ``Catalog.<name>`` ran on the event loop."""
    loop_thread = threading.get_ident()
    placed: dict[int, list[bool]] = defaultdict(list)
    read = getattr(Catalog, name)

    def recorded(self: Catalog, *args: Any, **kwargs: Any) -> Any:
        placed[id(self)].append(threading.get_ident() == loop_thread)
        return read(self, *args, **kwargs)

    monkeypatch.setattr(Catalog, name, recorded)
    return placed


@pytest.mark.parametrize(
    "query",
    [
        {"after": "x" * 64},
        {"objects": "a.txt"},
        {"prefixes": "a"},
    ],
)
async def test_a_log_that_may_walk_the_whole_history_runs_on_a_thread(
    apps: list[tuple[Catalog, httpx.AsyncClient]],
    monkeypatch: pytest.MonkeyPatch,
    query: dict[str, str],
) -> None:
    placed = _placements(monkeypatch, "log")
    answers = [
        await client.get(REPO + "/refs/main/commits", params=query, headers=ADMIN)
        for _, client in apps
    ]
    assert answers[0].status_code == 200, answers[0].text
    assert _comparable(answers[0]) == _comparable(answers[1])
    assert [placed[id(catalog)] for catalog, _ in apps] == [[False], [False]]


async def test_a_page_of_repositories_is_read_where_the_kv_is_read(
    apps: list[tuple[Catalog, httpx.AsyncClient]], monkeypatch: pytest.MonkeyPatch
) -> None:
    placed = _placements(monkeypatch, "list_repositories")
    for query in ({}, {"prefix": "re", "amount": "1"}, {"after": "repo"}):
        answers = [
            await client.get("/api/v1/repositories", params=query, headers=ADMIN)
            for _, client in apps
        ]
        assert answers[0].status_code == 200, answers[0].text
        assert _comparable(answers[0]) == _comparable(answers[1])
    local, remote = (placed[id(catalog)] for catalog, _ in apps)
    assert local == [True] * 3 and remote == [False] * 3


@pytest.mark.parametrize(
    "path",
    [
        "",
        "/branches/main",
        "/branches",
        "/commits/main",
        "/tags",
        "/tags/v1",
        "/refs/main/commits",
        "/settings/branch_protection",
    ],
)
async def test_a_read_on_the_loop_reads_the_repository_once(
    apps: list[tuple[Catalog, httpx.AsyncClient]], monkeypatch: pytest.MonkeyPatch, path: str
) -> None:
    """The record read to choose where the read runs is the one the read uses."""
    _, client = apps[0]  # over SQLite: the read runs on the event loop
    await client.get(REPO + path, headers=ADMIN)  # warm: sign-in remembered
    keys = record_reads(monkeypatch)
    answer = await client.get(REPO + path, headers=ADMIN)
    assert answer.status_code == 200, answer.text
    assert keys.count(b"repos/repo") == 1, keys
