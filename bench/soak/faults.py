"""The fault schedule: every so often, kill -9 a random process of the production path, restart it.

Kinds of fault (``--faults`` chooses among them; each is as likely, then each of its processes):

- ``worker``: a worker process of a region's ``lakemirror server``; the server's supervisor
  replaces it, and the fault is over when the replacement runs and ``/readyz`` answers;
- ``replicant``: a replicant replica (``r1`` or ``r2``); started again with its ID and port;
- ``replication``: the replication process; started again (``--resume``: it goes on where the
  killed one stopped);
- ``kv``: a region's dynalite; started again on its port and its LevelDB directory, and the fault
  is over when the region's server answers ``/readyz`` (its KV answers again).

The times between faults are drawn from a seeded RNG: ``every`` seconds give or take a quarter.
"""

from __future__ import annotations

import random
import threading
import time
import traceback
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from bench.soak.world import HEALTH_DEADLINE, SoakWorld, wait_answering

__all__ = ["KINDS", "Fault", "FaultSchedule"]

KINDS = ("worker", "replicant", "replication", "kv")


@dataclass(frozen=True)
class Fault:
    """One process killed and brought back."""

    at: float
    """``time.monotonic()`` of the kill."""
    kind: str
    target: str
    pid: int
    recovered_s: float | None
    """Seconds from the kill until the process (or its replacement) answered; ``None``: never."""
    error: str = ""


class FaultSchedule:
    """Kill and restart processes of ``world`` in a thread, ``every`` seconds or so."""

    def __init__(
        self,
        world: SoakWorld,
        every: float,
        seed: int,
        kinds: Sequence[str] = KINDS,
        limit: int | None = None,
        log: Callable[[str], None] = print,
    ) -> None:
        self.world = world
        self.every = every
        self.kinds = list(kinds)
        self.limit = limit
        self.log = log
        self.faults: list[Fault] = []
        self._random = random.Random(seed)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="faults", daemon=True)

    def start(self) -> FaultSchedule:
        """Start the schedule."""
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop after the fault in progress, once its process is back."""
        self._stop.set()
        self._thread.join(timeout=HEALTH_DEADLINE * 2)

    def _run(self) -> None:
        while self.limit is None or len(self.faults) < self.limit:
            if self._stop.wait(self.every * self._random.uniform(0.75, 1.25)):
                return
            self.faults.append(self.inject())

    def inject(self) -> Fault:
        """Kill one random process now and bring it back; return what happened."""
        kind = self._random.choice(self.kinds)
        kill, restart, target = self._choose(kind)
        began = time.monotonic()
        pid = kill()
        self.log(f"fault: killed {target} (pid {pid})")
        try:
            restart(pid)
        except BaseException as exc:  # a harness wait fails with pytest's outcome, no Exception
            error = "".join(traceback.format_exception_only(exc)).strip()[-500:]
            self.log(f"fault: {target} did not come back: {error}")
            return Fault(began, kind, target, pid, None, error)
        recovered = time.monotonic() - began
        self.log(f"fault: {target} back after {recovered:.1f} s")
        return Fault(began, kind, target, pid, recovered)

    def _choose(self, kind: str) -> tuple[Callable[[], int], Callable[[int], None], str]:
        world = self.world
        if kind == "worker":
            region = self._random.choice("ab")
            workers = world.workers[region]
            slots = workers.refresh()
            slot = self._random.randrange(len(slots))
            pid = slots[slot]
            return (
                lambda: workers.kill(pid),
                workers.wait_replaced,
                f"{region}.server worker {slot + 1}",
            )
        if kind == "replicant":
            replica = self._random.choice(world.replicas)
            return replica.kill, lambda _pid: replica.restart(), replica.label
        if kind == "replication":
            replication = world.replication
            return replication.kill, lambda _pid: replication.restart(), replication.label
        if kind == "kv":
            region = self._random.choice("ab")
            kv = world.kv[region]
            server = world.region(region).server

            def restart(_pid: int) -> None:
                kv.restart()
                wait_answering(server.url + "/readyz", HEALTH_DEADLINE)

            return kv.kill, restart, kv.label
        raise ValueError(f"unknown fault kind {kind!r}; choose among {', '.join(KINDS)}")
