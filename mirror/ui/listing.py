"""Lists as pages show them: lakeFS's paging, and the named things a person may create and delete.

Every list pages as lakeFS's UI pages it: 100 entries from ``after``, a **Next page** link to
``pagination.next_offset`` while ``has_more``, **Back to start** once past the first page, no
totals. Repositories, branches, tags, users, groups and policies are moreover named things
searched by the start of their name, with a create form and a delete link drawn only for whom
the API would allow it (:func:`named_list`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from mirror.auth.permissions import Permission
from mirror.ui.page import Page
from mirror.ui.render import page_url

__all__ = ["PAGE_SIZE", "Listing", "NamedList", "list_page", "may_add_and_remove", "named_list"]

PAGE_SIZE = 100
"""Entries a list shows (lakeFS's UI asks for 100)."""


@dataclass(frozen=True, slots=True)
class Listing:
    """One page of an API list, with the links to the next page and back to the start."""

    results: list[dict[str, Any]]
    next_url: str
    start_url: str


async def list_page(
    page: Page, api_path: str, here: str, *, keep: Mapping[str, str] | None = None, **params: str
) -> Listing:
    """Return the page of ``GET /api/v1<api_path>`` that the request's ``after`` names.

    Args:
        page: The page being served.
        api_path: The API's list.
        here: The UI path the paging links lead to.
        keep: What the paging links carry (by default ``params``).
        **params: What goes to the API besides ``after`` and ``amount`` (``prefix``, ...).
    """
    after = page.request.query_params.get("after", "")
    listing: dict[str, Any] = await page.get(api_path, after=after, amount=PAGE_SIZE, **params)
    pagination = listing["pagination"]
    kept = params if keep is None else keep
    return Listing(
        listing["results"],
        page_url(here, **kept, after=pagination["next_offset"]) if pagination["has_more"] else "",
        page_url(here, **kept) if after else "",
    )


async def may_add_and_remove(
    page: Page, add: Permission, removes: Iterable[Permission], *, writable: bool = True
) -> tuple[bool, list[bool]]:
    """Return whether the person may add to a list, and may remove each entry of it.

    ``writable`` false (a mirror's list) allows nothing and asks the API nothing.
    """
    asked = [add, *removes]
    allowed = await page.allowed(asked) if writable else [False] * len(asked)
    return allowed[0], allowed[1:]


@dataclass(frozen=True, slots=True)
class NamedList:
    """One page of named things, with what the person may do to them.

    Attributes:
        entries: Each thing the API listed, with whether the person may delete it.
        context: What every such list's template shows: the search (under its query name),
            ``next_url``, ``start_url``, ``can_create``, and the ``created`` and ``deleted``
            notices the query carries.
        also: Whether the person holds ``named_list``'s ``also`` permission on each entry, in
            order (empty without ``also``).
    """

    entries: list[tuple[dict[str, Any], bool]]
    context: dict[str, Any]
    also: list[bool] = field(default_factory=list)


async def named_list(
    page: Page,
    api_path: str,
    here: str,
    *,
    create: Permission,
    delete: Callable[[dict[str, Any]], Permission],
    search: str = "prefix",
    writable: bool = True,
    also: Callable[[dict[str, Any]], Permission] | None = None,
) -> NamedList:
    """Return the page of named things the request's search and ``after`` name.

    Args:
        page: The page being served.
        api_path: The API's list, which takes ``prefix``.
        here: The UI path of the list.
        create: The permission the create form needs.
        delete: The permission deleting a listed thing needs.
        search: The query parameter holding the searched prefix (kept in the paging links).
        writable: False for a mirror's list: nothing is offered to create or delete.
        also: Another permission each entry's row needs for a control of its own (resetting a
            branch), asked in the same call.
    """
    query = page.request.query_params
    prefix = query.get(search, "")
    listed = await list_page(page, api_path, here, keep={search: prefix}, prefix=prefix)
    asked = [delete(entry) for entry in listed.results]
    if also is not None:
        asked += [also(entry) for entry in listed.results]
    can_create, allowed = await may_add_and_remove(page, create, asked, writable=writable)
    count = len(listed.results)
    return NamedList(
        list(zip(listed.results, allowed[:count], strict=True)),
        {
            search: prefix,
            "next_url": listed.next_url,
            "start_url": listed.start_url,
            "can_create": can_create,
            "created": query.get("created", ""),
            "deleted": query.get("deleted", ""),
        },
        allowed[count:],
    )
