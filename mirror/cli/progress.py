"""One-line progress indicators drawn on a terminal's stderr, silent elsewhere.

:class:`Progress` is the bar of transfers; :class:`Spinner` shows that a server-side operation
is still running (an asynchronous commit or merge) and leaves no trace once it ends.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from types import TracebackType
from typing import TextIO

from mirror.cli.output import format_size

__all__ = ["Progress", "Spinner"]

_WIDTH = 24
_FRAMES = "|/-\\"


class Progress:
    """Count transferred files and bytes and redraw a bar at most every ``interval`` seconds.

    Thread-safe: parallel transfers report to the same bar.
    """

    def __init__(
        self,
        verb: str,
        total_files: int,
        total_bytes: int,
        stream: TextIO,
        *,
        enabled: bool,
        interval: float = 0.1,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.verb = verb
        self.total_files = total_files
        self.total_bytes = total_bytes
        self.files = 0
        self.bytes = 0
        self._stream = stream
        self._enabled = enabled
        self._interval = interval
        self._clock = clock
        self._drawn_at: float | None = None
        self._lock = threading.Lock()

    def __enter__(self) -> Progress:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def add_bytes(self, count: int) -> None:
        """Count ``count`` more bytes transferred."""
        with self._lock:
            self.bytes += count
            self._maybe_draw()

    def file_done(self) -> None:
        """Count one more file finished."""
        with self._lock:
            self.files += 1
            self._maybe_draw()

    def render(self) -> str:
        """Return the bar's current line."""
        if self.total_bytes:
            fraction = min(self.bytes / self.total_bytes, 1.0)
        else:
            fraction = self.files / self.total_files if self.total_files else 1.0
        filled = int(fraction * _WIDTH)
        return (
            f"{self.verb} [{'#' * filled}{'.' * (_WIDTH - filled)}] {fraction:4.0%}  "
            f"{self.files}/{self.total_files} files  "
            f"{format_size(self.bytes)}/{format_size(self.total_bytes)}"
        )

    def _maybe_draw(self) -> None:
        if not self._enabled:
            return
        now = self._clock()
        if self._drawn_at is not None and now - self._drawn_at < self._interval:
            return
        self._drawn_at = now
        self._stream.write("\r" + self.render() + "\x1b[K")
        self._stream.flush()

    def close(self) -> None:
        """Draw the final state and end the line."""
        with self._lock:
            if not self._enabled:
                return
            self._stream.write("\r" + self.render() + "\x1b[K\n")
            self._stream.flush()
            self._enabled = False


class Spinner:
    """Show ``<verb> <frame> <seconds>s`` while waiting; erase the line at the end.

    The line is erased rather than ended, so that what the command prints afterwards is exactly
    what it prints without a terminal.
    """

    def __init__(
        self,
        verb: str,
        stream: TextIO,
        *,
        enabled: bool,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.verb = verb
        self._stream = stream
        self._enabled = enabled
        self._clock = clock
        self._started = clock()
        self._frame = 0
        self._drawn = False

    def __enter__(self) -> Spinner:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def render(self) -> str:
        """Return the spinner's current line."""
        elapsed = self._clock() - self._started
        return f"{self.verb} {_FRAMES[self._frame % len(_FRAMES)]} {elapsed:.1f}s"

    def tick(self) -> None:
        """Advance the spinner and redraw it."""
        if not self._enabled:
            return
        self._stream.write("\r" + self.render() + "\x1b[K")
        self._stream.flush()
        self._frame += 1
        self._drawn = True

    def close(self) -> None:
        """Erase the spinner's line (if it was drawn)."""
        if self._drawn:
            self._stream.write("\r\x1b[K")
            self._stream.flush()
            self._drawn = False
        self._enabled = False
