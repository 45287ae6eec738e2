"""Pending post-events in a MemoryKV: claims by compare-and-swap, take-over after the lease,
and the post-event queue running what a dead process left (``mirror.actions.pending``,
``mirror.actions.post_queue``)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator

import pytest

from mirror.actions import ActionsService
from mirror.actions.pending import PREFIX, PendingEvent, PendingEvents, delete_pending
from mirror.actions.post_queue import PostQueue
from mirror.core import open_memory
from mirror.core.hooks import HookEvent
from mirror.core.ids import BranchID, RepositoryID
from mirror.core.model import Repository
from mirror.errors import UnavailableError
from mirror.kv import MemoryKV
from tests.webhooks import Receiver, webhook_receiver

REPO = Repository(RepositoryID("r"), "mem://r", BranchID("main"), 0, "uid-1")
EVENT = HookEvent(
    "post-commit",
    "r",
    branch_id="main",
    source_ref="c" * 64,
    commit_id="c" * 64,
    commit_message="m",
    committer="alice",
    commit_metadata={"k": "v"},
)
DEADLINE = 10.0
LEASE = 1.0  # long enough for a loaded machine to renew in time (every third of it)


class Clock:
    def __init__(self) -> None:
        self.now = 1_800_000_000.0

    def __call__(self) -> float:
        return self.now


def _until(check: Callable[[], object], what: str) -> None:
    deadline = time.monotonic() + DEADLINE
    while not check():
        if time.monotonic() > deadline:
            pytest.fail(f"not within {DEADLINE}s: {what}")
        time.sleep(0.01)


def test_a_record_keeps_the_event_and_its_repository_instance() -> None:
    kv = MemoryKV()
    claim = PendingEvents(kv, "a", 30.0, Clock()).add(REPO, EVENT)
    ((key, raw),) = list(kv.scan(PREFIX))
    assert key == b"actions/pending/r:uid-1/" + claim.pending.event_id.encode()
    found = PendingEvent.decode(raw)
    assert found == claim.pending
    assert (found.event, found.instance_uid) == (EVENT, "uid-1")
    assert (found.owner, found.attempts) == ("a", 1)


def test_two_claimers_of_an_expired_event_one_wins() -> None:
    kv, clock = MemoryKV(), Clock()
    dead = PendingEvents(kv, "dead", 30.0, clock)
    first = dead.add(REPO, EVENT)
    b, c = PendingEvents(kv, "b", 30.0, clock), PendingEvents(kv, "c", 30.0, clock)
    assert list(b.expired()) == []  # the claim holds
    clock.now += 29.0
    assert b.take(first) is None
    clock.now += 1.0
    (seen_by_b,) = b.expired()
    (seen_by_c,) = c.expired()
    won = b.take(seen_by_b)
    assert won is not None
    assert c.take(seen_by_c) is None
    assert (won.pending.owner, won.pending.attempts) == ("b", 2)
    assert list(c.expired()) == []  # b's claim holds now
    # the first owner, back to life, has lost it: no renewal, no removal of b's record
    assert dead.renew(first) is None
    assert dead.finish(first) is False
    assert len(list(kv.scan(PREFIX))) == 1
    assert b.finish(won) is True
    assert list(kv.scan(PREFIX)) == []


def test_a_renewed_claim_is_not_taken_over() -> None:
    kv, clock = MemoryKV(), Clock()
    owner, other = PendingEvents(kv, "a", 30.0, clock), PendingEvents(kv, "b", 30.0, clock)
    claim = owner.add(REPO, EVENT)
    clock.now += 20.0
    renewed = owner.renew(claim)
    assert renewed is not None
    clock.now += 20.0
    assert list(other.expired()) == []
    assert owner.renew(claim) is None  # the stale bytes lost the compare-and-swap
    assert owner.finish(renewed) is True


def test_delete_repository_removes_only_that_instance() -> None:
    kv = MemoryKV()
    store = PendingEvents(kv, "a", 30.0, Clock())
    store.add(REPO, EVENT)
    other = Repository(RepositoryID("r"), "mem://r", BranchID("main"), 0, "uid-2")
    kept = store.add(other, EVENT)
    delete_pending(kv, REPO)
    assert store.of(REPO) == []
    assert store.of(other) == [kept.pending]


def test_the_queue_keeps_an_event_pending_until_its_run_ends() -> None:
    kv = MemoryKV()
    ran: list[PendingEvent] = []
    release = threading.Event()

    def run(pending: PendingEvent) -> None:
        assert len(list(kv.scan(PREFIX))) == 1  # recorded before it runs
        release.wait(DEADLINE)
        ran.append(pending)

    queue = PostQueue(PendingEvents(kv, "me", 30.0), run, workers=1)
    queue.submit(REPO, EVENT)
    assert len(list(kv.scan(PREFIX))) == 1
    release.set()
    queue.close(wait=True)
    assert [p.event for p in ran] == [EVENT]
    assert list(kv.scan(PREFIX)) == []


def test_an_unavailable_store_leaves_the_event_to_run_again() -> None:
    kv = MemoryKV()

    def run(pending: PendingEvent) -> None:
        raise UnavailableError("the KV is down")

    queue = PostQueue(PendingEvents(kv, "me", 30.0), run, workers=1)
    queue.submit(REPO, EVENT)
    queue.close(wait=True)
    (left,) = PendingEvents(kv, "me", 30.0).of(REPO)
    assert left.event == EVENT


def test_a_started_queue_takes_over_what_a_dead_process_left() -> None:
    kv = MemoryKV()
    PendingEvents(kv, "dead", 0.3).add(REPO, EVENT)
    ran: list[PendingEvent] = []
    queue = PostQueue(PendingEvents(kv, "alive", 0.3), ran.append, workers=1)
    queue.start()
    _until(lambda: ran and not list(kv.scan(PREFIX)), "the dead process's event ran")
    queue.close(wait=True)
    (pending,) = ran
    assert (pending.event, pending.owner, pending.attempts) == (EVENT, "alive", 2)


def test_a_running_event_keeps_its_claim_past_the_lease() -> None:
    kv = MemoryKV()
    release = threading.Event()
    started = threading.Event()
    taken: list[PendingEvent] = []

    def slow(pending: PendingEvent) -> None:
        started.set()
        release.wait(DEADLINE)

    owner = PostQueue(PendingEvents(kv, "owner", LEASE), slow, workers=1)
    other = PostQueue(PendingEvents(kv, "other", LEASE), taken.append, workers=1)
    owner.submit(REPO, EVENT)
    other.start()
    assert started.wait(DEADLINE)
    before = PendingEvents(kv, "x", LEASE).of(REPO)[0].expires
    _until(lambda: PendingEvents(kv, "x", LEASE).of(REPO)[0].expires > before + LEASE, "renewals")
    release.set()
    owner.close(wait=True)
    other.close(wait=True)
    assert taken == []
    assert list(kv.scan(PREFIX)) == []


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    with webhook_receiver() as received:
        yield received


def test_the_service_runs_a_dead_process_post_event_and_records_its_run(
    receiver: Receiver,
) -> None:
    catalog = open_memory()
    catalog.create_repository("repo", "mem://repo")
    action = (
        "name: Told\non:\n  post-commit:\nhooks:\n"
        f"  - {{id: tell, type: webhook, properties: {{url: '{receiver.url}/ok'}}}}\n"
    )
    catalog.upload_object("repo", "main", "_lakefs_actions/a.yaml", action.encode())
    commit = catalog.commit("repo", "main", "actions").commit
    repo = catalog.get_repository("repo")
    event = HookEvent(
        "post-commit", "repo", branch_id="main", source_ref=commit.id, commit_id=commit.id
    )
    PendingEvents(catalog.kv, "dead", 0.3).add(repo, event)
    service = ActionsService(catalog, post_lease=0.3)
    service.start()
    receiver.wait_for("repo", lambda calls: len(calls) == 1)
    _until(lambda: not service.pending.of(repo), "the pending record is removed")
    service.close(wait=True)
    (run,) = service.runs.list(repo)
    assert (run.event_type, run.commit_id, run.status) == ("post-commit", commit.id, "completed")


def test_the_service_drops_events_of_a_repository_created_again() -> None:
    catalog = open_memory()
    catalog.create_repository("repo", "mem://repo")
    old = catalog.get_repository("repo")
    catalog.delete_repository("repo")
    catalog.create_repository("repo", "mem://repo")
    PendingEvents(catalog.kv, "dead", 0.3).add(old, HookEvent("post-create-branch", "repo"))
    service = ActionsService(catalog, post_lease=0.3)
    service.start()
    _until(lambda: not list(catalog.kv.scan(PREFIX)), "the stale event is dropped")
    service.close(wait=True)
    assert list(service.runs.list(catalog.get_repository("repo"))) == []


def test_an_event_no_action_matches_is_neither_kept_nor_queued() -> None:
    catalog = open_memory()
    catalog.create_repository("repo", "mem://repo")
    action = (
        "name: Merges\non:\n  post-merge:\nhooks:\n"
        "  - {id: tell, type: webhook, properties: {url: 'http://127.0.0.1:9/'}}\n"
    )
    catalog.upload_object("repo", "main", "_lakefs_actions/a.yaml", action.encode())
    commit = catalog.commit("repo", "main", "actions").commit
    service = ActionsService(catalog, post_lease=30.0)
    queued: list[PendingEvent] = []
    service._post.submit = lambda repo, event: queued.append(event)  # type: ignore[method-assign]
    repo = catalog.get_repository("repo")
    for event_type in ("post-commit", "post-create-branch"):
        service.post(
            HookEvent(
                event_type, "repo", branch_id="main", source_ref=commit.id, commit_id=commit.id
            )
        )
    assert queued == [] and list(catalog.kv.scan(PREFIX)) == []
    merge = HookEvent("post-merge", "repo", branch_id="main", source_ref=commit.id)
    service.post(merge)
    assert queued == [merge]
    assert not service.pending.of(repo)
    service.close(wait=True)


def test_a_run_ending_after_its_repository_was_deleted_leaves_no_record(
    receiver: Receiver,
) -> None:
    catalog = open_memory()
    catalog.create_repository("repo", "mem://repo")
    action = (
        "name: Told\non:\n  pre-create-tag:\nhooks:\n"
        f"  - {{id: tell, type: webhook, properties: {{url: '{receiver.url}/ok'}}}}\n"
    )
    catalog.upload_object("repo", "main", "_lakefs_actions/a.yaml", action.encode())
    commit = catalog.commit("repo", "main", "actions").commit
    repo = catalog.get_repository("repo")
    service = ActionsService(catalog)
    save = service.runs.save

    def deleted_meanwhile(repo: Repository, run: object) -> None:
        catalog.delete_repository("repo")  # and its cleanup, just before the run is recorded
        save(repo, run)  # type: ignore[arg-type]

    service.runs.save = deleted_meanwhile  # type: ignore[method-assign]
    service.run(HookEvent("pre-create-tag", "repo", source_ref=commit.id, tag_id="v1"))
    service.close(wait=True)
    assert list(service.runs.list(repo)) == []
