"""Where a commit's CPU goes, by part: the clock of each part stops while a part inside it runs.

``bench.commit_ratio --parts`` installs :class:`PartClock` in each worker process. The parts are
the core's functions whose cost grows with the repository (the files read, their encodings, the
metarange) and those that do not (new range files); the rest of a commit (staging, the KV, the
commit record) is its total less the parts. Each function is wrapped in place, in the worker's
process only, for the benchmark's own measurement; nothing else runs there.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable
from typing import Any

from bench.core import Timings
from mirror.core.columnar import RangeData
from mirror.core.committed import CommittedStore

__all__ = ["PARTS", "REST", "PartClock", "PartTimings"]

# (label, owner, function names): the labels in the order of the table
PARTS: tuple[tuple[str, type, tuple[str, ...]], ...] = (
    ("range files read (cache misses: file, Parquet, keys)", CommittedStore, ("read_rows",)),
    ("their canonical encodings (for the new range IDs)", RangeData, ("_encode",)),
    (
        "new range files (records, IDs, Parquet, put)",
        CommittedStore,
        ("write_pieces", "write_range"),
    ),
    (
        "the metarange (rows, ID, Parquet, put)",
        CommittedStore,
        ("write_metarange_pieces", "write_metarange"),
    ),
    ("last keys to bisect", CommittedStore, ("max_keys",)),
)
REST = "the rest (staging, KV, commit record, hooks)"


class PartClock:
    """CPU seconds spent in each part while :attr:`active`, exclusive of the parts inside it."""

    def __init__(self) -> None:
        self.active = False
        self.seconds: dict[str, float] = {label: 0.0 for label, _, _ in PARTS}
        self._stack: list[list[Any]] = []  # [label, CPU time the label's clock last started]
        for label, owner, names in PARTS:
            for name in names:
                setattr(owner, name, self._timed(label, getattr(owner, name)))

    def _timed(self, label: str, fn: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(fn)
        def timed(*args: Any, **kwargs: Any) -> Any:
            if not self.active:
                return fn(*args, **kwargs)
            now = time.process_time()
            if self._stack:
                outer = self._stack[-1]
                self.seconds[outer[0]] += now - outer[1]
            self._stack.append([label, now])
            try:
                return fn(*args, **kwargs)
            finally:
                now = time.process_time()
                self.seconds[label] += now - self._stack.pop()[1]
                if self._stack:
                    self._stack[-1][1] = now

        return timed

    def take(self, total: float) -> dict[str, float]:
        """Return the milliseconds of each part since the last call, and the rest of ``total``."""
        parts = {label: s * 1000.0 for label, s in self.seconds.items()}
        parts[REST] = total * 1000.0 - sum(parts.values())
        self.seconds = dict.fromkeys(self.seconds, 0.0)
        return parts


class PartTimings(Timings):
    """:class:`~bench.core.Timings` whose runs are also timed by part (and only its runs)."""

    def __init__(self, clock: PartClock) -> None:
        super().__init__()
        self.clock = clock
        self.parts: list[dict[str, float]] = []

    def run(self, fn: Callable[[], Any]) -> Any:
        """Call ``fn`` with the part clock running; keep its parts beside its total."""
        self.clock.take(0.0)
        self.clock.active = True
        try:
            return super().run(fn)
        finally:
            self.clock.active = False
            self.parts.append(self.clock.take(self.cpu[-1] if self.cpu else 0.0))
