"""Shared fixtures: a controllable clock and an in-memory repository with terse helpers.

Also how ``make test`` spreads the suite over two pytest-xdist workers (``--dist loadscope``):
each file is one unit of work, so a module's live servers start once; the Spark tests share one
worker (one SparkSession) and the two-region end-to-end tests another unit, so that no two of
them compete for the machine; the longest units are handed out first.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from mirror.core import Catalog, ChunkingParams, Commit, CommitID, ObjectStat, open_memory


class Clock:
    """A clock that moves only when told to; call it for the current time in seconds."""

    def __init__(self, start: int = 1_700_000_000) -> None:
        self.now = start

    def __call__(self) -> float:
        return float(self.now)

    def tick(self, seconds: int = 1) -> int:
        self.now += seconds
        return self.now


@dataclass
class Lake:
    """One repository in an in-memory catalog, with shortcuts for building histories."""

    catalog: Catalog
    clock: Clock
    repo: str = "repo"

    def put(self, branch: str, path: str, data: bytes, **kwargs: Any) -> ObjectStat:
        return self.catalog.upload_object(self.repo, branch, path, data, **kwargs)

    def rm(self, branch: str, path: str) -> None:
        self.catalog.delete_object(self.repo, branch, path)

    def commit(self, branch: str, message: str = "commit", **kwargs: Any) -> Commit:
        """Commit one second after the previous commit, so every commit has its own time."""
        self.clock.tick()
        return self.catalog.commit(self.repo, branch, message, **kwargs).commit

    def write(
        self, branch: str, files: Mapping[str, bytes | None], message: str = "commit"
    ) -> Commit:
        """Upload (bytes) or delete (``None``) each path, then commit."""
        for path, data in files.items():
            if data is None:
                self.rm(branch, path)
            else:
                self.put(branch, path, data)
        return self.commit(branch, message)

    def branch(self, name: str, source: str = "main") -> CommitID:
        return self.catalog.create_branch(self.repo, name, source).commit_id

    def head(self, branch: str) -> CommitID:
        return self.catalog.get_branch(self.repo, branch).commit_id

    def resolve(self, ref: str) -> CommitID:
        return self.catalog.resolve_ref(self.repo, ref).commit_id

    def tree(self, ref: str) -> dict[str, bytes]:
        """Return every object at ``ref`` as path -> contents."""
        return {
            s.path: self.catalog.read_object(self.repo, ref, s.path)
            for s in self.catalog.iter_objects(self.repo, ref)
        }


CHUNKINGS = {
    "one-range": ChunkingParams(),
    "ragged": ChunkingParams(raggedness=3),
}


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture(params=sorted(CHUNKINGS))
def lake(request: pytest.FixtureRequest, clock: Clock) -> Lake:
    """Return a fresh repository "repo" (default branch main), once per chunking of trees."""
    catalog = open_memory(clock=clock, chunking=CHUNKINGS[request.param])
    catalog.create_repository("repo", "mem://repo")
    return Lake(catalog, clock)


_TESTS = Path(__file__).parent
_SHARED_UNITS = {"spark": "spark", "e2e": "e2e"}
"""Directories whose files run as one unit of work on one worker."""
_UNIT_OF_FILE = {
    # its pods mount host paths (/var/lib/lakemirror) that e2e/test_server_replicas.py's pods
    # mount too, and each cluster removes the mount points it made: never beside that one
    "deploy/test_chart_run.py": "e2e",
}
_FIRST = ("spark", "e2e", "deploy")
"""Directories whose units go out before the rest: they are the longest."""


def unit_of_work(nodeid: str) -> str:
    """Return the unit of work of the test ``nodeid`` (relative to the project root)."""
    path = nodeid.split("::", 1)[0]
    relative = path.removeprefix("tests/")
    top = relative.split("/", 1)[0] if "/" in relative else ""
    return _UNIT_OF_FILE.get(relative) or _SHARED_UNITS.get(top) or relative


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Put the longest units of work first (slow tests, Spark, end-to-end, deployment)."""
    units = [unit_of_work(item.nodeid) for item in items]
    first = {
        unit
        for unit, item in zip(units, items, strict=True)
        if unit.split("/", 1)[0] in _FIRST or item.get_closest_marker("slow") is not None
    }
    order = {id(item): (units[i] not in first, i) for i, item in enumerate(items)}
    items.sort(key=lambda item: order[id(item)])


def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """Hand out whole units of work (:func:`unit_of_work`) under ``--dist loadscope``."""
    if config.getvalue("dist") != "loadscope":
        return None
    from xdist.scheduler import LoadScopeScheduling

    class UnitScheduling(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return unit_of_work(nodeid)

    return UnitScheduling(config, log)
