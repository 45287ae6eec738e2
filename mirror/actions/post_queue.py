"""The post-event queue of a server process: a thread pool whose work survives the process.

Every post-event is first recorded as pending in the KV (:mod:`mirror.actions.pending`),
claimed by this process, and only then queued; the record goes once the event's run is
recorded. A keeper thread renews this process's claims while their runs go on, and takes over
the pending events whose claims expired (left by a process that died) to run them here. So a
post-hook cut short by a crash runs again in some live process: hook receivers may see a
post-event twice, never zero times.
"""

from __future__ import annotations

import logging
import os
import secrets
import socket
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

from mirror.actions.pending import Claim, PendingEvent, PendingEvents, new_event_id
from mirror.core.hooks import HookEvent
from mirror.core.model import Repository
from mirror.errors import LakeMirrorError, UnavailableError

__all__ = ["MAX_ATTEMPTS", "PostQueue", "process_name"]

log = logging.getLogger(__name__)

MAX_ATTEMPTS = 10
"""Claims of one pending event after which it is dropped unrun (it keeps killing processes, or
the stores it needs keep failing)."""


def process_name() -> str:
    """Return a name for this process in claims: host, process ID and a random part."""
    return f"{socket.gethostname()}:{os.getpid()}:{secrets.token_hex(4)}"


class _Held:
    """A claim this process holds while its event waits or runs; the lock orders its writes."""

    def __init__(self, claim: Claim) -> None:
        self.claim = claim
        self.lock = threading.Lock()
        self.lost = False


class PostQueue:
    """Runs post-events on a thread pool; pending ones are kept in the KV until their run ends.

    Args:
        pending: The pending events in the KV, with this process's name and lease.
        run: Runs one event. Raising :class:`UnavailableError` leaves the event pending, to
            run again once its claim expires; any other error is logged and the event dropped.
        workers: Threads running events.
    """

    def __init__(
        self, pending: PendingEvents, run: Callable[[PendingEvent], None], *, workers: int
    ) -> None:
        self.pending = pending
        self._run = run
        self._pool = ThreadPoolExecutor(workers, thread_name_prefix="post-hooks")
        # taken-over events wait in the pool with claims to renew: take no more than this many
        self._takeover_limit = 4 * workers
        self._held: dict[bytes, _Held] = {}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._closing = False
        self._keeper: threading.Thread | None = None

    def start(self) -> None:
        """Start the keeper (renewing claims, taking over expired ones) unless it runs."""
        with self._lock:
            if self._keeper is not None or self._closing:
                return
            self._keeper = threading.Thread(
                target=self._keep, name="post-hooks-keeper", daemon=True
            )
            self._keeper.start()

    def submit(self, repo: Repository, event: HookEvent) -> None:
        """Record ``event`` of ``repo`` as pending, then queue it; return at once.

        When the KV cannot record it the event still runs, but a crash would lose it.
        """
        try:
            claim: Claim | None = self.pending.add(repo, event)
        except LakeMirrorError as exc:
            log.warning(
                "%s of %s not recorded as pending (%s): lost if this process dies",
                event.event_type,
                event.repository,
                exc,
            )
            claim = None
        self.start()
        if claim is None:
            unrecorded = PendingEvent(new_event_id(), repo.instance_uid, event, "", 0.0)
            self._queue(unrecorded, None)
        else:
            self._queue(claim.pending, self._hold(claim))

    def close(self, wait: bool = True) -> None:
        """Stop taking events over; finish the queued ones (``wait``), then stop the keeper.

        Without ``wait`` the queued events' claims lapse and other processes run them.
        """
        with self._lock:
            self._closing = True
        # the keeper renews the claims of the queued events while they finish
        self._pool.shutdown(wait=wait)
        self._stop.set()
        keeper = self._keeper
        if wait and keeper is not None:
            keeper.join()

    # running

    def _hold(self, claim: Claim) -> _Held:
        held = _Held(claim)
        with self._lock:
            self._held[claim.pending.key] = held
        return held

    def _queue(self, pending: PendingEvent, held: _Held | None) -> None:
        try:
            self._pool.submit(self._work, pending, held)
        except RuntimeError:  # the pool is shut down: the claim lapses, another process runs it
            if held is not None:
                with self._lock:
                    self._held.pop(pending.key, None)
            log.warning("%s of %s left to another process", pending.event.event_type, pending.key)

    def _work(self, pending: PendingEvent, held: _Held | None) -> None:
        event = pending.event
        retry = False
        try:
            self._run(pending)
        except UnavailableError as exc:
            retry = held is not None
            log.warning("%s hooks of %s not run: %s", event.event_type, event.repository, exc)
        except Exception as exc:  # a background hook must never take its thread down
            log.warning("%s hooks of %s not run: %s", event.event_type, event.repository, exc)
        if held is not None:
            self._settle(held, retry)

    def _settle(self, held: _Held, retry: bool) -> None:
        """Stop renewing ``held``; remove its record unless it is to run again (``retry``)."""
        with self._lock:
            self._held.pop(held.claim.pending.key, None)
        with held.lock:
            if retry or held.lost:
                return  # the claim lapses: whoever takes it over runs the event
            try:
                self.pending.finish(held.claim)
            except LakeMirrorError as exc:
                log.warning(
                    "pending %s not removed (%s): it runs again", held.claim.pending.key, exc
                )

    # the keeper

    def _keep(self) -> None:
        interval = self.pending.lease / 3
        while True:
            self._take_over()  # at once on start: what dead processes left
            if self._stop.wait(interval):
                return
            self._renew()

    def _renew(self) -> None:
        with self._lock:
            held = list(self._held.values())
        for one in held:
            with one.lock:
                if one.lost or one.claim.pending.key not in self._held:
                    continue
                try:
                    renewed = self.pending.renew(one.claim)
                except LakeMirrorError as exc:
                    log.warning("claim on %s not renewed: %s", one.claim.pending.key, exc)
                    continue
                if renewed is None:
                    one.lost = True
                    log.warning("claim on %s lost: another process runs it", one.claim.pending.key)
                else:
                    one.claim = renewed

    def _take_over(self) -> None:
        try:
            for found in self.pending.expired():
                with self._lock:
                    if self._closing or len(self._held) >= self._takeover_limit:
                        return
                    if found.pending.key in self._held:
                        continue  # still running here: its renewals failed for a while
                taken = self.pending.take(found)
                if taken is None:
                    continue  # another process was first
                if taken.pending.attempts > MAX_ATTEMPTS:
                    log.error("%s dropped after %d attempts", taken.pending.key, MAX_ATTEMPTS)
                    self.pending.finish(taken)
                    continue
                log.info("taking over %s (attempt %d)", taken.pending.key, taken.pending.attempts)
                self._queue(taken.pending, self._hold(taken))
        except Exception as exc:  # the keeper must outlive a failing KV
            log.warning("pending post-events not taken over: %s", exc)
