"""The administration's policies: list, create, a policy's statements, edit, delete.

``GET /api/v1/auth/policies?prefix&after&amount`` pages of 100. A policy is written as lakeFS's
editor writes it, a JSON document ``{"statement": [{"effect", "action", "resource"}, …]}`` in a
text area, with its ID beside it: **Create policy** sends ``POST /auth/policies`` and **Edit**
``PUT /auth/policies/{id}``, the document with the ID set. The server judges the document: text
that is not a JSON object is sent as it was typed, so the message shown next to the form (with
the text kept) is always the server's. A policy's page shows its statements as a table (lakeFS's
Actions, Resource and Effect) and as the JSON document; **Delete** asks first (``DELETE
/auth/policies/{id}``: it is detached from every user and group).
"""

from __future__ import annotations

import json
from typing import Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route

from mirror.auth.permissions import Action, Permission, policy_arn
from mirror.ui.auth_pages import POLICIES_URL, Removal, ask_to_remove, policy_url, remove
from mirror.ui.forms import field, redirect_after
from mirror.ui.listing import named_list
from mirror.ui.page import Page
from mirror.ui.render import page_url, urlpart

__all__ = ["document", "routes"]


def document(policy: dict[str, Any]) -> str:
    """Return a policy's statements as the JSON document its editor shows."""
    return json.dumps({"statement": policy["statement"]}, indent=2)


def _body(text: str, policy_id: str) -> tuple[Any, bytes | None]:
    """Return the API's body for a typed document: ``(json, None)``, or ``(None, raw text)``.

    A JSON object gets the policy's ID; anything else goes as typed, for the server to judge.
    """
    try:
        parsed = json.loads(text)
    except ValueError:
        return None, text.encode()
    if not isinstance(parsed, dict):
        return None, text.encode()
    return {**parsed, "id": policy_id}, None


async def _listing(
    page: Page, *, new: dict[str, str] | None = None, error: str = "", status: int = 200
) -> Response:
    listed = await named_list(
        page,
        "/auth/policies",
        POLICIES_URL,
        create=Permission(Action.CREATE_POLICY, policy_arn("*")),
        delete=lambda policy: Permission(Action.DELETE_POLICY, policy_arn(policy["id"])),
    )
    rows = [
        {
            "id": policy["id"],
            "statements": len(policy["statement"]),
            "creation_date": policy.get("creation_date") or 0,
            "url": policy_url(policy["id"]),
            "delete_url": policy_url(policy["id"], "delete"),
            "can_delete": may,
        }
        for policy, may in listed.entries
    ]
    return page.render(
        "auth/policies.html",
        status,
        **listed.context,
        auth_tab="policies",
        rows=rows,
        new=new or {"id": "", "document": ""},
        error=error,
    )


async def list_policies(request: Request) -> Response:
    """List policies: 100 from ``after``, those whose ID starts with ``prefix``."""
    return await _listing(await Page.open(request))


async def create_policy(request: Request) -> Response:
    """Create a policy; go to its page, or show the server's message next to the form."""
    page = await Page.open(request)
    form = await page.form()
    new = {"id": field(form, "id"), "document": field(form, "document")}
    body, raw = _body(new["document"], new["id"])
    return await redirect_after(
        page.send("POST", "/auth/policies", json=body, content=raw),
        page_url(policy_url(new["id"]), created=1),
        refused=lambda e: _listing(page, new=new, error=e.message, status=e.status),
    )


async def _policy(
    page: Page, policy_id: str, *, typed: str | None = None, error: str = "", status: int = 200
) -> Response:
    policy: dict[str, Any] = await page.get(f"/auth/policies/{urlpart(policy_id)}")
    arn = policy_arn(policy_id)
    may_edit, may_delete = await page.allowed(
        [Permission(Action.UPDATE_POLICY, arn), Permission(Action.DELETE_POLICY, arn)]
    )
    query = page.request.query_params
    return page.render(
        "auth/policy.html",
        status,
        auth_tab="policies",
        policy=policy,
        document=document(policy),
        typed=document(policy) if typed is None else typed,
        action=policy_url(policy_id),
        delete_url=policy_url(policy_id, "delete"),
        can_edit=may_edit,
        can_delete=may_delete,
        error=error,
        created=query.get("created", ""),
        saved=query.get("saved", ""),
    )


async def show_policy(request: Request) -> Response:
    """Show a policy's statements, with its editor for those who may change it."""
    return await _policy(await Page.open(request), request.path_params["policy"])


async def edit_policy(request: Request) -> Response:
    """Replace a policy's statements; show the server's message next to the editor."""
    page = await Page.open(request)
    form = await page.form()
    policy_id = request.path_params["policy"]
    typed = field(form, "document")
    body, raw = _body(typed, policy_id)
    return await redirect_after(
        page.send("PUT", f"/auth/policies/{urlpart(policy_id)}", json=body, content=raw),
        page_url(policy_url(policy_id), saved=1),
        refused=lambda e: _policy(page, policy_id, typed=typed, error=e.message, status=e.status),
    )


def _removal(policy_id: str) -> Removal:
    return Removal(
        heading=f"Delete policy {policy_id}",
        text=(
            "This deletes the policy and detaches it from every user and group: what it "
            "allowed stays allowed only where another policy allows it. It cannot be undone."
        ),
        button="Delete policy",
        action=policy_url(policy_id, "delete"),
        cancel_url=policy_url(policy_id),
        api_path=f"/auth/policies/{urlpart(policy_id)}",
        done_url=page_url(POLICIES_URL, deleted=policy_id),
    )


async def confirm_delete(request: Request) -> Response:
    """Ask the person to confirm deleting a policy."""
    return await ask_to_remove(await Page.open(request), _removal(request.path_params["policy"]))


async def delete_policy(request: Request) -> Response:
    """Delete a policy; show the API's refusal on the confirmation page."""
    return await remove(await Page.open(request), _removal(request.path_params["policy"]))


_POLICY = POLICIES_URL + "/{policy}"

routes: list[BaseRoute] = [
    Route(POLICIES_URL, list_policies, methods=["GET"]),
    Route(POLICIES_URL, create_policy, methods=["POST"]),
    Route(_POLICY, show_policy, methods=["GET"]),
    Route(_POLICY, edit_policy, methods=["POST"]),
    Route(_POLICY + "/delete", confirm_delete, methods=["GET"]),
    Route(_POLICY + "/delete", delete_policy, methods=["POST"]),
]
