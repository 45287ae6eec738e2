"""What the administration pages share: their addresses, paging, choices and confirmations.

The administration is lakeFS's RBAC ``internal`` pages: users, groups, policies and access keys,
under ``/ui/auth/``. Every list pages as lakeFS's do (100 entries, **Next page** and **Back to
start**, no totals); every removal asks first on a confirmation page; every page reads and
changes through ``/api/v1/auth/…`` as the signed-in person, so the API decides what they may see
and do, and a refusal shows its message.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from starlette.datastructures import FormData
from starlette.responses import Response

from mirror.ui.api import ApiError
from mirror.ui.page import Page
from mirror.ui.render import page_url, urlpart

__all__ = [
    "AUTH_URL",
    "CREDENTIALS_URL",
    "GROUPS_URL",
    "PAGE_SIZE",
    "POLICIES_URL",
    "USERS_URL",
    "Listing",
    "choices",
    "confirm",
    "field",
    "group_url",
    "list_page",
    "policy_url",
    "user_url",
]

AUTH_URL = "/ui/auth"
USERS_URL = f"{AUTH_URL}/users"
GROUPS_URL = f"{AUTH_URL}/groups"
POLICIES_URL = f"{AUTH_URL}/policies"
CREDENTIALS_URL = f"{AUTH_URL}/credentials"
"""The signed-in person's own access keys."""

PAGE_SIZE = 100
"""Entries a list shows (lakeFS's UI asks for 100)."""

_CHOICES = 100
"""Entries offered as suggestions where a form takes a user, group or policy ID."""


def user_url(user_id: str, *rest: str) -> str:
    """Return the UI path of a user's page, or of one of its parts."""
    return "/".join([f"{USERS_URL}/{urlpart(user_id)}", *rest])


def group_url(group_id: str, *rest: str) -> str:
    """Return the UI path of a group's page, or of one of its parts."""
    return "/".join([f"{GROUPS_URL}/{urlpart(group_id)}", *rest])


def policy_url(policy_id: str, *rest: str) -> str:
    """Return the UI path of a policy's page, or of one of its parts."""
    return "/".join([f"{POLICIES_URL}/{urlpart(policy_id)}", *rest])


def field(form: FormData, name: str) -> str:
    """Return a text field of ``form``, stripped (empty when absent)."""
    value = form.get(name)
    return value.strip() if isinstance(value, str) else ""


@dataclass(frozen=True, slots=True)
class Listing:
    """One page of an API list, with the links to the next page and back to the start."""

    results: list[dict[str, Any]]
    next_url: str
    start_url: str


async def list_page(page: Page, api_path: str, here: str, **params: str) -> Listing:
    """Return the page of ``GET /api/v1<api_path>`` that the request's ``after`` names.

    ``params`` (``prefix``, ``effective``, ...) go to the API and stay in the paging links, which
    lead to ``here``.
    """
    after = page.request.query_params.get("after", "")
    listing: dict[str, Any] = await page.get(api_path, after=after, amount=PAGE_SIZE, **params)
    pagination = listing["pagination"]
    return Listing(
        listing["results"],
        page_url(here, **params, after=pagination["next_offset"]) if pagination["has_more"] else "",
        page_url(here, **params) if after else "",
    )


async def choices(page: Page, api_path: str) -> list[str]:
    """Return the first IDs ``GET /api/v1<api_path>`` lists, to suggest in a form.

    Empty when the person may not list them: the form still takes any ID, and the API judges it.
    """
    try:
        listing: dict[str, Any] = await page.get(api_path, amount=_CHOICES)
    except ApiError:
        return []
    return [str(entry["id"]) for entry in listing["results"]]


def confirm(
    page: Page,
    *,
    heading: str,
    text: str,
    action: str,
    button: str,
    cancel_url: str,
    error: str = "",
    status: int = 200,
) -> Response:
    """Return the page asking the person to confirm a removal that ``action`` then makes."""
    return page.render(
        "auth/confirm.html",
        status,
        heading=heading,
        text=text,
        action=action,
        button=button,
        cancel_url=cancel_url,
        error=error,
    )
