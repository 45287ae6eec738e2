"""The lag of a mirror's branches over the last hour as SVG charts, drawn on the server.

The replicant keeps each branch's lag of the last hour (``GET …/mirrors/{name}/lag_history``:
the worst lag of each 10-second slot). This module lays those samples out as two charts, the
lag in seconds and in commits, one line per branch over a time axis ending now (the whole hour,
or its last ten minutes): the geometry
only (numbers the template writes into ``<polyline>`` and ``<circle>`` elements), so no chart
library or script is needed and every label (a branch name, a time) is escaped by the template
engine like any other value. A line breaks where samples are missing (no replica worked the
mirror then); a sample whose commit count is only a lower bound is drawn hollow.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from mirror.ui.mirror_status import commits_text, duration

__all__ = ["HEIGHT", "WIDTH", "WINDOWS", "Chart", "Line", "Point", "Tick", "lag_charts"]

WIDTH = 720
HEIGHT = 240
_LEFT, _RIGHT, _TOP, _BOTTOM = 84.0, 20.0, 12.0, 34.0
WINDOWS = {"1h": (3600.0, 600), "10m": (600.0, 120)}
"""The spans a chart can show: the replicant's whole hour, or its last ten minutes (with the
seconds between two marks of the time axis)."""
_CORNER = 24.0
"""Pixels from the left edge within which the time axis shows no mark."""
_GAP_SLOTS = 2.5
"""Slots without a sample after which a line breaks."""
_SECOND_STEPS = (1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 14400, 43200)
Sample = dict[str, Any]
"""A sample as the replicant answers it: ``time``, ``lag_seconds``, ``lag_commits``, …"""
_LINE_COLOURS = 6
"""Line styles the stylesheet defines (``series-0`` … ``series-5``); more branches reuse them."""


@dataclass(frozen=True, slots=True)
class Tick:
    """A mark on an axis: its position (pixels) and its label."""

    at: float
    label: str


@dataclass(frozen=True, slots=True)
class Point:
    """One sample: where it is drawn, whether its value is a lower bound, and its text."""

    x: float
    y: float
    bound: bool
    text: str


@dataclass(frozen=True, slots=True)
class Line:
    """One branch's samples: the polylines of its unbroken runs, and its points."""

    branch: str
    style: int
    segments: tuple[str, ...]
    points: tuple[Point, ...]


@dataclass(frozen=True, slots=True)
class Chart:
    """One chart: its title, plot area, axes and lines."""

    key: str
    title: str
    left: float
    top: float
    right: float
    bottom: float
    lines: tuple[Line, ...]
    y_ticks: tuple[Tick, ...]
    x_ticks: tuple[Tick, ...]

    @property
    def samples(self) -> int:
        """Return how many samples the chart draws."""
        return sum(len(line.points) for line in self.lines)


def _step(top: float, steps: tuple[int, ...]) -> int:
    """Return the smallest step of ``steps`` that spans ``top`` in at most 4 ticks."""
    for step in steps:
        if step * 4 >= top:
            return step
    return steps[-1] * math.ceil(top / (steps[-1] * 4))


def _count_steps() -> tuple[int, ...]:
    return tuple(m * 10**e for e in range(7) for m in (1, 2, 5))


def _clock(epoch: float) -> str:
    return datetime.fromtimestamp(epoch, tz=UTC).strftime("%H:%M")


def _chart(
    key: str,
    title: str,
    history: dict[str, list[Sample]],
    now: float,
    span: tuple[float, int],
    slot: float,
    value: Callable[[Sample], float],
    label: Callable[[Sample], str],
    steps: tuple[int, ...],
    tick_label: Callable[[int], str],
) -> Chart:
    left, top, right, bottom = _LEFT, _TOP, WIDTH - _RIGHT, HEIGHT - _BOTTOM
    window, every = span
    start = now - window
    history = {b: [s for s in ss if float(s["time"]) >= start] for b, ss in history.items()}
    peak = max((value(s) for ss in history.values() for s in ss), default=0.0)
    step = _step(max(peak, 1.0), steps)
    y_max = float(step * max(1, math.ceil(max(peak, 1.0) / step)))

    def x(at: float) -> float:
        return round(left + (min(max(at, start), now) - start) / window * (right - left), 1)

    def y(v: float) -> float:
        return round(bottom - v / y_max * (bottom - top), 1)

    lines = []
    for index, (branch, samples) in enumerate(sorted(history.items())):
        runs: list[list[str]] = []
        points = []
        previous: float | None = None
        for sample in samples:
            at = float(sample["time"])
            if previous is None or at - previous > _GAP_SLOTS * slot:
                runs.append([])
            previous = at
            px, py = x(at), y(value(sample))
            runs[-1].append(f"{px},{py}")
            stamp = datetime.fromtimestamp(at, tz=UTC).strftime("%H:%M:%S UTC")
            points.append(
                Point(
                    px, py, sample.get("lag_commits") is None, f"{branch}, {stamp}: {label(sample)}"
                )
            )
        segments = tuple(" ".join(run) for run in runs if len(run) > 1)
        lines.append(Line(branch, index % _LINE_COLOURS, segments, tuple(points)))
    y_ticks = tuple(Tick(y(float(v)), tick_label(v)) for v in range(0, int(y_max) + 1, step))
    first = math.ceil(start / every) * every
    # a time at the axes' corner would print over the lowest value's label
    x_ticks = tuple(
        Tick(x(float(t)), _clock(float(t)))
        for t in range(int(first), int(now) + 1, every)
        if x(float(t)) - left >= _CORNER
    )
    return Chart(key, title, left, top, right, bottom, tuple(lines), y_ticks, x_ticks)


def lag_charts(history: dict[str, Any], now: float, window: str = "1h") -> tuple[Chart, Chart]:
    """Return the charts of a lag history (the replicant's answer): seconds, then commits.

    Args:
        history: The replicant's answer.
        now: The end of the time axis.
        window: A key of :data:`WINDOWS`: the span the charts show, ending ``now``.
    """
    span = WINDOWS[window]
    slot = float(history.get("slot_seconds") or 10.0)
    samples: dict[str, list[Sample]] = {
        str(b["branch"]): list(b["samples"]) for b in history.get("branches") or []
    }

    def commits(sample: Sample) -> float:
        exact = sample.get("lag_commits")
        return float(exact if exact is not None else sample.get("lag_commits_at_least") or 0)

    seconds = _chart(
        "seconds",
        "Lag in seconds",
        samples,
        now,
        span,
        slot,
        lambda s: float(s["lag_seconds"]),
        lambda s: duration(float(s["lag_seconds"])),
        _SECOND_STEPS,
        duration,
    )
    counted = _chart(
        "commits",
        "Lag in commits",
        samples,
        now,
        span,
        slot,
        commits,
        lambda s: commits_text(s.get("lag_commits"), s.get("lag_commits_at_least")),
        _count_steps(),
        str,
    )
    return seconds, counted
