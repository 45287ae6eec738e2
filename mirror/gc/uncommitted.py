"""``prepare_uncommited``: the addresses staged on every branch, as Parquet in the namespace.

A garbage collection job must not delete what a branch has staged but not committed. This lists
every staged entry of every branch (hidden ones too; every staging token, sealed ones too, so a
commit in flight loses nothing) into gzip Parquet files ``{physical_address, creation_date}``
under ``<ns>/_lakefs/retention/gc/uncommitted/<run>/uncommitted/``. Tombstones are skipped, and
so are full addresses outside the namespace (garbage collection never deletes those); full
addresses inside it are written relative to it.

A call stops after a page (a number of entries, or a time) and returns a continuation token;
the caller calls again with it until no token comes back. The token names the run, the branch,
the staging token and the last path written. If a commit took that staging token meanwhile, the
rest of the branch is skipped: its entries are committed now (and the job reads the commits after
this listing), or they were dropped. Objects staged after the listing are younger than the
job's grace period.
"""

from __future__ import annotations

import base64
import binascii
import io
import json
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from mirror.core.catalog import Catalog
from mirror.core.errors import BranchNotFoundError
from mirror.core.ids import BranchID, StagingToken
from mirror.core.model import AddressType, Branch, Entry, Repository
from mirror.core.staging import Tombstone
from mirror.gc.commits import gc_repository
from mirror.gc.errors import InvalidContinuationTokenError
from mirror.gc.layout import is_run_id, new_run_id, part_id, uncommitted_prefix

__all__ = [
    "DEFAULT_PAGE_SECONDS",
    "DEFAULT_PAGE_SIZE",
    "UNCOMMITTED_SCHEMA",
    "Position",
    "PreparedUncommitted",
    "prepare_uncommitted",
    "relative_address",
]

DEFAULT_PAGE_SIZE = 500_000
"""Entries one call writes at most."""
DEFAULT_PAGE_SECONDS = 60.0
"""Seconds one call lists for at most (lakeFS's page ends at one minute too)."""

_FIELDS: list[pa.Field[Any]] = [
    pa.field("physical_address", pa.string()),
    pa.field("creation_date", pa.int64()),
]
UNCOMMITTED_SCHEMA = pa.schema(_FIELDS)
"""The columns of an uncommitted-address file (lakeFS's)."""


@dataclass(frozen=True, slots=True)
class Position:
    """Where a page ended: after ``path`` of staging token ``token`` of ``branch``."""

    run_id: str
    branch: BranchID
    token: StagingToken
    path: str

    def encode(self) -> str:
        """Return the continuation token handed to the caller."""
        data = json.dumps(
            {"run_id": self.run_id, "branch": self.branch, "token": self.token, "path": self.path},
            separators=(",", ":"),
        )
        return base64.urlsafe_b64encode(data.encode()).decode()

    @classmethod
    def decode(cls, value: str) -> Position:
        """Parse a continuation token made by :meth:`encode`.

        Raises:
            InvalidContinuationTokenError: the token is not one this server handed out.
        """
        try:
            record = json.loads(base64.urlsafe_b64decode(value.encode()))
        except (binascii.Error, UnicodeError, ValueError) as exc:
            raise InvalidContinuationTokenError("not a token this server made") from exc
        keys = ("run_id", "branch", "token", "path")
        if not isinstance(record, dict) or not all(isinstance(record.get(k), str) for k in keys):
            raise InvalidContinuationTokenError("not a token this server made")
        if not is_run_id(record["run_id"]):
            raise InvalidContinuationTokenError(f"bad run ID {record['run_id']!r}")
        return cls(
            record["run_id"],
            BranchID(record["branch"]),
            StagingToken(record["token"]),
            record["path"],
        )


@dataclass(frozen=True, slots=True)
class PreparedUncommitted:
    """What one call wrote.

    Attributes:
        run_id: The run's ID (the same on every page).
        location: The full URI of the run's files, or ``""`` while the run has none.
        continuation_token: Call again with it; ``None`` on the last page.
        written: Addresses written by this call.
    """

    run_id: str
    location: str
    continuation_token: str | None
    written: int


def relative_address(repo: Repository, entry: Entry) -> str | None:
    """Return ``entry``'s address relative to ``repo``'s namespace, ``None`` if outside it."""
    if entry.address_type is AddressType.RELATIVE:
        return entry.address
    namespace = repo.storage_namespace.rstrip("/") + "/"
    if entry.address.startswith(namespace):
        return entry.address[len(namespace) :]
    return None


def _branches(catalog: Catalog, repo: Repository, start: Position | None) -> Iterator[Branch]:
    if start is None:
        yield from catalog.refs.list_branches(repo)
        return
    try:
        yield catalog.refs.get_branch(repo, start.branch)
    except BranchNotFoundError:
        pass
    yield from catalog.refs.list_branches(repo, after=start.branch)


def _entries(
    catalog: Catalog, repo: Repository, start: Position | None
) -> Iterator[tuple[Branch, StagingToken, str, Entry]]:
    """Yield every staged entry after ``start``: branch by branch, token by token, by path."""
    for branch in _branches(catalog, repo, start):
        tokens = branch.tokens
        first_path = ""
        if start is not None and branch.id == start.branch:
            if start.token not in tokens:
                continue  # committed (or dropped) since the last page
            tokens = tokens[tokens.index(start.token) :]
            first_path = start.path + "\x00"
        for token in tokens:
            for path, value in catalog.staging.scan(token, start=first_path):
                if not isinstance(value, Tombstone):
                    yield branch, token, path, value
            first_path = ""


def _parquet(addresses: list[str], dates: list[int]) -> bytes:
    table = pa.table(
        {"physical_address": addresses, "creation_date": dates}, schema=UNCOMMITTED_SCHEMA
    )
    buf = io.BytesIO()
    pq.write_table(table, buf, compression="gzip")
    return buf.getvalue()


def prepare_uncommitted(
    catalog: Catalog,
    repository: str,
    continuation_token: str | None = None,
    *,
    page_size: int = DEFAULT_PAGE_SIZE,
    page_seconds: float = DEFAULT_PAGE_SECONDS,
) -> PreparedUncommitted:
    """Write one page of the staged addresses of every branch; see the module's description.

    Raises:
        RepositoryNotFoundError: no such repository.
        GCReadOnlyError: the repository is read-only (a mirror).
        InvalidContinuationTokenError: the token is not one this server handed out.
    """
    start = Position.decode(continuation_token) if continuation_token else None
    repo = gc_repository(catalog, repository)
    run_id = start.run_id if start is not None else new_run_id()
    deadline = time.monotonic() + page_seconds
    addresses: list[str] = []
    dates: list[int] = []
    last: Position | None = None
    more = False
    for branch, token, path, entry in _entries(catalog, repo, start):
        # every page makes progress: a token after nothing would end the listing
        if last is not None and (len(addresses) >= page_size or time.monotonic() >= deadline):
            more = True
            break
        last = Position(run_id, branch.id, token, path)
        address = relative_address(repo, entry)
        if address is not None:
            addresses.append(address)
            dates.append(entry.mtime)
    store = catalog.block_store(repo)
    prefix = uncommitted_prefix(run_id)
    if addresses:
        store.put(prefix + part_id(), _parquet(addresses, dates))
        has_data = True
    else:
        has_data = next(iter(store.list(prefix)), None) is not None
    namespace = repo.storage_namespace.rstrip("/")
    return PreparedUncommitted(
        run_id=run_id,
        location=f"{namespace}/{prefix}" if has_data else "",
        continuation_token=last.encode() if more and last is not None else None,
        written=len(addresses),
    )
