"""Run records of actions: one per event that matched actions, with its hooks, in the KV.

Every server process sharing the KV sees every run. Keys:

- ``actions/runs/<repo>:<instance>/<run_id>``: the run (JSON, its hook runs included);
- ``actions/branch/<repo>:<instance>/<branch>/<run_id>`` and
  ``actions/commit/<repo>:<instance>/<commit>/<run_id>``: empty index entries for the
  ``branch`` and ``commit`` filters of the runs API.

``<instance>`` is the repository record's ``instance_uid``: a repository deleted and created
again under the same name starts with no runs. Deleting a repository removes its runs, and its
pending post-events first (:func:`register_runs_cleanup` registers that on the catalog).

Run IDs sort newest first (lakeFS's reverse-time IDs), so a prefix scan lists runs newest first.
"""

from __future__ import annotations

import json
import secrets
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field, replace

from mirror.actions.pending import delete_pending
from mirror.core.deletion import CleanupRegistry
from mirror.core.model import Repository
from mirror.errors import NotFoundError
from mirror.kv.errors import KeyNotFoundError
from mirror.kv.protocol import KV

__all__ = [
    "HookRunRecord",
    "RunNotFoundError",
    "RunRecord",
    "RunStore",
    "new_run_id",
    "register_runs_cleanup",
]

_RUNS = b"actions/runs/"
_BY_BRANCH = b"actions/branch/"
_BY_COMMIT = b"actions/commit/"
_B32 = "0123456789abcdefghijklmnopqrstuv"
_NEVER = 1 << 64


class RunNotFoundError(NotFoundError):
    """No run (or hook run) of that ID."""


def new_run_id(now_ns: int | None = None) -> str:
    """Return a new run ID: 20 base32hex characters whose order is newest first.

    The first 13 characters encode the time inverted (so a later run sorts first), the last 7
    are random (runs started in the same nanosecond stay distinct).
    """
    value = _NEVER - 1 - (time.time_ns() if now_ns is None else now_ns)
    digits = []
    for _ in range(13):
        digits.append(_B32[value & 31])
        value >>= 5
    tail = "".join(_B32[b & 31] for b in secrets.token_bytes(7))
    return "".join(reversed(digits)) + tail


@dataclass(frozen=True)
class HookRunRecord:
    """One hook's run.

    Attributes:
        hook_run_id: ``%04d_%04d`` of the action's and the hook's index.
        action: The action's name.
        hook_id: The hook's ID.
        start_time: RFC 3339 UTC.
        end_time: RFC 3339 UTC, ``""`` for a skipped hook.
        status: ``completed``, ``failed`` or ``skipped``.
        error: Why it failed (``""`` otherwise).
    """

    hook_run_id: str
    action: str
    hook_id: str
    start_time: str
    end_time: str = ""
    status: str = "completed"
    error: str = ""


@dataclass(frozen=True)
class RunRecord:
    """One run: the hooks an event triggered.

    Attributes:
        run_id: From :func:`new_run_id`.
        repository: The repository's name.
        event_type: The event, e.g. ``pre-commit``.
        branch: The event's branch (``""`` for tag events).
        source_ref: Where the action files were read.
        commit_id: The event's commit (a pre-commit run gets it afterwards).
        start_time: RFC 3339 UTC.
        end_time: RFC 3339 UTC.
        status: ``completed`` or ``failed``.
        hooks: The hook runs, in ``hook_run_id`` order.
    """

    run_id: str
    repository: str
    event_type: str
    branch: str
    source_ref: str
    commit_id: str
    start_time: str
    end_time: str
    status: str
    hooks: tuple[HookRunRecord, ...] = field(default_factory=tuple)

    def encode(self) -> bytes:
        """Return the KV encoding (JSON)."""
        return json.dumps(asdict(self), separators=(",", ":")).encode()

    @classmethod
    def decode(cls, raw: bytes) -> RunRecord:
        """Read a record written by :meth:`encode`."""
        doc = json.loads(raw)
        hooks = tuple(HookRunRecord(**h) for h in doc.pop("hooks"))
        return cls(**doc, hooks=hooks)


def _key(prefix: bytes, *parts: str) -> bytes:
    return prefix + "/".join(parts).encode()


def _scope(repo: Repository) -> str:
    # a repository deleted and created again under its name starts with no runs
    return f"{repo.id}:{repo.instance_uid}"


class RunStore:
    """Run records in the KV.

    Args:
        kv: Shared by every server process.
    """

    def __init__(self, kv: KV) -> None:
        self.kv = kv

    def save(self, repo: Repository, run: RunRecord) -> None:
        """Store ``run`` of ``repo`` and its index entries."""
        scope = _scope(repo)
        items = [(_key(_RUNS, scope, run.run_id), run.encode())]
        if run.branch:
            items.append((_key(_BY_BRANCH, scope, run.branch, run.run_id), b""))
        if run.commit_id:
            items.append((_key(_BY_COMMIT, scope, run.commit_id, run.run_id), b""))
        self.kv.set_many(items)

    def delete_repository(self, repo: Repository) -> None:
        """Delete every run of ``repo`` and their index entries (none left: no error)."""
        scope = _scope(repo)
        for prefix in (_RUNS, _BY_BRANCH, _BY_COMMIT):
            for key in [k for k, _ in self.kv.scan(_key(prefix, scope, ""))]:
                self.kv.delete(key)

    def set_commit(self, repo: Repository, run_id: str, commit_id: str) -> None:
        """Fill in the commit of a pre-commit run once the commit exists."""
        self.save(repo, replace(self.get(repo, run_id), commit_id=commit_id))

    def get(self, repo: Repository, run_id: str) -> RunRecord:
        """Return a run.

        Raises:
            RunNotFoundError: no such run.
        """
        try:
            return RunRecord.decode(self.kv.get(_key(_RUNS, _scope(repo), run_id)))
        except KeyNotFoundError:
            raise RunNotFoundError(f"not found: action run {run_id!r}") from None

    def list(
        self, repo: Repository, *, branch: str = "", commit: str = "", after: str = ""
    ) -> Iterator[RunRecord]:
        """Yield runs newest first, after the run ID ``after``, of one branch or commit."""
        scope = _scope(repo)
        if branch or commit:
            base = (
                _key(_BY_BRANCH, scope, branch, "")
                if branch
                else _key(_BY_COMMIT, scope, commit, "")
            )
            start = base + after.encode() + b"\x00" if after else b""
            for key, _ in self.kv.scan(base, start):
                run_id = key[len(base) :].decode()
                try:
                    yield self.get(repo, run_id)
                except RunNotFoundError:
                    continue
            return
        base = _key(_RUNS, scope, "")
        start = base + after.encode() + b"\x00" if after else b""
        for _, raw in self.kv.scan(base, start):
            yield RunRecord.decode(raw)


def register_runs_cleanup(registry: CleanupRegistry, kv: KV) -> None:
    """Have deleted repositories' action runs and pending post-events removed with them."""
    runs = RunStore(kv)

    def cleanup(repo: Repository) -> None:
        delete_pending(kv, repo)  # first: a pending event would record a run again
        runs.delete_repository(repo)

    registry.add_repository_cleanup("action runs", cleanup)
