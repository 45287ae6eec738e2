"""The S3 Replication stand-in: late, unordered, faulty, and never losing an object."""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Callable, Iterator
from typing import BinaryIO

import pytest

import mirror.simulate
from mirror.block.errors import BlockUnavailableError
from mirror.block.memory import MemoryBlockStore
from mirror.block.protocol import BlockStore, ObjectInfo
from mirror.errors import InvalidValueError
from mirror.simulate import ReplicationSimulator, ReplicationStats

DEADLINE = 10.0


class FakeClock:
    """Seconds that move only when told to."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now

    def tick(self, seconds: float) -> None:
        self.now += seconds


class RecordingStore(MemoryBlockStore):
    """A memory store that logs the keys written, in order."""

    def __init__(self, namespace: str = "mem://destination") -> None:
        super().__init__(namespace)
        self.written: list[str] = []

    def put(self, key: str, data: bytes | BinaryIO) -> ObjectInfo:
        info = super().put(key, data)
        self.written.append(key)
        return info


class FlakyStore:
    """A store that fails its next ``puts`` writes and ``lists`` listings, then works."""

    def __init__(self, inner: BlockStore, *, puts: int = 0, lists: int = 0) -> None:
        self.inner = inner
        self.puts_to_fail = puts
        self.lists_to_fail = lists
        self.failed_puts = 0
        self.failed_lists = 0

    @property
    def namespace(self) -> str:
        return self.inner.namespace

    def put(self, key: str, data: bytes | BinaryIO) -> ObjectInfo:
        if self.failed_puts < self.puts_to_fail:
            self.failed_puts += 1
            raise BlockUnavailableError(f"injected put failure of {key!r}")
        return self.inner.put(key, data)

    def put_if_absent(self, key: str, data: bytes) -> bool:
        return self.inner.put_if_absent(key, data)

    def get(self, key: str, start: int = 0, end: int | None = None) -> bytes:
        return self.inner.get(key, start, end)

    def head(self, key: str) -> ObjectInfo:
        return self.inner.head(key)

    def exists(self, key: str) -> bool:
        return self.inner.exists(key)

    def list(self, prefix: str = "", start_after: str = "") -> Iterator[ObjectInfo]:
        if self.failed_lists < self.lists_to_fail:
            self.failed_lists += 1
            raise BlockUnavailableError("injected list failure")
        return self.inner.list(prefix, start_after)

    def delete(self, key: str) -> None:
        self.inner.delete(key)


class GatedStore(MemoryBlockStore):
    """A memory store whose writes wait until ``gate`` is set; ``entered`` tells one is waiting."""

    def __init__(self) -> None:
        super().__init__("mem://gated")
        self.entered = threading.Event()
        self.gate = threading.Event()
        self.landed = threading.Event()

    def put(self, key: str, data: bytes | BinaryIO) -> ObjectInfo:
        self.entered.set()
        if not self.gate.wait(DEADLINE):
            raise AssertionError("the gate was never opened")
        info = super().put(key, data)
        self.landed.set()
        return info


def stores() -> tuple[MemoryBlockStore, MemoryBlockStore, FakeClock]:
    """Return an empty source, an empty destination and a fake clock."""
    return MemoryBlockStore("mem://a"), MemoryBlockStore("mem://b"), FakeClock()


def fill(store: BlockStore, count: int, *, seed: int = 7) -> dict[str, bytes]:
    """Write ``count`` objects of random sizes, in key order; return them."""
    rng = random.Random(seed)
    objects = {
        f"data/p{i // 10}/obj-{i:04d}": rng.randbytes(rng.randrange(0, 300)) for i in range(count)
    }
    for key, body in objects.items():
        store.put(key, body)
    return objects


def contents(store: MemoryBlockStore) -> dict[str, bytes]:
    return {info.key: store.get(info.key) for info in store.list()}


def drain(
    sim: ReplicationSimulator, clock: FakeClock, *, tick: float = 0.5, steps: int = 1000
) -> int:
    """Step and advance the fake clock until nothing is pending; return the steps taken."""
    for n in range(steps):
        sim.step()
        if sim.stats.pending == 0:
            return n
        clock.tick(tick)
    raise AssertionError(f"still pending after {steps} steps: {sim.stats}")


def wait_for(condition: Callable[[], bool], what: str, timeout: float = DEADLINE) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.005)


def test_public_names() -> None:
    assert sorted(mirror.simulate.__all__) == sorted(set(mirror.simulate.__all__))
    for name in mirror.simulate.__all__:
        assert getattr(mirror.simulate, name) is not None


def test_everything_arrives_byte_for_byte_despite_delays_and_drops() -> None:
    source, destination, clock = stores()
    objects = fill(source, 120)
    sim = ReplicationSimulator(
        source,
        destination,
        seed=3,
        delay=(0.0, 5.0),
        drop_probability=0.3,
        drop_for=(1, 3),
        clock=clock,
    )
    drain(sim, clock)
    assert contents(destination) == objects
    stats = sim.stats
    assert stats.discovered == stats.copied == 120
    assert stats.dropped > 0
    assert (stats.pending, stats.withheld, stats.vanished, stats.failed) == (0, 0, 0, 0)


@pytest.mark.parametrize("replicate_deletes", [False, True], ids=["copies", "and-deletes"])
def test_a_resumed_simulator_copies_only_what_the_destination_lacks(
    replicate_deletes: bool,
) -> None:
    source, destination, clock = stores()
    objects = fill(source, 20)
    # a simulator that stopped part-way: half the objects arrived, one of them not whole
    arrived = sorted(objects)[:10]
    for key in arrived:
        destination.put(key, objects[key])
    destination.put(arrived[0], objects[arrived[0]] + b"!")
    sim = ReplicationSimulator(
        source,
        destination,
        seed=2,
        clock=clock,
        resume=True,
        replicate_deletes=replicate_deletes,
    )
    drain(sim, clock)
    assert contents(destination) == objects
    stats = sim.stats
    assert (stats.resumed, stats.discovered, stats.copied) == (9, 11, 11)
    # what is written later is new, and copied
    source.put("late", b"late")
    drain(sim, clock)
    assert sim.stats.copied == 12 and contents(destination)["late"] == b"late"
    if replicate_deletes:
        # a resumed object deleted at the source is deleted at the destination too
        source.delete(arrived[1])
        drain_all(sim, clock)
        assert arrived[1] not in contents(destination)


def test_without_resume_a_new_simulator_copies_everything_again() -> None:
    source, destination, clock = stores()
    objects = fill(source, 5)
    for key, data in objects.items():
        destination.put(key, data)
    sim = ReplicationSimulator(source, destination, seed=2, clock=clock)
    drain(sim, clock)
    assert (sim.stats.resumed, sim.stats.copied) == (0, 5)


def test_objects_written_while_replicating_are_discovered_once() -> None:
    source, destination, clock = stores()
    sim = ReplicationSimulator(source, destination, seed=1, delay=(1.0, 2.0), clock=clock)
    source.put("one", b"1")
    assert sim.scan() == 1
    assert sim.scan() == 0
    source.put("two", b"22")
    assert sim.scan() == 1
    assert sim.deliver() == 0  # nothing is due yet
    clock.tick(2.0)
    assert sim.deliver() == 2
    assert contents(destination) == {"one": b"1", "two": b"22"}
    assert sim.stats.discovered == 2


def delivery_order(seed: int, delay: tuple[float, float], count: int = 40) -> list[str]:
    source, destination, clock = MemoryBlockStore("mem://a"), RecordingStore(), FakeClock()
    fill(source, count)
    sim = ReplicationSimulator(source, destination, seed=seed, delay=delay, clock=clock)
    drain(sim, clock, tick=0.1)
    return destination.written


@pytest.mark.parametrize("delay", [(0.0, 0.0), (0.0, 3.0)], ids=["all-due-at-once", "delayed"])
def test_order_is_random_but_reproducible_with_a_seed(delay: tuple[float, float]) -> None:
    created = sorted(fill(MemoryBlockStore(), 40))
    order = delivery_order(11, delay)
    assert sorted(order) == created
    assert order != created
    assert delivery_order(11, delay) == order
    assert delivery_order(12, delay) != order


def test_delays_spread_deliveries_over_time() -> None:
    source, destination, clock = stores()
    fill(source, 50)
    sim = ReplicationSimulator(source, destination, seed=5, delay=(1.0, 3.0), clock=clock)
    sim.scan()
    assert sim.deliver() == 0
    clock.tick(0.999)
    assert sim.deliver() == 0
    clock.tick(1.0)
    partial = sim.deliver()
    assert 0 < partial < 50
    clock.tick(1.001)
    assert sim.deliver() == 50 - partial


@pytest.mark.parametrize("delay", [(0.0, 0.0), (0.5, 4.0)], ids=["no-delay", "delayed"])
def test_small_first_delivers_small_objects_first(delay: tuple[float, float]) -> None:
    source, destination, clock = MemoryBlockStore("mem://a"), RecordingStore(), FakeClock()
    sizes = {"data/big": 5000, "data/medium": 800, "_lakefs/metarange": 40, "_lakefs/range": 300}
    sizes |= {f"data/p/{i}": 1000 + i * 100 for i in range(10)}
    for key, size in sizes.items():
        source.put(key, b"x" * size)
    sim = ReplicationSimulator(
        source, destination, seed=2, delay=delay, small_first=True, clock=clock
    )
    drain(sim, clock, tick=0.05)
    assert destination.written == sorted(sizes, key=sizes.__getitem__)


def test_small_first_lets_metadata_overtake_data_written_before_it() -> None:
    source, destination, clock = MemoryBlockStore("mem://a"), RecordingStore(), FakeClock()
    sim = ReplicationSimulator(
        source, destination, seed=2, delay=(0.0, 10.0), small_first=True, clock=clock
    )
    source.put("data/part-0", b"d" * 10_000)
    sim.scan()
    clock.tick(1.0)
    source.put("_lakefs/meta", b"m" * 100)
    drain(sim, clock, tick=0.25)
    assert destination.written == ["_lakefs/meta", "data/part-0"]


def test_drops_postpone_deliveries_but_lose_nothing() -> None:
    source, destination, clock = stores()
    objects = fill(source, 60)
    sim = ReplicationSimulator(
        source, destination, seed=9, drop_probability=0.5, drop_for=(2.0, 4.0), clock=clock
    )
    first = sim.step()
    assert 0 < first < 60
    assert sim.stats.dropped == 60 - first
    clock.tick(1.9)
    assert sim.step() == 0  # dropped objects wait at least drop_for's minimum
    drain(sim, clock)
    assert contents(destination) == objects
    assert sim.stats.dropped >= 60 - first


def test_stall_stops_every_delivery_until_resumed() -> None:
    source, destination, clock = stores()
    objects = fill(source, 20)
    sim = ReplicationSimulator(source, destination, seed=1, delay=(0.0, 1.0), clock=clock)
    sim.stall()
    for _ in range(5):
        clock.tick(1.0)
        assert sim.step() == 0
    assert sim.stats.stalled
    assert sim.stats.pending == 20
    assert contents(destination) == {}
    sim.resume()
    assert not sim.stats.stalled
    assert sim.step() == 20
    assert contents(destination) == objects


def test_stall_waits_for_a_copy_in_flight() -> None:
    source, destination = MemoryBlockStore("mem://a"), GatedStore()
    source.put("k", b"v")
    sim = ReplicationSimulator(source, destination, seed=1)
    delivering = threading.Thread(target=sim.step)
    delivering.start()
    assert destination.entered.wait(DEADLINE)
    landed_when_stall_returned: list[bool] = []

    def stall() -> None:
        sim.stall()
        landed_when_stall_returned.append(destination.landed.is_set())

    stalling = threading.Thread(target=stall)
    stalling.start()
    wait_for(lambda: sim.stats.stalled, "the stall flag")
    destination.gate.set()
    delivering.join(DEADLINE)
    stalling.join(DEADLINE)
    assert landed_when_stall_returned == [True]


def test_withhold_holds_matching_keys_until_released() -> None:
    source, destination, clock = stores()
    objects = fill(source, 30)
    source.put("_lakefs/meta", b"m")
    objects["_lakefs/meta"] = b"m"
    sim = ReplicationSimulator(source, destination, seed=4, delay=(0.0, 2.0), clock=clock)

    def is_data(key: str) -> bool:
        return key.startswith("data/")

    def is_one(key: str) -> bool:
        return key == "data/p1/obj-0013"

    sim.withhold(is_data)
    sim.withhold(is_one)
    sim.scan()
    clock.tick(2.0)
    assert sim.step() == 1
    assert set(contents(destination)) == {"_lakefs/meta"}
    assert sim.stats.withheld == 30
    sim.release(is_data)
    clock.tick(1.0)
    assert sim.step() == 29
    assert sim.pending_keys() == ["data/p1/obj-0013"]
    assert sim.stats.withheld == 1
    source.put("data/late", b"late")
    sim.withhold(is_data)  # applies to keys discovered later too
    clock.tick(3.0)
    assert sim.step() == 0
    sim.release()
    assert sim.stats.withheld == 0
    clock.tick(2.0)
    assert sim.step() == 2
    objects["data/late"] = b"late"
    assert contents(destination) == objects


def test_objects_deleted_at_the_source_before_delivery_are_skipped() -> None:
    source, destination, clock = stores()
    source.put("gone", b"g")
    source.put("kept", b"k")
    sim = ReplicationSimulator(source, destination, seed=1, delay=(1.0, 1.0), clock=clock)
    assert sim.scan() == 2
    source.delete("gone")
    clock.tick(1.0)
    assert sim.deliver() == 1
    assert contents(destination) == {"kept": b"k"}
    stats = sim.stats
    assert (stats.copied, stats.vanished, stats.pending) == (1, 1, 0)


def test_a_failing_destination_is_retried_on_later_steps() -> None:
    source, inner = MemoryBlockStore("mem://a"), MemoryBlockStore("mem://b")
    destination = FlakyStore(inner, puts=3)
    source.put("only", b"payload")
    sim = ReplicationSimulator(source, destination, seed=1)
    for attempt in range(3):
        assert sim.step() == 0
        assert sim.stats.retries == attempt + 1
        assert sim.pending_keys() == ["only"]
    assert sim.step() == 1
    assert contents(inner) == {"only": b"payload"}
    assert sim.stats.pending == 0


def test_prefix_limits_what_is_replicated() -> None:
    source, destination, clock = stores()
    source.put("repo1/data/x", b"1")
    source.put("repo2/data/y", b"2")
    sim = ReplicationSimulator(source, destination, seed=1, prefix="repo1/", clock=clock)
    drain(sim, clock)
    assert contents(destination) == {"repo1/data/x": b"1"}


def test_run_until_idle_returns_stats_or_times_out() -> None:
    source, destination = MemoryBlockStore("mem://a"), MemoryBlockStore("mem://b")
    objects = fill(source, 10)
    sim = ReplicationSimulator(source, destination, seed=1, delay=(0.0, 0.05), poll_interval=0.01)
    stats = sim.run_until_idle(timeout=DEADLINE)
    assert stats == ReplicationStats(
        discovered=10, copied=10, dropped=0, pending=0, withheld=0, stalled=False
    )
    assert contents(destination) == objects
    source.put("late", b"l")
    sim.stall()
    with pytest.raises(TimeoutError, match="1 objects pending"):
        sim.run_until_idle(timeout=0.1)
    sim.resume()
    assert sim.run_until_idle(timeout=DEADLINE).copied == 11


def test_background_thread_replicates_while_the_source_changes() -> None:
    source, destination = MemoryBlockStore("mem://a"), MemoryBlockStore("mem://b")
    objects = fill(source, 20)
    with ReplicationSimulator(
        source,
        destination,
        seed=1,
        delay=(0.0, 0.05),
        drop_probability=0.2,
        drop_for=(0.01, 0.05),
        poll_interval=0.01,
    ) as sim:
        assert sim.running
        with pytest.raises(RuntimeError, match="already running"):
            sim.start()
        for i in range(20):
            source.put(f"late/{i}", bytes([i]) * i)
            objects[f"late/{i}"] = bytes([i]) * i
        wait_for(lambda: contents(destination) == objects, "every object to arrive")
    assert not sim.running
    assert sim.stats.copied == 40


def test_background_thread_survives_an_unavailable_source() -> None:
    inner, destination = MemoryBlockStore("mem://a"), MemoryBlockStore("mem://b")
    source = FlakyStore(inner, lists=3)
    inner.put("k", b"v")
    sim = ReplicationSimulator(source, destination, poll_interval=0.01)
    sim.start()
    try:
        wait_for(lambda: destination.exists("k"), "the object to arrive")
    finally:
        sim.stop()
    assert source.failed_lists == 3


def test_background_thread_controls() -> None:
    source, destination = MemoryBlockStore("mem://a"), MemoryBlockStore("mem://b")
    with ReplicationSimulator(source, destination, seed=1, poll_interval=0.01) as sim:
        sim.withhold(lambda key: key.startswith("data/"))
        source.put("data/x", b"x")
        source.put("meta", b"m")
        wait_for(lambda: destination.exists("meta"), "the unheld object")
        wait_for(lambda: sim.stats.withheld == 1, "the held object to be discovered")
        assert not destination.exists("data/x")
        sim.stall()
        sim.release()
        source.put("data/y", b"y")
        wait_for(lambda: sim.stats.pending == 2, "both data objects to be discovered")
        assert not destination.exists("data/x")
        sim.resume()
        wait_for(lambda: destination.exists("data/x") and destination.exists("data/y"), "data")


@pytest.mark.parametrize(
    "kwargs",
    [
        {"delay": (2.0, 1.0)},
        {"delay": (-1.0, 1.0)},
        {"drop_for": (0.0, float("inf"))},
        {"drop_probability": 1.0},
        {"drop_probability": -0.1},
        {"poll_interval": 0.0},
    ],
)
def test_invalid_settings_are_rejected(kwargs: dict[str, object]) -> None:
    with pytest.raises(InvalidValueError):
        ReplicationSimulator(MemoryBlockStore(), MemoryBlockStore(), **kwargs)  # type: ignore[arg-type]


# replicated deletions (S3's delete-marker replication)


class EventStore(MemoryBlockStore):
    """A memory store that logs every write and deletion, in order, as ``(op, key)``."""

    def __init__(self, namespace: str = "mem://destination") -> None:
        super().__init__(namespace)
        self.events: list[tuple[str, str]] = []

    def put(self, key: str, data: bytes | BinaryIO) -> ObjectInfo:
        info = super().put(key, data)
        self.events.append(("put", key))
        return info

    def delete(self, key: str) -> None:
        super().delete(key)
        self.events.append(("delete", key))


def check_history(events: list[tuple[str, str]]) -> None:
    """Assert every deletion of a key follows a copy of it since its previous deletion."""
    there: set[str] = set()
    for op, key in events:
        if op == "put":
            there.add(key)
        else:
            assert key in there, f"{key!r} deleted before its copy arrived (or deleted twice)"
            there.discard(key)


def drain_all(
    sim: ReplicationSimulator, clock: FakeClock, *, tick: float = 0.5, steps: int = 1000
) -> None:
    """Step and advance the fake clock until no copy or deletion is pending."""
    for _ in range(steps):
        sim.step()
        stats = sim.stats
        if stats.pending == 0 and stats.deletes_pending == 0:
            return
        clock.tick(tick)
    raise AssertionError(f"still pending after {steps} steps: {sim.stats}")


def test_deletions_are_not_replicated_unless_asked() -> None:
    source, destination, clock = stores()
    objects = fill(source, 10)
    sim = ReplicationSimulator(source, destination, seed=1, clock=clock)
    assert not sim.replicate_deletes
    drain(sim, clock)
    for key in list(objects)[:5]:
        source.delete(key)
    drain_all(sim, clock)
    assert contents(destination) == objects
    assert (sim.stats.deleted, sim.stats.deletes_pending) == (0, 0)


def test_deletions_replicate_after_the_delay() -> None:
    source, destination, clock = stores()
    destination = EventStore()
    objects = fill(source, 20)
    sim = ReplicationSimulator(
        source, destination, seed=2, delay=(2.0, 2.0), clock=clock, replicate_deletes=True
    )
    sim.scan()
    clock.tick(2.0)
    assert sim.deliver() == 20
    gone = sorted(objects)[::2]
    for key in gone:
        source.delete(key)
        del objects[key]
    sim.step()
    # found, but not due yet: the destination still has every object
    assert sim.pending_deletes() == gone
    assert sim.stats.deletes_pending == 10
    assert len(contents(destination)) == 20
    clock.tick(1.9)
    sim.step()
    assert len(contents(destination)) == 20
    clock.tick(0.1)
    sim.step()
    assert contents(destination) == contents(source) == objects
    stats = sim.stats
    assert (stats.deleted, stats.deletes_pending, stats.copied) == (10, 0, 20)
    check_history(destination.events)


def test_a_deletion_found_before_the_copy_never_resurrects_the_object() -> None:
    source, destination, clock = stores()
    destination = EventStore()
    source.put("short-lived", b"s")
    source.put("kept", b"k")
    sim = ReplicationSimulator(
        source, destination, seed=3, delay=(5.0, 5.0), clock=clock, replicate_deletes=True
    )
    assert sim.scan() == 2
    source.delete("short-lived")
    sim.scan()
    # the deletion waits for a copy that is still pending
    assert sim.pending_deletes() == ["short-lived"]
    clock.tick(5.0)
    assert sim.deliver() == 1  # "kept"; "short-lived" is gone at the source: nothing to copy
    assert contents(destination) == {"kept": b"k"}
    stats = sim.stats
    assert (stats.vanished, stats.deleted, stats.deletes_pending) == (1, 0, 0)
    assert destination.events == [("put", "kept")]


def test_a_deletion_waits_for_a_copy_in_flight() -> None:
    source, destination = MemoryBlockStore("mem://a"), GatedStore()
    deletions: list[str] = []
    original_delete = destination.delete

    def delete(key: str) -> None:
        deletions.append(key)
        original_delete(key)

    destination.delete = delete  # type: ignore[method-assign]
    source.put("k", b"v")
    sim = ReplicationSimulator(source, destination, seed=1, replicate_deletes=True)
    delivering = threading.Thread(target=sim.step)
    delivering.start()
    assert destination.entered.wait(DEADLINE)  # the copy read the source and is writing
    source.delete("k")
    sim.scan()
    assert sim.pending_deletes() == ["k"]
    applying = threading.Thread(target=sim.deliver)
    applying.start()
    destination.gate.set()
    delivering.join(DEADLINE)
    applying.join(DEADLINE)
    sim.deliver()
    assert destination.landed.is_set()
    assert deletions == ["k"]
    assert not destination.exists("k")
    assert (sim.stats.copied, sim.stats.deleted, sim.stats.deletes_pending) == (1, 1, 0)


def test_each_object_is_deleted_once_and_a_key_written_again_replicates_again() -> None:
    source, destination, clock = stores()
    destination = EventStore()
    source.put("k", b"first")
    sim = ReplicationSimulator(
        source, destination, seed=4, delay=(0.0, 1.0), clock=clock, replicate_deletes=True
    )
    drain_all(sim, clock)
    source.delete("k")
    for _ in range(5):  # found by every scan, applied once
        drain_all(sim, clock)
    assert destination.events == [("put", "k"), ("delete", "k")]
    source.put("k", b"second")
    drain_all(sim, clock)
    assert contents(destination) == {"k": b"second"}
    source.delete("k")
    drain_all(sim, clock)
    assert contents(destination) == {}
    assert sim.stats.deleted == 2
    check_history(destination.events)


def test_deletions_obey_stall_withhold_and_drops() -> None:
    source, destination, clock = stores()
    destination = EventStore()
    objects = fill(source, 60)
    sim = ReplicationSimulator(
        source,
        destination,
        seed=5,
        delay=(0.0, 3.0),
        drop_probability=0.3,
        drop_for=(1.0, 2.0),
        clock=clock,
        replicate_deletes=True,
    )
    drain_all(sim, clock)
    dropped = sim.stats.dropped
    gone = sorted(objects)[:30]
    for key in gone:
        source.delete(key)
    sim.stall()
    sim.scan()
    clock.tick(10.0)
    sim.deliver()
    assert len(contents(destination)) == 60  # stalled: nothing deleted

    def is_first(key: str) -> bool:
        return key == gone[0]

    sim.withhold(is_first)
    sim.resume()
    for _ in range(200):
        sim.step()
        if sim.pending_deletes() == [gone[0]]:
            break
        clock.tick(0.5)
    assert sim.pending_deletes() == [gone[0]]
    assert destination.exists(gone[0])
    sim.release(is_first)
    drain_all(sim, clock)
    assert contents(destination) == contents(source)
    assert sim.stats.dropped > dropped  # deletions were dropped too, and retried
    assert sim.stats.deleted == 30
    check_history(destination.events)


@pytest.mark.parametrize("seed", range(5))
def test_random_writes_and_deletions_converge_without_resurrection(seed: int) -> None:
    rng = random.Random(seed)
    source, destination, clock = stores()
    destination = EventStore()
    sim = ReplicationSimulator(
        source,
        destination,
        seed=seed,
        delay=(0.0, 4.0),
        drop_probability=0.2,
        drop_for=(0.5, 2.0),
        small_first=bool(seed % 2),
        clock=clock,
        replicate_deletes=True,
    )
    written: list[str] = []
    for step in range(300):
        if written and rng.random() < 0.4:
            key = written.pop(rng.randrange(len(written)))
            source.delete(key)
        else:
            # keys are never reused, as in a storage namespace
            key = f"data/{step:04d}"
            source.put(key, rng.randbytes(rng.randrange(1, 200)))
            written.append(key)
        sim.step()
        # whatever the destination holds was written at the source, with the same bytes
        for info in destination.list():
            if source.exists(info.key):
                assert destination.get(info.key) == source.get(info.key)
        clock.tick(rng.uniform(0.0, 0.5))
    drain_all(sim, clock)
    assert contents(destination) == contents(source)
    check_history(destination.events)
