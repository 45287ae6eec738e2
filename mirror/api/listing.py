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


def group_paths(
    items: Iterable[T],
    path: Callable[[T], str],
    *,
    prefix: str = "",
    delimiter: str = "",
    after: str = "",
) -> Iterator[T | CommonPrefix]:
    """Yield the items after ``after``, folding those past a ``delimiter`` into common prefixes.

    ``items`` must be ordered by path and all start with ``prefix``. Each common prefix is
    yielded once, in path order, in place of the items under it.
    """
    skip_under = after if delimiter and after.endswith(delimiter) and after > prefix else ""
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
                continue
        yield item
