"""The task model, its KV store and the runner, over the in-memory KV with a hand-set clock.

The status every process derives from a record and its owner's heartbeat; expiry (read and
sweep); compare-and-swap of records; the runner's success, failure, concurrency bound and stop.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping
from typing import Any

import pytest

from mirror.errors import NotFoundError
from mirror.kv.memory import MemoryKV
from mirror.tasks import (
    MISSED_HEARTBEATS,
    OWNER_GONE_STATUS,
    RunnerSettings,
    Task,
    TaskChangedError,
    TaskNotFoundError,
    TaskRunner,
    TasksStoppedError,
    TaskState,
    TaskStore,
    new_task_id,
    tasks_still_running,
)


class Clock:
    """A clock the test moves by hand."""

    def __init__(self, now: float = 1_700_000_000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def wait_until(condition: Callable[[], bool], what: str, deadline: float = 10.0) -> None:
    end = time.monotonic() + deadline
    while not condition():
        if time.monotonic() > end:
            pytest.fail(f"not within {deadline}s: {what}")
        time.sleep(0.005)


def make_task(owner: str = "owner-1", now: float = 1_700_000_000.0, ttl: float = 60.0) -> Task:
    return Task(
        id=new_task_id("CA"),
        operation="commit",
        repository="repo-1",
        scope={"branch": "main"},
        owner=owner,
        state=TaskState.PENDING,
        created=now,
        updated=now,
        ttl=ttl,
    )


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def store(clock: Clock) -> TaskStore:
    return TaskStore(MemoryKV(), clock)


# -- the record ----------------------------------------------------------------------------------


def test_task_ids_have_lakefs_shape_and_differ() -> None:
    ids = {new_task_id("MA") for _ in range(100)}
    assert len(ids) == 100
    assert all(i.startswith("MA") and len(i) == 22 and i.isalnum() for i in ids)


def test_record_round_trips_through_its_encoding() -> None:
    task = make_task().running(1_700_000_001.0).succeeded({"id": "abc", "n": [1]}, 1_700_000_002)
    assert Task.decode(task.encode()) == task
    assert task.done and task.expires == 1_700_000_002 + task.ttl
    assert not make_task().done and make_task().expires is None


def test_failure_details_round_trip_and_a_record_without_them_has_no_key() -> None:
    running = make_task().running(1_700_000_001.0)
    detailed = running.failed(409, "conflict found", 1_700_000_002, {"conflicts": ["a", "b"]})
    assert Task.decode(detailed.encode()) == detailed
    assert detailed.details == {"conflicts": ["a", "b"]}
    plain = running.failed(400, "no changes", 1_700_000_002)
    assert plain.details is None and b"details" not in plain.encode()
    assert Task.decode(plain.encode()) == plain


def test_not_found_carries_lakefs_text(store: TaskStore) -> None:
    with pytest.raises(TaskNotFoundError) as caught:
        store.status("CAnope")
    assert isinstance(caught.value, NotFoundError)
    assert str(caught.value).startswith("not found")


def test_replace_is_a_compare_and_swap(store: TaskStore, clock: Clock) -> None:
    task = make_task()
    raw = store.create(task)
    with pytest.raises(TaskChangedError):
        store.create(task)
    newer = store.replace(raw, task.running(clock.now))
    with pytest.raises(TaskChangedError):
        store.replace(raw, task.failed(500, "late", clock.now))
    store.replace(newer, task.running(clock.now).succeeded({}, clock.now))
    assert store.status(task.id).state is TaskState.SUCCEEDED


# -- status from the owner's heartbeat -----------------------------------------------------------


def test_running_task_reads_running_while_its_owner_beats(store: TaskStore, clock: Clock) -> None:
    task = make_task()
    store.beat(task.owner, 1.0)
    store.create(task.running(clock.now))
    clock.now += MISSED_HEARTBEATS * 1.0 - 0.5
    store.beat(task.owner, 1.0)
    seen = store.status(task.id)
    assert seen.state is TaskState.RUNNING and not seen.done
    assert seen.updated == clock.now  # the owner's last heartbeat
    clock.now += MISSED_HEARTBEATS * 1.0
    assert store.status(task.id).state is TaskState.RUNNING  # exactly at the deadline: alive


def test_task_of_an_owner_that_stopped_beating_reads_failed_408(
    store: TaskStore, clock: Clock
) -> None:
    task = make_task()
    store.beat(task.owner, 2.0)
    store.create(task.running(clock.now))
    beat_at = clock.now
    clock.now += 2.0 * MISSED_HEARTBEATS + 0.1
    seen = store.status(task.id)
    assert seen.done and seen.state is TaskState.FAILED
    assert seen.status_code == OWNER_GONE_STATUS
    assert seen.error is not None and "expired" in seen.error
    assert seen.updated == beat_at + 2.0 * MISSED_HEARTBEATS
    # nothing is written by reading: the owner, were it alive after all, could still finish
    stored, _ = store.get_raw(task.id)
    assert stored.state is TaskState.RUNNING


def test_task_of_an_owner_without_heartbeat_reads_failed_408(
    store: TaskStore, clock: Clock
) -> None:
    task = make_task()
    store.beat(task.owner, 1.0)
    store.create(task.running(clock.now))
    store.forget(task.owner)
    seen = store.status(task.id)
    assert seen.done and seen.status_code == OWNER_GONE_STATUS
    assert seen.error is not None and "no longer available" in seen.error


# -- expiry --------------------------------------------------------------------------------------


def test_finished_task_expires_after_its_ttl_and_is_removed_when_read(
    store: TaskStore, clock: Clock
) -> None:
    task = make_task(ttl=30.0)
    raw = store.create(task)
    store.replace(raw, task.running(clock.now).succeeded({"reference": "c1"}, clock.now))
    clock.now += 29.9
    assert store.status(task.id).result == {"reference": "c1"}
    clock.now += 0.1
    with pytest.raises(TaskNotFoundError):
        store.status(task.id)
    with pytest.raises(TaskNotFoundError):
        store.get_raw(task.id)


def test_sweep_removes_expired_tasks_and_unreferenced_stale_heartbeats(
    store: TaskStore, clock: Clock
) -> None:
    finished = make_task(owner="gone", ttl=10.0)
    raw = store.create(finished)
    store.replace(raw, finished.failed(409, "conflict found", clock.now))
    orphan = make_task(owner="dead", ttl=10.0)
    store.beat("dead", 1.0)
    store.create(orphan.running(clock.now))
    alive = make_task(owner="alive", ttl=10.0)
    store.beat("alive", 1.0)
    store.create(alive.running(clock.now))
    store.beat("idle", 1.0)

    clock.now += 9.0  # finished: not yet expired; dead owner: failed at +6 s, expires at +16 s
    store.beat("alive", 1.0)
    assert store.sweep() == 0
    assert store.heartbeat("idle") is None  # stale and referred to by no task
    assert store.heartbeat("dead") is not None  # its task still reads through it

    clock.now += 1.0
    store.beat("alive", 1.0)
    assert store.sweep() == 1
    with pytest.raises(TaskNotFoundError):
        store.status(finished.id)

    clock.now += 6.0
    store.beat("alive", 1.0)
    assert store.sweep() == 1
    with pytest.raises(TaskNotFoundError):
        store.status(orphan.id)
    assert store.heartbeat("dead") is None
    assert store.status(alive.id).state is TaskState.RUNNING


def test_sweep_keeps_a_heartbeat_renewed_while_it_ran(clock: Clock) -> None:
    kv = MemoryKV()

    class RenewingKV(MemoryKV):
        """Renew the heartbeat right after the sweep read it, as a reviving process would."""

        def scan(self, prefix: bytes, start: bytes = b"") -> Any:
            rows = list(kv.scan(prefix, start))
            if prefix == b"tasks/instances/":
                TaskStore(kv, lambda: clock.now + 100).beat("revived", 1.0)
            return iter(rows)

        def delete_if(self, key: bytes, expected: bytes) -> None:
            kv.delete_if(key, expected)

    TaskStore(kv, clock).beat("revived", 1.0)
    clock.now += 50
    TaskStore(RenewingKV(), clock).sweep()
    beat = TaskStore(kv, clock).heartbeat("revived")
    assert beat is not None and beat.seen == clock.now + 100


# -- the runner ----------------------------------------------------------------------------------


def describe(exc: BaseException) -> tuple[int, str]:
    return (409, f"conflict found: {exc}") if isinstance(exc, KeyError) else (500, str(exc))


def runner_on(store: TaskStore, **settings: Any) -> TaskRunner:
    return TaskRunner(store, RunnerSettings(**{"heartbeat": 0.05, **settings}))


def test_runner_records_result_and_failure(store: TaskStore) -> None:
    runner = runner_on(store)

    def fail() -> Mapping[str, Any]:
        raise KeyError("a/b")

    good = runner.submit("merge", "repo-1", {"destination": "main"}, lambda: {"x": 1}, describe)
    bad = runner.submit("merge", "repo-1", {"destination": "main"}, fail, describe, id_prefix="M")
    wait_until(lambda: store.status(good.id).done and store.status(bad.id).done, "both done")
    assert store.status(good.id).result == {"x": 1}
    failed = store.status(bad.id)
    assert (failed.status_code, failed.error) == (409, "conflict found: 'a/b'")
    assert bad.id.startswith("M") and good.owner == bad.owner == runner.instance
    assert runner.stop() == 0
    assert store.heartbeat(runner.instance) is None


def test_runner_records_what_details_add_to_a_failure(store: TaskStore) -> None:
    runner = runner_on(store)

    def fail() -> Mapping[str, Any]:
        raise KeyError("a/b")

    def details(exc: BaseException) -> Mapping[str, Any] | None:
        return {"conflicts": [exc.args[0]]} if isinstance(exc, KeyError) else None

    def broken(exc: BaseException) -> Mapping[str, Any] | None:
        raise RuntimeError("cannot detail")

    detailed = runner.submit("merge", "repo-1", {"d": "main"}, fail, describe, details=details)
    undetailed = runner.submit("merge", "repo-1", {"d": "x"}, fail, describe, details=broken)
    wait_until(
        lambda: store.status(detailed.id).done and store.status(undetailed.id).done, "both done"
    )
    assert store.status(detailed.id).details == {"conflicts": ["a/b"]}
    # a detail that cannot be had leaves the status and message to say what failed
    failed = store.status(undetailed.id)
    assert (failed.status_code, failed.details) == (409, None)
    assert runner.stop() == 0


def test_runner_bounds_concurrency_and_heartbeats_while_busy(
    store: TaskStore, clock: Clock
) -> None:
    runner = runner_on(store, workers=1)
    release = threading.Event()
    started = threading.Event()

    def blocked() -> Mapping[str, Any]:
        started.set()
        release.wait(10)
        return {}

    first = runner.submit("commit", "repo-1", {"branch": "a"}, blocked, describe)
    assert started.wait(10)
    second = runner.submit("commit", "repo-1", {"branch": "b"}, lambda: {}, describe)
    assert store.status(first.id).state is TaskState.RUNNING
    assert store.status(second.id).state is TaskState.PENDING
    clock.now += 100.0  # long past any deadline, unless the runner keeps beating
    wait_until(lambda: store.status(first.id).updated == clock.now, "a heartbeat at the new time")
    release.set()
    wait_until(lambda: store.status(second.id).done, "the second task, after the first")
    assert runner.busy == 0
    runner.stop()


def test_stop_waits_for_running_tasks_then_leaves_the_rest_failed_408(store: TaskStore) -> None:
    runner = runner_on(store)
    release = threading.Event()
    quick = runner.submit("commit", "repo-1", {"branch": "a"}, lambda: {"ok": 1}, describe)
    stuck = runner.submit(
        "commit", "repo-1", {"branch": "b"}, lambda: {"ok": release.wait(10)}, describe
    )
    wait_until(lambda: store.status(quick.id).done, "the quick task")
    assert runner.stop(timeout=0.2) == 1
    with pytest.raises(TasksStoppedError):
        runner.submit("commit", "repo-1", {"branch": "c"}, lambda: {}, describe)
    seen = store.status(stuck.id)
    assert seen.done and seen.status_code == OWNER_GONE_STATUS
    release.set()


def test_a_task_that_fails_after_stop_gave_up_on_it_still_reads_408(store: TaskStore) -> None:
    # the KV closing under a given-up task makes it fail; that failure is not its outcome
    runner = runner_on(store)
    release = threading.Event()
    ended = threading.Event()

    def cut_short() -> Mapping[str, Any]:
        release.wait(10)
        ended.set()
        raise RuntimeError("database is closed")

    stuck = runner.submit("commit", "repo-1", {"branch": "b"}, cut_short, describe)
    wait_until(lambda: store.status(stuck.id).state is TaskState.RUNNING, "the task running")
    assert runner.stop(timeout=0.2) == 1
    release.set()
    assert ended.wait(10)
    wait_until(lambda: runner.busy == 0, "the given-up task's thread to end")
    seen = store.status(stuck.id)
    assert seen.done and seen.status_code == OWNER_GONE_STATUS


def test_a_task_given_up_at_stop_is_seen_running_until_its_thread_ends(store: TaskStore) -> None:
    # what `lakemirror server` asks before it exits: such a thread must not meet finalization
    runner = runner_on(store)
    release = threading.Event()
    stuck = runner.submit(
        "commit", "repo-1", {"branch": "b"}, lambda: {"ok": release.wait(10)}, describe
    )
    wait_until(lambda: store.status(stuck.id).state is TaskState.RUNNING, "the task running")
    assert runner.stop(timeout=0.2) == 1
    assert tasks_still_running()
    release.set()
    wait_until(lambda: not tasks_still_running(), "the given-up task's thread to end")


def test_stop_lets_a_task_finish_within_the_timeout(store: TaskStore) -> None:
    runner = runner_on(store)
    release = threading.Event()
    task = runner.submit(
        "commit", "repo-1", {"branch": "a"}, lambda: {"ok": release.wait(10)}, describe
    )
    wait_until(lambda: store.status(task.id).state is TaskState.RUNNING, "the task running")
    threading.Timer(0.1, release.set).start()
    assert runner.stop(timeout=10) == 0
    assert store.status(task.id).result == {"ok": True}


def test_public_api() -> None:
    import mirror.tasks

    assert len(mirror.tasks.__all__) == len(set(mirror.tasks.__all__))
    for name in mirror.tasks.__all__:
        assert getattr(mirror.tasks, name) is not None
    assert {"Task", "TaskStore", "TaskRunner", "RunnerSettings"} <= set(mirror.tasks.__all__)
