"""The demo's writer: CSV, JSON and Parquet objects committed to the source branch at a pace."""

from __future__ import annotations

import io
import json
import random
import threading
import time

import httpx

from mirror.cli.demo.api import BRANCH, HTTP_TIMEOUT, SOURCE_REPO, check
from mirror.cli.demo.errors import DemoError

__all__ = ["Writer"]


class Writer:
    """Commit a few objects of mixed kinds and sizes to the source branch at a steady pace."""

    def __init__(self, api: httpx.Client, interval: float, rng: random.Random) -> None:
        self._api = api
        self._interval = interval
        self._rng = rng
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="demo-writer", daemon=True)
        self._lock = threading.Lock()
        self._live: list[str] = []
        self.commits: list[str] = []
        self.objects_written = 0
        self.objects_deleted = 0
        self.errors = 0
        self.last_error: str | None = None

    def start(self) -> None:
        """Start committing in a thread of its own."""
        self._thread.start()

    def stop(self) -> None:
        """Stop committing; return once the commit under way is done."""
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=HTTP_TIMEOUT * 2)

    @property
    def head(self) -> str | None:
        """Return the last commit made (None before the first)."""
        with self._lock:
            return self.commits[-1] if self.commits else None

    def _run(self) -> None:
        number = 0
        next_at = time.monotonic()
        while not self._stop.wait(max(0.0, next_at - time.monotonic())):
            next_at = max(next_at + self._interval, time.monotonic())
            number += 1
            try:
                commit = self._commit(number)
            except (DemoError, httpx.HTTPError) as exc:
                with self._lock:
                    self.errors += 1
                    self.last_error = str(exc)
                continue
            with self._lock:
                self.commits.append(commit)

    def _upload(self, path: str, body: bytes, content_type: str) -> None:
        check(
            self._api.post(
                f"/repositories/{SOURCE_REPO}/branches/{BRANCH}/objects",
                params={"path": path},
                content=body,
                headers={"content-type": content_type},
            ),
            f"upload {path}",
            201,
        )
        self.objects_written += 1

    def _commit(self, number: int) -> str:
        rng = self._rng
        for i in range(rng.randint(1, 3)):
            kind = rng.choices(("csv", "json", "parquet"), weights=(3, 1, 3))[0]
            if kind == "parquet":
                path = f"tables/events/part-{number:05}-{i}.parquet"
                self._upload(path, self._parquet(number), "application/octet-stream")
            elif kind == "csv":
                path = f"raw/clicks/{number:05}-{i}.csv"
                self._upload(path, self._csv(number), "text/csv")
            else:
                path = f"raw/runs/{number:05}-{i}.json"
                self._upload(path, self._json(number, i), "application/json")
            self._live.append(path)
        if len(self._live) > 4 and rng.random() < 0.3:
            victim = self._live.pop(rng.randrange(len(self._live) - 1))
            check(
                self._api.delete(
                    f"/repositories/{SOURCE_REPO}/branches/{BRANCH}/objects",
                    params={"path": victim},
                ),
                f"delete {victim}",
                204,
            )
            self.objects_deleted += 1
        # one object every commit rewrites: the mirror must show each version whole
        latest = json.dumps({"commit": number, "objects": len(self._live)}).encode()
        self._upload("state/latest.json", latest, "application/json")
        body = {"message": f"demo commit {number}", "metadata": {"writer": "lakemirror demo"}}
        response = self._api.post(
            f"/repositories/{SOURCE_REPO}/branches/{BRANCH}/commits", json=body
        )
        return str(check(response, f"commit {number}", 201).json()["id"])

    def _csv(self, number: int) -> bytes:
        rows = self._rng.choice((5, 50, 500, 5000))
        lines = ["id,user,page,ms"]
        lines.extend(
            f"{number * 100_000 + r},u{self._rng.randrange(1000)},/p/{self._rng.randrange(50)},"
            f"{self._rng.randrange(5000)}"
            for r in range(rows)
        )
        return ("\n".join(lines) + "\n").encode()

    def _json(self, number: int, index: int) -> bytes:
        doc = {
            "run": number,
            "part": index,
            "started": time.time(),
            "params": {f"k{i}": self._rng.random() for i in range(self._rng.randint(1, 40))},
        }
        return json.dumps(doc, indent=1).encode()

    def _parquet(self, number: int) -> bytes:
        import pyarrow as pa
        import pyarrow.parquet as pq

        rows = self._rng.choice((100, 1_000, 10_000, 30_000))
        rng = self._rng
        table = pa.table(
            {
                "id": pa.array(range(number * 100_000, number * 100_000 + rows), pa.int64()),
                "value": pa.array([rng.random() for _ in range(rows)], pa.float64()),
                "country": pa.array([rng.choice(("de", "fr", "us", "jp")) for _ in range(rows)]),
            }
        )
        buffer = io.BytesIO()
        pq.write_table(table, buffer)
        return buffer.getvalue()
