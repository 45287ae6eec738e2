r"""Multipart uploads in progress: their records in the KV, their parts in the storage namespace.

Several server processes share one KV, so an upload lives there and nowhere else: any process
answers any call of an upload. Per repository instance (``<repo>:<instance_uid>``, like every
record of a repository)::

    gateway/multipart/<repo>:<uid>/id/<upload ID>                   the upload record
    gateway/multipart/<repo>:<uid>/key/<ref/path>\x00<upload ID>    index for ListMultipartUploads
    gateway/multipart/<repo>:<uid>/part/<upload ID>/<NNNNN>         one part record
    gateway/multipart/<repo>:<uid>/done/<upload ID>                 a completed upload
    gateway/multipart/<repo>:<uid>/expiry/<µs, hex>/<upload ID>     when it is forgotten

A completed upload is remembered for :data:`COMPLETED_KEPT_SECONDS` (its key, a digest of the
parts it was completed with, its ETag and location), so that a CompleteMultipartUpload repeated
with the same parts — an SDK retrying a completion whose answer was lost — is answered as the
first one was, as S3 answers it. The KV has no expiry of its own: a record past its time reads as
absent, and each completion removes the records of its repository instance whose time has passed
(the ``expiry/`` index lists them oldest first, so that costs one read beyond them).

A repository deleted and created again under its name therefore neither lists nor completes the
uploads of the one before (their IDs answer NoSuchUpload), and deleting a repository removes
them (:func:`register_uploads_cleanup` registers :meth:`UploadStore.delete_repository` on the
catalog; every server process does, its gateway enabled or not, since any process may delete a
repository whose uploads another one started).

Earlier versions keyed the records by the repository name alone (``gateway/multipart/<repo>/…``).
Those are not migrated: nothing reads that prefix, so an upload in progress across the upgrade
answers NoSuchUpload, as S3 does after an abort, and the client starts it again. Deleting a
repository removes the records of its name under that prefix too.

Upload IDs start with the time of creation in hexadecimal, so the index lists the uploads of one
key in the order they were started (as S3 does), and end with 128 random bits, so that an upload
ID cannot be guessed.

A part's bytes are written once, at a fresh key under :data:`PARTS_PREFIX` of the repository's
storage namespace: garbage collection sweeps only ``data/``, so parts stay until their upload is
completed or aborted, and everything under the upload's prefix is then deleted (parts uploaded
again under the same number included). Deleting the repository leaves them, with the rest of its
namespace, as lakeFS does.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import secrets
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Self, cast

from mirror.block.protocol import BlockStore
from mirror.core.deletion import CleanupRegistry
from mirror.core.model import Repository
from mirror.errors import LakeMirrorError
from mirror.kv.errors import KeyNotFoundError, KVPreconditionFailedError
from mirror.kv.protocol import KV

if TYPE_CHECKING:
    from _typeshed import DataclassInstance

__all__ = [
    "COMPLETED_KEPT_SECONDS",
    "MAX_PART_NUMBER",
    "PARTS_PREFIX",
    "Completed",
    "Part",
    "Upload",
    "UploadStore",
    "new_upload_id",
    "part_address",
    "parts_digest",
    "register_uploads_cleanup",
]

PARTS_PREFIX = "_lakefs/multipart/"
"""Where parts live in a storage namespace (outside ``data/``, which garbage collection sweeps)."""
MAX_PART_NUMBER = 10_000
"""S3's highest part number."""

COMPLETED_KEPT_SECONDS = 24 * 3600
"""How long a completed upload is remembered for a repeated CompleteMultipartUpload."""

_ROOT = b"gateway/multipart/"


def new_upload_id(now: float | None = None) -> str:
    """Return a fresh upload ID: creation time in microseconds, then 128 random bits (hex)."""
    micros = int((time.time() if now is None else now) * 1_000_000)
    return f"{micros:014x}{secrets.token_hex(16)}"


def _is_upload_id(value: str) -> bool:
    return len(value) == 46 and all(c in "0123456789abcdef" for c in value)


def part_address(upload_id: str, number: int) -> str:
    """Return a fresh namespace key for the bytes of part ``number`` (one per attempt)."""
    return f"{PARTS_PREFIX}{upload_id}/{number:05d}-{secrets.token_hex(8)}"


class _Record:
    """A KV record of a dataclass: sorted, compact JSON of its fields."""

    def encode(self) -> bytes:
        """Return the KV encoding of the record."""
        fields = asdict(cast("DataclassInstance", self))
        return json.dumps(fields, sort_keys=True, separators=(",", ":")).encode()

    @classmethod
    def decode(cls, data: bytes) -> Self:
        """Decode a record written by :meth:`encode`."""
        return cls(**json.loads(data))


@dataclass(frozen=True)
class Upload(_Record):
    """A multipart upload in progress.

    Attributes:
        repository: The repository (bucket).
        instance_uid: The ``instance_uid`` of the repository the upload was started in.
        upload_id: The upload ID.
        branch: The branch the object is completed on.
        path: The object path.
        initiated: Creation time, epoch seconds.
        initiator: The ID of the user who started it.
        content_type: The content type the object gets, ``None`` for the default.
        metadata: The user metadata the object gets.
    """

    repository: str
    instance_uid: str
    upload_id: str
    branch: str
    path: str
    initiated: float
    initiator: str
    content_type: str | None = None
    metadata: dict[str, str] = field(default_factory=dict)

    @property
    def key(self) -> str:
        """Return the S3 key, ``<branch>/<path>``."""
        return f"{self.branch}/{self.path}"


@dataclass(frozen=True)
class Part(_Record):
    """One uploaded part.

    Attributes:
        number: The part number, 1 to 10,000.
        md5: The hexadecimal MD5 of the part's bytes (its ETag, unquoted).
        size: Its size in bytes.
        address: Its key in the repository's storage namespace.
        modified: When it was uploaded, epoch seconds.
    """

    number: int
    md5: str
    size: int
    address: str
    modified: float


def parts_digest(parts: Iterable[tuple[int, str]]) -> str:
    """Return the digest of a CompleteMultipartUpload's part list: ``(number, ETag)`` in order."""
    listed = "".join(f"{number}:{etag}\n" for number, etag in parts)
    return hashlib.sha256(listed.encode()).hexdigest()


@dataclass(frozen=True)
class Completed(_Record):
    """A completed upload, remembered to answer its completion again.

    Attributes:
        repository: The repository (bucket).
        instance_uid: The ``instance_uid`` of the repository the upload was completed in.
        upload_id: The upload ID.
        branch: The branch the object was completed on.
        path: The object path.
        parts: The :func:`parts_digest` of the part list it was completed with.
        etag: The object's ETag (unquoted).
        location: The ``Location`` the completion answered.
        expires: When it is forgotten, epoch seconds.
    """

    repository: str
    instance_uid: str
    upload_id: str
    branch: str
    path: str
    parts: str
    etag: str
    location: str
    expires: float


def _scope(repository: str, instance_uid: str) -> bytes:
    """Return the prefix of every record of one repository instance's uploads."""
    return _ROOT + f"{repository}:{instance_uid}/".encode()


def _legacy_scope(repository: str) -> bytes:
    """Return the prefix earlier versions kept a repository's uploads under (by name alone)."""
    return _ROOT + f"{repository}/".encode()


def _id_key(scope: bytes, upload_id: str) -> bytes:
    return scope + b"id/" + upload_id.encode()


def _index_key(upload: Upload) -> bytes:
    scope = _scope(upload.repository, upload.instance_uid)
    return scope + b"key/" + upload.key.encode() + b"\x00" + upload.upload_id.encode()


def _parts_prefix(upload: Upload) -> bytes:
    scope = _scope(upload.repository, upload.instance_uid)
    return scope + b"part/" + upload.upload_id.encode() + b"/"


def _upload_key(upload: Upload) -> bytes:
    return _id_key(_scope(upload.repository, upload.instance_uid), upload.upload_id)


def _done_key(scope: bytes, upload_id: str) -> bytes:
    return scope + b"done/" + upload_id.encode()


def _expiry_key(scope: bytes, expires: float, upload_id: str) -> bytes:
    # fixed-width hexadecimal, so that the index sorts by time
    return scope + f"expiry/{int(expires * 1_000_000):016x}/{upload_id}".encode()


class UploadStore:
    """Multipart uploads of every repository instance, in the shared KV.

    Args:
        kv: The KV the catalog uses.
        clock: The time, epoch seconds (completed uploads expire by it).
    """

    def __init__(self, kv: KV, *, clock: Callable[[], float] = time.time) -> None:
        self._kv = kv
        self._clock = clock

    def create(self, upload: Upload) -> None:
        """Record a new upload (its index entry first, so listing never misses a live upload)."""
        self._kv.set(_index_key(upload), upload.upload_id.encode())
        self._kv.set_if(_upload_key(upload), upload.encode(), None)

    def get(self, repo: Repository, upload_id: str) -> Upload | None:
        """Return the upload of ``repo``, or ``None`` when it has none by that ID.

        An upload never started, ended, or started in another instance of the repository (one
        deleted since) is none.
        """
        if not _is_upload_id(upload_id):
            return None
        try:
            raw = self._kv.get(_id_key(_scope(repo.id, repo.instance_uid), upload_id))
        except KeyNotFoundError:
            return None
        return Upload.decode(raw)

    def uploads(
        self, repo: Repository, *, prefix: str = "", key_marker: str = "", id_marker: str = ""
    ) -> Iterator[Upload]:
        """Yield the uploads of ``repo`` in key order, then by start time.

        Args:
            repo: The repository instance.
            prefix: Only keys starting with it.
            key_marker: Only keys after it; with ``id_marker``, also the uploads of this key
                whose ID sorts after ``id_marker``.
            id_marker: See ``key_marker``.
        """
        base = _scope(repo.id, repo.instance_uid) + b"key/"
        start = base + max(prefix, key_marker).encode()
        for index, value in self._kv.scan(base + prefix.encode(), start):
            key = index[len(base) :].rpartition(b"\x00")[0].decode()
            upload_id = value.decode()
            if key_marker and (key < key_marker or (key == key_marker and not id_marker)):
                continue
            if key == key_marker and upload_id <= id_marker:
                continue
            upload = self.get(repo, upload_id)
            if upload is None:
                # an index entry whose upload ended between the two writes of remove()
                continue
            yield upload

    def put_part(self, upload: Upload, part: Part) -> bool:
        """Record ``part`` (replacing an earlier upload of the same number).

        Returns:
            ``False`` if the upload ended meanwhile (or its repository was deleted): the record
            is then removed again, and the caller deletes the part's bytes (:meth:`remove` may
            have listed them already).
        """
        key = _parts_prefix(upload) + f"{part.number:05d}".encode()
        self._kv.set(key, part.encode())
        try:
            self._kv.get(_upload_key(upload))
        except KeyNotFoundError:
            self._kv.delete(key)
            return False
        return True

    def parts(self, upload: Upload, *, after: int = 0) -> Iterator[Part]:
        """Yield the parts of ``upload`` numbered above ``after``, in ascending order."""
        prefix = _parts_prefix(upload)
        start = prefix + f"{after + 1:05d}".encode() if after < MAX_PART_NUMBER else prefix + b"~"
        for _, value in self._kv.scan(prefix, start):
            yield Part.decode(value)

    def remove(self, upload: Upload, store: BlockStore) -> bool:
        """End ``upload``: forget it and delete its parts' bytes.

        Returns:
            ``False`` if another call ended it first (nothing done by this one).
        """
        try:
            self._kv.delete_if(_upload_key(upload), upload.encode())
        except KVPreconditionFailedError:
            return False
        self._kv.delete(_index_key(upload))
        for key, _ in list(self._kv.scan(_parts_prefix(upload))):
            self._kv.delete(key)
        for info in list(store.list(f"{PARTS_PREFIX}{upload.upload_id}/")):
            with contextlib.suppress(LakeMirrorError):
                # best effort: a part left behind is only space, never data of a live object
                store.delete(info.key)
        return True

    def remember(self, upload: Upload, *, parts: str, etag: str, location: str) -> Completed:
        """Record that ``upload`` completed, until :data:`COMPLETED_KEPT_SECONDS` from now.

        Called before :meth:`remove` ends the upload, so that a repeated completion finds one
        or the other. Records of the repository instance whose time has passed are removed.

        Args:
            upload: The upload, still in progress.
            parts: The :func:`parts_digest` of the part list it is completed with.
            etag: The completed object's ETag (unquoted).
            location: The ``Location`` the completion answers.
        """
        now = self._clock()
        scope = _scope(upload.repository, upload.instance_uid)
        done = Completed(
            repository=upload.repository,
            instance_uid=upload.instance_uid,
            upload_id=upload.upload_id,
            branch=upload.branch,
            path=upload.path,
            parts=parts,
            etag=etag,
            location=location,
            expires=now + COMPLETED_KEPT_SECONDS,
        )
        # the index entry first: a record is never left without the entry that expires it
        self._kv.set(_expiry_key(scope, done.expires, done.upload_id), b"")
        self._kv.set(_done_key(scope, done.upload_id), done.encode())
        self._forget_expired(scope, now)
        return done

    def completed(self, repo: Repository, upload_id: str) -> Completed | None:
        """Return the completed upload ``upload_id`` of ``repo``, or ``None``.

        An upload completed more than :data:`COMPLETED_KEPT_SECONDS` ago, never completed, or
        completed in another instance of the repository is none.
        """
        if not _is_upload_id(upload_id):
            return None
        try:
            raw = self._kv.get(_done_key(_scope(repo.id, repo.instance_uid), upload_id))
        except KeyNotFoundError:
            return None
        done = Completed.decode(raw)
        return done if done.expires > self._clock() else None

    def _forget_expired(self, scope: bytes, now: float) -> None:
        index = scope + b"expiry/"
        for key, _ in self._kv.scan(index):
            stamp, _, upload_id = key[len(index) :].decode().partition("/")
            if int(stamp, 16) / 1_000_000 > now:
                break
            done_key = _done_key(scope, upload_id)
            with contextlib.suppress(KeyNotFoundError):
                # completed twice (a race of two completions): the later time decides
                if Completed.decode(self._kv.get(done_key)).expires <= now:
                    self._kv.delete(done_key)
            self._kv.delete(key)

    def delete_repository(self, repo: Repository) -> None:
        """Delete every upload record of the deleted repository instance ``repo`` (idempotent).

        Records of completed uploads go too.

        The records an earlier version kept under the repository's name go too: whichever
        instance they belonged to, nothing reads them any more. The parts' bytes stay in the
        storage namespace, which deleting a repository leaves as it is (as lakeFS does); no
        object refers to them, so ``_lakefs/multipart/`` may be removed from it by hand.
        """
        for prefix in (_scope(repo.id, repo.instance_uid), _legacy_scope(repo.id)):
            for key in [k for k, _ in self._kv.scan(prefix)]:
                self._kv.delete(key)


def register_uploads_cleanup(registry: CleanupRegistry, kv: KV) -> None:
    """Have deleted repositories' multipart upload records removed with them.

    The parts' bytes stay in the storage namespace, as the rest of it does.
    """
    registry.add_repository_cleanup("multipart uploads", UploadStore(kv).delete_repository)
