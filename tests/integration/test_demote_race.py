"""A demotion racing commits on a live server: nothing is acknowledged that the heads lack.

``lakemirror server`` with two worker processes on one SQLite KV. One thread per branch
uploads and commits as fast as it can; once some commits are acknowledged a replicator demotes
the repository (through whichever worker answers) and reads every head right after the
demotion answered. Every commit acknowledged (2xx) must be in the history of its branch's head
read then, no head may move afterwards, and every commit started after the demotion answered
must be refused with 403, the read-only answer naming the mirror's source.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import pytest

from tests.e2e.regions import wait_for
from tests.integration.harness import Server, running_server

KEY = ("AKIADEMOTERACE000001", "demote-race-secret-key-000000000000000")
REPO = "demote-race"
BRANCHES = ("main", "side")
ACKED_BEFORE_DEMOTE = 15
REFUSED_AFTER_DEMOTE = 5


@pytest.fixture
def server(tmp_path: Path) -> Iterator[Server]:
    with running_server(
        tmp_path / "data",
        tmp_path / "server.log",
        access_key_id=KEY[0],
        secret_access_key=KEY[1],
        env={"LAKEMIRROR_SERVER__WORKERS": "2"},
    ) as running:
        yield running


@dataclass
class Writer:
    """What one committing thread saw: acknowledged commits and answers after the demotion."""

    branch: str
    acked: list[str] = field(default_factory=list)
    refused_after: int = 0
    unexpected: list[str] = field(default_factory=list)


def _replicator(http: httpx.Client) -> tuple[str, str]:
    assert http.post("/auth/users", json={"id": "replicator"}).status_code == 201
    attached = http.put("/auth/users/replicator/policies/Replicator")
    assert attached.status_code == 201, attached.text
    made = http.post("/auth/users/replicator/credentials")
    assert made.status_code == 201, made.text
    return made.json()["access_key_id"], made.json()["secret_access_key"]


def _write(server: Server, writer: Writer, demoted: threading.Event, stop: threading.Event) -> None:
    with httpx.Client(base_url=f"{server.url}/api/v1", auth=KEY, timeout=60.0) as http:
        n = 0
        while not stop.is_set():
            n += 1
            after = demoted.is_set()
            path = f"{writer.branch}/{n}.txt"
            uploaded = http.post(
                f"/repositories/{REPO}/branches/{writer.branch}/objects",
                params={"path": path},
                files={"content": (path, path.encode())},
            )
            if uploaded.status_code != 201:
                if uploaded.status_code == 403 and "mirror of" in uploaded.text:
                    writer.refused_after += after
                    continue
                writer.unexpected.append(f"upload {uploaded.status_code}: {uploaded.text}")
                continue
            after = demoted.is_set()
            committed = http.post(
                f"/repositories/{REPO}/branches/{writer.branch}/commits",
                json={"message": f"commit {n}"},
            )
            if committed.status_code == 201:
                writer.acked.append(committed.json()["id"])
                if after:
                    writer.unexpected.append(f"commit {n} acknowledged after the demotion")
            elif committed.status_code == 403 and "b-region/demote-race" in committed.text:
                writer.refused_after += after
            else:
                writer.unexpected.append(f"commit {committed.status_code}: {committed.text}")


def _history(http: httpx.Client, head: str) -> set[str]:
    found: set[str] = set()
    after = ""
    while True:
        page = http.get(
            f"/repositories/{REPO}/refs/{head}/commits", params={"amount": 1000, "after": after}
        ).json()
        found.update(c["id"] for c in page["results"])
        if not page["pagination"]["has_more"]:
            return found
        after = page["pagination"]["next_offset"]


def _heads(http: httpx.Client) -> dict[str, str]:
    return {b: http.get(f"/repositories/{REPO}/branches/{b}").json()["commit_id"] for b in BRANCHES}


def test_no_commit_is_acknowledged_after_a_demotion_answered(server: Server) -> None:
    with httpx.Client(base_url=f"{server.url}/api/v1", auth=KEY, timeout=60.0) as http:
        created = http.post(
            "/repositories",
            json={"name": REPO, "storage_namespace": server.namespace(REPO)},
        )
        assert created.status_code == 201, created.text
        side = http.post(f"/repositories/{REPO}/branches", json={"name": "side", "source": "main"})
        assert side.status_code == 201, side.text
        replicator = _replicator(http)

        writers = [Writer(b) for b in BRANCHES]
        demoted, stop = threading.Event(), threading.Event()
        threads = [
            threading.Thread(target=_write, args=(server, w, demoted, stop)) for w in writers
        ]
        for thread in threads:
            thread.start()
        try:
            wait_for(
                lambda: all(len(w.acked) >= ACKED_BEFORE_DEMOTE for w in writers),
                timeout=120,
                what=f"{ACKED_BEFORE_DEMOTE} acknowledged commits on each branch",
            )
            with httpx.Client(
                base_url=f"{server.url}/api/v1", auth=replicator, timeout=60.0
            ) as rep:
                answer = rep.post(
                    f"/repositories/{REPO}/mirror/demote",
                    json={"mirror_of": "b-region/demote-race"},
                )
            demoted.set()
            assert answer.status_code == 200, answer.text
            heads = _heads(http)
            wait_for(
                lambda: all(w.refused_after >= REFUSED_AFTER_DEMOTE for w in writers),
                timeout=120,
                what=f"{REFUSED_AFTER_DEMOTE} refused writes on each branch after the demotion",
            )
        finally:
            stop.set()
            for thread in threads:
                thread.join(timeout=120)

        assert [w.unexpected for w in writers] == [[], []]
        assert _heads(http) == heads, "a head moved after the demotion answered"
        for writer in writers:
            history = _history(http, heads[writer.branch])
            lost = [c for c in writer.acked if c not in history]
            assert lost == [], f"{writer.branch}: acknowledged commits not in the head"
            # a refused commit never lands either: the head is the last acknowledged one
            assert heads[writer.branch] == writer.acked[-1]
        repo = http.get(f"/repositories/{REPO}").json()
        assert repo["read_only"] is True
        assert repo["mirror_of"] == "b-region/demote-race"
