"""Importing objects that already lie in storage: one commit replacing destination prefixes.

An import lists each source (an object, or every object under a prefix) with the block store of
the repository's own scheme, maps every key onto its destination path, and commits directly on
the branch: everything under each destination prefix is replaced by what the sources hold
there, so keys no source lists any more disappear. It is a plain string-prefix match, as in
lakeFS: importing into ``a/f1`` also drops ``a/f10``.

The whole import is streamed (:mod:`mirror.core.import_listing`): the sources' listings,
mapped and merged in path order, and the deletions under the destination prefixes become one
sorted change stream that :func:`~mirror.core.tree_writer.apply_changes` writes range by range,
listed objects arriving as runs of columns rather than an entry each. Memory therefore holds
about one range of records and a batch or two of listed objects, never the whole listing; and
the ranges written are exactly those the core writes for the same records.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from mirror.block.resolver import split_namespace
from mirror.core.commits import new_commit
from mirror.core.committed import WriteStats
from mirror.core.errors import (
    DirtyBranchError,
    LakeFSText,
    RefPreconditionFailedError,
    RepositoryReadOnlyError,
)
from mirror.core.hooks import HookEvent
from mirror.core.ids import BranchID
from mirror.core.import_listing import (
    ImportProgress,
    ImportSource,
    ImportTally,
    InvalidImportSourceError,
    SourceObject,
    import_changes,
    import_runs,
    list_source,
    split_source,
    tallied_runs,
)
from mirror.core.model import Branch, Commit, Repository
from mirror.core.repository_metadata import RepositoryMetadataStore
from mirror.core.threeway import MERGE_STRATEGY_KEY
from mirror.core.tree_writer import apply_changes
from mirror.core.validate import validate_branch_id, validate_metadata, validate_path
from mirror.errors import InvalidValueError, LakeMirrorError, PermissionDeniedError

if TYPE_CHECKING:
    from mirror.core.catalog import Catalog

__all__ = [
    "DEFAULT_IMPORT_MESSAGE",
    "IMPORT_STRATEGY",
    "LAST_IMPORT_TIMESTAMP",
    "ImportCanceledError",
    "ImportNotSupportedError",
    "ImportResult",
    "ImportSource",
    "InvalidImportSourceError",
    "InvalidImportTypeError",
    "SourceObject",
    "import_changes",
    "import_objects",
    "import_runs",
    "list_source",
    "require_clean",
    "validate_sources",
]

LAST_IMPORT_TIMESTAMP = ".lakefs.last.import.timestamp"
"""The repository metadata key holding the time of the last import (Unix seconds, lakeFS's)."""
DEFAULT_IMPORT_MESSAGE = "Import objects"
"""The commit message of an import that gives none (lakeFS's)."""
IMPORT_STRATEGY = "source-wins"
"""The ``.lakefs.merge.strategy`` an import commit records (lakeFS's)."""


class InvalidImportTypeError(LakeFSText, InvalidValueError):
    """A source type other than ``common_prefix`` or ``object``."""

    lakefs_text = "invalid import type"


class ImportNotSupportedError(LakeFSText, PermissionDeniedError):
    """The repository's storage cannot be imported from (an in-memory namespace)."""

    lakefs_text = "import is not supported for this storage"


class ImportCanceledError(LakeFSText):
    """The import was canceled while it ran (lakeFS reports ``import error: Canceled``)."""

    lakefs_text = "Canceled"


@dataclass(frozen=True, slots=True)
class ImportResult:
    """A finished import: its commit, how many objects it ingested and what writing cost."""

    commit: Commit
    ingested: int
    stats: WriteStats


def _normalised(uri: str) -> str:
    scheme, rest = split_namespace(uri)
    return f"{scheme}://{rest}/"


def validate_sources(repo: Repository, sources: Sequence[ImportSource]) -> None:
    """Check the import's sources against the repository before anything runs.

    Raises:
        InvalidImportTypeError: a type other than ``common_prefix`` or ``object``.
        ImportNotSupportedError: the namespace's scheme cannot be imported from.
        InvalidImportSourceError: a source inside the namespace, holding it, of another
            scheme, or malformed.
        InvalidPathError: a bad destination.
    """
    if not sources:
        raise InvalidValueError("paths: at least one import path is required")
    ns_scheme, _ = split_namespace(repo.storage_namespace)
    if ns_scheme == "mem":
        raise ImportNotSupportedError(f"namespace {repo.storage_namespace}")
    namespace = _normalised(repo.storage_namespace)
    for source in sources:
        if source.type not in ("common_prefix", "object"):
            raise InvalidImportTypeError(source.type)
        try:
            scheme, _, key = split_source(source.path)
        except LakeMirrorError as exc:
            raise InvalidImportSourceError(f"import path ({source.path}) is malformed") from exc
        if scheme != ns_scheme:
            raise InvalidImportSourceError(
                f"import path ({source.path}) has scheme {scheme!r}, the repository namespace "
                f"({repo.storage_namespace}) {ns_scheme!r}"
            )
        target = _normalised(source.path)
        if target.startswith(namespace) or namespace.startswith(target):
            raise InvalidImportSourceError(
                f"import path ({source.path}) in repository namespace "
                f"({repo.storage_namespace}) is prohibited"
            )
        if source.type == "object" and (not key or key.endswith("/")):
            raise InvalidImportSourceError(f"import path ({source.path}) names no object")
        if source.type == "object" or source.destination:
            validate_path(source.destination)


def import_objects(
    catalog: Catalog,
    repository: str,
    branch: str,
    sources: Sequence[ImportSource],
    *,
    committer: str,
    message: str,
    metadata: Mapping[str, str] | None,
    progress: ImportProgress | None = None,
    before_commit: Callable[[], None] | None = None,
    clock: Callable[[], float] = time.time,
) -> ImportResult:
    """Import ``sources`` into ``branch`` as one commit on its head.

    ``progress`` is told the count of ingested objects as they stream; ``before_commit`` runs
    once the tree is written, just before the branch moves (either may raise
    :class:`ImportCanceledError` to stop, leaving the branch as it was).

    Raises:
        RepositoryReadOnlyError: the repository is a mirror.
        BranchNotFoundError: no such branch.
        DirtyBranchError: the branch has uncommitted changes.
        InvalidImportSourceError: a source is prohibited or unusable.
        HookAbortError: a pre-commit hook failed.
        RefPreconditionFailedError: the branch moved while the import ran, every time.
    """
    repo = catalog.get_repository(repository)
    if repo.read_only:
        raise RepositoryReadOnlyError(repo.id)
    branch_id = validate_branch_id(branch)
    meta = dict(validate_metadata(metadata))
    meta[MERGE_STRATEGY_KEY] = IMPORT_STRATEGY
    validate_sources(repo, sources)
    store = catalog.committed(repo)
    message = message or DEFAULT_IMPORT_MESSAGE
    pre = HookEvent(
        "pre-commit",
        repo.id,
        branch_id=branch_id,
        source_ref=branch_id,
        commit_message=message,
        committer=committer,
        commit_metadata=dict(meta),
    )
    # lakeFS fires the commit hooks of the import's commit; a failing pre-commit hook aborts it
    run = catalog.hooks.pre(pre)
    last: RefPreconditionFailedError | None = None
    for _ in range(3):
        current, raw = catalog.refs.get_branch_raw(repo, branch_id)
        _clean(catalog, current, branch_id)
        parent = catalog.refs.get_commit(repo, current.commit_id)
        tally = ImportTally(progress)
        changes = tallied_runs(
            sources,
            catalog.blocks.open,
            functools.partial(store.iterate, parent.metarange_id),
            int(clock()),
            tally,
        )
        mid, stats = apply_changes(store, catalog.chunking, parent.metarange_id, changes)
        commit = new_commit(
            committer,
            message,
            mid,
            int(clock()),
            meta,
            (parent.id,),
            parent.generation + 1,
        )
        if before_commit is not None:
            before_commit()
        catalog.refs.add_commit(repo, commit)
        moved = Branch(branch_id, commit.id, current.staging_token, current.sealed_tokens)
        try:
            catalog.refs.set_branch_if(repo, moved, raw)
        except RefPreconditionFailedError as exc:
            last = exc  # the branch moved meanwhile: import again onto its new head
            continue
        RepositoryMetadataStore(catalog.kv).set(
            repo, {LAST_IMPORT_TIMESTAMP: str(commit.creation_date)}
        )
        catalog.hooks.post(
            replace(pre, event_type="post-commit", source_ref=commit.id, commit_id=commit.id), run
        )
        return ImportResult(commit, tally.count, stats)
    assert last is not None
    raise last


def _clean(catalog: Catalog, branch: Branch, branch_id: BranchID) -> None:
    if branch.sealed_tokens or not catalog.staging.is_empty(branch.staging_token):
        raise DirtyBranchError(f"import into branch {branch_id!r}")


def require_clean(catalog: Catalog, repository: str, branch: str) -> None:
    """Check that ``branch`` exists and has no uncommitted changes.

    Raises:
        BranchNotFoundError: no such branch.
        DirtyBranchError: the branch has staged changes.
    """
    branch_id = validate_branch_id(branch)
    _clean(catalog, catalog.get_branch(repository, branch_id), branch_id)
