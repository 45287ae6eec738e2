"""lakeFS pagination: ``after``/``amount`` in, the four-field ``pagination`` object out."""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from operator import attrgetter
from typing import Annotated, Any, TypeVar

from fastapi import Depends

from mirror.api.models import Pagination
from mirror.api.routing import AfterQuery, AmountQuery, PrefixQuery

__all__ = [
    "DEFAULT_AMOUNT",
    "MAX_PER_PAGE",
    "PageDep",
    "PageQuery",
    "page",
    "page_fields",
    "page_query",
    "page_size",
]

T = TypeVar("T")
L = TypeVar("L")

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
    last = key(results[-1]) if has_more and results else ""
    return results, Pagination(**page_fields(has_more, last, len(results)))


def page_fields(has_more: bool, next_offset: str, results: int) -> dict[str, Any]:
    """Return a page's ``pagination`` object as a dictionary, for answers encoded without models.

    ``next_offset`` is kept only when there is more to list, as :func:`page` does.
    """
    return {
        "has_more": has_more,
        "next_offset": next_offset if has_more else "",
        "results": results,
        "max_per_page": MAX_PER_PAGE,
    }


_BY_ID: Callable[[Any], str] = attrgetter("id")


@dataclass(frozen=True, slots=True)
class PageQuery:
    """The ``prefix``, ``after`` and ``amount`` query parameters of a list call.

    Attributes:
        prefix: Return items prefixed with this value.
        after: Return items after this value.
        amount: How many items to return (:func:`page_size` reads it).
    """

    prefix: str = ""
    after: str = ""
    amount: int = 0

    def listed(
        self,
        model: Callable[..., L],
        items: Iterable[T],
        show: Callable[[T], Any],
        key: Callable[[T], str] = _BY_ID,
    ) -> L:
        """Return the first page of ``items`` as ``model``: its pagination and results.

        Args:
            model: The list model (fields ``pagination`` and ``results``).
            items: The items after :attr:`after`, in ``key`` order.
            show: Returns the wire form of an item.
            key: Returns an item's ``next_offset`` (default: its ``id``).
        """
        shown, pagination = page(items, self.amount, key)
        return model(pagination=pagination, results=[show(item) for item in shown])


async def page_query(
    prefix: PrefixQuery = "", after: AfterQuery = "", amount: AmountQuery = 0
) -> PageQuery:
    """Read a list call's paging parameters (a FastAPI dependency, :data:`PageDep`).

    A coroutine, so that FastAPI runs it on the event loop instead of a worker thread: it
    only gathers its arguments.
    """
    return PageQuery(prefix, after, amount)


PageDep = Annotated[PageQuery, Depends(page_query)]
"""A list call's ``prefix``, ``after`` and ``amount``, in that order among its query parameters."""
