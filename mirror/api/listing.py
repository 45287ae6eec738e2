"""Delimiter grouping and ``after`` skipping for path-ordered listings (objects and diffs)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import TypeVar

__all__ = ["CommonPrefix", "group_paths", "under_prefix"]

T = TypeVar("T")


class CommonPrefix(str):
    """A path prefix that stands for every item under it (a ``common_prefix`` row)."""

    __slots__ = ()


def under_prefix(items: Iterable[T], prefix: str, path: Callable[[T], str]) -> Iterator[T]:
    """Yield the items of a path-ordered stream whose path starts with ``prefix``."""
    for item in items:
        p = path(item)
        if p.startswith(prefix):
            yield item
        elif p > prefix:
            return


_MAX_CHAR = 0x10FFFF


def _past(prefix: str) -> str | None:
    """Return the least string above every string starting with ``prefix`` (``None``: none)."""
    stem = prefix.rstrip(chr(_MAX_CHAR))
    return stem[:-1] + chr(ord(stem[-1]) + 1) if stem else None


def group_paths(
    items: Iterable[T],
    path: Callable[[T], str],
    *,
    prefix: str = "",
    delimiter: str = "",
    after: str = "",
    seek: Callable[[str], None] | None = None,
) -> Iterator[T | CommonPrefix]:
    """Yield the items after ``after``, folding those past a ``delimiter`` into common prefixes.

    ``items`` must be ordered by path and all start with ``prefix``. Each common prefix is
    yielded once, in path order, in place of the items under it.

    ``seek``, if given, moves the source of ``items`` ahead to the first path ``>=`` its
    argument: it is called before the first item with where the listing starts, and after each
    common prefix with the first path past it, so the items skipped are never read.
    """
    skip_under = after if delimiter and after.endswith(delimiter) and after > prefix else ""
    if seek is not None:
        start = _past(skip_under) if skip_under else after
        if start is not None:
            seek(max(prefix, start))
    last: str | None = None
    for item in items:
        p = path(item)
        if after and p <= after:
            continue
        if skip_under and p.startswith(skip_under):
            continue
        if delimiter:
            cut = p.find(delimiter, len(prefix))
            if cut >= 0:
                common = p[: cut + len(delimiter)]
                if common != last:
                    last = common
                    yield CommonPrefix(common)
                    past = _past(common) if seek is not None else None
                    if seek is not None and past is not None:
                        seek(past)
                continue
        yield item
