"""A demotion racing writes on a live server: nothing is acknowledged that the heads lack.

``lakemirror server`` with two worker processes on one KV (the embedded SQLite, and DynamoDB
served by dynalite, whose slower round trips widen every race window). One thread per branch
uploads and commits as fast as it can while a replicator demotes the repository and promotes
it again, round after round (through whichever worker answers). Once a demotion answered the
heads are read: every commit acknowledged (2xx) until then must be in its branch's head, the
head must be the last one acknowledged (a refused commit never lands), no head may move while
the repository is read-only, and every write sent after the demotion answered and answered
before the promotion was asked for must be refused with 403, the answer naming the source.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import pytest

from tests.e2e.regions import wait_for
from tests.integration.dynalite import running_dynalite
from tests.integration.harness import Server, running_server, unique

KEY = ("AKIADEMOTERACE000001", "demote-race-secret-key-000000000000000")
REPO = "demote-race"
BRANCHES = ("main", "side", "third")
ROUNDS = 6
ACKED_PER_ROUND = 3
REFUSED_PER_ROUND = 2
SOURCE = "b-region/demote-race"
READ_ONLY = "read-only repository"


@pytest.fixture(params=["sqlite", "dynamodb"])
def server(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Server]:
    env = {"LAKEMIRROR_SERVER__WORKERS": "2"}
    with contextlib.ExitStack() as stack:
        if request.param == "dynamodb":
            dynalite = stack.enter_context(running_dynalite(tmp_path))
            env.update(dynalite.env(unique("demote-race")))
        yield stack.enter_context(
            running_server(
                tmp_path / "data",
                tmp_path / "server.log",
                access_key_id=KEY[0],
                secret_access_key=KEY[1],
                env=env,
            )
        )


@dataclass
class Phase:
    """The round, and whether the repository is demoted (set once the demotion answered)."""

    round: int = 0
    demoted: bool = False


@dataclass
class Writer:
    """What one writing thread saw."""

    branch: str
    acked: list[str] = field(default_factory=list)
    refused: dict[int, int] = field(default_factory=dict)
    unexpected: list[str] = field(default_factory=list)


def _replicator(http: httpx.Client) -> tuple[str, str]:
    assert http.post("/auth/users", json={"id": "replicator"}).status_code == 201
    attached = http.put("/auth/users/replicator/policies/Replicator")
    assert attached.status_code == 201, attached.text
    made = http.post("/auth/users/replicator/credentials")
    assert made.status_code == 201, made.text
    return made.json()["access_key_id"], made.json()["secret_access_key"]


def _send(http: httpx.Client, what: str, branch: str, n: int) -> httpx.Response:
    if what == "upload":
        path = f"{branch}/{n}.txt"
        return http.post(
            f"/repositories/{REPO}/branches/{branch}/objects",
            params={"path": path},
            files={"content": (path, path.encode())},
        )
    return http.post(
        f"/repositories/{REPO}/branches/{branch}/commits", json={"message": f"commit {n}"}
    )


def _write(server: Server, writer: Writer, phase: Phase, stop: threading.Event) -> None:
    with httpx.Client(base_url=f"{server.url}/api/v1", auth=KEY, timeout=60.0) as http:
        n = 0
        while not stop.is_set():
            n += 1
            for what in ("upload", "commit"):
                sent = (phase.round, phase.demoted)
                answer = _send(http, what, writer.branch, n)
                # demoted all the time the request was in flight: it must be refused
                must_refuse = sent[1] and (phase.round, phase.demoted) == sent
                if answer.status_code == 201:
                    if what == "commit":
                        writer.acked.append(answer.json()["id"])
                    if must_refuse:
                        writer.unexpected.append(f"{what} {n} acknowledged while demoted")
                    continue
                # the refusal names the source unless a promotion began since
                if answer.status_code == 403 and answer.json()["message"].startswith(READ_ONLY):
                    if must_refuse:
                        writer.refused[sent[0]] = writer.refused.get(sent[0], 0) + 1
                else:
                    writer.unexpected.append(f"{what} {n}: {answer.status_code} {answer.text}")
                break


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


def _check_round(
    http: httpx.Client, round_: int, heads: dict[str, str], writers: list[Writer]
) -> None:
    """Check what each writer saw acknowledged against the heads read after the demotion."""
    assert _heads(http) == heads, f"round {round_}: a head moved while demoted"
    for writer in writers:
        acknowledged = list(writer.acked)
        history = _history(http, heads[writer.branch])
        lost = [c for c in acknowledged if c not in history]
        assert lost == [], f"round {round_}, {writer.branch}: acknowledged, not in the head"
        assert heads[writer.branch] == acknowledged[-1], f"round {round_}, {writer.branch}"


def _setup(http: httpx.Client, server: Server) -> tuple[str, str]:
    created = http.post(
        "/repositories", json={"name": REPO, "storage_namespace": server.namespace(REPO)}
    )
    assert created.status_code == 201, created.text
    for branch in BRANCHES[1:]:
        made = http.post(f"/repositories/{REPO}/branches", json={"name": branch, "source": "main"})
        assert made.status_code == 201, made.text
    return _replicator(http)


def test_no_write_is_acknowledged_after_a_demotion_answered(server: Server) -> None:
    base = f"{server.url}/api/v1"
    with httpx.Client(base_url=base, auth=KEY, timeout=60.0) as http:
        key = _setup(http, server)
        with httpx.Client(base_url=base, auth=key, timeout=60.0) as rep:
            writers = [Writer(b) for b in BRANCHES]
            phase, stop = Phase(), threading.Event()
            threads = [
                threading.Thread(target=_write, args=(server, w, phase, stop)) for w in writers
            ]
            for thread in threads:
                thread.start()
            try:
                for round_ in range(1, ROUNDS + 1):
                    seen = [len(w.acked) for w in writers]
                    wait_for(
                        lambda seen=seen: all(
                            len(w.acked) >= s + ACKED_PER_ROUND
                            for w, s in zip(writers, seen, strict=True)
                        ),
                        timeout=120,
                        what=f"round {round_}: {ACKED_PER_ROUND} new commits on each branch",
                    )
                    phase.round = round_
                    demoted = rep.post(
                        f"/repositories/{REPO}/mirror/demote", json={"mirror_of": SOURCE}
                    )
                    assert demoted.status_code == 200, demoted.text
                    phase.demoted = True
                    heads = _heads(http)
                    # each writer is answered for a request sent after the demotion answered,
                    # so every answer to what it sent before has arrived too
                    wait_for(
                        lambda round_=round_: all(
                            w.refused.get(round_, 0) >= REFUSED_PER_ROUND for w in writers
                        ),
                        timeout=120,
                        what=f"round {round_}: {REFUSED_PER_ROUND} refusals on each branch",
                    )
                    _check_round(http, round_, heads, writers)
                    phase.demoted = False
                    phase.round = round_ + 1
                    promoted = rep.post(
                        f"/repositories/{REPO}/mirror/promote",
                        json={"promotion": {"from": SOURCE, "round": round_}},
                    )
                    assert promoted.status_code == 200, promoted.text
            finally:
                stop.set()
                for thread in threads:
                    thread.join(timeout=120)
            assert [w.unexpected for w in writers] == [[] for _ in writers]
            record = rep.get(f"/repositories/{REPO}/mirror/promotion").json()
            assert record == {"from": SOURCE, "round": ROUNDS}
