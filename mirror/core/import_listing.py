"""Listing import sources: their objects mapped onto destination paths, as sorted changes.

Each source listing is sorted (stores list in key order, sorted per directory at most), mapped
keys keep that order, several sources are merged as sorted iterators, and the merged stream
plus the deletions of base keys under the destination prefixes become one sorted change stream
for :func:`~mirror.core.tree_writer.apply_changes`.

:func:`import_runs` gives the listed objects as runs of columns: up to a thousand objects
become one :class:`~mirror.core.columnar.RangeData` whose encodings and identities are computed
for the whole batch (:func:`~mirror.core.record_columns.rows_of_columns`), and the tree writer
splits ranges out of it as it would out of the same records one by one.
:func:`import_changes` is the same stream record by record, with an
:class:`~mirror.core.model.Entry` per object.
"""

from __future__ import annotations

import bisect
import heapq
import itertools
import operator
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Literal, Protocol, TypeVar

from mirror.block.protocol import BlockStore, ObjectInfo
from mirror.block.resolver import split_namespace
from mirror.core.columnar import Run
from mirror.core.errors import LakeFSText
from mirror.core.model import DEFAULT_CONTENT_TYPE, AddressType, Entry
from mirror.core.record_columns import rows_of_columns
from mirror.errors import InvalidValueError, LakeMirrorError

__all__ = [
    "Change",
    "Columns",
    "ImportProgress",
    "ImportSource",
    "ImportTally",
    "InvalidImportSourceError",
    "SourceObject",
    "import_changes",
    "import_runs",
    "list_source",
    "split_source",
    "tallied_runs",
]

SourceType = Literal["common_prefix", "object"]
Change = tuple[str, Entry | None]
Columns = tuple[list[str], list[str], list[int], list[str], list[int]]
"""Objects mapped onto the destination: paths, addresses, sizes, etags and mtimes."""
_T = TypeVar("_T")

_BATCH = 1000
"""How many listed objects a batch of columns holds at most."""


class InvalidImportSourceError(LakeFSText, InvalidValueError):
    """A source lies inside the repository's own namespace (or holds it), or is unusable.

    lakeFS puts its text last here: ``import path (…) in repository namespace (…) is
    prohibited: invalid import source``.
    """

    lakefs_text = "invalid import source"

    def __init__(self, detail: str) -> None:
        LakeMirrorError.__init__(self, f"{detail}: {self.lakefs_text}")


@dataclass(frozen=True, slots=True)
class ImportSource:
    """One thing to import.

    Attributes:
        type: ``common_prefix`` (every object under ``path``) or ``object`` (exactly ``path``).
        path: The source URI (``s3://bucket/prefix/``, ``local://dir/``...).
        destination: The path in the branch the objects land under (or at, for an object).
    """

    type: str
    path: str
    destination: str


@dataclass(frozen=True, slots=True)
class SourceObject:
    """One listed object of a source: its key in its store, size, checksum and mtime."""

    key: str
    size: int
    etag: str
    mtime: int


ImportProgress = Callable[[int], None]
"""Told the running count of ingested objects.

It may raise :class:`~mirror.core.imports.ImportCanceledError` to stop the import.
"""


class _ListedBatch(Protocol):
    """Objects as a store that lists details in batches yields them."""

    @property
    def keys(self) -> list[str]: ...
    @property
    def sizes(self) -> list[int]: ...
    @property
    def etags(self) -> list[str]: ...
    @property
    def mtimes(self) -> list[int]: ...


class _Listed(Protocol):
    """An object as a store that lists details yields it (``list_detailed``)."""

    @property
    def key(self) -> str: ...
    @property
    def size(self) -> int: ...
    @property
    def etag(self) -> str: ...
    @property
    def mtime(self) -> int: ...


def split_source(uri: str) -> tuple[str, str, str]:
    """Return ``(scheme, store namespace, key)`` of a URI, splitting as full addresses are read.

    The store is the URI's first path component (a bucket, or a top directory), as
    :func:`~mirror.core.objects.open_entry` opens it when the imported entries are read.
    """
    scheme, rest = split_namespace(uri)
    lead = "/" if uri.split("://", 1)[1].startswith("/") else ""
    root, _, key = rest.lstrip("/").partition("/")
    if uri.endswith("/") and key:
        key += "/"
    return scheme, f"{scheme}://{lead}{root}", key


def list_source(store: BlockStore, prefix: str, now: int) -> Iterator[SourceObject]:
    """Yield the objects of ``store`` under ``prefix`` in key order, with checksums and mtimes.

    Stores that list details (a ``list_detailed`` method) give their modification times; for
    others the listing's etag is kept and the mtime is the import's time.
    """
    detailed: Callable[[str], Iterator[_Listed]] | None = getattr(store, "list_detailed", None)
    if detailed is not None:
        for obj in detailed(prefix):
            yield SourceObject(obj.key, obj.size, obj.etag, obj.mtime)
        return
    info: ObjectInfo
    for info in store.list(prefix):
        etag = info.etag or store.head(info.key).etag
        yield SourceObject(info.key, info.size, etag, now)


def _mapped(
    source: ImportSource, open_store: Callable[[str], BlockStore], now: int
) -> Iterator[tuple[str, Entry]]:
    """Yield ``(destination path, entry)`` of one source, in path order."""
    _, namespace, key = split_source(source.path)
    store = open_store(namespace)
    base = namespace.rstrip("/") + "/"
    if source.type == "object":
        info = store.head(key)
        yield source.destination, _entry(base, SourceObject(key, info.size, info.etag, now))
        return
    previous = ""
    for obj in list_source(store, key, now):
        if obj.key <= previous:
            raise InvalidImportSourceError(
                f"import path ({source.path}) listed {obj.key!r} after {previous!r}: the "
                "store's listing is not in key order"
            )
        previous = obj.key
        yield source.destination + obj.key[len(key) :], _entry(base, obj)


def _entry(base: str, obj: SourceObject) -> Entry:
    return Entry(
        address=base + obj.key,
        size=obj.size,
        checksum=obj.etag,
        mtime=obj.mtime,
        content_type=DEFAULT_CONTENT_TYPE,
        address_type=AddressType.FULL,
    )


def _prefixes(sources: Sequence[ImportSource]) -> list[str]:
    """Return the destination prefixes to replace, sorted, none inside another."""
    out: list[str] = []
    for p in sorted({s.destination for s in sources}):
        if out and p.startswith(out[-1]):
            continue
        out.append(p)
    return out


def _dedup_last(merged: Iterable[tuple[str, int, _T]]) -> Iterator[tuple[str, _T]]:
    """Keep one record per path: the one of the latest source listing it."""
    pending: tuple[str, int, _T] | None = None
    for item in merged:
        if pending is not None and pending[0] != item[0]:
            yield pending[0], pending[2]
        pending = item
    if pending is not None:
        yield pending[0], pending[2]


def _removed(
    sources: Sequence[ImportSource], base: Callable[[str], Iterator[tuple[str, Entry]]]
) -> Iterator[str]:
    """Yield the keys of the base tree under the destination prefixes, in order."""
    for prefix in _prefixes(sources):
        for key, _ in base(prefix):
            if not key.startswith(prefix):
                break
            yield key


def import_changes(
    sources: Sequence[ImportSource],
    open_store: Callable[[str], BlockStore],
    base: Callable[[str], Iterator[tuple[str, Entry]]],
    now: int,
    progress: ImportProgress | None = None,
) -> Iterator[Change]:
    """Yield the sorted changes an import makes to a tree.

    Args:
        sources: What to import.
        open_store: Opens the store of a namespace URI.
        base: Iterates the base tree's records from a key on.
        now: The mtime of objects whose store lists none.
        progress: Told the running count of ingested objects.
    """
    imported: Iterator[tuple[str, Entry]]
    if len(sources) == 1:  # one listing is in strict path order already: nothing to merge
        imported = _mapped(sources[0], open_store, now)
    else:
        streams = [
            ((path, i, entry) for path, entry in _mapped(s, open_store, now))
            for i, s in enumerate(sources)
        ]
        imported = _dedup_last(heapq.merge(*streams, key=lambda t: (t[0], t[1])))

    gone = _removed(sources, base)
    next_gone = next(gone, None)
    count = 0
    for path, entry in imported:
        while next_gone is not None and next_gone < path:
            yield next_gone, None
            next_gone = next(gone, None)
        if next_gone == path:
            next_gone = next(gone, None)
        yield path, entry
        count += 1
        if progress is not None:
            progress(count)
    while next_gone is not None:
        yield next_gone, None
        next_gone = next(gone, None)


class ImportTally:
    """Count imported objects as they are listed, telling ``progress`` each count."""

    __slots__ = ("_progress", "count")

    def __init__(self, progress: ImportProgress | None) -> None:
        self.count = 0
        self._progress = progress

    def tell(self, more: int) -> None:
        """Count ``more`` objects, telling ``progress`` each count in turn."""
        if self._progress is None:
            self.count += more
            return
        for n in range(self.count + 1, self.count + more + 1):
            self.count = n
            self._progress(n)


def _listed_batches(
    store: BlockStore, prefix: str, now: int, tally: ImportTally | None
) -> Iterator[tuple[list[str], list[int], list[str], list[int]]]:
    """Yield :func:`list_source`'s objects as batches of keys, sizes, etags and mtimes.

    ``tally`` counts them as the store lists them: each batch of a store that lists batches,
    each object of another (so that a listing waiting on its store has told all before).
    """
    batches: Callable[[str, int], Iterator[_ListedBatch]] | None = getattr(
        store, "list_detailed_batches", None
    )
    if batches is not None:
        for b in batches(prefix, _BATCH):
            if b.keys:
                if tally is not None:
                    tally.tell(len(b.keys))
                yield b.keys, b.sizes, b.etags, b.mtimes
        return
    chunk: list[SourceObject] = []
    for obj in list_source(store, prefix, now):
        chunk.append(obj)
        if tally is not None:
            tally.tell(1)
        if len(chunk) >= _BATCH:
            yield _source_columns(chunk)
            chunk = []
    if chunk:
        yield _source_columns(chunk)


def _source_columns(
    chunk: list[SourceObject],
) -> tuple[list[str], list[int], list[str], list[int]]:
    return (
        [o.key for o in chunk],
        [o.size for o in chunk],
        [o.etag for o in chunk],
        [o.mtime for o in chunk],
    )


def _check_order(source: ImportSource, previous: str, keys: list[str]) -> None:
    """Raise unless ``keys`` strictly increase, all after ``previous``."""
    if keys[0] > previous and all(map(operator.lt, keys, itertools.islice(keys, 1, None))):
        return
    for key in keys:
        if key <= previous:
            raise InvalidImportSourceError(
                f"import path ({source.path}) listed {key!r} after {previous!r}: the "
                "store's listing is not in key order"
            )
        previous = key


def _mapped_columns(
    source: ImportSource,
    open_store: Callable[[str], BlockStore],
    now: int,
    tally: ImportTally | None = None,
) -> Iterator[Columns]:
    """Yield the objects of one source as :data:`Columns` batches, in path order."""
    _, namespace, key = split_source(source.path)
    store = open_store(namespace)
    base = namespace.rstrip("/") + "/"
    if source.type == "object":
        info = store.head(key)
        if tally is not None:
            tally.tell(1)
        yield [source.destination], [base + key], [info.size], [info.etag], [now]
        return
    previous = ""
    cut, destination = len(key), source.destination
    for keys, sizes, etags, mtimes in _listed_batches(store, key, now, tally):
        _check_order(source, previous, keys)
        previous = keys[-1]
        paths = [destination + k[cut:] for k in keys]
        yield paths, [base + k for k in keys], sizes, etags, mtimes


def _merged_columns(
    sources: Sequence[ImportSource],
    open_store: Callable[[str], BlockStore],
    now: int,
    tally: ImportTally,
) -> Iterator[Columns]:
    """Yield the objects of several sources in path order, the latest source's on a tie."""

    def rows(i: int, source: ImportSource) -> Iterator[tuple[str, int, tuple[str, int, str, int]]]:
        for paths, addresses, sizes, etags, mtimes in _mapped_columns(source, open_store, now):
            for path, *row in zip(paths, addresses, sizes, etags, mtimes, strict=True):
                yield path, i, tuple(row)  # type: ignore[misc]

    def counted(
        merged: Iterator[tuple[str, tuple[str, int, str, int]]],
    ) -> Iterator[tuple[str, tuple[str, int, str, int]]]:
        for item in merged:
            tally.tell(1)
            yield item

    streams = [rows(i, s) for i, s in enumerate(sources)]
    merged = counted(_dedup_last(heapq.merge(*streams, key=lambda t: (t[0], t[1]))))
    while chunk := list(itertools.islice(merged, _BATCH)):
        yield (
            [p for p, _ in chunk],
            [r[0] for _, r in chunk],
            [r[1] for _, r in chunk],
            [r[2] for _, r in chunk],
            [r[3] for _, r in chunk],
        )


def import_runs(
    sources: Sequence[ImportSource],
    open_store: Callable[[str], BlockStore],
    base: Callable[[str], Iterator[tuple[str, Entry]]],
    now: int,
    progress: ImportProgress | None = None,
) -> Iterator[Change | Run]:
    """Yield the changes of :func:`import_changes`, imported objects as runs of new records.

    Each batch of listed objects becomes rows of columns
    (:func:`~mirror.core.record_columns.rows_of_columns`), yielded as runs between the
    deletions of base keys that fall among them. ``progress`` is told every count as the
    objects are listed (merged, with several sources), so it leads what is written into ranges
    by at most a batch, and a listing that waits on its store has told what came before.
    """
    return tallied_runs(sources, open_store, base, now, ImportTally(progress))


def tallied_runs(
    sources: Sequence[ImportSource],
    open_store: Callable[[str], BlockStore],
    base: Callable[[str], Iterator[tuple[str, Entry]]],
    now: int,
    tally: ImportTally,
) -> Iterator[Change | Run]:
    """Return :func:`import_runs`'s changes, counting the objects with ``tally``."""
    if len(sources) == 1:  # one listing is in strict path order already: nothing to merge
        batches = _mapped_columns(sources[0], open_store, now, tally)
    else:
        batches = _merged_columns(sources, open_store, now, tally)
    gone = _removed(sources, base)
    next_gone = next(gone, None)
    for paths, addresses, sizes, etags, mtimes in batches:
        rows = rows_of_columns(
            paths,
            addresses,
            sizes,
            etags,
            mtimes,
            content_types=DEFAULT_CONTENT_TYPE,
            address_types=AddressType.FULL,
        )
        start, last = 0, paths[-1]
        while next_gone is not None and next_gone <= last:
            at = bisect.bisect_left(paths, next_gone, start)
            if at > start:
                yield rows, start, at
                start = at
            if paths[at] != next_gone:
                yield next_gone, None
            next_gone = next(gone, None)
        if start < len(paths):
            yield rows, start, len(paths)
    while next_gone is not None:
        yield next_gone, None
        next_gone = next(gone, None)
