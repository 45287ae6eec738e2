"""A webhook receiver on 127.0.0.1 for hook tests: it records every POST and answers by path.

``/fail`` answers 500, ``/slow`` answers only once :attr:`Receiver.release` is set (or after
5 s), anything else 200. Tests wait for deliveries with :meth:`Receiver.wait_for`, which polls
under a deadline instead of sleeping.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest

DEADLINE = 20.0


@dataclass
class Call:
    """One request the webhook server received."""

    path: str
    query: dict[str, list[str]]
    headers: dict[str, str]
    body: dict[str, Any]

    @property
    def event(self) -> dict[str, Any]:
        """The lakeFS event sent (an airflow hook sends it under ``conf.lakeFS_event``)."""
        event: dict[str, Any] = self.body.get("conf", {}).get("lakeFS_event", self.body)
        return event


@dataclass
class Receiver:
    """The webhook server: where it listens and what it received."""

    url: str
    calls: list[Call] = field(default_factory=list)
    changed: threading.Condition = field(default_factory=threading.Condition)
    release: threading.Event = field(default_factory=threading.Event)

    def of(self, repository: str) -> list[Call]:
        """Return the calls whose event names ``repository``."""
        with self.changed:
            return [c for c in self.calls if c.event.get("repository_id") == repository]

    def wait_for(self, repository: str, done: Callable[[list[Call]], bool]) -> list[Call]:
        """Wait until ``done`` holds for the calls of ``repository``; return them."""
        deadline = time.monotonic() + DEADLINE
        with self.changed:
            while True:
                found = [c for c in self.calls if c.event.get("repository_id") == repository]
                if done(found):
                    return found
                left = deadline - time.monotonic()
                if left <= 0:
                    pytest.fail(f"webhooks of {repository} never arrived; got {found}")
                self.changed.wait(left)


@contextmanager
def webhook_receiver(host: str = "127.0.0.1") -> Iterator[Receiver]:
    """Serve a :class:`Receiver` on a free port of ``host`` (a loopback address) until the block
    ends."""
    state = Receiver("")

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length", "0"))
            body = json.loads(self.rfile.read(length) or b"{}")
            parts = urlsplit(self.path)
            with state.changed:
                state.calls.append(
                    Call(parts.path, parse_qs(parts.query), dict(self.headers.items()), body)
                )
                state.changed.notify_all()
            if parts.path == "/slow":
                # held until the hook has given up
                state.release.wait(5.0)
            self.send_response(500 if parts.path == "/fail" else 200)
            self.send_header("Content-Length", "2")
            self.end_headers()
            self.wfile.write(b"ok")

        def log_message(self, format: str, *args: Any) -> None:
            return

    httpd = ThreadingHTTPServer((host, 0), Handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    state.url = f"http://{host}:{httpd.server_address[1]}"
    try:
        yield state
    finally:
        state.release.set()
        httpd.shutdown()
        httpd.server_close()
