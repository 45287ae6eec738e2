"""The last hour of each mirrored branch's lag, kept by the replicant itself (no Prometheus).

Every round of a branch's worker loop reports the branch's lag (seconds and commits) to
:meth:`LagHistory.record`. The hour is cut into :data:`SLOTS` slots of :data:`SLOT_SECONDS`
each; a slot keeps the worst lag reported during it, so a peak shorter than a slot still shows.
The slots are records of the region's KV, ``replicant/lag-history/<mirror>/<branch>/<slot>``
with ``slot`` the slot's number modulo :data:`SLOTS`: a ring that overwrites itself, bounded
to :data:`SLOTS` records a branch whatever the poll interval, shared by every replica (the one
working a mirror writes, any answers) and kept across restarts.

A slot is written when its first report arrives (so the newest point is never more than a slot
old) and once more, with the slot's worst, when the next slot begins: at most two writes a slot
and branch, however often the worker polls.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from mirror.kv import KV

__all__ = [
    "SLOTS",
    "SLOT_SECONDS",
    "WINDOW_SECONDS",
    "LagHistory",
    "LagSample",
    "history_prefix",
    "read_history",
]

SLOT_SECONDS = 10.0
"""Seconds a sample stands for."""
SLOTS = 360
"""Samples kept per branch: one hour of :data:`SLOT_SECONDS` slots."""
WINDOW_SECONDS = SLOT_SECONDS * SLOTS
"""The span :func:`read_history` answers: the last hour."""

_ROOT = b"replicant/lag-history/"


def history_prefix(mirror: str) -> bytes:
    """Return the KV prefix of mirror ``mirror``'s lag history."""
    return _ROOT + mirror.encode() + b"/"


@dataclass(frozen=True, slots=True)
class LagSample:
    """The worst lag of one branch during one slot.

    Attributes:
        time: When the worst lag was reported (seconds since the epoch).
        lag_seconds: Age of the oldest source commit the mirror branch did not show.
        lag_commits: Source commits it did not show: a count when ``exact``, else a lower bound.
        exact: Whether ``lag_commits`` is a count (the status's ``lag_commits``) or a bound
            (its ``lag_commits_at_least``).
    """

    time: float
    lag_seconds: float
    lag_commits: int
    exact: bool = True

    def worse_than(self, other: LagSample) -> bool:
        """Return whether this sample lags more than ``other`` (seconds, then commits)."""
        return (self.lag_seconds, self.lag_commits) > (other.lag_seconds, other.lag_commits)

    def to_json(self) -> dict[str, Any]:
        """Return the sample as the API answers it (commits as a count or as a bound)."""
        return {
            "time": self.time,
            "lag_seconds": self.lag_seconds,
            "lag_commits": self.lag_commits if self.exact else None,
            "lag_commits_at_least": None if self.exact else self.lag_commits,
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> LagSample:
        """Return the sample :meth:`to_json` wrote."""
        exact = data.get("lag_commits") is not None
        commits = data["lag_commits"] if exact else data.get("lag_commits_at_least") or 0
        return cls(float(data["time"]), float(data["lag_seconds"]), int(commits), exact)


@dataclass(slots=True)
class _Slot:
    number: int
    worst: LagSample
    written: LagSample


class LagHistory:
    """The lag history of one mirror's branches in the region's KV.

    Args:
        kv: The region's KV.
        mirror: The mirror's name.
    """

    def __init__(self, kv: KV, mirror: str) -> None:
        self.kv = kv
        self.mirror = mirror
        self._slots: dict[str, _Slot] = {}

    def _key(self, branch: str, number: int) -> bytes:
        return history_prefix(self.mirror) + branch.encode() + b"/" + b"%03d" % (number % SLOTS)

    def _write(self, branch: str, number: int, sample: LagSample) -> None:
        self.kv.set(self._key(branch, number), json.dumps(sample.to_json()).encode())

    def record(self, branch: str, sample: LagSample) -> None:
        """Fold one report of ``branch``'s lag into the slot of ``sample.time``."""
        number = int(sample.time // SLOT_SECONDS)
        slot = self._slots.get(branch)
        if slot is not None and slot.number == number:
            if sample.worse_than(slot.worst):
                slot.worst = sample
            return
        if slot is not None and slot.worst != slot.written:
            self._write(branch, slot.number, slot.worst)
        self._write(branch, number, sample)
        self._slots[branch] = _Slot(number, sample, sample)

    def flush(self) -> None:
        """Write each branch's current slot if a worse lag came in after it was written."""
        for branch, slot in self._slots.items():
            if slot.worst != slot.written:
                self._write(branch, slot.number, slot.worst)
                slot.written = slot.worst

    def drop_branch(self, branch: str) -> None:
        """Forget the history of a branch that is no longer mirrored."""
        self._slots.pop(branch, None)
        for key, _ in list(self.kv.scan(history_prefix(self.mirror) + branch.encode() + b"/")):
            self.kv.delete(key)


def read_history(kv: KV, mirror: str, now: float) -> dict[str, list[LagSample]]:
    """Return each branch's samples of mirror ``mirror`` of the hour before ``now``.

    A slot older than the hour (the ring has not come round to it again) is left out.
    """
    since = now - WINDOW_SECONDS
    found: dict[str, list[LagSample]] = {}
    prefix = history_prefix(mirror)
    for key, raw in kv.scan(prefix):
        branch = key[len(prefix) :].rpartition(b"/")[0].decode()
        sample = LagSample.from_json(json.loads(raw))
        if since < sample.time <= now + SLOT_SECONDS:
            found.setdefault(branch, []).append(sample)
    return {b: sorted(samples, key=lambda s: s.time) for b, samples in sorted(found.items())}
