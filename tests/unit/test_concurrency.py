"""Concurrent writers and committers on one branch of the embedded catalog lose nothing.

Every thread uploads distinct objects to the same branch of a SQLite + local-disk catalog and
commits; the only commit error allowed is :class:`NoChangesError` (another thread's commit took
the objects first). Afterwards every object is in the branch's committed tree and every commit
reported as made is in the branch's history.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from mirror.core import Catalog, CommitID, NoChangesError, open_embedded

REPO = "busy"
JOIN_TIMEOUT = 120.0


@pytest.fixture
def catalog(tmp_path: Path) -> Iterator[Catalog]:
    catalog = open_embedded(tmp_path)
    catalog.create_repository(REPO, "local://busy")
    yield catalog
    catalog.kv.close()


@dataclass
class Outcome:
    commits: list[CommitID] = field(default_factory=list)
    no_changes: int = 0
    errors: list[BaseException] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def commit(self, catalog: Catalog, message: str) -> None:
        try:
            cid = catalog.commit(REPO, "main", message).commit.id
        except NoChangesError:
            with self.lock:
                self.no_changes += 1
            return
        with self.lock:
            self.commits.append(cid)


def run_threads(targets: list[Callable[[], None]], outcome: Outcome) -> None:
    """Start every target at once behind a barrier; collect whatever they raise."""
    barrier = threading.Barrier(len(targets))

    def wrap(target: Callable[[], None]) -> Callable[[], None]:
        def run() -> None:
            try:
                barrier.wait()
                target()
            except BaseException as exc:
                with outcome.lock:
                    outcome.errors.append(exc)

        return run

    threads = [threading.Thread(target=wrap(t), daemon=True) for t in targets]
    for t in threads:
        t.start()
    for t in threads:
        t.join(JOIN_TIMEOUT)
    assert not any(t.is_alive() for t in threads), "a thread is stuck"


def path_of(writer: int, i: int) -> str:
    return f"writer-{writer:02d}/object-{i:04d}"


def data_of(writer: int, i: int) -> bytes:
    return f"written by {writer} as number {i}".encode()


def assert_nothing_lost(catalog: Catalog, outcome: Outcome, written: dict[str, bytes]) -> None:
    assert outcome.errors == []
    branch = catalog.get_branch(REPO, "main")
    head = branch.commit_id
    committed = {s.path for s in catalog.iter_objects(REPO, head)}
    assert committed == set(written), "objects missing from the committed tree"
    for path, data in written.items():
        assert catalog.read_object(REPO, head, path) == data
    assert list(catalog.diff_uncommitted(REPO, "main")) == []
    assert branch.sealed_tokens == ()
    history = list(catalog.log(REPO, "main"))
    ids = [c.id for c in history]
    assert set(outcome.commits) <= set(ids), "a reported commit is not in the branch history"
    assert len(ids) == len(outcome.commits) + 1, "history holds commits nobody reported"
    assert all(len(c.parents) == 1 for c in history[:-1])
    assert [c.parents[0] for c in history[:-1]] == ids[1:], "history is not one linear chain"


@pytest.mark.parametrize(("writers", "per_writer"), [(2, 40), (8, 30)])
def test_threads_writing_and_committing_to_one_branch_lose_nothing(
    catalog: Catalog, writers: int, per_writer: int
) -> None:
    outcome = Outcome()

    def work(writer: int) -> Callable[[], None]:
        def run() -> None:
            for i in range(per_writer):
                catalog.upload_object(REPO, "main", path_of(writer, i), data_of(writer, i))
                outcome.commit(catalog, f"writer {writer} object {i}")

        return run

    run_threads([work(w) for w in range(writers)], outcome)

    written = {path_of(w, i): data_of(w, i) for w in range(writers) for i in range(per_writer)}
    assert_nothing_lost(catalog, outcome, written)
    assert outcome.commits, "no commit succeeded"
    assert len(outcome.commits) + outcome.no_changes == writers * per_writer


def test_writers_with_one_committer_lose_nothing(catalog: Catalog) -> None:
    writers, per_writer = 6, 40
    outcome = Outcome()
    done = threading.Event()
    finished = 0
    finished_lock = threading.Lock()

    def work(writer: int) -> Callable[[], None]:
        def run() -> None:
            nonlocal finished
            try:
                for i in range(per_writer):
                    catalog.upload_object(REPO, "main", path_of(writer, i), data_of(writer, i))
            finally:
                with finished_lock:
                    finished += 1
                    if finished == writers:
                        done.set()

        return run

    def commit_until_writers_are_done() -> None:
        rounds = 0
        while not done.is_set():
            outcome.commit(catalog, f"round {rounds}")
            rounds += 1
        outcome.commit(catalog, "final")

    run_threads([*(work(w) for w in range(writers)), commit_until_writers_are_done], outcome)

    written = {path_of(w, i): data_of(w, i) for w in range(writers) for i in range(per_writer)}
    assert_nothing_lost(catalog, outcome, written)
    assert len(outcome.commits) >= 2, "the committer never overlapped the writers"
