"""Post-events not yet run to the end, kept in the KV so that a dead process loses none.

A post-event is recorded when the operation hands it to the post-hook pool, before the answer
is sent, and removed once its run is recorded. Each record carries a claim: the server process
that runs it (``owner``) and until when (``expires``, Unix seconds). The owner renews the claim
while the run goes on; a process that finds a claim expired (its owner died, or lost the KV
for longer than the lease) takes it over by compare-and-swap, so of two live processes exactly
one runs the event. Delivery is therefore at least once: a process that dies after a hook was
called, or after the run was recorded but before the record was removed, leaves the event to
run again.

KV layout: ``actions/pending/<repo>:<instance>/<event_id>`` → :class:`PendingEvent` (JSON),
keyed per repository instance like the runs (:mod:`mirror.actions.runs`), so that deleting the
repository removes them with its runs.
"""

from __future__ import annotations

import json
import secrets
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, replace
from typing import Any

from mirror.core.hooks import HookEvent
from mirror.core.model import Repository
from mirror.kv.errors import KVPreconditionFailedError
from mirror.kv.protocol import KV

__all__ = ["PREFIX", "Claim", "PendingEvent", "PendingEvents", "delete_pending", "new_event_id"]

PREFIX = b"actions/pending/"
"""Where every pending post-event is, under ``<repo>:<instance>/``."""


def new_event_id(now_ns: int | None = None) -> str:
    """Return a new pending-event ID: the time in hex (oldest sorts first) and 8 random hex."""
    return f"{time.time_ns() if now_ns is None else now_ns:016x}{secrets.token_hex(4)}"


@dataclass(frozen=True, slots=True)
class PendingEvent:
    """A post-event waiting for its run, and who runs it until when.

    Attributes:
        event_id: From :func:`new_event_id`.
        instance_uid: The repository instance the event happened in (a repository deleted and
            created again under the name gets none of the old one's events).
        event: The event; its ``source_ref`` is where the run reads the action files.
        owner: The server process running it.
        expires: When the owner's claim lapses (Unix seconds).
        attempts: How many processes have claimed it (1 for the process that recorded it).
    """

    event_id: str
    instance_uid: str
    event: HookEvent
    owner: str
    expires: float
    attempts: int = 1

    @property
    def key(self) -> bytes:
        """Return the record's KV key."""
        scope = f"{self.event.repository}:{self.instance_uid}/{self.event_id}"
        return PREFIX + scope.encode()

    def encode(self) -> bytes:
        """Return the KV encoding (JSON)."""
        doc: dict[str, Any] = asdict(self)
        doc["event"]["commit_metadata"] = dict(self.event.commit_metadata)
        return json.dumps(doc, sort_keys=True, separators=(",", ":")).encode()

    @classmethod
    def decode(cls, raw: bytes) -> PendingEvent:
        """Read a record written by :meth:`encode`."""
        doc = json.loads(raw)
        return cls(**{**doc, "event": HookEvent(**doc["event"])})


@dataclass(frozen=True, slots=True)
class Claim:
    """A pending event this process holds, with the exact bytes stored for it.

    Attributes:
        pending: The record.
        raw: Its stored bytes: every later write of it is a compare-and-swap on them.
    """

    pending: PendingEvent
    raw: bytes


def _scope(repo: Repository) -> bytes:
    return PREFIX + f"{repo.id}:{repo.instance_uid}/".encode()


class PendingEvents:
    """The pending post-events in the KV, claimed by one owner at a time.

    Args:
        kv: Shared by every server process.
        owner: This process's name in claims (unique among the processes sharing ``kv``).
        lease: Seconds a claim holds without being renewed.
        clock: Returns the current time in Unix seconds.
    """

    def __init__(
        self, kv: KV, owner: str, lease: float, clock: Callable[[], float] = time.time
    ) -> None:
        self.kv = kv
        self.owner = owner
        self.lease = lease
        self.clock = clock

    def add(self, repo: Repository, event: HookEvent) -> Claim:
        """Record ``event`` of ``repo`` as pending, claimed by this process.

        Raises:
            KVUnavailableError: the KV failed; nothing was recorded.
        """
        pending = PendingEvent(
            new_event_id(), repo.instance_uid, event, self.owner, self.clock() + self.lease
        )
        raw = pending.encode()
        self.kv.set_if(pending.key, raw, None)
        return Claim(pending, raw)

    def _swap(self, claim: Claim, pending: PendingEvent) -> Claim | None:
        raw = pending.encode()
        try:
            self.kv.set_if(pending.key, raw, claim.raw)
        except KVPreconditionFailedError:
            return None
        return Claim(pending, raw)

    def renew(self, claim: Claim) -> Claim | None:
        """Extend a claim by the lease from now; ``None``: it was lost (taken over, or gone)."""
        return self._swap(claim, replace(claim.pending, expires=self.clock() + self.lease))

    def take(self, claim: Claim) -> Claim | None:
        """Claim a pending event as read (``claim``) if its claim has expired.

        Two processes taking the same record are ordered by the KV's compare-and-swap: one gets
        the new claim, the other ``None``. ``None`` too while the current claim holds.
        """
        pending = claim.pending
        if pending.owner != self.owner and pending.expires > self.clock():
            return None
        taken = replace(
            pending,
            owner=self.owner,
            expires=self.clock() + self.lease,
            attempts=pending.attempts + 1,
        )
        return self._swap(claim, taken)

    def finish(self, claim: Claim) -> bool:
        """Remove a pending event whose run is recorded; ``False``: the claim was lost.

        A lost claim leaves the record to the process that took it over (which runs the event
        again: at least once).
        """
        try:
            self.kv.delete_if(claim.pending.key, claim.raw)
        except KVPreconditionFailedError:
            return False
        return True

    def expired(self) -> Iterator[Claim]:
        """Yield every pending event whose claim has expired, as read (for :meth:`take`)."""
        now = self.clock()
        for _, raw in self.kv.scan(PREFIX):
            pending = PendingEvent.decode(raw)
            if pending.expires <= now:
                yield Claim(pending, raw)

    def of(self, repo: Repository) -> list[PendingEvent]:
        """Return the pending events of ``repo`` (oldest first)."""
        return [PendingEvent.decode(raw) for _, raw in self.kv.scan(_scope(repo))]


def delete_pending(kv: KV, repo: Repository) -> None:
    """Remove every pending event of ``repo`` (a deleted repository runs no more hooks)."""
    for key in [k for k, _ in kv.scan(_scope(repo))]:
        kv.delete(key)
