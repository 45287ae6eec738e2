"""The replicant's lag history: a ring of one-slot samples per branch in the region's KV."""

from __future__ import annotations

import json

import pytest

from mirror.kv import MemoryKV
from mirror.replicant.lag_history import (
    SLOT_SECONDS,
    SLOTS,
    WINDOW_SECONDS,
    LagHistory,
    LagSample,
    history_prefix,
    read_history,
)
from mirror.replicant.state import MirrorConfig, ReplicantStore

T0 = 1_800_000_000.0
"""A slot boundary (a multiple of the slot length)."""


class CountingKV(MemoryKV):
    """A memory KV that counts its writes."""

    def __init__(self) -> None:
        super().__init__()
        self.writes = 0

    def set(self, key: bytes, value: bytes) -> None:
        self.writes += 1
        super().set(key, value)


def test_a_slot_keeps_its_worst_lag_in_at_most_two_writes() -> None:
    kv = CountingKV()
    history = LagHistory(kv, "m")
    for second, lag in enumerate([1.0, 5.0, 3.0, 9.0, 2.0]):
        history.record("main", LagSample(T0 + second, lag, int(lag), exact=True))
    assert kv.writes == 1, "only the slot's first report is written at once"
    assert [s.lag_seconds for s in read_history(kv, "m", T0 + 5)["main"]] == [1.0]
    history.record("main", LagSample(T0 + SLOT_SECONDS, 0.0, 0))
    assert kv.writes == 3, "the next slot writes the last one's worst, then its own first"
    samples = read_history(kv, "m", T0 + SLOT_SECONDS)["main"]
    assert [(s.time, s.lag_seconds, s.lag_commits) for s in samples] == [
        (T0 + 3, 9.0, 9),
        (T0 + SLOT_SECONDS, 0.0, 0),
    ]


def test_flush_writes_a_worse_lag_seen_after_the_slot_was_written() -> None:
    kv = CountingKV()
    history = LagHistory(kv, "m")
    history.record("main", LagSample(T0, 1.0, 1))
    history.flush()
    assert kv.writes == 1, "nothing worse came in: nothing to write"
    history.record("main", LagSample(T0 + 1, 4.0, 2, exact=False))
    history.flush()
    (sample,) = read_history(kv, "m", T0 + 2)["main"]
    assert sample == LagSample(T0 + 1, 4.0, 2, exact=False)
    history.flush()
    assert kv.writes == 2


def test_a_lower_bound_of_commits_keeps_its_own_field() -> None:
    bound = LagSample(T0, 2.5, 3, exact=False)
    assert bound.to_json() == {
        "time": T0,
        "lag_seconds": 2.5,
        "lag_commits": None,
        "lag_commits_at_least": 3,
    }
    assert LagSample.from_json(bound.to_json()) == bound
    count = LagSample(T0, 2.5, 3)
    assert count.to_json()["lag_commits"] == 3 and count.to_json()["lag_commits_at_least"] is None
    assert LagSample.from_json(count.to_json()) == count


def test_the_ring_holds_one_hour_of_slots_per_branch_whatever_the_polls() -> None:
    kv = MemoryKV()
    history = LagHistory(kv, "m")
    polls = int(2 * WINDOW_SECONDS / 2.5)  # two hours of a poll every 2.5 s, 4 a slot
    for i in range(polls):
        now = T0 + i * 2.5
        history.record("main", LagSample(now, float(i % 4), i % 4))
        history.record("dev", LagSample(now, 0.0, 0))
    history.flush()
    for branch in ("main", "dev"):
        keys = list(kv.scan(history_prefix("m") + branch.encode() + b"/"))
        assert len(keys) == SLOTS
    now = T0 + (polls - 1) * 2.5
    found = read_history(kv, "m", now)
    assert list(found) == ["dev", "main"]
    times = [s.time for s in found["main"]]
    assert times == sorted(times) and len(times) <= SLOTS
    assert times[0] > now - WINDOW_SECONDS
    assert all(s.lag_seconds == 3.0 for s in found["main"]), "each slot keeps its worst"


def test_slots_older_than_the_hour_are_not_answered() -> None:
    kv = MemoryKV()
    history = LagHistory(kv, "m")
    history.record("main", LagSample(T0, 1.0, 1))
    history.record("main", LagSample(T0 + 20 * SLOT_SECONDS, 2.0, 2))
    assert len(read_history(kv, "m", T0 + 20 * SLOT_SECONDS)["main"]) == 2
    later = read_history(kv, "m", T0 + WINDOW_SECONDS + SLOT_SECONDS)
    assert [s.lag_seconds for s in later["main"]] == [2.0]
    assert read_history(kv, "m", T0 + 3 * WINDOW_SECONDS) == {}
    assert read_history(kv, "other", T0) == {}


def test_a_dropped_branch_and_a_deleted_mirror_leave_no_history() -> None:
    kv = MemoryKV()
    store = ReplicantStore(kv)
    store.add_mirror(MirrorConfig("m", "a", "origin", "b", "mem://m"))
    history = LagHistory(kv, "m")
    for branch in ("main", "dev"):
        history.record(branch, LagSample(T0, 1.0, 1))
    LagHistory(kv, "m2").record("main", LagSample(T0, 1.0, 1))
    history.drop_branch("dev")
    assert list(read_history(kv, "m", T0)) == ["main"]
    store.delete_mirror("m")
    assert read_history(kv, "m", T0) == {}
    assert list(read_history(kv, "m2", T0)) == ["main"], "another mirror's history stays"


@pytest.mark.parametrize("branch", ["main", "feature-x_1"])
def test_records_are_json_under_the_branch_and_slot(branch: str) -> None:
    kv = MemoryKV()
    LagHistory(kv, "m").record(branch, LagSample(T0 + 3 * SLOT_SECONDS, 1.0, 1))
    ((key, raw),) = list(kv.scan(history_prefix("m")))
    slot = int((T0 + 3 * SLOT_SECONDS) // SLOT_SECONDS) % SLOTS
    assert key == f"replicant/lag-history/m/{branch}/{slot:03d}".encode()
    assert json.loads(raw)["lag_seconds"] == 1.0
