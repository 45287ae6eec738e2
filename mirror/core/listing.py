"""Listings of objects under a prefix: streamed in path order, or paged with common prefixes."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from mirror.core.context import CatalogContext
from mirror.core.model import Entry, ObjectStat, Repository
from mirror.core.objects import physical_address
from mirror.core.resolve import resolve_ref
from mirror.core.staging import Tombstone, merge_staged
from mirror.core.views import View, read_at

__all__ = ["ListResult", "iter_objects", "iter_view", "list_objects"]

_MAX_CHAR = "\U0010ffff"


@dataclass(frozen=True, slots=True)
class ListResult:
    """One page of a listing."""

    objects: list[ObjectStat]
    common_prefixes: list[str]
    has_more: bool
    next_offset: str


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
    start = after + "\x00" if after and after >= prefix else prefix
    sources = [ctx.staging.scan(t, prefix, start) for t in view.tokens]
    tree = ctx.refs.get_commit(repo, view.commit_id).metarange_id
    committed: Iterator[tuple[str, Entry | Tombstone]] = iter(
        ctx.committed(repo).iterate(tree, start)
    )
    for path, value in merge_staged([*sources, committed]):
        if not path.startswith(prefix):
            if path > prefix:
                return
            continue
        if isinstance(value, Entry):
            yield ObjectStat(path, value, physical_address(repo, value))


def list_objects(
    ctx: CatalogContext,
    repository: str,
    ref: str,
    prefix: str,
    *,
    after: str,
    amount: int,
    delimiter: str,
) -> ListResult:
    """Return one page of objects (and common prefixes, with a delimiter) under ``prefix``.

    On a branch, the page is read again if a commit moved the branch meanwhile.
    """
    repo = ctx.repository(repository)
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
    objects: list[ObjectStat] = []
    prefixes: list[str] = []
    cursor = after
    cut = after.find(delimiter, len(prefix)) if delimiter and after.startswith(prefix) else -1
    if cut >= 0 and cut + len(delimiter) == len(after):
        # resuming after a common prefix: skip everything under it (an object whose path
        # ends with the delimiter inside ``prefix``, such as ``prefix`` itself, is not one)
        cursor = after + _MAX_CHAR
    while True:
        restart = False
        for stat in iter_view(ctx, repo, view, prefix, cursor):
            if len(objects) + len(prefixes) >= amount:
                last = objects[-1].path if objects else ""
                lastp = prefixes[-1] if prefixes else ""
                return ListResult(objects, prefixes, True, max(last, lastp))
            if delimiter:
                cut = stat.path.find(delimiter, len(prefix))
                if cut >= 0:
                    common = stat.path[: cut + len(delimiter)]
                    prefixes.append(common)
                    # skip everything under this common prefix in one jump
                    cursor = common + _MAX_CHAR
                    restart = True
                    break
            objects.append(stat)
        if not restart:
            return ListResult(objects, prefixes, False, "")
