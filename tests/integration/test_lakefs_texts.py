"""lakeFS's error texts and statuses (reference §9), one case per row LakeMirror can produce.

Clients match on lakeFS's texts (substrings), so each message must start with lakeFS's text;
LakeMirror's detail follows it. Every case runs against one live server process, which retries
a branch's compare-and-swap once only (``server.ref_update_tries`` = 1), so that concurrent
commits give up with 429 quickly; nothing else here runs concurrently.

Rows LakeMirror cannot produce are not here: pull requests, hooks, imports, staging-backing
links, ``source_metarange`` commits, branch locks, repository deletion in the background and
``commit already exists`` (importing a commit record again succeeds).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import httpx
import pytest

from mirror.api.convert import commit_model
from mirror.core.commits import new_commit
from mirror.core.ids import MetaRangeID
from tests.integration.harness import Server, running_server, unique

KEY = ("AKIATEXTS00000000001", "lakefs-texts-secret-access-key-00000000")
DEADLINE = 60.0


@dataclass
class World:
    """One repository set up so that every row has something to refuse."""

    server: Server
    http: httpx.Client
    repo: str
    merge_commit: str
    mirror: str
    roots: tuple[str, str]

    def url(self, tail: str) -> str:
        return f"/repositories/{self.repo}{tail}"


def _ok(response: httpx.Response, status: int = 201) -> httpx.Response:
    assert response.status_code == status, (response.request.url, response.text)
    return response


def _upload(http: httpx.Client, repo: str, branch: str, path: str, data: bytes) -> None:
    _ok(
        http.post(
            f"/repositories/{repo}/branches/{branch}/objects", params={"path": path}, content=data
        )
    )


def _commit(http: httpx.Client, repo: str, branch: str, message: str) -> str:
    made = http.post(f"/repositories/{repo}/branches/{branch}/commits", json={"message": message})
    return str(_ok(made).json()["id"])


def _branch(http: httpx.Client, repo: str, name: str, source: str) -> None:
    _ok(http.post(f"/repositories/{repo}/branches", json={"name": name, "source": source}))


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    root = tmp_path_factory.mktemp("texts")
    with (
        running_server(
            root / "data",
            root / "server.log",
            access_key_id=KEY[0],
            secret_access_key=KEY[1],
            env={"LAKEMIRROR_SERVER__REF_UPDATE_TRIES": "1"},
        ) as server,
        httpx.Client(base_url=f"{server.url}/api/v1", auth=KEY, timeout=30.0) as http,
    ):
        repo = unique("texts")
        _ok(
            http.post(
                "/repositories", json={"name": repo, "storage_namespace": server.namespace(repo)}
            )
        )
        _upload(http, repo, "main", "a", b"base")
        _upload(http, repo, "main", "gone", b"data that will vanish")
        _commit(http, repo, "main", "base")
        # a merge commit on main
        _branch(http, repo, "dev", "main")
        _upload(http, repo, "dev", "d", b"d")
        _commit(http, repo, "dev", "d")
        _upload(http, repo, "main", "m", b"m")
        _commit(http, repo, "main", "m")
        merged = _ok(http.post(f"/repositories/{repo}/refs/dev/merge/main", json={}), 200)
        # two branches changing "a" differently
        for name in ("left", "right"):
            _branch(http, repo, name, "main")
            _upload(http, repo, name, "a", name.encode())
            _commit(http, repo, name, name)
        # uncommitted changes, a tag, a protected branch, an object without its data
        _branch(http, repo, "dirty", "main")
        _upload(http, repo, "dirty", "wip", b"w")
        _ok(http.post(f"/repositories/{repo}/tags", json={"id": "v1", "ref": "main"}))
        _branch(http, repo, "guarded", "main")
        guard = [{"pattern": "guarded"}]
        _ok(http.put(f"/repositories/{repo}/settings/branch_protection", json=guard), 204)
        stat = http.get(f"/repositories/{repo}/refs/main/objects/stat", params={"path": "gone"})
        address = _ok(stat, 200).json()["physical_address"]
        (server.data_dir / address.removeprefix("local://")).unlink()
        # a mirror holding two unrelated histories (two root commits)
        mirror = unique("texts-mirror")
        created = http.post(
            "/mirror/repositories",
            json={
                "name": mirror,
                "storage_namespace": server.namespace(mirror),
                "mirror_of": "x/y",
            },
        )
        _ok(created)
        roots = []
        for message in ("one history", "another history"):
            record = new_commit("someone", message, MetaRangeID(""), 1_700_000_000, {}, ())
            body = commit_model(record).model_dump()
            _ok(http.post(f"/repositories/{mirror}/mirror/commits", json=body))
            roots.append(record.id)
        yield World(server, http, repo, merged.json()["reference"], mirror, (roots[0], roots[1]))


def _concurrent_commits_until_one_gives_up(w: World) -> httpx.Response:
    """Commit from several threads at once until a commit loses its one compare-and-swap."""
    found: list[httpx.Response] = []
    stop = threading.Event()
    deadline = time.monotonic() + DEADLINE
    url = w.url("/branches/hot/commits")

    def commit_until_refused(_: int) -> None:
        with httpx.Client(base_url=w.http.base_url, auth=KEY, timeout=30.0) as client:
            while not stop.is_set() and time.monotonic() < deadline:
                answer = client.post(url, json={"message": "hot", "allow_empty": True})
                if answer.status_code != 201:
                    found.append(answer)
                    stop.set()

    if w.http.get(w.url("/branches/hot")).status_code == 404:
        _branch(w.http, w.repo, "hot", "main")
    with ThreadPoolExecutor(max_workers=6) as pool:
        list(pool.map(commit_until_refused, range(6)))
    assert found, f"no commit lost a compare-and-swap within {DEADLINE} s"
    return found[0]


def _create_user_twice(w: World) -> httpx.Response:
    user = unique("user")
    _ok(w.http.post("/auth/users", json={"id": user}))
    return w.http.post("/auth/users", json={"id": user})


@dataclass(frozen=True)
class Row:
    text: str
    status: int
    call: Callable[[World], httpx.Response]


ROWS = [
    # 404
    Row(
        "not found",
        404,
        lambda w: w.http.get(w.url("/refs/main/objects/stat"), params={"path": "nope"}),
    ),
    Row("repository not found", 404, lambda w: w.http.get("/repositories/no-such-repo")),
    Row("branch not found", 404, lambda w: w.http.get(w.url("/branches/no-such-branch"))),
    Row("tag not found", 404, lambda w: w.http.get(w.url("/tags/no-such-tag"))),
    Row(
        "commit not found",
        404,
        lambda w: w.http.put(
            f"/repositories/{w.mirror}/mirror/branches/x", json={"commit_id": "e" * 64}
        ),
    ),
    # 409
    Row(
        "branch already exists: not unique",
        409,
        lambda w: w.http.post(w.url("/branches"), json={"name": "dev", "source": "main"}),
    ),
    Row(
        "tag already exists: not unique",
        409,
        lambda w: w.http.post(w.url("/tags"), json={"id": "v1", "ref": "main"}),
    ),
    Row("conflict found", 409, lambda w: w.http.post(w.url("/refs/left/merge/right"), json={})),
    Row(
        "must specify 1-based parent number for reverting merge commit",
        409,
        lambda w: w.http.post(
            w.url("/branches/dev/revert"), json={"ref": w.merge_commit, "parent_number": 0}
        ),
    ),
    Row("Already exists", 409, lambda w: _create_user_twice(w)),
    # 400
    Row(
        "uncommitted changes (dirty branch)",
        400,
        lambda w: w.http.post(w.url("/refs/dev/merge/dirty"), json={}),
    ),
    Row(
        "no changes",
        400,
        lambda w: w.http.post(w.url("/branches/dev/commits"), json={"message": "x"}),
    ),
    Row(
        "invalid value: validation error",
        400,
        lambda w: w.http.post(w.url("/branches"), json={"name": "no spaces", "source": "main"}),
    ),
    Row(
        "invalid merge strategy",
        400,
        lambda w: w.http.post(w.url("/refs/left/merge/right"), json={"strategy": "mine"}),
    ),
    Row(
        "given commit does not have the given parent number",
        400,
        lambda w: w.http.post(
            w.url("/branches/dev/revert"), json={"ref": w.merge_commit, "parent_number": 3}
        ),
    ),
    Row(
        "must specify 1-based parent number for cherry-picking merge commit",
        400,
        lambda w: w.http.post(w.url("/branches/dev/cherry-pick"), json={"ref": w.merge_commit}),
    ),
    Row(
        "reference to staging area with $ is not a commit",
        400,
        lambda w: w.http.get(w.url("/commits/main$")),
    ),
    Row(
        "missing path: required value: validation error",
        400,
        lambda w: w.http.get(w.url("/refs/main/objects/stat"), params={"path": ""}),
    ),
    # 403
    Row(
        "protected branch",
        403,
        lambda w: w.http.put(w.url("/branches/guarded/hard_reset"), params={"ref": "dev"}),
    ),
    Row(
        "cannot write to protected branch",
        403,
        lambda w: w.http.post(
            w.url("/branches/guarded/objects"), params={"path": "x"}, content=b"x"
        ),
    ),
    Row(
        "cannot commit to protected branch",
        403,
        lambda w: w.http.post(
            w.url("/branches/guarded/commits"), json={"message": "x", "allow_empty": True}
        ),
    ),
    Row(
        "read-only repository",
        403,
        lambda w: w.http.post(
            f"/repositories/{w.mirror}/tags", json={"id": "t", "ref": w.roots[0]}
        ),
    ),
    Row(
        "cannot delete repository default branch",
        403,
        lambda w: w.http.delete(w.url("/branches/main")),
    ),
    # 412
    Row(
        "Precondition failed",
        412,
        lambda w: w.http.put(
            w.url("/settings/branch_protection"), json=[], headers={"If-Match": "0" * 64}
        ),
    ),
    # 410
    Row("No data", 410, lambda w: w.http.get(w.url("/refs/main/objects"), params={"path": "gone"})),
    # 429
    Row("Too many attempts, try again later", 429, _concurrent_commits_until_one_gives_up),
    # 500: lakeFS leaves "no merge base" unmapped
    Row(
        "no merge base",
        500,
        lambda w: w.http.get(f"/repositories/{w.mirror}/refs/{w.roots[0]}/diff/{w.roots[1]}"),
    ),
]


@pytest.mark.parametrize("row", ROWS, ids=[r.text for r in ROWS])
def test_lakefs_text_and_status(world: World, row: Row) -> None:
    response = row.call(world)
    assert response.status_code == row.status, response.text
    message = response.json()["message"]
    assert message.startswith(row.text), message
    # LakeMirror's detail follows lakeFS's text
    assert message[len(row.text) : len(row.text) + 2] == ": " and len(message) > len(row.text) + 2


def test_a_conflicting_merge_answers_an_empty_reference(world: World) -> None:
    response = world.http.post(world.url("/refs/left/merge/right"), json={})
    assert response.status_code == 409
    body = response.json()
    assert body["reference"] == "" and body["message"].startswith("conflict found")
    assert body["conflicts"] == ["a"]


def test_too_many_attempts_says_when_to_retry(world: World) -> None:
    refused = _concurrent_commits_until_one_gives_up(world)
    assert refused.status_code == 429 and refused.headers["retry-after"] == "1"
