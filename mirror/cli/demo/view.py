"""The demo's live view: a block redrawn in place on a terminal, or a progress line."""

from __future__ import annotations

import time
from typing import TextIO

from mirror.cli.demo.observer import Snapshot

__all__ = ["View", "plural", "short"]

_PLAIN_EVERY = 2.0


def plural(count: int, noun: str) -> str:
    """Return ``count`` and ``noun``, with an ``s`` unless the count is one."""
    return f"{count} {noun}" + ("" if count == 1 else "s")


def short(commit: str | None) -> str:
    """Return a commit ID's first 12 characters (``-`` for none)."""
    return commit[:12] if commit else "-"


class View:
    """Show snapshots: a block redrawn in place on a terminal, or a line every few seconds."""

    def __init__(self, out: TextIO, live: bool) -> None:
        self._out = out
        self._live = live
        self._drawn = 0
        self._next_line = 0.0

    def show(self, snap: Snapshot) -> None:
        """Redraw the block with ``snap``, or print its line when the last one is old enough."""
        if not self._live:
            now = time.monotonic()
            if now >= self._next_line:
                self._next_line = now + _PLAIN_EVERY
                self._out.write(self._line(snap) + "\n")
                self._out.flush()
            return
        lines = self._block(snap)
        parts = [f"\x1b[{self._drawn}F"] if self._drawn else []
        parts.extend(f"\x1b[2K{line}\n" for line in lines)
        self._out.write("".join(parts))
        self._out.flush()
        self._drawn = len(lines)

    def detach(self) -> None:
        """Leave the block drawn so far in place: the next snapshot is drawn below it."""
        self._drawn = 0

    def _line(self, s: Snapshot) -> str:
        line = (
            f"{s.elapsed:6.1f}s source {short(s.source_head)} ({s.commits} commits) "
            f"mirror {short(s.mirror_head)} {s.state} lag {s.lag_seconds:.1f}s/{s.lag_commits} "
            f"skipped {s.skipped} advances {s.advances} validated {s.validated} "
            f"s3 {s.requests} pending {s.pending}"
        )
        return line + (f" [{s.problem}]" if s.problem else "")

    def _block(self, s: Snapshot) -> list[str]:
        return [
            f"elapsed       {s.elapsed:7.1f} s",
            f"source head   {short(s.source_head)}  {plural(s.commits, 'commit')} written"
            + (f", {s.writer_errors} failed" if s.writer_errors else ""),
            f"mirror head   {short(s.mirror_head)}  {s.state:<10}  lag {s.lag_seconds:.1f} s, "
            f"{plural(s.lag_commits, 'commit')}",
            f"replicant     {s.advances} head advances, {s.skipped} commits skipped, "
            f"{s.validated} objects validated, {s.requests} S3 requests",
            f"replication   {s.pending} objects pending, {s.copied} copied, "
            f"{s.dropped} deliveries dropped",
            f"              {(s.problem or '')[:110]}",
        ]
