"""Repository roles over the API: demote, promote, the promotion record and preserved branches.

One region's app in this process (in-memory KV and objects), called over ASGI by an
administrator, a replicator (built-in ``Replicator`` policy), a reader and nobody at all, and
by the replicant's client (:class:`~mirror.replicant.client.LakeFSClient`).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from fastapi import FastAPI

from mirror.block import BlockResolver
from mirror.core.catalog import Catalog
from mirror.core.errors import RepositoryReadOnlyError
from mirror.errors import AlreadyExistsError, ConflictError, InvalidValueError, NotFoundError
from mirror.kv import MemoryKV
from mirror.replicant.client import RemoteCommit
from tests.inprocess import ADMIN, REPLICATOR, app_client, region_app

READER = ("AKIAREADER0000000001", "reader-secret")


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


class Region:
    """A catalog with repository ``origin`` (main: two commits), its app and three callers."""

    def __init__(self) -> None:
        self.catalog, self.app = region_app(BlockResolver())
        self.catalog.create_repository("origin", "mem://origin")
        for n in (1, 2):
            self.catalog.upload_object(
                "origin", "main", f"f{n}.txt", f"data {n}".encode(), content_type=None, metadata={}
            )
            self.catalog.commit("origin", "main", f"commit {n}", committer="admin")

    def client(self, key: tuple[str, str] | None) -> httpx.AsyncClient:
        """Return an HTTP client of ``/api/v1`` signed in with ``key`` (``None``: anonymous)."""
        return httpx.AsyncClient(
            transport=httpx.ASGITransport(app=self.app),
            base_url="http://region/api/v1",
            auth=key,
        )


@pytest.fixture
def region() -> Region:
    return Region()


@pytest.fixture
async def admin(region: Region) -> AsyncIterator[httpx.AsyncClient]:
    async with region.client(ADMIN) as c:
        yield c


@pytest.fixture
async def replicator(region: Region) -> AsyncIterator[httpx.AsyncClient]:
    async with region.client(REPLICATOR) as c:
        yield c


async def _reader(region: Region, admin: httpx.AsyncClient) -> httpx.AsyncClient:
    """Return a client of a user in the built-in Readers group (no fs:MirrorRepository)."""
    assert (await admin.post("/auth/users", json={"id": "reader"})).status_code == 201
    assert (await admin.put("/auth/groups/Readers/members/reader")).status_code == 201
    made = await admin.post("/auth/users/reader/credentials")
    assert made.status_code == 201, made.text
    body = made.json()
    return region.client((body["access_key_id"], body["secret_access_key"]))


async def _head(admin: httpx.AsyncClient, branch: str = "main", repo: str = "origin") -> str:
    got = await admin.get(f"/repositories/{repo}/branches/{branch}")
    assert got.status_code == 200, got.text
    return str(got.json()["commit_id"])


async def _upload(client: httpx.AsyncClient, path: str, repo: str = "origin") -> httpx.Response:
    return await client.post(
        f"/repositories/{repo}/branches/main/objects",
        params={"path": path},
        files={"content": (path, b"x")},
    )


@pytest.mark.anyio
async def test_demote_makes_writes_refused_and_retry_succeeds(
    admin: httpx.AsyncClient, replicator: httpx.AsyncClient
) -> None:
    demoted = await replicator.post(
        "/repositories/origin/mirror/demote", json={"mirror_of": "b/origin"}
    )
    assert demoted.status_code == 200, demoted.text
    assert demoted.json()["read_only"] is True
    assert demoted.json()["mirror_of"] == "b/origin"
    assert (await admin.get("/repositories/origin")).json()["read_only"] is True

    refused = await admin.post("/repositories/origin/branches/main/commits", json={"message": "m"})
    assert refused.status_code == 403, refused.text
    assert "b/origin" in refused.json()["message"]
    assert (await _upload(admin, "late.txt")).status_code == 403
    created = await admin.post(
        "/repositories/origin/branches", json={"name": "x", "source": "main"}
    )
    assert created.status_code == 403
    tagged = await admin.post("/repositories/origin/tags", json={"id": "t", "ref": "main"})
    assert tagged.status_code == 403

    again = await replicator.post(
        "/repositories/origin/mirror/demote", json={"mirror_of": "b/origin"}
    )
    assert again.status_code == 200, again.text
    other = await replicator.post(
        "/repositories/origin/mirror/demote", json={"mirror_of": "c/origin"}
    )
    assert other.status_code == 409, other.text
    assert "c/origin" in other.json()["message"]
    assert (await admin.get("/repositories/origin")).json()["mirror_of"] == "b/origin"


@pytest.mark.anyio
async def test_demoted_repository_takes_mirror_writes(
    admin: httpx.AsyncClient, replicator: httpx.AsyncClient
) -> None:
    head = await _head(admin)
    parent = (await admin.get(f"/repositories/origin/commits/{head}")).json()["parents"][0]
    demoted = await replicator.post(
        "/repositories/origin/mirror/demote", json={"mirror_of": "b/origin"}
    )
    assert demoted.status_code == 200, demoted.text
    moved = await replicator.put(
        "/repositories/origin/mirror/branches/main", json={"commit_id": parent, "expected": head}
    )
    assert moved.status_code == 200, moved.text
    assert await _head(admin) == parent
    tag = await replicator.put("/repositories/origin/mirror/tags/v1", json={"commit_id": head})
    assert tag.status_code == 201, tag.text


@pytest.mark.anyio
async def test_demote_and_promote_need_credentials_and_permission(
    region: Region, admin: httpx.AsyncClient
) -> None:
    async with region.client(None) as anonymous:
        for path, body in (
            ("demote", {"mirror_of": "b/origin"}),
            ("promote", {"promotion": {}}),
            ("preserve", {"branch": "p", "head": await _head(admin), "commits": []}),
        ):
            answer = await anonymous.post(f"/repositories/origin/mirror/{path}", json=body)
            assert answer.status_code == 401, (path, answer.text)
            assert "message" in answer.json()
        assert (await anonymous.get("/repositories/origin/mirror/promotion")).status_code == 401
    async with await _reader(region, admin) as reader:
        for path, body in (
            ("demote", {"mirror_of": "b/origin"}),
            ("promote", {"promotion": {}}),
            ("preserve", {"branch": "p", "head": await _head(admin), "commits": []}),
        ):
            answer = await reader.post(f"/repositories/origin/mirror/{path}", json=body)
            assert answer.status_code == 403, (path, answer.text)
            assert "message" in answer.json()
        assert (await reader.get("/repositories/origin/mirror/promotion")).status_code == 403
    assert (await admin.get("/repositories/origin")).json()["read_only"] is False


@pytest.mark.anyio
async def test_promote_keeps_the_newest_record(
    admin: httpx.AsyncClient, replicator: httpx.AsyncClient
) -> None:
    never = await replicator.get("/repositories/origin/mirror/promotion")
    assert never.status_code == 404, never.text
    assert "message" in never.json()
    not_mirror = await replicator.post(
        "/repositories/origin/mirror/promote", json={"promotion": {}}
    )
    assert not_mirror.status_code == 409, not_mirror.text
    assert not_mirror.json() == {"message": "repository 'origin' is not a mirror"}

    head = await _head(admin)
    first: dict[str, Any] = {"from": "a/origin", "at": 1, "forced": False, "heads": {"main": head}}
    for n, record in enumerate((first, {**first, "at": 2, "forced": True, "missing": {}})):
        demoted = await replicator.post(
            "/repositories/origin/mirror/demote", json={"mirror_of": f"a{n}/origin"}
        )
        assert demoted.status_code == 200, demoted.text
        promoted = await replicator.post(
            "/repositories/origin/mirror/promote", json={"promotion": record}
        )
        assert promoted.status_code == 200, promoted.text
        assert promoted.json()["read_only"] is False
        assert promoted.json()["mirror_of"] is None
        got = await replicator.get("/repositories/origin/mirror/promotion")
        assert got.status_code == 200, got.text
        assert got.json() == record

    again = await replicator.post("/repositories/origin/mirror/promote", json={"promotion": first})
    assert again.status_code == 409
    assert (await replicator.get("/repositories/origin/mirror/promotion")).json()["at"] == 2
    written = await _upload(admin, "after.txt")
    assert written.status_code == 201, written.text
    committed = await admin.post(
        "/repositories/origin/branches/main/commits", json={"message": "w"}
    )
    assert committed.status_code == 201, committed.text


@pytest.mark.anyio
async def test_bad_bodies_and_missing_repository(replicator: httpx.AsyncClient) -> None:
    empty = await replicator.post("/repositories/origin/mirror/demote", json={"mirror_of": ""})
    assert empty.status_code == 400, empty.text
    no_record = await replicator.post("/repositories/origin/mirror/promote", json={})
    assert no_record.status_code == 400, no_record.text
    for path, body in (
        ("demote", {"mirror_of": "b/nowhere"}),
        ("promote", {"promotion": {}}),
        ("preserve", {"branch": "p", "head": "0" * 64, "commits": []}),
    ):
        answer = await replicator.post(f"/repositories/nowhere/mirror/{path}", json=body)
        assert answer.status_code == 404, (path, answer.text)
    assert (await replicator.get("/repositories/nowhere/mirror/promotion")).status_code == 404


async def _diverge(region: Region, admin: httpx.AsyncClient) -> tuple[str, list[dict[str, Any]]]:
    """Make two commits on a side branch ``dev`` of origin; return main's head and them."""
    base = await _head(admin)
    assert (
        await admin.post("/repositories/origin/branches", json={"name": "dev", "source": "main"})
    ).status_code == 201
    records = []
    for n in (1, 2):
        region.catalog.upload_object(
            "origin", "dev", f"dev{n}.txt", b"d", content_type=None, metadata={}
        )
        commit = region.catalog.commit("origin", "dev", f"dev {n}", committer="admin").commit
        records.append((await admin.get(f"/repositories/origin/commits/{commit.id}")).json())
    return base, records


@pytest.mark.anyio
async def test_preserve_imports_commits_onto_a_new_branch(
    region: Region, admin: httpx.AsyncClient, replicator: httpx.AsyncClient
) -> None:
    base, records = await _diverge(region, admin)
    # a second region whose repository has main's history but not dev's commits
    other = Region()
    async with other.client(ADMIN) as other_admin, other.client(REPLICATOR) as other_replicator:
        history = [
            (await admin.get(f"/repositories/origin/commits/{c['id']}")).json()
            for c in reversed(
                (await admin.get("/repositories/origin/refs/main/commits")).json()["results"]
            )
        ]
        other.catalog.delete_repository("origin", force=True)
        other.catalog.create_repository(
            "origin", "mem://b-origin", read_only=True, mirror_of="a/origin", bare=True
        )
        for record in history:
            imported = await other_replicator.post(
                "/repositories/origin/mirror/commits", json=record
            )
            assert imported.status_code == 201, imported.text
        moved = await other_replicator.put(
            "/repositories/origin/mirror/branches/main",
            json={"commit_id": base, "expected": None},
        )
        assert moved.status_code == 200, moved.text
        head = records[-1]["id"]
        body = {"branch": "preserved-dev-20260101T000000", "head": head, "commits": records}
        kept = await other_replicator.post("/repositories/origin/mirror/preserve", json=body)
        assert kept.status_code == 201, kept.text
        assert kept.json() == {"id": body["branch"], "commit_id": head}
        assert await _head(other_admin, body["branch"]) == head
        log = (await other_admin.get(f"/repositories/origin/refs/{body['branch']}/commits")).json()
        assert [c["id"] for c in log["results"][:2]] == [head, records[0]["id"]]

        twice = await other_replicator.post("/repositories/origin/mirror/preserve", json=body)
        assert twice.status_code == 409, twice.text

        # a record whose ID does not match its content is refused, nothing is created
        forged = {**records[0], "message": "changed"}
        bad = await other_replicator.post(
            "/repositories/origin/mirror/preserve",
            json={"branch": "preserved-x", "head": forged["id"], "commits": [forged]},
        )
        assert bad.status_code == 400, bad.text
        missing = await other_replicator.post(
            "/repositories/origin/mirror/preserve",
            json={"branch": "preserved-y", "head": "f" * 64, "commits": []},
        )
        assert missing.status_code == 404, missing.text
        for name in ("preserved-x", "preserved-y"):
            assert (
                await other_admin.get(f"/repositories/origin/branches/{name}")
            ).status_code == 404


@pytest.mark.anyio
async def test_preserve_on_a_writable_repository(
    region: Region, admin: httpx.AsyncClient, replicator: httpx.AsyncClient
) -> None:
    head = await _head(admin)
    kept = await replicator.post(
        "/repositories/origin/mirror/preserve",
        json={"branch": "preserved-main", "head": head, "commits": []},
    )
    assert kept.status_code == 201, kept.text
    assert await _head(admin, "preserved-main") == head
    taken = await replicator.post(
        "/repositories/origin/mirror/preserve",
        json={"branch": "main", "head": head, "commits": []},
    )
    assert taken.status_code == 409, taken.text


@pytest.mark.anyio
async def test_replicant_client_calls(region: Region, admin: httpx.AsyncClient) -> None:
    base, records = await _diverge(region, admin)
    app: FastAPI = region.app
    async with app_client(app, "region", REPLICATOR) as client:
        assert await client.get_promotion("origin") is None
        with pytest.raises(NotFoundError):
            await client.get_promotion("nowhere")
        with pytest.raises(ConflictError) as refused:
            await client.promote_repository("origin", {"from": "x"})
        assert str(refused.value) == "repository 'origin' is not a mirror"
        demoted = await client.demote_repository("origin", "b/origin")
        assert demoted["read_only"] is True
        assert (await client.demote_repository("origin", "b/origin"))["mirror_of"] == "b/origin"
        with pytest.raises(ConflictError) as refused:
            await client.demote_repository("origin", "c/origin")
        assert not isinstance(refused.value, AlreadyExistsError)
        promoted = await client.promote_repository("origin", {"from": "b/origin", "at": 5})
        assert promoted["read_only"] is False
        assert await client.get_promotion("origin") == {"from": "b/origin", "at": 5}

        commits = [RemoteCommit.from_json(r) for r in records]
        ref = await client.preserve_branch("origin", "preserved-dev", commits[-1].id, commits)
        assert ref == {"id": "preserved-dev", "commit_id": commits[-1].id}
        with pytest.raises(AlreadyExistsError):
            await client.preserve_branch("origin", "preserved-dev", base, [])
        forged = RemoteCommit.from_json({**records[0], "message": "changed"})
        with pytest.raises(InvalidValueError):
            await client.preserve_branch("origin", "preserved-forged", forged.id, [forged])


def test_catalog_demotion_fences_every_branch_and_drops_uncommitted_changes() -> None:
    catalog = Catalog(MemoryKV(), BlockResolver())
    catalog.create_repository("repo", "mem://repo")
    catalog.create_branch("repo", "dev", "main")
    catalog.upload_object("repo", "dev", "staged.csv", b"never committed")
    assert len(list(catalog.diff_uncommitted("repo", "dev"))) == 1
    before = {b.id: b for b in catalog.list_branches("repo")}
    catalog.demote_repository("repo", "b/repo")
    after = {b.id: b for b in catalog.list_branches("repo")}
    assert set(after) == {"main", "dev"}
    for name, branch in after.items():
        assert branch.fence and branch.fence != before[name].fence
        assert branch.commit_id == before[name].commit_id
        assert branch.staging_token != before[name].staging_token
        assert branch.sealed_tokens == ()
    # a mirror branch shows its commits only, and a later promotion starts from them
    assert list(catalog.diff_uncommitted("repo", "dev")) == []
    catalog.promote_repository("repo", {})
    assert list(catalog.diff_uncommitted("repo", "dev")) == []


class DemoteMidWrite:
    """A KV through which, once armed, a demotion runs just before a chosen ``set_if``.

    The demotion goes through a second catalog on the same store (another server process), after
    the writer read the repository record and the branch, right before its swap: the narrowest
    window a write racing a demotion has.
    """

    def __init__(self, inner: MemoryKV) -> None:
        self.inner = inner
        self.armed: tuple[bytes, Any] | None = None

    def arm(self, key_part: bytes, compete: Any) -> None:
        """Run ``compete`` before the next write of a key containing ``key_part``."""
        self.armed = (key_part, compete)

    def _maybe_compete(self, key: bytes) -> None:
        if self.armed is not None and self.armed[0] in key:
            compete = self.armed[1]
            self.armed = None
            compete()

    def set_if(self, key: bytes, value: bytes, expected: bytes | None) -> None:
        self._maybe_compete(key)
        self.inner.set_if(key, value, expected)

    def set(self, key: bytes, value: bytes) -> None:
        self._maybe_compete(key)
        self.inner.set(key, value)

    def delete_if(self, key: bytes, expected: bytes) -> None:
        self._maybe_compete(key)
        self.inner.delete_if(key, expected)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


def _racing_catalogs() -> tuple[Catalog, Catalog, DemoteMidWrite]:
    kv = DemoteMidWrite(MemoryKV())
    blocks = BlockResolver()
    writer, demoter = Catalog(kv, blocks), Catalog(kv.inner, blocks)  # type: ignore[arg-type]
    writer.create_repository("repo", "mem://repo")
    writer.upload_object("repo", "main", "a", b"a", content_type=None, metadata={})
    return writer, demoter, kv


def test_commit_racing_a_demotion_is_refused_and_never_lands() -> None:
    writer, demoter, kv = _racing_catalogs()
    head = writer.get_branch("repo", "main").commit_id
    demoted: list[str] = []

    def demote() -> None:
        demoter.demote_repository("repo", "b/repo")
        demoted.append(demoter.get_branch("repo", "main").commit_id)

    # the commit's first set_if on main seals staging; arm after it, on the head move
    original = writer._ctx.refs.set_branch_if
    calls: list[int] = []

    def counting(*args: Any, **kwargs: Any) -> None:
        calls.append(1)
        if len(calls) == 2:
            kv.arm(b"branches/main", demote)
        original(*args, **kwargs)

    writer._ctx.refs.set_branch_if = counting  # type: ignore[method-assign]
    with pytest.raises(RepositoryReadOnlyError):
        writer.commit("repo", "main", "racing", committer="w")
    assert demoted == [head]
    assert demoter.get_branch("repo", "main").commit_id == head


@pytest.mark.parametrize("write", ["branch", "tag", "upload", "delete"])
def test_ref_writes_racing_a_demotion_are_refused(write: str) -> None:
    writer, demoter, kv = _racing_catalogs()
    writer.create_branch("repo", "old", "main")
    key = {
        "branch": b"branches/dev",
        "tag": b"tags/v1",
        "upload": b"staging/",
        "delete": b"branches/old",
    }[write]
    kv.arm(key, lambda: demoter.demote_repository("repo", "b/repo"))
    with pytest.raises(RepositoryReadOnlyError):
        if write == "branch":
            writer.create_branch("repo", "dev", "main")
        elif write == "tag":
            writer.create_tag("repo", "v1", "main")
        elif write == "upload":
            writer.upload_object("repo", "main", "c", b"c", content_type=None, metadata={})
        else:
            writer.delete_branch("repo", "old")
    assert kv.armed is None
    # the racing write left nothing behind, not even a staged change on the mirror's branch
    assert list(writer.diff_uncommitted("repo", "main")) == []
    assert not writer.branch_exists("repo", "dev")
    assert writer.branch_exists("repo", "old")
    assert [t for t, _ in writer.list_tags("repo")] == []


class DemoteAtOp:
    """A KV that runs a demotion right before its ``at``-th read or write (1-based)."""

    def __init__(self, inner: MemoryKV) -> None:
        self.inner = inner
        self.count = 0
        self.at = 0
        self.compete: Any = None

    def _tick(self) -> None:
        self.count += 1
        if self.compete is not None and self.count == self.at:
            compete, self.compete = self.compete, None
            compete()

    def get(self, key: bytes) -> bytes:
        self._tick()
        return self.inner.get(key)

    def set(self, key: bytes, value: bytes) -> None:
        self._tick()
        self.inner.set(key, value)

    def set_if(self, key: bytes, value: bytes, expected: bytes | None) -> None:
        self._tick()
        self.inner.set_if(key, value, expected)

    def delete_if(self, key: bytes, expected: bytes) -> None:
        self._tick()
        self.inner.delete_if(key, expected)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


def _racing_commit(c: Catalog) -> str:
    return c.commit("repo", "main", "racing", committer="w").commit.id


def _racing_merge(c: Catalog) -> str:
    return c.merge("repo", "dev", "main", committer="w").commit.id


def _racing_upload(c: Catalog) -> str:
    c.upload_object("repo", "main", "new", b"n")
    return ""


def _racing_branch(c: Catalog) -> str:
    c.create_branch("repo", "made", "main")
    return ""


def _racing_tag(c: Catalog) -> str:
    c.create_tag("repo", "made", "main")
    return ""


def _racing_tag_deletion(c: Catalog) -> str:
    c.delete_tag("repo", "old")
    return ""


@pytest.mark.parametrize(
    "write",
    [
        _racing_commit,
        _racing_merge,
        _racing_upload,
        _racing_branch,
        _racing_tag,
        _racing_tag_deletion,
    ],
)
def test_a_demotion_at_every_step_of_a_write(write: Any) -> None:
    """Run the demotion before each KV operation of the write in turn, until none is left.

    At each point the write either took effect before the demotion answered (a commit: it is
    the head read right after) or is refused as read-only with no trace: no other error, no
    head moved, no staged change, branch or tag left behind.
    """
    outcomes: set[str] = set()
    for at in range(1, 200):
        kv = DemoteAtOp(MemoryKV())
        blocks = BlockResolver()
        writer = Catalog(kv, blocks)  # type: ignore[arg-type]
        demoter = Catalog(kv.inner, blocks)
        writer.create_repository("repo", "mem://repo")
        writer.create_branch("repo", "dev", "main")
        writer.upload_object("repo", "dev", "d", b"d")
        writer.commit("repo", "dev", "on dev", committer="w")
        writer.create_tag("repo", "old", "main")
        if write is not _racing_merge:  # a merge refuses a branch with uncommitted changes
            writer.upload_object("repo", "main", "a", b"a")
        before = writer.get_branch("repo", "main").commit_id
        seen: dict[str, str] = {}

        def demote(demoter: Catalog = demoter, seen: dict[str, str] = seen) -> None:
            demoter.demote_repository("repo", "b/repo")
            seen["head"] = demoter.get_branch("repo", "main").commit_id
            seen["tags"] = ",".join(t for t, _ in demoter.list_tags("repo"))
            seen["branches"] = ",".join(b.id for b in demoter.list_branches("repo"))

        kv.count, kv.at, kv.compete = 0, at, demote
        try:
            made = write(writer)
        except RepositoryReadOnlyError:
            outcomes.add("refused")
            assert writer.get_branch("repo", "main").commit_id == before, at
            assert list(writer.diff_uncommitted("repo", "main")) == [], at
            assert writer.get_branch("repo", "main").commit_id == seen["head"], at
            assert not writer.branch_exists("repo", "made"), at
            assert [t for t, _ in writer.list_tags("repo")] == ["old"], at
            continue
        if kv.compete is not None:
            assert outcomes == {"refused"}, "the write never met the demotion at all"
            return  # the write ended before the at-th operation: every step was tried
        outcomes.add("done")
        # it took effect before the demotion answered: what the demotion left shows it
        if made:
            assert seen["head"] == made, at
        if write is _racing_branch:
            assert "made" in seen["branches"].split(","), at
        if write is _racing_tag:
            assert seen["tags"] == "made,old", at
        if write is _racing_tag_deletion:
            assert seen["tags"] == "", at
    raise AssertionError("the write did not end within 200 KV operations")
