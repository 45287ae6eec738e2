"""Whether a process grew after its warm-up: resident set and open descriptors, window to window.

A process is compared with itself: in the first window it lived through whole, as what it is at
the end (the same process ID, and for a replicant replica the same role), and in the last
window, each window by the median of its readings (a burst of work at a window's end opens
connections its pools close again). A process that ran from the start is so compared from the
second window on; one restarted later (or a replica that took the lease over, or gave it up)
warms up again, and from a window after that one. When no whole window is left between, it is
not judged.

Its own descriptors are judged, not the connections its clients opened to it: the kernel
spreads the load's keep-alive connections over the server's workers, and each worker's share
moves when another restarts. The stores (dynalite, moto) keep the data in memory and grow with
it: they are shown, never judged.
"""

from __future__ import annotations

import math
import statistics
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass

from bench.soak.samples import ProcessSample

__all__ = ["FD_SLACK", "GROWTH_LIMIT", "JUDGED", "Growth", "growth"]

GROWTH_LIMIT = 0.10
FD_SLACK = 2
"""Descriptors a process may gain however few it has (10 % of 20 is not one whole socket)."""
JUDGED = ("server", "worker", "replicant", "replication")


@dataclass(frozen=True)
class Growth:
    """One process's growth after its warm-up."""

    label: str
    kind: str
    base: tuple[float, float] | None
    """Median RSS (MB) and own descriptors in its first whole window (``None``: not judged)."""
    end: tuple[float, float] | None
    """The same in the last window."""
    base_window: int | None
    note: str = ""
    """Why it is not judged, or what changed before its first whole window."""

    @property
    def measured(self) -> bool:
        """Return whether both readings exist."""
        return self.base is not None and self.end is not None and self.base[0] > 0

    @property
    def rss(self) -> float:
        """Return the resident set's growth as a ratio (0.1: +10 %)."""
        assert self.base is not None and self.end is not None
        return self.end[0] / self.base[0] - 1

    @property
    def fds(self) -> float:
        """Return how many descriptors of its own the process gained."""
        assert self.base is not None and self.end is not None
        return self.end[1] - self.base[1]

    @property
    def judged(self) -> bool:
        """Return whether the target applies to it (a LakeMirror process, measured)."""
        return self.kind in JUDGED and self.measured

    @property
    def within(self) -> bool:
        """Return whether it stayed within the target (or is not judged)."""
        if not self.judged:
            return True
        assert self.base is not None
        allowed = max(FD_SLACK, GROWTH_LIMIT * self.base[1])
        return self.rss <= GROWTH_LIMIT and self.fds <= allowed


def _clock(seconds: float) -> str:
    return f"{int(seconds // 60)}:{int(seconds % 60):02d}"


def growth(
    samples: Sequence[ProcessSample], started: float, window: float, windows: int
) -> list[Growth]:
    """Return the growth of every process ``samples`` read, in the order they were first read."""
    by_label: dict[str, list[ProcessSample]] = defaultdict(list)
    for sample in sorted(samples, key=lambda s: s.at):
        by_label[sample.label].append(sample)
    last_window = windows - 1
    out = []
    for label, readings in by_label.items():
        last = readings[-1]
        first = len(readings) - 1
        while first > 0 and (readings[first - 1].pid, readings[first - 1].role) == (
            last.pid,
            last.role,
        ):
            first -= 1
        since = readings[first].at
        base_window = max(1, math.ceil((since - started) / window - 1e-9))
        changed = ""
        if first > 0:
            previous = readings[first - 1]
            what = "restarted" if previous.pid != last.pid else f"{last.role} since"
            changed = f"{what} {_clock(since - started)}"

        def window_of(sample: ProcessSample) -> int:
            return min(last_window, int((sample.at - started) // window))

        base = [r for r in readings[first:] if window_of(r) == base_window]
        end = [r for r in readings[first:] if window_of(r) == last_window]
        if base_window >= last_window or not base or not end:
            note = changed or "fewer than two windows"
            out.append(Growth(label, last.kind, None, None, None, f"{note}: not judged"))
            continue
        out.append(Growth(label, last.kind, _median(base), _median(end), base_window, changed))
    return out


def _median(readings: list[ProcessSample]) -> tuple[float, float]:
    return (
        statistics.median(r.rss_mb for r in readings),
        statistics.median(r.own_fds for r in readings),
    )
