"""Where LakeMirror's error tree becomes S3 errors, and where write targets are checked.

An S3 client branches on the ``<Code>`` and the status, so every error the catalog, the block
stores or the KV raise is answered with S3's code for it (lakeFS's gateway codes where lakeFS has
its own), S3's text first and our detail after. Where lakeFS's gateway answers a 500 for a client
error (a write to ``main~1``, an unknown upload), the right 4xx is answered instead.

Two answers depend on the repository: a write refused because the repository is a mirror names the
mirror and its source (``AccessDenied``), and a file missing from a mirror's storage has not been
replicated yet (``503 SlowDown`` with ``Retry-After``, clients retry) rather than gone.

The functions taking a catalog are blocking; call them from a worker thread
(:meth:`~mirror.gateway.context.S3Request.run_sync` or :func:`call`).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, TypeVar

import anyio.to_thread

from mirror.block.errors import BlockNotFoundError, InvalidRangeError
from mirror.core.committed import METADATA_PREFIX
from mirror.core.errors import (
    BranchNotFoundError,
    InvalidNameError,
    InvalidPathError,
    InvalidRefError,
    LakeFSText,
    NotYetReplicatedError,
    ProtectedBranchError,
    RepositoryNotFoundError,
    RepositoryReadOnlyError,
    TooManyTriesError,
)
from mirror.core.model import Repository
from mirror.core.protection import check_staging_write
from mirror.core.validate import MAX_PATH_LENGTH, validate_branch_id
from mirror.errors import (
    AlreadyExistsError,
    AuthenticationError,
    ConflictError,
    InvalidValueError,
    LakeMirrorError,
    NotFoundError,
    PermissionDeniedError,
    PreconditionFailedError,
    ReadOnlyError,
    UnavailableError,
)
from mirror.gateway.errors import S3Code, S3Error

if TYPE_CHECKING:
    from mirror.core.catalog import Catalog
    from mirror.gateway.context import S3Request

__all__ = [
    "MAX_KEY_BYTES",
    "RETRY_AFTER_SECONDS",
    "WriteTarget",
    "call",
    "check_path",
    "mirror_write_error",
    "resolve_write_target",
    "s3_errors",
    "to_s3_error",
]

log = logging.getLogger("mirror.gateway")

T = TypeVar("T")

MAX_KEY_BYTES = 1024
"""S3's longest key, in UTF-8 bytes (``<ref>/<path>`` as a client sends it)."""

RETRY_AFTER_SECONDS = 1
"""The ``Retry-After`` of a ``SlowDown``: replication and throttling clear within seconds."""


def _with(code: S3Code, detail: str) -> str:
    """Return S3's text for ``code`` followed by our detail."""
    if not detail:
        return code.description
    return f"{code.description}: {detail}"


def _repository(catalog: Catalog | None, name: str | None) -> Repository | None:
    if catalog is None or not name:
        return None
    try:
        return catalog.get_repository(name)
    except LakeMirrorError:
        return None


def _slow_down(detail: str, *, bucket: str | None, key: str | None) -> S3Error:
    return S3Error(
        S3Code.SLOW_DOWN,
        _with(S3Code.SLOW_DOWN, detail),
        bucket=bucket,
        key=key,
        headers={"Retry-After": str(RETRY_AFTER_SECONDS)},
    )


def mirror_write_error(repo: Repository, *, key: str | None = None) -> S3Error:
    """Return the refusal of a write to the read-only repository ``repo``.

    A mirror answers ``AccessDenied`` naming itself and its source, so that a client's message
    says where to write instead; another read-only repository answers lakeFS's
    ``ErrReadOnlyRepository``.
    """
    if repo.mirror_of:
        detail = (
            f"repository {repo.id} is a mirror (read-only) of {repo.mirror_of}; "
            "write to the source repository in its own region"
        )
        return S3Error(
            S3Code.ACCESS_DENIED, _with(S3Code.ACCESS_DENIED, detail), bucket=repo.id, key=key
        )
    return S3Error(
        S3Code.READ_ONLY_REPOSITORY,
        _with(S3Code.READ_ONLY_REPOSITORY, f"repository {repo.id} is read-only"),
        bucket=repo.id,
        key=key,
    )


def to_s3_error(
    exc: BaseException,
    *,
    bucket: str | None,
    key: str | None,
    catalog: Catalog | None = None,
    write: bool = False,
) -> S3Error:
    """Return the S3 error answering ``exc``.

    Args:
        exc: What the operation raised.
        bucket: The bucket (repository) the request names.
        key: The object path the request names, without its ref (S3's ``<Key>``).
        catalog: When given, the repository is read to tell a mirror from another read-only
            repository, and a file not yet replicated from one that is gone (blocking).
        write: Whether the operation writes: a missing branch is then lakeFS's ``NoSuchBucket``
            (the target is not writable), on a read it is ``NoSuchKey``.
    """
    if isinstance(exc, S3Error):
        return exc
    detail = str(exc)

    def err(code: S3Code, text: str = detail) -> S3Error:
        return S3Error(code, _with(code, text), bucket=bucket, key=key)

    if isinstance(exc, RepositoryNotFoundError):
        return err(S3Code.NO_SUCH_BUCKET)
    if isinstance(exc, RepositoryReadOnlyError):
        repo = _repository(catalog, exc.repository)
        if repo is not None:
            return mirror_write_error(repo, key=key)
        return err(S3Code.READ_ONLY_REPOSITORY)
    if isinstance(exc, ProtectedBranchError):
        return err(S3Code.PROTECTED_BRANCH)
    if isinstance(exc, ReadOnlyError):
        return err(S3Code.READ_ONLY_REPOSITORY)
    if isinstance(exc, NotYetReplicatedError):
        return _slow_down(detail, bucket=bucket, key=key)
    if isinstance(exc, BlockNotFoundError):
        repo = _repository(catalog, bucket)
        what = (
            f"metadata file {exc.key!r}" if exc.key.startswith(METADATA_PREFIX) else "object data"
        )
        if repo is not None and repo.read_only:
            return _slow_down(
                f"{what} not yet replicated to this region; retry later", bucket=bucket, key=key
            )
        if exc.key.startswith(METADATA_PREFIX):
            log.error("metadata file missing from storage: %s", exc.key)
            return err(S3Code.INTERNAL_ERROR, f"{what} is missing from storage")
        # lakeFS: the entry is there but its data is gone (garbage-collected)
        return err(S3Code.NO_SUCH_VERSION, "the object's data is gone from storage")
    if isinstance(exc, BranchNotFoundError) and write:
        return err(S3Code.NO_SUCH_BUCKET)
    if isinstance(exc, NotFoundError):
        return err(S3Code.NO_SUCH_KEY)
    if isinstance(exc, InvalidRangeError):
        return err(S3Code.INVALID_RANGE)
    if isinstance(exc, InvalidPathError) and "exceeds" in detail:
        return err(S3Code.KEY_TOO_LONG)
    if isinstance(exc, InvalidRefError | InvalidNameError) and not write:
        # a malformed ref names no object: the key does not exist
        return err(S3Code.NO_SUCH_KEY)
    if isinstance(exc, InvalidValueError):
        return err(S3Code.INVALID_ARGUMENT)
    if isinstance(exc, PreconditionFailedError):
        return err(S3Code.PRECONDITION_FAILED)
    if isinstance(exc, PermissionDeniedError | AuthenticationError):
        return err(S3Code.ACCESS_DENIED)
    if isinstance(exc, TooManyTriesError | UnavailableError):
        return _slow_down(detail, bucket=bucket, key=key)
    if isinstance(exc, AlreadyExistsError | ConflictError):
        return err(S3Code.INVALID_REQUEST)
    if isinstance(exc, LakeFSText):
        log.warning("gateway answered 500 for: %s", detail)
    else:
        log.error("unexpected error: %s", type(exc).__name__, exc_info=exc)
    # never the exception text: an unexpected error may carry internals
    return S3Error(S3Code.INTERNAL_ERROR, bucket=bucket, key=key)


@contextmanager
def s3_errors(
    bucket: str | None,
    key: str | None,
    *,
    catalog: Catalog | None = None,
    write: bool = False,
) -> Iterator[None]:
    """Re-raise LakeMirror's errors raised inside the block as :class:`S3Error` (blocking).

    Exceptions outside LakeMirror's tree (bugs) pass through: the app answers them with
    ``InternalError`` and logs them with the request ID.
    """
    try:
        yield
    except S3Error:
        raise
    except LakeMirrorError as exc:
        raise to_s3_error(exc, bucket=bucket, key=key, catalog=catalog, write=write) from exc


async def call(
    req: S3Request,
    fn: Callable[..., T],
    *args: object,
    key: str | None = None,
    write: bool = False,
    reads: bool = False,
) -> T:
    """Run the blocking ``fn(*args)`` in a worker thread, its errors mapped by :func:`s3_errors`.

    Args:
        req: The request (its bucket and catalog name the error).
        fn: The catalog call.
        *args: Its arguments.
        key: The object path the error names (S3's ``<Key>``).
        write: Whether the error is that of a write (see :func:`to_s3_error`).
        reads: ``fn`` only reads (the KV, the bucket's files): it runs on the event loop
            when :meth:`S3Request.reads_inline` allows.
    """
    catalog = req.state.catalog

    def run() -> T:
        with s3_errors(req.bucket, key, catalog=catalog, write=write):
            return fn(*args)

    if reads and req.reads_inline():
        return run()
    return await anyio.to_thread.run_sync(run)


def check_path(ref: str, path: str, *, bucket: str | None) -> None:
    """Refuse an object path no write may create.

    Raises:
        S3Error: KeyTooLongError over 1024 bytes; InvalidArgument for an empty path, a leading
            ``/``, a ``.`` or ``..`` segment, or a NUL.
    """
    key_bytes = len(f"{ref}/{path}".encode(errors="surrogatepass"))
    if key_bytes > MAX_KEY_BYTES or len(path.encode(errors="surrogatepass")) > MAX_PATH_LENGTH:
        raise S3Error(
            S3Code.KEY_TOO_LONG,
            _with(S3Code.KEY_TOO_LONG, f"{key_bytes} bytes, at most {MAX_KEY_BYTES}"),
            bucket=bucket,
            key=path[:64],
        )

    def invalid(why: str) -> S3Error:
        return S3Error(
            S3Code.INVALID_ARGUMENT,
            _with(S3Code.INVALID_ARGUMENT, f"object path {path!r} {why}"),
            bucket=bucket,
            key=path,
        )

    if not path:
        raise invalid("is empty: a key is <ref>/<path>")
    if path.startswith("/"):
        raise invalid("starts with '/'")
    if "\x00" in path:
        raise invalid("contains NUL")
    segments = path.split("/")
    if any(s in (".", "..") for s in segments):
        raise invalid("has a '.' or '..' segment")
    try:
        path.encode()
    except UnicodeEncodeError as exc:
        raise invalid("is not valid UTF-8") from exc


@dataclass(frozen=True)
class WriteTarget:
    """Where a write goes: a branch of a writable repository, and a checked path.

    Attributes:
        repository: The repository record.
        branch: The branch.
        path: The object path.
    """

    repository: Repository
    branch: str
    path: str


def resolve_write_target(
    catalog: Catalog, repository: str | Repository, ref: str, path: str
) -> WriteTarget:
    """Check a write of ``path`` on ``ref`` of a repository before its body is read.

    ``repository``: the bucket's name, or its record just read.

    As lakeFS: the repository must exist, must not be read-only (checked first), and ``ref``
    must be a branch (whose protection rules allow writes). A tag or a commit ID (names a
    branch could have) answers lakeFS's ``NoSuchBucket``; an expression such as ``main~1``
    answers ``InvalidArgument`` (lakeFS: a 500). Blocking.

    Raises:
        S3Error: NoSuchBucket, AccessDenied / ErrReadOnlyRepository, InvalidArgument,
            KeyTooLongError, ErrWriteToProtectedBranch.
    """
    bucket = repository if isinstance(repository, str) else repository.id
    with s3_errors(bucket, path, catalog=catalog, write=True):
        repo = catalog.get_repository(repository)
    if repo.read_only:
        raise mirror_write_error(repo, key=path)
    check_path(ref, path, bucket=bucket)
    not_branch = f"{ref!r} is not a branch of repository {bucket}; writes go to branches only"
    try:
        validate_branch_id(ref)
    except InvalidNameError as exc:
        raise S3Error(
            S3Code.INVALID_ARGUMENT,
            _with(S3Code.INVALID_ARGUMENT, not_branch),
            bucket=bucket,
            key=path,
        ) from exc
    with s3_errors(bucket, path, catalog=catalog, write=True):
        exists = catalog.branch_exists(repo, ref)
    if not exists:
        raise S3Error(
            S3Code.NO_SUCH_BUCKET, _with(S3Code.NO_SUCH_BUCKET, not_branch), bucket=bucket, key=path
        )
    with s3_errors(bucket, path, catalog=catalog, write=True):
        check_staging_write(catalog.kv, repo, ref)
    return WriteTarget(repo, ref, path)
