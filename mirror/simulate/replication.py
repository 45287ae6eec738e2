"""A stand-in for S3 Replication: copy new objects between namespaces, late, unordered, faulty.

S3 Replication copies every new object of the source bucket to the destination bucket
asynchronously: minutes late, in no particular order, and small objects (Iceberg or range metadata)
often overtake the large data files written before them. :class:`ReplicationSimulator` reproduces
that between two :class:`~mirror.block.protocol.BlockStore` namespaces, and adds the controls the
mirroring tests need to create exact situations: stall everything, withhold chosen keys, drop
deliveries for a while.

S3 Replication can also replicate deletions (delete-marker replication, off unless the rule
enables it): an object deleted at the source is then deleted at the destination too, as late and
as unordered as copies. ``replicate_deletes=True`` does the same here, which is how the source's
garbage collection reaches a mirror.
"""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from types import TracebackType

from mirror.block.errors import BlockNotFoundError, BlockUnavailableError
from mirror.block.protocol import BlockStore, ObjectInfo
from mirror.errors import InvalidValueError, LakeMirrorError

__all__ = ["KeyPredicate", "ReplicationSimulator", "ReplicationStats"]

KeyPredicate = Callable[[str], bool]
"""Select object keys (relative to the namespace) for :meth:`ReplicationSimulator.withhold`."""


@dataclass(frozen=True, slots=True)
class ReplicationStats:
    """A snapshot of a simulator's counters.

    Attributes:
        discovered: objects found at the source since the start.
        copied: deliveries written to the destination (an object is copied once).
        dropped: deliveries postponed by an injected drop (one object may be dropped repeatedly).
        pending: discovered objects not yet copied, vanished or failed (withheld ones included).
        withheld: pending objects a :meth:`~ReplicationSimulator.withhold` predicate holds back.
        stalled: whether deliveries are stalled.
        vanished: objects deleted at the source before they could be copied (skipped).
        retries: copies (or deletions) that failed transiently (``BlockUnavailableError``) and
            stay pending.
        failed: objects given up on because a store rejected them for good.
        deleted: deletions applied to the destination (with ``replicate_deletes``; each object
            deleted once).
        deletes_pending: deletions found at the source and not yet applied (withheld, stalled,
            dropped, not yet due, or waiting for the object's copy to land first).
        resumed: objects the first scan found at the destination already, with their size
            (with ``resume``): taken as replicated, not copied again.
    """

    discovered: int
    copied: int
    dropped: int
    pending: int
    withheld: int
    stalled: bool
    vanished: int = 0
    retries: int = 0
    failed: int = 0
    deleted: int = 0
    deletes_pending: int = 0
    resumed: int = 0


@dataclass(slots=True)
class _Pending:
    key: str
    size: int
    due: float


def _check_interval(name: str, interval: tuple[float, float]) -> tuple[float, float]:
    low, high = (float(v) for v in interval)
    if not (0.0 <= low <= high) or high == float("inf"):
        raise InvalidValueError(
            f"{name} must be (min, max) seconds with 0 <= min <= max < inf, got {interval!r}"
        )
    return low, high


class ReplicationSimulator:
    """Copy every new object of ``source`` to ``destination`` late, out of order, with faults.

    :meth:`scan` lists the source (under ``prefix``) and schedules each object it has not seen
    before for delivery ``uniform(delay)`` seconds later; :meth:`deliver` copies the objects that
    are due, in random order. Objects keep their key. Drive it by hand with :meth:`step` (tests
    with a fake ``clock``), until nothing is pending with :meth:`run_until_idle`, or in a
    background thread with :meth:`start` / :meth:`stop` or as a context manager.

    Fault controls, safe to call from any thread while it runs: :meth:`stall` / :meth:`resume`
    and :meth:`withhold` / :meth:`release`. When one of them returns, it is in force: no copy it
    forbids is in flight or will start. ``drop_probability`` makes each delivery attempt fail with
    that probability; the object is then retried ``uniform(drop_for)`` seconds later, so drops
    delay objects but never lose them.

    Source objects deleted before delivery are skipped; a destination (or source) failing with
    :class:`~mirror.block.errors.BlockUnavailableError` is retried on the next step. Source
    objects are remembered by key: an object rewritten at the source after it was scanned is not
    copied again.

    With ``replicate_deletes``, a scan also notices objects that are gone from the source and
    schedules their deletion at the destination ``uniform(delay)`` seconds later, like S3's
    delete-marker replication; deletions go through the same random order, drops, stalls and
    withholding as copies. A deletion is never applied before the object's copy has landed (so
    a late copy cannot bring a deleted object back); when the copy finds the source object gone,
    nothing was replicated and nothing is deleted. Each object is deleted once; afterwards its key
    is forgotten, so an object written again under that key is replicated again.

    With ``resume``, the first scan also lists the destination, and a source object already
    there with the same size is taken as replicated: a simulator started again after another
    stopped (or was killed) picks up where that one left off, as S3 Replication does after an
    outage, instead of copying the whole namespace again.

    Args:
        source: the namespace objects are replicated from.
        destination: the namespace they are copied to.
        seed: seed of the random delays, drops and delivery order (``None``: unpredictable).
        delay: ``(min, max)`` seconds between discovery and delivery.
        drop_probability: chance in ``[0, 1)`` that a delivery attempt is dropped.
        drop_for: ``(min, max)`` seconds a dropped object waits before its next attempt.
        small_first: schedule objects in proportion to their size instead of at random: the
            largest object seen so far waits ``max`` of ``delay``, an empty one ``min``; among
            objects due together, smaller ones are copied first.
        poll_interval: seconds between steps of :meth:`start` and :meth:`run_until_idle`.
        prefix: replicate only keys starting with this.
        clock: the time source of delivery times, in seconds.
        replicate_deletes: delete at the destination what is deleted at the source.
        resume: take what the destination already holds (same key and size) as replicated.

    Raises:
        InvalidValueError: an interval, probability or poll interval is out of range.
    """

    def __init__(
        self,
        source: BlockStore,
        destination: BlockStore,
        *,
        seed: int | None = None,
        delay: tuple[float, float] = (0.0, 0.0),
        drop_probability: float = 0.0,
        drop_for: tuple[float, float] = (1.0, 5.0),
        small_first: bool = False,
        poll_interval: float = 0.05,
        prefix: str = "",
        clock: Callable[[], float] = time.monotonic,
        replicate_deletes: bool = False,
        resume: bool = False,
    ) -> None:
        if not 0.0 <= drop_probability < 1.0:
            raise InvalidValueError(
                f"drop_probability must lie in [0, 1), got {drop_probability!r}"
            )
        if not 0.0 < poll_interval < float("inf"):
            raise InvalidValueError(f"poll_interval must be positive, got {poll_interval!r}")
        self._source = source
        self._destination = destination
        self._delay = _check_interval("delay", delay)
        self._drop_for = _check_interval("drop_for", drop_for)
        self._drop_probability = float(drop_probability)
        self._small_first = small_first
        self._poll_interval = float(poll_interval)
        self._prefix = prefix
        self._clock = clock
        self._replicate_deletes = replicate_deletes
        self._to_resume = resume
        """Whether the next scan still has to take in what the destination holds."""
        self._resumed = 0
        # a simulation, seeded on purpose
        self._random = random.Random(seed)  # nosec B311
        # _lock guards the state below; _copy_lock is held for each copy and taken by the fault
        # controls, so that once a control returns no copy it forbids is in flight.
        self._lock = threading.Lock()
        self._copy_lock = threading.Lock()
        # one scan at a time: a scan that listed before an object appeared must not take it for
        # deleted because a later scan has already seen it
        self._scan_lock = threading.Lock()
        self._seen: set[str] = set()
        self._pending: dict[str, _Pending] = {}
        self._landed: set[str] = set()
        """Keys copied to the destination (tracked only with ``replicate_deletes``)."""
        self._deletes: dict[str, _Pending] = {}
        self._held: list[KeyPredicate] = []
        self._stalled = False
        self._largest = 1
        self._discovered = 0
        self._copied = 0
        self._dropped = 0
        self._vanished = 0
        self._retries = 0
        self._deleted = 0
        self._failures: dict[str, str] = {}
        self._thread: threading.Thread | None = None
        self._stop = threading.Event()
        self._crash: BaseException | None = None

    @property
    def source(self) -> BlockStore:
        """Return the store objects are replicated from."""
        return self._source

    @property
    def destination(self) -> BlockStore:
        """Return the store objects are copied to."""
        return self._destination

    @property
    def replicate_deletes(self) -> bool:
        """Return whether deletions at the source are replicated."""
        return self._replicate_deletes

    @property
    def poll_interval(self) -> float:
        """Return the seconds between steps of the background thread and :meth:`run_until_idle`."""
        return self._poll_interval

    @property
    def stats(self) -> ReplicationStats:
        """Return a snapshot of the counters."""
        with self._lock:
            return ReplicationStats(
                discovered=self._discovered,
                copied=self._copied,
                dropped=self._dropped,
                pending=len(self._pending),
                withheld=sum(1 for key in self._pending if self._is_held(key)),
                stalled=self._stalled,
                vanished=self._vanished,
                retries=self._retries,
                failed=len(self._failures),
                deleted=self._deleted,
                deletes_pending=len(self._deletes),
                resumed=self._resumed,
            )

    @property
    def failures(self) -> dict[str, str]:
        """Return the keys given up on, each with the error a store rejected it with."""
        with self._lock:
            return dict(self._failures)

    def pending_keys(self) -> list[str]:
        """Return the keys discovered but not yet copied, in key order."""
        with self._lock:
            return sorted(self._pending)

    def pending_deletes(self) -> list[str]:
        """Return the keys deleted at the source whose deletion is not yet applied, in order."""
        with self._lock:
            return sorted(self._deletes)

    # -- scanning and delivery -------------------------------------------------------------

    def scan(self) -> int:
        """List the source and schedule every object not seen before; return how many.

        With ``replicate_deletes``, also schedule the deletion of every replicated (or pending)
        object the listing no longer shows.

        Raises:
            BlockUnavailableError: listing the source (or, on the first scan with ``resume``, the
                destination) failed (nothing is scheduled twice when the scan is repeated).
        """
        with self._scan_lock:
            now = self._clock()
            listing = list(self._source.list(self._prefix))
            if self._to_resume:
                self._take_in_destination(listing)
            if self._replicate_deletes:
                self._schedule_deletes(now, {info.key for info in listing})
            return self._schedule_copies(now, [i for i in listing if i.key not in self._seen])

    def _take_in_destination(self, listing: list[ObjectInfo]) -> None:
        """Take the objects of ``listing`` the destination holds with their size as copied."""
        there = {info.key: info.size for info in self._destination.list(self._prefix)}
        with self._lock:
            for info in listing:
                if info.key in self._seen or there.get(info.key) != info.size:
                    continue
                self._seen.add(info.key)
                if self._replicate_deletes:
                    self._landed.add(info.key)
                self._resumed += 1
            self._to_resume = False

    def _schedule_deletes(self, now: float, present: set[str]) -> None:
        low, high = self._delay
        with self._lock:
            for key in self._seen - present:
                if key in self._deletes:
                    continue
                if key not in self._landed and key not in self._pending:
                    continue  # vanished or failed: nothing reached the destination
                # a delete marker is tiny: with small_first it travels as fast as can be
                wait = low if self._small_first else self._random.uniform(low, high)
                self._deletes[key] = _Pending(key, 0, now + wait)

    def _schedule_copies(self, now: float, found: list[ObjectInfo]) -> int:
        if not found:
            return 0
        low, high = self._delay
        new = 0
        with self._lock:
            self._largest = max(self._largest, *(info.size for info in found))
            for info in found:
                if info.key in self._seen:
                    continue
                self._seen.add(info.key)
                if self._small_first:
                    wait = low + (high - low) * info.size / self._largest
                else:
                    wait = self._random.uniform(low, high)
                self._pending[info.key] = _Pending(info.key, info.size, now + wait)
                new += 1
            self._discovered += new
        return new

    def deliver(self, now: float | None = None) -> int:
        """Copy every object due at ``now`` (default: the clock), in random order.

        Each attempt is dropped with probability ``drop_probability`` (the object is rescheduled
        ``uniform(drop_for)`` seconds later). Nothing is copied while stalled, nor any key a
        :meth:`withhold` predicate selects. Deletions that are due (``replicate_deletes``) are
        applied in the same shuffled order, except those whose object's copy is still pending.

        Returns:
            How many objects were copied.
        """
        if now is None:
            now = self._clock()
        with self._lock:
            if self._stalled:
                return 0
            copies = [(p, False) for p in self._pending.values() if self._due(p, now)]
            deletes = [
                (p, True)
                for p in self._deletes.values()
                if self._due(p, now) and p.key not in self._pending
            ]
            due = sorted(copies + deletes, key=lambda pair: (pair[0].key, pair[1]))
            self._random.shuffle(due)
            if self._small_first:
                due.sort(key=lambda pair: pair[0].size)  # stable: equal sizes keep the order
        copied = 0
        for item, is_delete in due:
            if is_delete:
                self._delete_one(item.key, now)
            elif self._copy_one(item.key, now):
                copied += 1
        return copied

    def _due(self, item: _Pending, now: float) -> bool:
        return item.due <= now and not self._is_held(item.key)

    def _dropped_now(self, item: _Pending, now: float) -> bool:
        """Return whether this attempt is dropped (and reschedule ``item`` if so)."""
        if self._drop_probability and self._random.random() < self._drop_probability:
            item.due = now + self._random.uniform(*self._drop_for)
            self._dropped += 1
            return True
        return False

    def _copy_one(self, key: str, now: float) -> bool:
        with self._copy_lock:
            with self._lock:
                item = self._pending.get(key)
                if item is None or item.due > now or self._stalled or self._is_held(key):
                    return False
                if self._dropped_now(item, now):
                    return False
            try:
                data = self._source.get(key)
                self._destination.put(key, data)
            except BlockNotFoundError:
                with self._lock:
                    del self._pending[key]
                    self._vanished += 1
                    if self._replicate_deletes:
                        # nothing reached the destination: its deletion has nothing to do, and
                        # the key may be written again
                        self._deletes.pop(key, None)
                        self._seen.discard(key)
                return False
            except BlockUnavailableError:
                with self._lock:
                    self._retries += 1
                return False
            except LakeMirrorError as exc:
                with self._lock:
                    del self._pending[key]
                    self._failures[key] = str(exc)
                return False
            with self._lock:
                del self._pending[key]
                self._copied += 1
                if self._replicate_deletes:
                    self._landed.add(key)
            return True

    def _delete_one(self, key: str, now: float) -> bool:
        with self._copy_lock:
            with self._lock:
                item = self._deletes.get(key)
                if item is None or item.due > now or self._stalled or self._is_held(key):
                    return False
                if key in self._pending:
                    return False  # its copy has not landed yet: deleting now would not stick
                if self._dropped_now(item, now):
                    return False
            try:
                self._destination.delete(key)
            except BlockUnavailableError:
                with self._lock:
                    self._retries += 1
                return False
            except LakeMirrorError as exc:
                with self._lock:
                    del self._deletes[key]
                    self._failures[key] = str(exc)
                return False
            with self._lock:
                del self._deletes[key]
                self._landed.discard(key)
                self._seen.discard(key)
                self._deleted += 1
            return True

    def step(self) -> int:
        """Scan the source once, then deliver what is due; return how many objects were copied.

        Raises:
            BlockUnavailableError: listing the source failed (nothing was delivered).
        """
        self.scan()
        return self.deliver()

    def run_until_idle(self, timeout: float) -> ReplicationStats:
        """Step every ``poll_interval`` until a scan finds nothing pending; return the stats.

        Pending deletions (``replicate_deletes``) count as pending too.

        Raises:
            TimeoutError: objects are still pending after ``timeout`` seconds (stalled,
                withheld, dropped or not yet due).
        """
        deadline = time.monotonic() + timeout
        while True:
            self.step()
            stats = self.stats
            if stats.pending == 0 and stats.deletes_pending == 0:
                return stats
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                deletes = f", {stats.deletes_pending} deletions" if stats.deletes_pending else ""
                raise TimeoutError(
                    f"replication not idle after {timeout}s: {stats.pending} objects pending"
                    f"{deletes} ({stats.withheld} withheld{', stalled' if stats.stalled else ''})"
                )
            time.sleep(min(self._poll_interval, remaining))

    # -- fault controls --------------------------------------------------------------------

    def stall(self) -> None:
        """Stop delivering anything until :meth:`resume`; wait for a copy in flight to land."""
        with self._lock:
            self._stalled = True
        with self._copy_lock:
            pass

    def resume(self) -> None:
        """Deliver again after :meth:`stall`; what fell due meanwhile goes on the next step."""
        with self._lock:
            self._stalled = False

    def withhold(self, predicate: KeyPredicate) -> None:
        """Hold back every key ``predicate`` selects until :meth:`release`.

        Applies to keys already pending and to keys discovered later, and to their deletions.
        Waits for a copy in flight to land, so that afterwards no selected key reaches (or
        leaves) the destination.
        """
        with self._lock:
            self._held.append(predicate)
        with self._copy_lock:
            pass

    def release(self, predicate: KeyPredicate | None = None) -> None:
        """Stop withholding by ``predicate`` (the same object passed to :meth:`withhold`).

        ``None`` releases every predicate. Released objects that fell due meanwhile are copied
        on the next step.
        """
        with self._lock:
            if predicate is None:
                self._held.clear()
            else:
                self._held = [held for held in self._held if held is not predicate]

    def _is_held(self, key: str) -> bool:
        return any(predicate(key) for predicate in self._held)

    # -- background mode -------------------------------------------------------------------

    @property
    def running(self) -> bool:
        """Return whether the background thread is running."""
        thread = self._thread
        return thread is not None and thread.is_alive()

    def start(self) -> None:
        """Step every ``poll_interval`` in a daemon thread until :meth:`stop`.

        A source that cannot be listed (``BlockUnavailableError``) is retried on the next poll.

        Raises:
            RuntimeError: the thread is already running.
        """
        if self._thread is not None:
            raise RuntimeError("the replication simulator is already running")
        self._stop.clear()
        self._crash = None
        self._thread = threading.Thread(
            target=self._run, name=f"replicate {self._source.namespace}", daemon=True
        )
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                self.step()
            except BlockUnavailableError:
                pass
            except BaseException as exc:
                self._crash = exc
                return
            self._stop.wait(self._poll_interval)

    def stop(self, timeout: float | None = 10.0) -> None:
        """Stop the background thread and wait for it (doing nothing if it is not running).

        Raises:
            TimeoutError: the thread did not end within ``timeout`` seconds.
            Exception: the unexpected error that ended the thread, re-raised.
        """
        thread = self._thread
        if thread is None:
            return
        self._stop.set()
        thread.join(timeout)
        if thread.is_alive():
            raise TimeoutError(f"the replication thread did not stop within {timeout}s")
        self._thread = None
        crash, self._crash = self._crash, None
        if crash is not None:
            raise crash

    def __enter__(self) -> ReplicationSimulator:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.stop()
