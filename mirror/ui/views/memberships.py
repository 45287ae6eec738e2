"""A user's and a group's pages: memberships and attached policies, added and removed.

As lakeFS's tabs (W/lib/components/auth/nav.jsx): a user's page has **Group Memberships**
(``GET /auth/users/{u}/groups``; add: ``PUT /auth/groups/{g}/members/{u}``), **Directly
Attached Policies** (``GET /auth/users/{u}/policies``; ``PUT|DELETE …/policies/{p}``),
**Effective Attached Policies** (``?effective=true``: its own and its groups', read only) and
**Access Credentials** (:mod:`mirror.ui.views.access_keys`). A group's page has **Group
Memberships** (``GET /auth/groups/{g}/members``; ``PUT|DELETE …/members/{u}``) and **Attached
Policies** (``GET /auth/groups/{g}/policies``), and its header shows the group's description
and its ACL (``GET /auth/groups/{g}/acl``, lakeFS's answer as it is). Every list pages by 100;
a form takes the other side's ID, suggesting the first 100 the person may list; removing asks
first. Controls show only where ``POST /user/permissions`` says the person may use them.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import BaseRoute, Route

from mirror.auth.permissions import Action, Permission, group_arn, policy_arn, user_arn
from mirror.ui.api import ApiError
from mirror.ui.auth_pages import (
    GROUPS_URL,
    USERS_URL,
    Removal,
    choices,
    confirm_removal,
    group_url,
    policy_url,
    remove,
    user_url,
)
from mirror.ui.forms import field, redirect_after
from mirror.ui.listing import list_page, may_add_and_remove
from mirror.ui.page import Page
from mirror.ui.render import page_url, urlpart

__all__ = ["GROUP", "USER", "Owner", "Relation", "owner_context", "routes"]

_ARN: dict[str, Callable[[str], str]] = {"user": user_arn, "group": group_arn, "policy": policy_arn}
_URL: dict[str, Callable[..., str]] = {"user": user_url, "group": group_url, "policy": policy_url}
_API: dict[str, str] = {"user": "/auth/users", "group": "/auth/groups", "policy": "/auth/policies"}


@dataclass(frozen=True, slots=True)
class Relation:
    """One tab of an owner's page: what it is related to, and how a relation is made.

    ``change_api`` is the API path (``{owner}``, ``{other}``) that ``PUT`` adds and ``DELETE``
    removes; empty for a read-only list. The permissions are checked on the owner's ARN, or on
    the other side's when ``guard_other`` (adding a user to a group is the group's change).
    """

    key: str
    label: str
    other: str
    list_api: str
    change_api: str = ""
    add_action: str = ""
    remove_action: str = ""
    guard_other: bool = False
    add_label: str = ""
    remove_label: str = ""
    remove_link: str = ""
    added: str = ""
    """What the page says once a relation was added (``{}``: the other side's ID)."""
    removed: str = ""
    effective: bool = False


@dataclass(frozen=True, slots=True)
class Owner:
    """A kind of page with tabs: a user's or a group's."""

    kind: str
    label: str
    list_url: str
    relations: tuple[Relation, ...]
    extra_tabs: tuple[tuple[str, str], ...] = ()
    """Tabs other modules serve: (key, label)."""


USER = Owner(
    "user",
    "Users",
    USERS_URL,
    (
        Relation(
            "groups",
            "Group Memberships",
            "group",
            "/auth/users/{owner}/groups",
            "/auth/groups/{other}/members/{owner}",
            Action.ADD_GROUP_MEMBER,
            Action.REMOVE_GROUP_MEMBER,
            guard_other=True,
            add_label="Add to group",
            remove_label="Remove from group",
            remove_link="Remove",
            added="Added to group {}.",
            removed="Removed from group {}.",
        ),
        Relation(
            "policies",
            "Directly Attached Policies",
            "policy",
            "/auth/users/{owner}/policies",
            "/auth/users/{owner}/policies/{other}",
            Action.ATTACH_POLICY,
            Action.DETACH_POLICY,
            add_label="Attach policy",
            remove_label="Detach policy",
            remove_link="Detach",
            added="Policy {} was attached.",
            removed="Policy {} was detached.",
        ),
        Relation(
            "effective-policies",
            "Effective Attached Policies",
            "policy",
            "/auth/users/{owner}/policies",
            effective=True,
        ),
    ),
    (("credentials", "Access Credentials"),),
)
GROUP = Owner(
    "group",
    "Groups",
    GROUPS_URL,
    (
        Relation(
            "members",
            "Group Memberships",
            "user",
            "/auth/groups/{owner}/members",
            "/auth/groups/{owner}/members/{other}",
            Action.ADD_GROUP_MEMBER,
            Action.REMOVE_GROUP_MEMBER,
            add_label="Add member",
            remove_label="Remove from group",
            remove_link="Remove",
            added="User {} was added to the group.",
            removed="User {} was removed from the group.",
        ),
        Relation(
            "policies",
            "Attached Policies",
            "policy",
            "/auth/groups/{owner}/policies",
            "/auth/groups/{owner}/policies/{other}",
            Action.ATTACH_POLICY,
            Action.DETACH_POLICY,
            add_label="Attach policy",
            remove_label="Detach policy",
            remove_link="Detach",
            added="Policy {} was attached.",
            removed="Policy {} was detached.",
        ),
    ),
)


def _api(template: str, owner: str, other: str = "") -> str:
    return template.format(owner=urlpart(owner), other=urlpart(other))


async def _acl(page: Page, group_id: str) -> dict[str, str]:
    """Return the group's ACL as the page shows it: lakeFS's answer, or why there is none."""
    try:
        answer: dict[str, Any] = await page.get(f"/auth/groups/{urlpart(group_id)}/acl")
    except ApiError as refused:
        if refused.status == 403:
            return {"permission": "", "note": "not shown: your policies do not allow reading it"}
        # 404 once the group was found: its policies are not one ACL policy (lakeFS's no_acl)
        return {"permission": "", "note": refused.message}
    permission = str(answer.get("permission") or "")
    # lakeFS's blank ACL: the group has no policy at all
    return {"permission": permission, "note": "" if permission else "no policy is attached"}


async def owner_context(page: Page, owner: Owner, owner_id: str, tab: str) -> dict[str, Any]:
    """Return what ``auth/owner.html`` needs: the user or group, its facts and its tabs.

    Raises:
        ApiError: no such user or group, or the person may not read it (the page shows why).
    """
    found: dict[str, Any] = await page.get(f"{_API[owner.kind]}/{urlpart(owner_id)}")
    tabs = [(r.key, r.label) for r in owner.relations] + list(owner.extra_tabs)
    return {
        "auth_tab": f"{owner.kind}s",
        "owner_kind": owner.kind,
        "owner_label": owner.label,
        "owner_list_url": owner.list_url,
        "owner": found,
        "acl": await _acl(page, owner_id) if owner.kind == "group" else None,
        "owner_tabs": [
            {"label": label, "url": _URL[owner.kind](owner_id, key), "active": key == tab}
            for key, label in tabs
        ],
    }


def _guard(owner: Owner, relation: Relation, owner_id: str, other_id: str) -> str:
    return _ARN[relation.other](other_id) if relation.guard_other else _ARN[owner.kind](owner_id)


async def _tab(
    page: Page,
    owner: Owner,
    relation: Relation,
    *,
    new: str = "",
    error: str = "",
    status: int = 200,
) -> Response:
    owner_id = page.request.path_params["owner"]
    context = await owner_context(page, owner, owner_id, relation.key)
    here = _URL[owner.kind](owner_id, relation.key)
    effective = "true" if relation.effective else ""
    listed = await list_page(page, _api(relation.list_api, owner_id), here, effective=effective)
    can_add, may_remove = await may_add_and_remove(
        page,
        Permission(relation.add_action, _guard(owner, relation, owner_id, "*")),
        (
            Permission(relation.remove_action, _guard(owner, relation, owner_id, r["id"]))
            for r in listed.results
        ),
        writable=bool(relation.change_api),
    )
    rows = [
        {
            "id": other["id"],
            "url": _URL[relation.other](other["id"]),
            "detail": other.get("description") or other.get("email") or "",
            "creation_date": other.get("creation_date", 0),
            "remove_url": _URL[owner.kind](owner_id, relation.key, urlpart(other["id"]), "remove"),
            "can_remove": may,
        }
        for other, may in zip(listed.results, may_remove, strict=True)
    ]
    query = page.request.query_params
    return page.render(
        "auth/relation.html",
        status,
        **context,
        relation=relation,
        rows=rows,
        here=here,
        next_url=listed.next_url,
        start_url=listed.start_url,
        can_add=can_add,
        choices=await choices(page, _API[relation.other]) if can_add else [],
        new=new,
        error=error,
        added=query.get("added", ""),
        removed=query.get("removed", ""),
        created=query.get("created", ""),
    )


def _list_view(owner: Owner, relation: Relation) -> Callable[[Request], Awaitable[Response]]:
    async def view(request: Request) -> Response:
        return await _tab(await Page.open(request), owner, relation)

    view.__doc__ = f"List a {owner.kind}'s {relation.label.lower()}."
    return view


def _add_view(owner: Owner, relation: Relation) -> Callable[[Request], Awaitable[Response]]:
    async def view(request: Request) -> Response:
        page = await Page.open(request)
        form = await page.form()
        owner_id, other_id = request.path_params["owner"], field(form, "other")
        if not other_id:
            error = f"Name the {relation.other} to add."
            return await _tab(page, owner, relation, error=error, status=400)
        here = _URL[owner.kind](owner_id, relation.key)
        return await redirect_after(
            page.send("PUT", _api(relation.change_api, owner_id, other_id)),
            page_url(here, added=other_id),
            refused=lambda e: _tab(
                page, owner, relation, new=other_id, error=e.message, status=e.status
            ),
        )

    view.__doc__ = f"{relation.add_label} for a {owner.kind}; show the API's refusal by the form."
    return view


def _removal(page: Page, owner: Owner, relation: Relation) -> Removal:
    owner_id, other_id = page.request.path_params["owner"], page.request.path_params["other"]
    here = _URL[owner.kind](owner_id, relation.key)
    if relation.other != "policy":
        user, group = (other_id, owner_id) if owner.kind == "group" else (owner_id, other_id)
        text = f"User {user} leaves group {group} and loses what the group's policies allow."
    else:
        text = (
            f"Policy {other_id} no longer applies to {owner.kind} {owner_id}; what it allowed "
            "stays allowed only if another policy allows it. The policy itself stays."
        )
    return Removal(
        heading=f"{relation.remove_label}: {other_id}",
        text=text,
        button=relation.remove_label,
        action=_URL[owner.kind](owner_id, relation.key, urlpart(other_id), "remove"),
        cancel_url=here,
        api_path=_api(relation.change_api, owner_id, other_id),
        done_url=page_url(here, removed=other_id),
    )


def _confirm_view(owner: Owner, relation: Relation) -> Callable[[Request], Awaitable[Response]]:
    async def view(request: Request) -> Response:
        page = await Page.open(request)
        await owner_context(page, owner, request.path_params["owner"], relation.key)
        return confirm_removal(page, _removal(page, owner, relation))

    view.__doc__ = f"Ask the person to confirm: {relation.remove_label.lower()}."
    return view


def _remove_view(owner: Owner, relation: Relation) -> Callable[[Request], Awaitable[Response]]:
    async def view(request: Request) -> Response:
        page = await Page.open(request)
        return await remove(page, _removal(page, owner, relation))

    view.__doc__ = f"{relation.remove_label}; show the API's refusal on the confirmation page."
    return view


def _home_view(owner: Owner) -> Callable[[Request], Awaitable[Response]]:
    async def view(request: Request) -> Response:
        await Page.open(request)
        first = _URL[owner.kind](request.path_params["owner"], owner.relations[0].key)
        return RedirectResponse(first, status_code=302)

    view.__doc__ = f"Open a {owner.kind}'s page on its first tab, as lakeFS's does."
    return view


def _routes(owner: Owner) -> list[BaseRoute]:
    base = f"{owner.list_url}/{{owner}}"
    made: list[BaseRoute] = [Route(base, _home_view(owner), methods=["GET"])]
    for relation in owner.relations:
        tab = f"{base}/{relation.key}"
        made.append(Route(tab, _list_view(owner, relation), methods=["GET"]))
        if relation.change_api:
            removal = f"{tab}/{{other}}/remove"
            made += [
                Route(tab, _add_view(owner, relation), methods=["POST"]),
                Route(removal, _confirm_view(owner, relation), methods=["GET"]),
                Route(removal, _remove_view(owner, relation), methods=["POST"]),
            ]
    return made


routes: list[BaseRoute] = [*_routes(USER), *_routes(GROUP)]
