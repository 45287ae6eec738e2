"""Listings of objects under a prefix: streamed in path order, or paged with common prefixes."""

from __future__ import annotations

import bisect
import itertools
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from mirror.core.context import CatalogContext
from mirror.core.model import AddressType, Entry, ObjectStat, Repository
from mirror.core.resolve import resolve_ref
from mirror.core.staging import Tombstone, merge_staged
from mirror.core.views import View, read_at

__all__ = [
    "ListResult",
    "ListedObject",
    "RangeSpan",
    "iter_objects",
    "iter_view",
    "list_objects",
    "span_rows",
]

_MAX_CHAR = "\U0010ffff"

ListedObject = tuple[str, Entry, str]
"""An object of a listing: its path, its entry and the URI of its bytes (an ObjectStat's fields).

Pages carry these plain tuples: building one frozen :class:`ObjectStat` per object costs more
than reading the object from its range.
"""


@dataclass(frozen=True, slots=True)
class RangeSpan:
    """Records ``lo`` to ``hi`` (excluded) of one committed range, as a listing page holds them.

    Ranges are immutable and named by their content, so a front door may keep what it derives
    from a whole range (such as the encoded rows of a listing) under :attr:`range_id`.
    """

    range_id: str
    keys: list[str]
    entries: list[Entry]
    lo: int
    hi: int


class ListResult:
    """One page of a listing.

    Attributes:
        common_prefixes: The page's common prefixes (with a delimiter), in path order.
        has_more: Whether more objects or prefixes follow the page.
        next_offset: The path to list after for the next page (``""``: no more).
        spans: When the page's objects are all committed ones (nothing staged under the
            prefix, no delimiter), the slices of ranges they are, in order; else empty.
        namespace: The storage namespace relative addresses are under, with a trailing ``/``.
    """

    __slots__ = ("_rows", "common_prefixes", "has_more", "namespace", "next_offset", "spans")

    def __init__(
        self,
        rows: list[ListedObject] | None,
        common_prefixes: list[str],
        has_more: bool,
        next_offset: str,
        spans: tuple[RangeSpan, ...] = (),
        namespace: str = "",
    ) -> None:
        self._rows = rows
        self.common_prefixes = common_prefixes
        self.has_more = has_more
        self.next_offset = next_offset
        self.spans = spans
        self.namespace = namespace

    @property
    def rows(self) -> list[ListedObject]:
        """The page's objects in path order, as ``(path, entry, physical address)``."""
        if self._rows is None:
            self._rows = span_rows(self.spans, self.namespace)
        return self._rows

    @property
    def objects(self) -> list[ObjectStat]:
        """Return the page's objects in path order."""
        return [ObjectStat(path, entry, address) for path, entry, address in self.rows]


def span_rows(spans: Iterable[RangeSpan], namespace: str) -> list[ListedObject]:
    """Return the objects of ``spans`` in order, relative addresses under ``namespace``."""
    full = AddressType.FULL
    rows: list[ListedObject] = []
    for span in spans:
        found = span.entries[span.lo : span.hi]
        addresses = [e.address if e.address_type is full else namespace + e.address for e in found]
        rows.extend(zip(span.keys[span.lo : span.hi], found, addresses, strict=True))
    return rows


def iter_objects(
    ctx: CatalogContext, repository: str, ref: str, prefix: str, after: str
) -> Iterator[ObjectStat]:
    """Yield every object under ``prefix`` at ``ref`` with path ``> after``, in path order.

    A branch is read once, when the iteration starts.
    """
    repo = ctx.repository(repository)
    resolved = resolve_ref(ctx, repo, ref)
    view = View(resolved.commit_id)
    if resolved.include_staging and resolved.branch is not None:
        branch = ctx.refs.get_branch(repo, resolved.branch)
        view = View(branch.commit_id, branch.tokens)
    return iter_view(ctx, repo, view, prefix, after)


def iter_view(
    ctx: CatalogContext, repo: Repository, view: View, prefix: str, after: str
) -> Iterator[ObjectStat]:
    """Yield the objects ``view`` sees under ``prefix`` with path ``> after``, in path order."""
    for path, entry, address in _iter_rows(ctx, repo, view, prefix, after):
        yield ObjectStat(path, entry, address)


def _iter_rows(
    ctx: CatalogContext, repo: Repository, view: View, prefix: str, after: str
) -> Iterator[ListedObject]:
    start = _start(prefix, after)
    staged = _staged(ctx, view, prefix, start)
    tree = ctx.refs.get_commit(repo, view.commit_id).metarange_id
    committed = ctx.committed(repo).iterate(tree, start)
    namespace = repo.storage_namespace + "/"
    full = AddressType.FULL
    if not staged:
        # nothing staged under the prefix (the common case): the committed records are the
        # listing, without a merge. They start at ``start >= prefix``, so the paths under the
        # prefix come first and the first other path ends the listing.
        yield from (
            (
                path,
                entry,
                entry.address if entry.address_type is full else namespace + entry.address,
            )
            for path, entry in itertools.takewhile(lambda r: r[0].startswith(prefix), committed)
        )
        return
    for path, value in merge_staged([*staged, iter(committed)]):
        if not path.startswith(prefix):
            if path > prefix:
                return
            continue
        if isinstance(value, Entry):
            address = value.address if value.address_type is full else namespace + value.address
            yield path, value, address


def _start(prefix: str, after: str) -> str:
    return after + "\x00" if after and after >= prefix else prefix


def _staged(
    ctx: CatalogContext, view: View, prefix: str, start: str
) -> list[Iterator[tuple[str, Entry | Tombstone]]]:
    """Return the staged streams of ``view`` that hold something from ``start`` on."""
    staged: list[Iterator[tuple[str, Entry | Tombstone]]] = []
    for token in view.tokens:
        source = ctx.staging.scan(token, prefix, start)
        first = next(source, None)
        if first is not None:
            staged.append(itertools.chain((first,), source))
    return staged


def _committed_spans(
    ctx: CatalogContext, repo: Repository, tree: str, prefix: str, start: str, limit: int
) -> list[RangeSpan]:
    """Return the slices of ranges holding up to ``limit`` committed objects from ``start`` on.

    The objects are those under ``prefix``; the slices are in key order.
    Whole slices of each range at a time, not a generator step per record: on a page of
    1,000 objects this is most of the core's share of a listing.
    """
    store = ctx.committed(repo)
    ranges = store.read_metarange(tree)
    first = bisect.bisect_left(store.max_keys(tree, ranges), start) if start else 0
    spans: list[RangeSpan] = []
    count = 0
    for info in ranges[first:]:
        keys, entries = store.read_range(info.id)
        lo = bisect.bisect_left(keys, start) if start > info.min_key else 0
        hi = min(len(keys), lo + limit - count)
        ended = hi > lo and not keys[hi - 1].startswith(prefix)
        if ended:
            # the records from ``start`` under the prefix come first, then none: cut there
            hi = bisect.bisect_left(keys, True, lo, hi, key=lambda k: not k.startswith(prefix))
        if hi > lo:
            spans.append(RangeSpan(info.id, keys, entries, lo, hi))
            count += hi - lo
        if ended or count >= limit:
            break
    return spans


def _cut(spans: list[RangeSpan], amount: int) -> tuple[tuple[RangeSpan, ...], bool, str]:
    """Return the first ``amount`` records of ``spans``, whether more followed, and the last key."""
    kept: list[RangeSpan] = []
    count = 0
    for span in spans:
        take = min(span.hi - span.lo, amount - count)
        if take <= 0:
            return tuple(kept), True, kept[-1].keys[kept[-1].hi - 1] if kept else ""
        if take < span.hi - span.lo:
            kept.append(RangeSpan(span.range_id, span.keys, span.entries, span.lo, span.lo + take))
            return tuple(kept), True, kept[-1].keys[kept[-1].hi - 1]
        kept.append(span)
        count += take
    return tuple(kept), False, ""


def list_objects(
    ctx: CatalogContext,
    repository: str | Repository,
    ref: str,
    prefix: str,
    *,
    after: str,
    amount: int,
    delimiter: str,
) -> ListResult:
    """Return one page of objects (and common prefixes, with a delimiter) under ``prefix``.

    ``repository``: a name, or a record just read. On a branch, the page is read again if a
    commit moved the branch meanwhile.
    """
    repo = ctx.record(repository)
    resolved = resolve_ref(ctx, repo, ref)
    return read_at(
        ctx,
        repo,
        resolved,
        lambda view: _list_page(ctx, repo, view, prefix, after, amount, delimiter),
    )


def _list_page(
    ctx: CatalogContext,
    repo: Repository,
    view: View,
    prefix: str,
    after: str,
    amount: int,
    delimiter: str,
) -> ListResult:
    if not delimiter:
        start = _start(prefix, after)
        if not _staged(ctx, view, prefix, start):
            tree = ctx.refs.get_commit(repo, view.commit_id).metarange_id
            spans, more, last = _cut(
                _committed_spans(ctx, repo, tree, prefix, start, amount + 1), amount
            )
            return ListResult(None, [], more, last, spans, repo.storage_namespace + "/")
        rows = list(itertools.islice(_iter_rows(ctx, repo, view, prefix, after), amount + 1))
        if len(rows) > amount:
            del rows[amount:]
            return ListResult(rows, [], True, rows[-1][0] if rows else "")
        return ListResult(rows, [], False, "")
    objects: list[ListedObject] = []
    prefixes: list[str] = []
    cursor = after
    cut = after.find(delimiter, len(prefix)) if after.startswith(prefix) else -1
    if cut >= 0 and cut + len(delimiter) == len(after):
        # resuming after a common prefix: skip everything under it (an object whose path
        # ends with the delimiter inside ``prefix``, such as ``prefix`` itself, is not one)
        cursor = after + _MAX_CHAR
    while True:
        restart = False
        for row in _iter_rows(ctx, repo, view, prefix, cursor):
            if len(objects) + len(prefixes) >= amount:
                last = objects[-1][0] if objects else ""
                lastp = prefixes[-1] if prefixes else ""
                return ListResult(objects, prefixes, True, max(last, lastp))
            path = row[0]
            cut = path.find(delimiter, len(prefix))
            if cut >= 0:
                common = path[: cut + len(delimiter)]
                prefixes.append(common)
                # skip everything under this common prefix in one jump
                cursor = common + _MAX_CHAR
                restart = True
                break
            objects.append(row)
        if not restart:
            return ListResult(objects, prefixes, False, "")
