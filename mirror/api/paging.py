"""lakeFS pagination: ``after``/``amount`` in, the four-field ``pagination`` object out."""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterable
from typing import TypeVar

from mirror.api.models import Pagination

__all__ = ["DEFAULT_AMOUNT", "MAX_PER_PAGE", "page", "page_size"]

T = TypeVar("T")

MAX_PER_PAGE = 1000
DEFAULT_AMOUNT = 100


def page_size(amount: int | None) -> int:
    """Return the page size for a requested ``amount`` (default 100, at most 1000)."""
    if amount is None or amount <= 0:
        return DEFAULT_AMOUNT
    return min(amount, MAX_PER_PAGE)


def page(
    items: Iterable[T], amount: int | None, key: Callable[[T], str]
) -> tuple[list[T], Pagination]:
    """Return the first page of ``items`` and its pagination (``next_offset``: key of the last)."""
    size = page_size(amount)
    taken = list(itertools.islice(items, size + 1))
    has_more = len(taken) > size
    results = taken[:size]
    return results, Pagination(
        has_more=has_more,
        next_offset=key(results[-1]) if has_more and results else "",
        results=len(results),
        max_per_page=MAX_PER_PAGE,
    )
