"""The mirror head moves to a whole commit between it and a source head still waiting for files.

Two regions' API apps in this process (see ``test_replicant``); replication is copying files by
hand, so which commit is whole at any moment is set exactly. Every move of the mirror branch is
checked, at the moment it is asked for, by a validator with empty caches of its own: no move may
reach a commit with a file missing.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator

import pytest

from mirror.kv import MemoryKV
from mirror.replicant.metrics import ReplicantMetrics
from mirror.replicant.state import MirrorConfig, ReplicantStore
from mirror.replicant.worker import MirrorWorker, WorkerSettings, intermediate_probes
from mirror.validator import MemoryValidatedRanges, ThreadedObjectReader, Validator
from tests.inprocess import ADMIN, REPLICATOR
from tests.unit.test_replicant import Pair, _commit, _copy_all, _region, _until, _value

LABELS = {"mirror": "origin-mirror", "branch": "main"}


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


class Moves:
    """The mirror branch's moves, each checked whole by a validator with empty caches."""

    def __init__(self, pair: Pair) -> None:
        self.pair = pair
        self.targets: list[str] = []
        self.incomplete: list[str] = []
        dest = pair.worker.dest
        move = dest.set_branch_head

        async def checked(repo: str, branch: str, commit_id: str, expected: str | None) -> None:
            metarange = pair.b.catalog.get_commit("origin-mirror", commit_id).metarange_id
            fresh = Validator(
                ThreadedObjectReader(pair.dst_store), validated=MemoryValidatedRanges()
            )
            if not (await fresh.validate(metarange)).complete:
                self.incomplete.append(commit_id)
            self.targets.append(commit_id)
            await move(repo, branch, commit_id, expected)

        dest.set_branch_head = checked  # type: ignore[method-assign]


@pytest.fixture
async def pair() -> AsyncIterator[Pair]:
    a, b = _region("a"), _region("b")
    tag = uuid.uuid4().hex[:8]
    source_ns, mirror_ns = f"mem://src-{tag}", f"mem://dst-{tag}"
    a.catalog.create_repository("origin", source_ns)
    dest = b.client(REPLICATOR)
    await dest.create_mirror_repository("origin-mirror", mirror_ns, "main", "a/origin")
    config = MirrorConfig("origin-mirror", "a", "origin", "b", mirror_ns)
    metrics = ReplicantMetrics()
    validator = Validator(
        ThreadedObjectReader(b.resolver.open(mirror_ns)),
        validated=MemoryValidatedRanges(),
        events=metrics.for_validation(config.name),
    )
    worker = MirrorWorker(
        config,
        a.client(ADMIN),
        dest,
        validator,
        ReplicantStore(MemoryKV()),
        metrics,
        WorkerSettings(poll_interval=0.01),
    )
    yield Pair(a, b, source_ns, mirror_ns, config, worker, metrics)
    await worker.source.aclose()
    await dest.aclose()


def _data_key(pair: Pair, path: str) -> str:
    """Return the key, in the namespace, of the data of ``path`` at the source head."""
    address = pair.a.catalog.stat_object("origin", "main", path).physical_address
    return address.split("/", 3)[-1]


def _mirror_head(pair: Pair) -> str:
    return pair.b.catalog.get_branch("origin-mirror", "main").commit_id


def _skipped(pair: Pair) -> float:
    return _value(pair.metrics, "lakemirror_commits_skipped_total", **LABELS)


def _validations(pair: Pair, result: str) -> float:
    return _value(
        pair.metrics, "lakemirror_validations_total", mirror="origin-mirror", result=result
    )


async def _synced_at_first_commit(pair: Pair) -> str:
    first = _commit(pair.a, {"a.csv": b"1"}, "one")
    _copy_all(pair.src_store, pair.dst_store)
    assert await pair.worker.sync_branch("main") is True
    assert _mirror_head(pair) == first
    return first


@pytest.mark.anyio
async def test_a_whole_commit_is_shown_while_its_successor_waits(pair: Pair) -> None:
    await _synced_at_first_commit(pair)
    moves = Moves(pair)
    skipped = _skipped(pair)
    whole = _commit(pair.a, {"b.csv": b"2" * 300}, "two")
    head = _commit(pair.a, {"c.csv": b"3" * 500}, "three")
    held = _data_key(pair, "c.csv")
    _copy_all(pair.src_store, pair.dst_store, skip=lambda k: k == held)
    sync = asyncio.create_task(pair.worker.sync_branch("main"))
    await _until(
        lambda: _mirror_head(pair) == whole and pair.worker.status()[0].state == "waiting",
        "the mirror head at the whole commit, the source head waiting",
    )
    status = pair.worker.status()[0]
    assert (status.lag_commits, status.missing_objects) == (1, 1)
    assert held in status.missing_sample[0]
    assert not sync.done()
    _copy_all(pair.src_store, pair.dst_store)
    assert await asyncio.wait_for(sync, 10) is True
    assert _mirror_head(pair) == head
    assert moves.targets == [whole, head]
    assert moves.incomplete == []
    # one move per commit, none skipped
    assert _value(pair.metrics, "lakemirror_head_advances_total", **LABELS) == 3
    assert _skipped(pair) == skipped
    assert pair.worker.status()[0].state == "synced"


@pytest.mark.anyio
async def test_no_commit_with_a_file_missing_becomes_the_head(pair: Pair) -> None:
    first = await _synced_at_first_commit(pair)
    moves = Moves(pair)
    skipped = _skipped(pair)
    partial = _commit(pair.a, {"p.csv": b"p" * 200}, "p")
    held_p = _data_key(pair, "p.csv")
    # whole once p.csv arrives: it holds p.csv too
    middle = _commit(pair.a, {"q.csv": b"q" * 200}, "q")
    head = _commit(pair.a, {"r.csv": b"r" * 200}, "r")
    held_r = _data_key(pair, "r.csv")
    _copy_all(pair.src_store, pair.dst_store, skip=lambda k: k in (held_p, held_r))
    sync = asyncio.create_task(pair.worker.sync_branch("main"))
    # the head and both commits in between were checked and found incomplete
    await _until(lambda: _validations(pair, "incomplete") >= 3, "the commits in between checked")
    assert pair.worker.status()[0].missing_objects == 2
    assert _mirror_head(pair) == first
    _copy_all(pair.src_store, pair.dst_store, skip=lambda k: k == held_r)
    await _until(lambda: _mirror_head(pair) == middle, "the mirror head at the whole commit")
    assert not sync.done()
    _copy_all(pair.src_store, pair.dst_store)
    assert await asyncio.wait_for(sync, 10) is True
    assert moves.targets == [middle, head]
    assert partial not in moves.targets
    assert moves.incomplete == []
    assert _skipped(pair) == skipped + 1


@pytest.mark.anyio
async def test_a_source_head_that_moves_while_its_commit_waits_becomes_the_target(
    pair: Pair,
) -> None:
    await _synced_at_first_commit(pair)
    moves = Moves(pair)
    waiting = _commit(pair.a, {"w.csv": b"w" * 300}, "waits")
    held_w = _data_key(pair, "w.csv")
    _copy_all(pair.src_store, pair.dst_store, skip=lambda k: k == held_w)
    sync = asyncio.create_task(pair.worker.sync_branch("main"))
    await _until(
        lambda: (
            pair.worker.status()[0].state == "waiting"
            and pair.worker.status()[0].source_head == waiting
        ),
        "the first commit waiting for its file",
    )
    # the source moves on; its new head's files do not arrive either
    newer = _commit(pair.a, {"n.csv": b"n" * 300}, "newer")
    held_n = _data_key(pair, "n.csv")
    _copy_all(pair.src_store, pair.dst_store, skip=lambda k: k in (held_w, held_n))
    await _until(
        lambda: (
            pair.worker.status()[0].source_head == newer
            and pair.worker.status()[0].state == "waiting"
            and pair.worker.status()[0].lag_commits == 2
        ),
        "the status following the new source head, two commits behind",
    )
    assert not sync.done()
    _copy_all(pair.src_store, pair.dst_store)
    assert await asyncio.wait_for(sync, 10) is True
    assert _mirror_head(pair) == newer
    # the waiting commit was never the target once the source had moved past it
    assert moves.targets[-1] == newer
    assert moves.incomplete == []


@pytest.mark.anyio
async def test_a_storm_whose_files_are_all_there_costs_one_validation(pair: Pair) -> None:
    await _synced_at_first_commit(pair)
    skipped, complete = _skipped(pair), _validations(pair, "complete")
    for i in range(20):
        head = _commit(pair.a, {f"s/{i:02}.csv": str(i).encode()}, f"storm {i}")
    _copy_all(pair.src_store, pair.dst_store)
    assert await pair.worker.sync_branch("main") is True
    assert _mirror_head(pair) == head
    assert _validations(pair, "complete") == complete + 1
    assert _validations(pair, "incomplete") == 0
    assert _skipped(pair) == skipped + 19


@pytest.mark.parametrize(
    ("count", "picks"),
    [
        (0, []),
        (1, [0]),
        (2, [0, 1]),
        (3, [0, 1, 2]),
        (5, [0, 1, 3, 4]),
        (8, [0, 1, 3, 7]),
        (100, [0, 1, 3, 7, 15, 31, 63, 99]),
    ],
)
def test_the_commits_checked_in_between_span_the_chain(count: int, picks: list[int]) -> None:
    assert intermediate_probes(count) == picks
