"""Pull requests: records in the KV, one per request, and merging one through the catalog.

A pull request proposes merging a source branch into a destination branch of the same
repository (lakeFS's experimental pull requests, pkg/graveler/graveler.go). Its record lives in
the KV under ``pulls/<repository>:<instance>/<id>``, so every server process sharing the KV sees
the same state and a repository created again under the same name starts with none. Records
change only by compare-and-swap.

IDs are reverse-time xids, as lakeFS's: 20 base32hex characters (``0-9a-v``) that sort newest
first, so a listing in key order lists the newest request first.
"""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, replace
from typing import Any, Literal, Protocol

from mirror.core.commits import CommitResult
from mirror.core.errors import (
    INVALID_VALUE,
    LakeFSText,
    MergeConflictError,
    RepositoryReadOnlyError,
)
from mirror.core.ids import CommitID
from mirror.core.model import Repository
from mirror.errors import ConflictError, InvalidValueError, NotFoundError
from mirror.kv.errors import KeyNotFoundError, KVPreconditionFailedError
from mirror.kv.protocol import KV

__all__ = [
    "STATUSES",
    "BadPullRequestStatusError",
    "InvalidPullRequestIDError",
    "InvalidPullRequestStatusError",
    "Merger",
    "PullRequest",
    "PullRequestConflictError",
    "PullRequestNotFoundError",
    "PullRequestStore",
    "SameBranchError",
    "StatusFilter",
    "is_pull_request_id",
    "new_pull_request_id",
]

STATUSES = ("open", "closed", "merged")
"""The states of a pull request."""

StatusFilter = Literal["open", "closed", "all"]

_ALPHABET = "0123456789abcdefghijklmnopqrstuv"
_YEAR_4000 = 64_060_588_800
_COUNTER_SPAN = 1 << 24
_lock = threading.Lock()
_counter = int.from_bytes(os.urandom(3), "big")
_machine = os.urandom(2)
_MAX_TRIES = 20


class PullRequestNotFoundError(LakeFSText, NotFoundError):
    """No pull request of that ID in the repository."""

    lakefs_text = "pull request not found"


class InvalidPullRequestIDError(LakeFSText, InvalidValueError):
    """A pull request ID that is no xid."""

    lakefs_text = f"pull request id: {INVALID_VALUE}"


class InvalidPullRequestStatusError(LakeFSText, InvalidValueError):
    """An update names a status other than open, closed or merged."""

    lakefs_text = "invalid pull request status: validation error"


class BadPullRequestStatusError(LakeFSText, InvalidValueError):
    """A merge of a pull request that is not open."""

    lakefs_text = "bad pull request status"


class SameBranchError(LakeFSText, InvalidValueError):
    """A pull request whose source and destination are the same branch."""

    lakefs_text = "source and destination branches are the same"


class PullRequestConflictError(LakeFSText, ConflictError):
    """Merging a pull request found conflicts (an Error body, unlike the merge endpoint's).

    Attributes:
        paths: The conflicting object paths.
    """

    lakefs_text = ""

    def __init__(self, destination: str, paths: list[str]) -> None:
        shown = ", ".join(repr(p) for p in paths[:10])
        super().__init__(
            f"update branch {destination}: conflict found: {len(paths)} path(s): {shown}"
        )
        self.destination = destination
        self.paths = paths

    def __reduce__(self) -> tuple[type[PullRequestConflictError], tuple[str, list[str]]]:
        return (type(self), (self.destination, self.paths))


class Merger(Protocol):
    """What merging a pull request needs: a merge of one branch into another.

    :class:`~mirror.core.catalog.Catalog` is one (it imports this module, never the reverse).
    """

    def merge(
        self, repository: str, source: str, destination: str, *, committer: str = ""
    ) -> CommitResult:
        """Merge ``source`` into branch ``destination`` with the default message; return it."""
        ...


def _base32hex(data: bytes) -> str:
    value = int.from_bytes(data, "big")
    out = []
    for _ in range((len(data) * 8 + 4) // 5):
        value, digit = divmod(value, 32)
        out.append(_ALPHABET[digit])
    return "".join(reversed(out))[-20:]


def new_pull_request_id(now: float | None = None) -> str:
    """Return a fresh reverse-time xid: a later ID sorts before an earlier one.

    Within one second of one process the counter counts down, so the order holds there too.
    """
    global _counter
    seconds = int(time.time() if now is None else now)
    with _lock:
        _counter = (_counter + 1) % _COUNTER_SPAN
        counter = _COUNTER_SPAN - 1 - _counter
    raw = (
        (_YEAR_4000 - seconds).to_bytes(5, "big")
        + _machine
        + (os.getpid() & 0xFFFF).to_bytes(2, "big")
        + counter.to_bytes(3, "big")
    )
    return _base32hex(raw)


def is_pull_request_id(value: str) -> bool:
    """Return whether ``value`` is shaped like a pull request ID."""
    return len(value) == 20 and all(c in _ALPHABET for c in value)


@dataclass(frozen=True, slots=True)
class PullRequest:
    """One pull request.

    Attributes:
        id: The request's xid.
        status: ``open``, ``closed`` or ``merged``.
        title: Its title.
        description: Its description.
        author: The ID of the user who opened it.
        source_branch: The branch to merge.
        destination_branch: The branch merged into.
        creation_date: When it was opened (Unix seconds).
        merged_commit_id: The merge commit, once merged.
        closed_date: When it was first closed or merged (Unix seconds); reopening keeps it.
    """

    id: str
    status: str
    title: str
    description: str
    author: str
    source_branch: str
    destination_branch: str
    creation_date: float
    merged_commit_id: str | None = None
    closed_date: float | None = None

    def encode(self) -> bytes:
        """Return the KV encoding of this record."""
        return json.dumps(asdict(self), sort_keys=True, separators=(",", ":")).encode()

    @classmethod
    def decode(cls, raw: bytes) -> PullRequest:
        """Return the record encoded in ``raw``."""
        fields: dict[str, Any] = json.loads(raw)
        return cls(**fields)


class PullRequestStore:
    """The pull requests of every repository, in the KV.

    Args:
        kv: Where the records live.
        clock: Returns the current time in seconds.
    """

    def __init__(self, kv: KV, clock: Callable[[], float] = time.time) -> None:
        self.kv = kv
        self.clock = clock

    @staticmethod
    def _prefix(repo: Repository) -> bytes:
        return f"pulls/{repo.id}:{repo.instance_uid}/".encode()

    def delete_repository(self, repo: Repository) -> None:
        """Delete every pull request of ``repo`` (of that instance; none left: no error)."""
        for key in [k for k, _ in self.kv.scan(self._prefix(repo))]:
            self.kv.delete(key)

    def _key(self, repo: Repository, pull_id: str) -> bytes:
        if not is_pull_request_id(pull_id):
            raise InvalidPullRequestIDError(repr(pull_id))
        return self._prefix(repo) + pull_id.encode()

    def create(
        self,
        repo: Repository,
        *,
        title: str,
        description: str,
        author: str,
        source_branch: str,
        destination_branch: str,
    ) -> PullRequest:
        """Store a new open pull request and return it.

        Raises:
            RepositoryReadOnlyError: the repository is read-only.
            SameBranchError: source and destination are the same branch.
        """
        if repo.read_only:
            raise RepositoryReadOnlyError(repo.id)
        if source_branch == destination_branch:
            raise SameBranchError(repr(source_branch))
        now = self.clock()
        pull = PullRequest(
            id=new_pull_request_id(now),
            status="open",
            title=title,
            description=description,
            author=author,
            source_branch=source_branch,
            destination_branch=destination_branch,
            creation_date=now,
        )
        self.kv.set_if(self._key(repo, pull.id), pull.encode(), None)
        return pull

    def _get_raw(self, repo: Repository, pull_id: str) -> tuple[PullRequest, bytes]:
        try:
            raw = self.kv.get(self._key(repo, pull_id))
        except KeyNotFoundError as exc:
            raise PullRequestNotFoundError(f"{pull_id} in repository {repo.id!r}") from exc
        return PullRequest.decode(raw), raw

    def get(self, repo: Repository, pull_id: str) -> PullRequest:
        """Return a pull request.

        Raises:
            InvalidPullRequestIDError: ``pull_id`` is no xid.
            PullRequestNotFoundError: no such pull request.
        """
        return self._get_raw(repo, pull_id)[0]

    def list(
        self, repo: Repository, status: StatusFilter = "open", prefix: str = "", after: str = ""
    ) -> Iterator[PullRequest]:
        """Yield pull requests newest first; ``closed`` includes merged ones.

        Args:
            repo: The repository.
            status: Which requests: ``open``, ``closed`` (closed or merged), or ``all``.
            prefix: Only IDs starting with this.
            after: Only IDs after this one (the previous page's last).
        """
        base = self._prefix(repo)
        start = base + after.encode() + b"\x00" if after else b""
        for _, raw in self.kv.scan(base + prefix.encode(), start):
            pull = PullRequest.decode(raw)
            if status == "all" or (status == "open") == (pull.status == "open"):
                yield pull

    def update(
        self,
        repo: Repository,
        pull_id: str,
        change: Callable[[PullRequest], PullRequest],
    ) -> PullRequest:
        """Replace a pull request with ``change(current)`` by compare-and-swap; return it.

        Raises:
            RepositoryReadOnlyError, InvalidPullRequestIDError, PullRequestNotFoundError.
        """
        if repo.read_only:
            raise RepositoryReadOnlyError(repo.id)
        for _ in range(_MAX_TRIES):
            current, raw = self._get_raw(repo, pull_id)
            updated = change(current)
            try:
                self.kv.set_if(self._key(repo, pull_id), updated.encode(), raw)
            except KVPreconditionFailedError:
                continue
            return updated
        raise ConflictError(f"pull request {pull_id}: changed concurrently, try again")

    def edit(
        self,
        repo: Repository,
        pull_id: str,
        *,
        title: str | None = None,
        description: str | None = None,
        status: str | None = None,
    ) -> PullRequest:
        """Change a pull request's title, description or status (any case).

        Closing or merging sets ``closed_date`` when it is not set yet; reopening keeps it.

        Raises:
            InvalidPullRequestStatusError: a status other than open, closed or merged.
            RepositoryReadOnlyError, InvalidPullRequestIDError, PullRequestNotFoundError.
        """
        wanted = status.lower() if status is not None else None
        if wanted is not None and wanted not in STATUSES:
            raise InvalidPullRequestStatusError(repr(status))
        now = self.clock()

        def change(current: PullRequest) -> PullRequest:
            updated = replace(
                current,
                title=current.title if title is None else title,
                description=current.description if description is None else description,
                status=current.status if wanted is None else wanted,
            )
            if updated.status != "open" and updated.closed_date is None:
                updated = replace(updated, closed_date=now)
            return updated

        return self.update(repo, pull_id, change)

    def merge(self, catalog: Merger, repo: Repository, pull_id: str, committer: str) -> CommitID:
        """Merge an open pull request with the default message; mark it merged.

        The merge goes through ``catalog.merge`` (:meth:`Catalog.merge
        <mirror.core.catalog.Catalog.merge>` in a server), so everything a merge does (hooks
        included) happens here as well.

        Raises:
            BadPullRequestStatusError: the request is not open.
            PullRequestConflictError: the branches conflict.
            RepositoryReadOnlyError, InvalidPullRequestIDError, PullRequestNotFoundError, and
            whatever the merge raises (DirtyBranchError, NoChangesError, ...).
        """
        if repo.read_only:
            raise RepositoryReadOnlyError(repo.id)
        pull = self.get(repo, pull_id)
        if pull.status != "open":
            raise BadPullRequestStatusError(f"pull request {pull_id} is {pull.status}")
        try:
            result = catalog.merge(
                repo.id, pull.source_branch, pull.destination_branch, committer=committer
            )
        except MergeConflictError as exc:
            raise PullRequestConflictError(pull.destination_branch, exc.paths) from exc
        commit_id = result.commit.id
        now = self.clock()

        def merged(current: PullRequest) -> PullRequest:
            return replace(
                current,
                status="merged",
                merged_commit_id=commit_id,
                closed_date=current.closed_date if current.closed_date is not None else now,
            )

        self.update(repo, pull_id, merged)
        return commit_id
