"""Follow the mirror's ``main``: which source commits it has reached, and when.

A thread reads the mirror's ``main`` head every quarter second. When it is new, the thread walks
the head's first-parent history on the mirror back to a commit it already saw, and tells the
:class:`~bench.soak.ledger.Ledger` that the mirror reached all of them now: the ledger turns that
into the mirror lag of every acknowledged ``main`` commit among them.
"""

from __future__ import annotations

import threading
import time

import httpx

from bench.soak.ledger import Ledger

__all__ = ["MirrorWatch"]

POLL = 0.25
PAGE = 100


class MirrorWatch:
    """Poll the mirror's ``main`` and record what it reached in ``ledger``."""

    def __init__(self, http: httpx.Client, mirror: str, ledger: Ledger) -> None:
        self.http = http
        self.mirror = mirror
        self.ledger = ledger
        self.heads = 0
        """New heads seen."""
        self.head: str | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="mirror-watch", daemon=True)

    def start(self) -> MirrorWatch:
        """Start following."""
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop following and close the client."""
        self._stop.set()
        self._thread.join(timeout=60)
        self.http.close()

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                self.step()
            except (httpx.TransportError, httpx.HTTPStatusError):
                pass  # a worker or the KV restarting: read again on the next round
            self._stop.wait(POLL)

    def step(self) -> None:
        """Read the head once; record what is new."""
        answer = self.http.get(f"/repositories/{self.mirror}/branches/main")
        if answer.status_code != 200:
            return
        head = str(answer.json()["commit_id"])
        if head == self.head:
            return
        seen_at = time.monotonic()
        new: list[str] = []
        after = ""
        while True:
            page = self.http.get(
                f"/repositories/{self.mirror}/refs/{head}/commits",
                params={"first_parent": "true", "amount": PAGE, "after": after},
            )
            page.raise_for_status()
            body = page.json()
            ids = [str(c["id"]) for c in body["results"]]
            known = [i for i in ids if i in self.ledger.reached]
            new += ids if not known else ids[: ids.index(known[0])]
            if known or not body["pagination"]["has_more"]:
                break
            after = body["pagination"]["next_offset"]
        self.ledger.mirror_reached(new, seen_at)
        self.head = head
        self.heads += 1
