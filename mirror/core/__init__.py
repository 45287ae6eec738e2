"""The versioning core: lakeFS semantics over a KV store and object stores.

Start with :class:`Catalog`; :func:`open_embedded` builds one on the embedded default
(SQLite + a local directory) and :func:`open_memory` one in memory for tests.

Names are imported on first use (PEP 562), so that ``mirror.core.errors`` or ``mirror.core.uri``
can be imported without the columnar tree code (pyarrow, pandas): the command line's client
commands start in a fraction of the time.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from mirror.core.catalog import (
        CHERRY_PICK_ORIGIN,
        FIRST_COMMIT_MESSAGE,
        MERGE_STRATEGY_KEY,
        Catalog,
        CommitResult,
        ListResult,
        ResolvedRef,
    )
    from mirror.core.committed import ChunkingParams, RangeInfo, WriteStats
    from mirror.core.embedded import open_embedded, open_memory
    from mirror.core.errors import (
        BranchExistsError,
        BranchNotFoundError,
        CommitNotFoundError,
        DirtyBranchError,
        InvalidNameError,
        InvalidPathError,
        InvalidRefError,
        InvalidURIError,
        MergeConflictError,
        NoChangesError,
        NoMergeBaseError,
        ObjectNotFoundError,
        RefNotFoundError,
        RefPreconditionFailedError,
        RepositoryExistsError,
        RepositoryNotFoundError,
        RepositoryReadOnlyError,
        TagExistsError,
        TagNotFoundError,
        TooManyTriesError,
    )
    from mirror.core.ids import (
        BranchID,
        CommitID,
        MetaRangeID,
        RangeID,
        Ref,
        RepositoryID,
        StagingToken,
        TagID,
        commit_id,
        entry_identity,
    )
    from mirror.core.merge import MergeStrategy
    from mirror.core.model import (
        AddressType,
        Branch,
        Commit,
        DiffEntry,
        DiffType,
        Entry,
        ObjectStat,
        Repository,
    )
    from mirror.core.refexpr import RefExpr, parse_ref
    from mirror.core.uri import LakeFSURI, parse_uri

_MODULES: dict[str, tuple[str, ...]] = {
    "mirror.core.catalog": (
        "CHERRY_PICK_ORIGIN",
        "FIRST_COMMIT_MESSAGE",
        "MERGE_STRATEGY_KEY",
        "Catalog",
        "CommitResult",
        "ListResult",
        "ResolvedRef",
    ),
    "mirror.core.committed": (
        "ChunkingParams",
        "RangeInfo",
        "WriteStats",
    ),
    "mirror.core.embedded": (
        "open_embedded",
        "open_memory",
    ),
    "mirror.core.errors": (
        "BranchExistsError",
        "BranchNotFoundError",
        "CommitNotFoundError",
        "DirtyBranchError",
        "InvalidNameError",
        "InvalidPathError",
        "InvalidRefError",
        "InvalidURIError",
        "MergeConflictError",
        "NoChangesError",
        "NoMergeBaseError",
        "ObjectNotFoundError",
        "RefNotFoundError",
        "RefPreconditionFailedError",
        "RepositoryExistsError",
        "RepositoryNotFoundError",
        "RepositoryReadOnlyError",
        "TagExistsError",
        "TagNotFoundError",
        "TooManyTriesError",
    ),
    "mirror.core.ids": (
        "BranchID",
        "CommitID",
        "MetaRangeID",
        "RangeID",
        "Ref",
        "RepositoryID",
        "StagingToken",
        "TagID",
        "commit_id",
        "entry_identity",
    ),
    "mirror.core.merge": ("MergeStrategy",),
    "mirror.core.model": (
        "AddressType",
        "Branch",
        "Commit",
        "DiffEntry",
        "DiffType",
        "Entry",
        "ObjectStat",
        "Repository",
    ),
    "mirror.core.refexpr": (
        "RefExpr",
        "parse_ref",
    ),
    "mirror.core.uri": (
        "LakeFSURI",
        "parse_uri",
    ),
}
_LAZY = {name: module for module, members in _MODULES.items() for name in members}

__all__ = [
    "CHERRY_PICK_ORIGIN",
    "FIRST_COMMIT_MESSAGE",
    "MERGE_STRATEGY_KEY",
    "AddressType",
    "Branch",
    "BranchExistsError",
    "BranchID",
    "BranchNotFoundError",
    "Catalog",
    "ChunkingParams",
    "Commit",
    "CommitID",
    "CommitNotFoundError",
    "CommitResult",
    "DiffEntry",
    "DiffType",
    "DirtyBranchError",
    "Entry",
    "InvalidNameError",
    "InvalidPathError",
    "InvalidRefError",
    "InvalidURIError",
    "LakeFSURI",
    "ListResult",
    "MergeConflictError",
    "MergeStrategy",
    "MetaRangeID",
    "NoChangesError",
    "NoMergeBaseError",
    "ObjectNotFoundError",
    "ObjectStat",
    "RangeID",
    "RangeInfo",
    "Ref",
    "RefExpr",
    "RefNotFoundError",
    "RefPreconditionFailedError",
    "Repository",
    "RepositoryExistsError",
    "RepositoryID",
    "RepositoryNotFoundError",
    "RepositoryReadOnlyError",
    "ResolvedRef",
    "StagingToken",
    "TagExistsError",
    "TagID",
    "TagNotFoundError",
    "TooManyTriesError",
    "WriteStats",
    "commit_id",
    "entry_identity",
    "open_embedded",
    "open_memory",
    "parse_ref",
    "parse_uri",
]


def __getattr__(name: str) -> Any:
    """Import ``name`` from the module that defines it, on first use."""
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
