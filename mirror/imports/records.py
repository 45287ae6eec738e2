"""Import status records in the KV, shared by every server process.

KV layout: ``imports/<repository>:<instance>/<id>`` → :class:`ImportRecord` (JSON), keyed by
the repository instance (its ``instance_uid``) like every record of a repository: one created
again under the name sees none of its predecessor's imports, and deleting the repository
removes them (:func:`register_imports_cleanup` registers that on the catalog). The process running
an import rewrites its record about every second (``ingested_objects``, ``update_time``) and
when it ends; a cancel request rewrites it too, so every write is a compare-and-swap and the
runner notices a cancel at its next save.
"""

from __future__ import annotations

import json
import secrets
from dataclasses import asdict, dataclass, replace
from typing import Any

from mirror.core.deletion import CleanupRegistry
from mirror.core.model import Repository
from mirror.errors import NotFoundError
from mirror.kv import KV, KeyNotFoundError, KVPreconditionFailedError

__all__ = [
    "CANCELED_ERROR",
    "ImportNotFoundError",
    "ImportRecord",
    "ImportRecords",
    "new_import_id",
]

CANCELED_ERROR = "import error: Canceled"
"""The error of a canceled import, as lakeFS reports it."""

_PREFIX = b"imports/"
# xid's alphabet and length: lakeFS import IDs are xids
_ID_ALPHABET = "0123456789abcdefghijklmnopqrstuv"
_ID_LENGTH = 20


def new_import_id() -> str:
    """Return a new random import ID, shaped like lakeFS's (20 base32hex characters)."""
    return "".join(secrets.choice(_ID_ALPHABET) for _ in range(_ID_LENGTH))


class ImportNotFoundError(NotFoundError):
    """No import of that ID in the repository; the message starts with lakeFS's ``not found``."""

    def __init__(self, import_id: str) -> None:
        super().__init__(f"not found: no import {import_id!r}")


@dataclass(frozen=True, slots=True)
class ImportRecord:
    """The status of one import.

    Attributes:
        id: The import ID clients poll.
        repository: The repository imported into.
        branch: The branch imported into.
        task: The ID of the background task running it (whose owner's heartbeat tells
            whether it still runs).
        completed: Whether the import committed.
        update_time: When the record last changed (Unix seconds).
        ingested_objects: Objects read from the sources so far.
        metarange_id: The imported tree, once completed.
        commit: The commit (lakeFS's ``Commit`` JSON), once completed.
        error: ``import error: <cause>`` once failed or canceled.
        cancel: A cancel was requested.
    """

    id: str
    repository: str
    branch: str
    task: str
    update_time: float
    completed: bool = False
    ingested_objects: int = 0
    metarange_id: str | None = None
    commit: dict[str, Any] | None = None
    error: str | None = None
    cancel: bool = False

    @property
    def ended(self) -> bool:
        """Return whether the import committed, failed or was canceled."""
        return self.completed or self.error is not None

    def encode(self) -> bytes:
        """Return the record as stored in the KV."""
        return json.dumps(asdict(self), sort_keys=True, separators=(",", ":")).encode()

    @classmethod
    def decode(cls, raw: bytes) -> ImportRecord:
        """Return the record stored as ``raw``."""
        return cls(**json.loads(raw))

    def with_progress(self, ingested: int, now: float) -> ImportRecord:
        """Return this record with ``ingested`` objects read at ``now``."""
        return replace(self, ingested_objects=ingested, update_time=now)


class ImportRecords:
    """Read and write import records.

    Args:
        kv: The KV every server process shares.
    """

    def __init__(self, kv: KV) -> None:
        self.kv = kv

    @staticmethod
    def _prefix(repo: Repository) -> bytes:
        return _PREFIX + f"{repo.id}:{repo.instance_uid}/".encode()

    def _key(self, repo: Repository, import_id: str) -> bytes:
        return self._prefix(repo) + import_id.encode()

    def create(self, repo: Repository, record: ImportRecord) -> bytes:
        """Store a new record of an import into ``repo``; return its bytes."""
        raw = record.encode()
        self.kv.set_if(self._key(repo, record.id), raw, None)
        return raw

    def get_raw(self, repo: Repository, import_id: str) -> tuple[ImportRecord, bytes]:
        """Return a record and its stored bytes.

        Raises:
            ImportNotFoundError: no such import in the repository.
        """
        try:
            raw = self.kv.get(self._key(repo, import_id))
        except KeyNotFoundError as exc:
            raise ImportNotFoundError(import_id) from exc
        return ImportRecord.decode(raw), raw

    def replace(self, repo: Repository, expected: bytes, record: ImportRecord) -> bytes | None:
        """Store ``record`` if its record still holds ``expected``; ``None`` if it changed.

        A record removed meanwhile (its repository was deleted) is not written again.
        """
        raw = record.encode()
        try:
            self.kv.set_if(self._key(repo, record.id), raw, expected)
        except KVPreconditionFailedError:
            return None
        return raw

    def delete_repository(self, repo: Repository) -> None:
        """Delete every import record of ``repo`` (none left: no error)."""
        for key in [k for k, _ in self.kv.scan(self._prefix(repo))]:
            self.kv.delete(key)


def register_imports_cleanup(registry: CleanupRegistry, kv: KV) -> None:
    """Have deleted repositories' import records removed with them."""
    registry.add_repository_cleanup("imports", ImportRecords(kv).delete_repository)
