"""The checks at the end of a soak, once the load and the faults have stopped.

1. **Catch-up**: the mirror must reach the source's final state: every source branch at the
   source's head, no branch the source deleted.
2. **Acknowledged commits**: each is in the history (all ancestors) of a branch of the source.
3. **Acknowledged objects**: each is read back from the source at the commit that acknowledged
   it, byte for byte; an upload whose commit was never acknowledged must be on its branch.
4. **Mirror history**: the mirror's ``main`` has the source ``main``'s first-parent history.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import httpx

from bench.soak.ledger import Ledger, Staged
from bench.soak.world import SoakWorld
from tests.e2e.failover import Ack

__all__ = ["Verdict", "final_checks"]

READERS = 8
TRIES = 5


@dataclass
class Verdict:
    """What the final checks found."""

    catch_up_s: float | None = None
    """Seconds the mirror took, after the load stopped, to reach the source; ``None``: never."""
    behind: list[str] = field(default_factory=list)
    """Where the mirror still differed from the source when the catch-up deadline passed."""
    source_branches: int = 0
    acked_commits: int = 0
    acked_objects: int = 0
    staged_objects: int = 0
    lost: list[str] = field(default_factory=list)
    """Acknowledged writes not found as acknowledged."""
    mirror_history: str = ""
    """How the mirror's ``main`` history compares with the source's."""


def _get(http: httpx.Client, url: str, **params: Any) -> httpx.Response:
    """GET with a few tries on no answer or a 503 (a process still settling)."""
    for attempt in range(TRIES):
        try:
            answer = http.get(url, params=params)
        except httpx.TransportError:
            if attempt == TRIES - 1:
                raise
        else:
            if answer.status_code != 503 or attempt == TRIES - 1:
                return answer
        time.sleep(0.5 * (attempt + 1))  # back-off between tries of one request
    raise AssertionError("unreachable")


def _pages(http: httpx.Client, url: str, **params: Any) -> Iterator[dict[str, Any]]:
    after = ""
    while True:
        answer = _get(http, url, after=after, amount=1000, **params)
        answer.raise_for_status()
        body = answer.json()
        yield from body["results"]
        if not body["pagination"]["has_more"]:
            return
        after = body["pagination"]["next_offset"]


def _heads(http: httpx.Client, repo: str) -> dict[str, str]:
    return {
        str(b["id"]): str(b["commit_id"]) for b in _pages(http, f"/repositories/{repo}/branches")
    }


def catch_up(world: SoakWorld, deadline: float, verdict: Verdict) -> None:
    """Wait for the mirror to show every source branch at its head and no other branch."""
    began = time.monotonic()
    with world.http("a") as a, world.http("b") as b:
        source = _heads(a, world.source_repo)
        verdict.source_branches = len(source)
        while True:
            try:
                mirror = _heads(b, world.mirror_repo)
            except (httpx.TransportError, httpx.HTTPStatusError):
                mirror = {}
            behind = [
                f"{name}: source {head[:12]}, mirror {(mirror.get(name) or '-')[:12]}"
                for name, head in sorted(source.items())
                if mirror.get(name) != head
            ] + [f"{name}: on the mirror only" for name in sorted(set(mirror) - set(source))]
            if not behind:
                verdict.catch_up_s = time.monotonic() - began
                return
            if time.monotonic() - began > deadline:
                verdict.behind = behind
                return
            time.sleep(0.5)  # polling interval of a deadline-bounded wait


def _history(http: httpx.Client, repo: str, ref: str, first_parent: bool = False) -> list[str]:
    url = f"/repositories/{repo}/refs/{ref}/commits"
    extra = {"first_parent": "true"} if first_parent else {}
    return [str(c["id"]) for c in _pages(http, url, **extra)]


def _check_commits(http: httpx.Client, repo: str, acks: list[Ack], verdict: Verdict) -> None:
    reachable: set[str] = set()
    for branch in _heads(http, repo):
        reachable.update(_history(http, repo, branch))
    for commit in sorted({a.commit for a in acks} - reachable):
        ack = next(a for a in acks if a.commit == commit)
        exists = _get(http, f"/repositories/{repo}/commits/{commit}").status_code
        verdict.lost.append(
            f"commit {commit[:12]} acknowledged on {ack.branch} is in no branch's history "
            f"(reading it by ID answers {exists})"
        )


def _read(http: httpx.Client, repo: str, ref: str, path: str) -> httpx.Response:
    return _get(http, f"/repositories/{repo}/refs/{ref}/objects", path=path)


def _check_objects(
    world: SoakWorld, acks: list[Ack], staged: list[Staged], verdict: Verdict
) -> None:
    repo = world.source_repo
    todo: list[Ack | Staged] = [*(a for a in acks if a.path), *staged]

    def check(share: list[Ack | Staged]) -> list[str]:
        problems = []
        with world.http("a") as http:
            for what in share:
                ref = what.commit if isinstance(what, Ack) else what.branch
                answer = _read(http, repo, ref, what.path)
                if answer.status_code != 200:
                    status = f"{answer.status_code} {answer.text[:120]}"
                    problems.append(f"{what.path} at {ref[:12]}: read answered {status}")
                elif answer.content != what.data:
                    size = len(answer.content)
                    problems.append(f"{what.path} at {ref[:12]}: {size} bytes, not as acknowledged")
        return problems

    with ThreadPoolExecutor(READERS) as pool:
        for problems in pool.map(check, [todo[i::READERS] for i in range(READERS)]):
            verdict.lost += problems


def final_checks(world: SoakWorld, ledger: Ledger, catch_up_deadline: float) -> Verdict:
    """Run every final check and return what they found."""
    verdict = Verdict()
    catch_up(world, catch_up_deadline, verdict)
    acks, staged = ledger.snapshot()
    verdict.acked_commits = len({a.commit for a in acks})
    verdict.acked_objects = sum(1 for a in acks if a.path)
    verdict.staged_objects = len(staged)
    with world.http("a") as a, world.http("b") as b:
        _check_commits(a, world.source_repo, acks, verdict)
        source = _history(a, world.source_repo, "main", first_parent=True)
        try:
            mirror = _history(b, world.mirror_repo, "main", first_parent=True)
        except httpx.HTTPStatusError as exc:
            mirror = []
            verdict.mirror_history = f"unreadable: {exc}"
    _check_objects(world, acks, staged, verdict)
    if not verdict.mirror_history:
        if mirror == source:
            verdict.mirror_history = f"the same {len(source)} first-parent commits"
        elif mirror == source[len(source) - len(mirror) :]:
            verdict.mirror_history = f"{len(source) - len(mirror)} commits behind"
        else:
            verdict.mirror_history = "differs from the source's"
    return verdict
