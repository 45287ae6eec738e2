"""What the administration pages share: their addresses, choices and confirmations.

The administration is lakeFS's RBAC ``internal`` pages: users, groups, policies and access keys,
under ``/ui/auth/``. Every list pages as lakeFS's do (:mod:`mirror.ui.listing`); every removal
asks first on a confirmation page; every page reads and changes through ``/api/v1/auth/…`` as the
signed-in person, so the API decides what they may see and do, and a refusal shows its message.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from starlette.responses import Response

from mirror.ui.api import ApiError
from mirror.ui.forms import redirect_after
from mirror.ui.page import Page
from mirror.ui.render import urlpart

__all__ = [
    "AUTH_URL",
    "CREDENTIALS_URL",
    "GROUPS_URL",
    "POLICIES_URL",
    "USERS_URL",
    "Removal",
    "ask_to_remove",
    "choices",
    "confirm_removal",
    "group_url",
    "policy_url",
    "remove",
    "user_url",
]

AUTH_URL = "/ui/auth"
USERS_URL = f"{AUTH_URL}/users"
GROUPS_URL = f"{AUTH_URL}/groups"
POLICIES_URL = f"{AUTH_URL}/policies"
CREDENTIALS_URL = f"{AUTH_URL}/credentials"
"""The signed-in person's own access keys."""

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


async def choices(page: Page, api_path: str) -> list[str]:
    """Return the first IDs ``GET /api/v1<api_path>`` lists, to suggest in a form.

    Empty when the person may not list them: the form still takes any ID, and the API judges it.
    """
    try:
        listing: dict[str, Any] = await page.get(api_path, amount=_CHOICES)
    except ApiError:
        return []
    return [str(entry["id"]) for entry in listing["results"]]


@dataclass(frozen=True, slots=True)
class Removal:
    """A removal the administration asks to confirm first: a user, a group, a key, a membership.

    Attributes:
        heading: The confirmation page's heading (and title).
        text: What the removal does, said before it is done.
        button: The label of the button that removes.
        action: The UI path the button posts to.
        cancel_url: Where **Cancel** leads.
        api_path: What ``DELETE /api/v1<api_path>`` removes.
        done_url: Where the browser goes once removed.
    """

    heading: str
    text: str
    button: str
    action: str
    cancel_url: str
    api_path: str
    done_url: str


def confirm_removal(
    page: Page, removal: Removal, *, error: str = "", status: int = 200
) -> Response:
    """Return the page asking the person to confirm ``removal`` (with a refusal's ``error``)."""
    return page.render(
        "auth/confirm.html",
        status,
        heading=removal.heading,
        text=removal.text,
        action=removal.action,
        button=removal.button,
        cancel_url=removal.cancel_url,
        error=error,
    )


async def ask_to_remove(page: Page, removal: Removal) -> Response:
    """Return the confirmation of removing what ``GET /api/v1<api_path>`` finds.

    Raises:
        ApiError: nothing there, or the person may not read it (the page shows the API's
            message).
    """
    await page.get(removal.api_path)
    return confirm_removal(page, removal)


async def remove(page: Page, removal: Removal) -> Response:
    """Make a confirmed removal; show the API's refusal on the confirmation page."""
    await page.form()
    return await redirect_after(
        page.send("DELETE", removal.api_path),
        removal.done_url,
        refused=lambda e: confirm_removal(page, removal, error=e.message, status=e.status),
    )
