"""The administration pages in a real browser: users, groups, policies and their relations.

An administrator creates a user, a group and a policy (a document that is not JSON first, which
the server refuses with its message), adds the user to the group, attaches the policy to the
group, and the user's page shows it among its effective policies. User IDs cannot hold markup,
but e-mail addresses, group descriptions and policy statements' resources can: they show as
text, with no dialog and no script. Someone who may not list users sees no Administration link
and, opening its pages anyway, the server's refusal. Access keys: tests/ui/test_access_keys.py.
"""

from __future__ import annotations

import json
from collections.abc import Iterator

import httpx
import pytest
from playwright.sync_api import Page, expect

from tests.integration.harness import Server, unique
from tests.ui.browser import (
    HOSTILE,
    assert_accessible,
    fits_phone,
    follow,
    screenshot,
    sign_in,
    sign_in_admin,
)
from tests.ui.conftest import make_user

pytestmark = pytest.mark.ui

HOSTILE_EMAIL = f'"{HOSTILE[0]}"@example.com'
"""A valid address (a quoted local part may hold any printable character) that is markup."""
HOSTILE_DESCRIPTION = " ".join(HOSTILE)
HOSTILE_RESOURCE = f"arn:lakefs:fs:::repository/{HOSTILE[1]}{HOSTILE[0]}"


def _ok(answer: httpx.Response) -> httpx.Response:
    assert answer.status_code < 300, answer.text
    return answer


def _inert(page: Page) -> None:
    """Check no markup a user wrote became an element: no image, no script but the UI's own."""
    assert page.locator("img").count() == 0
    sources = [s.get_attribute("src") or "" for s in page.locator("script").all()]
    assert sources and all(s.startswith("/ui/static/") for s in sources), sources


def _rows(page: Page) -> list[str]:
    page.wait_for_load_state()
    return [t.split(" ")[0] for t in page.locator("tbody th").all_inner_texts()]


def _open(page: Page, summary: str) -> None:
    """Open a form's card unless it is open (it stays open showing an error)."""
    card = page.locator("details.card").filter(has_text=summary)
    if card.get_attribute("open") is None:
        card.locator("summary").click()


@pytest.fixture(scope="module")
def hostile_group(admin: httpx.Client) -> Iterator[str]:
    group = unique("hostile")
    _ok(admin.post("/auth/groups", json={"id": group, "description": HOSTILE_DESCRIPTION}))
    yield group


def test_an_administrator_builds_a_user_group_and_policy(
    page: Page, server: Server, admin: httpx.Client
) -> None:
    user, group, policy = unique("jane"), unique("team"), unique("ReadShop")
    shop = unique("shop")
    sign_in_admin(page, server, "/ui/repositories")
    page.get_by_role("navigation", name="Main").get_by_role("link", name="Administration").click()
    expect(page).to_have_url(server.url + "/ui/auth/users")
    expect(page.get_by_role("heading", level=1)).to_have_text("Users")

    # the user, with an e-mail address holding markup
    _open(page, "Create user")
    page.get_by_label("User ID").fill(user)
    page.get_by_label("E-mail (optional)").fill(HOSTILE_EMAIL)
    page.get_by_role("button", name="Create user").click()
    expect(page.get_by_role("status")).to_have_text(f"User {user} was created.")
    expect(page.locator(".facts dd").first).to_have_text(HOSTILE_EMAIL)
    _inert(page)
    assert _ok(admin.get(f"/auth/users/{user}")).json()["email"] == HOSTILE_EMAIL

    # the group
    page.get_by_role("navigation", name="Administration").get_by_role("link", name="Groups").click()
    _open(page, "Create group")
    page.get_by_label("Group ID").fill(group)
    page.get_by_label("Description (optional)").fill("Reads the shop")
    page.get_by_role("button", name="Create group").click()
    expect(page.get_by_role("status")).to_have_text(f"Group {group} was created.")

    # the policy: text that is no JSON gets the server's message, the text kept
    nav = page.get_by_role("navigation", name="Administration")
    nav.get_by_role("link", name="Policies").click()
    _open(page, "Create policy")
    page.get_by_label("Policy ID").fill(policy)
    page.get_by_label("Statements (a JSON document)").fill('{"statement": [nope]}')
    page.get_by_role("button", name="Create policy").click()
    expect(page.locator("#create-error")).to_have_text(
        "invalid request: JSON decode error at character 15: Expecting value"
    )
    expect(page.get_by_label("Statements (a JSON document)")).to_have_value('{"statement": [nope]}')
    assert admin.get(f"/auth/policies/{policy}").status_code == 404
    assert_accessible(page)
    screenshot(page, "admin-policy-error")
    statements = [
        {"effect": "allow", "action": ["fs:ListRepositories"], "resource": "*"},
        {
            "effect": "allow",
            "action": ["fs:Read*", "fs:List*"],
            "resource": f"arn:lakefs:fs:::repository/{shop}",
        },
    ]
    page.get_by_label("Statements (a JSON document)").fill(json.dumps({"statement": statements}))
    page.get_by_role("button", name="Create policy").click()
    expect(page.get_by_role("status")).to_have_text(f"Policy {policy} was created.")
    expect(page.locator("table.statements tbody tr")).to_have_count(2)

    # the user joins the group from its page; the group gets the policy from the group's page
    page.goto(f"{server.url}/ui/auth/users/{user}")
    expect(page).to_have_url(f"{server.url}/ui/auth/users/{user}/groups")
    page.get_by_label("Group ID").fill(group)
    page.get_by_role("button", name="Add to group").click()
    expect(page.get_by_role("status")).to_have_text(f"Added to group {group}.")
    assert _rows(page) == [group]
    page.get_by_role("link", name=group, exact=True).click()
    expect(page).to_have_url(f"{server.url}/ui/auth/groups/{group}/members")
    assert _rows(page) == [user]
    page.get_by_role("link", name="Attached Policies").click()
    page.get_by_label("Policy ID").fill(policy)
    page.get_by_role("button", name="Attach policy").click()
    expect(page.get_by_role("status")).to_have_text(f"Policy {policy} was attached.")
    assert _rows(page) == [policy]
    assert_accessible(page)
    fits_phone(page)
    screenshot(page, "admin-group")

    # the user's effective policies come through the group; none is attached directly
    page.goto(f"{server.url}/ui/auth/users/{user}/policies")
    expect(page.get_by_text("None.")).to_be_visible()
    follow(page.get_by_role("link", name="Effective Attached Policies"))
    assert _rows(page) == [policy]
    expect(page.get_by_role("button")).to_have_count(1)  # only the header's Sign out
    assert_accessible(page)
    fits_phone(page)
    screenshot(page, "admin-user")
    effective = _ok(admin.get(f"/auth/users/{user}/policies", params={"effective": True}))
    assert [p["id"] for p in effective.json()["results"]] == [policy]


def test_attach_and_detach_a_policy_and_leave_a_group(
    page: Page, server: Server, admin: httpx.Client
) -> None:
    user = unique("sam")
    _ok(admin.post("/auth/users", json={"id": user}))
    _ok(admin.put(f"/auth/groups/Readers/members/{user}"))
    sign_in_admin(page, server, f"/ui/auth/users/{user}/policies")
    # the suggestions are the policies the person may list
    options = page.locator("#other-choices option")
    assert "FSReadAll" in [o.get_attribute("value") for o in options.all()]
    page.get_by_label("Policy ID").fill("no-such-policy")
    page.get_by_role("button", name="Attach policy").click()
    expect(page.locator("#add-error")).to_contain_text("not found")
    page.get_by_label("Policy ID").fill("FSReadAll")
    follow(page.get_by_role("button", name="Attach policy"))
    assert _rows(page) == ["FSReadAll"]
    page.get_by_role("link", name="Detach FSReadAll").click()
    expect(page.get_by_role("heading", level=1)).to_have_text("Detach policy: FSReadAll")
    assert_accessible(page)
    fits_phone(page)
    screenshot(page, "admin-detach")
    follow(page.get_by_role("link", name="Cancel"))
    assert _rows(page) == ["FSReadAll"]
    page.get_by_role("link", name="Detach FSReadAll").click()
    page.get_by_role("button", name="Detach policy").click()
    expect(page.get_by_role("status")).to_have_text("Policy FSReadAll was detached.")
    assert _ok(admin.get(f"/auth/users/{user}/policies")).json()["results"] == []
    page.get_by_role("link", name="Group Memberships").click()
    page.get_by_role("link", name="Remove Readers").click()
    expect(page.get_by_text(f"User {user} leaves group Readers")).to_be_visible()
    page.get_by_role("button", name="Remove from group").click()
    expect(page.get_by_role("status")).to_have_text("Removed from group Readers.")
    assert _ok(admin.get(f"/auth/users/{user}/groups")).json()["results"] == []


def test_users_page_by_prefix_and_are_deleted_after_a_confirmation(
    page: Page, server: Server, admin: httpx.Client
) -> None:
    stem = unique("pg")
    made = [f"{stem}-{i:03d}" for i in range(105)]
    for user in made:
        _ok(admin.post("/auth/users", json={"id": user}))
    sign_in_admin(page, server, "/ui/auth/users")
    expect(page.locator("tbody tr").filter(has_text="admin").locator(".badge")).to_have_text("you")
    expect(page.get_by_role("link", name="Delete admin")).to_have_count(0)
    page.get_by_label("Users starting with").fill(stem)
    follow(page.get_by_role("button", name="Search"))
    assert _rows(page) == made[:100]
    expect(page.get_by_role("link", name="Back to start")).to_have_count(0)
    follow(page.get_by_role("link", name="Next page"))
    assert _rows(page) == made[100:]
    expect(page.get_by_role("link", name="Next page")).to_have_count(0)
    assert_accessible(page)
    fits_phone(page)
    screenshot(page, "admin-users")
    follow(page.get_by_role("link", name="Back to start"))
    assert _rows(page) == made[:100]
    page.get_by_role("link", name=f"Delete {made[0]}").click()
    expect(page.get_by_role("heading", level=1)).to_have_text(f"Delete user {made[0]}")
    page.get_by_role("button", name="Delete user").click()
    expect(page.get_by_role("status")).to_have_text(f"User {made[0]} was deleted.")
    assert admin.get(f"/auth/users/{made[0]}").status_code == 404
    # an ID the server refuses shows its message, with what was typed kept
    _open(page, "Create user")
    page.get_by_label("User ID").fill("two words")
    page.get_by_label("E-mail (optional)").fill("not an address")
    page.get_by_role("button", name="Create user").click()
    expect(page.locator("#create-error")).to_contain_text("invalid user ID 'two words'")
    expect(page.get_by_label("E-mail (optional)")).to_have_value("not an address")
    page.get_by_label("User ID").fill(made[1])
    page.get_by_label("E-mail (optional)").fill("")
    page.get_by_role("button", name="Create user").click()
    expect(page.locator("#create-error")).to_contain_text("Already exists")


def test_a_hostile_group_description_and_its_acl_show_as_text(
    page: Page, server: Server, admin: httpx.Client, hostile_group: str
) -> None:
    member = unique("mem")
    _ok(admin.post("/auth/users", json={"id": member, "email": HOSTILE_EMAIL}))
    _ok(admin.put(f"/auth/groups/{hostile_group}/members/{member}"))
    sign_in_admin(page, server, "/ui/auth/groups")
    row = page.locator("tbody tr").filter(has_text=hostile_group)
    expect(row.locator("td.text")).to_have_text(HOSTILE_DESCRIPTION)
    _inert(page)
    assert_accessible(page)
    fits_phone(page)
    screenshot(page, "admin-groups")
    row.get_by_role("link", name=hostile_group, exact=True).click()
    facts = page.locator(".facts")
    expect(facts.locator("dd").first).to_have_text(HOSTILE_DESCRIPTION)
    # no policy attached: lakeFS answers a blank ACL
    acl = facts.locator("div").filter(has_text="ACL").locator("dd")
    expect(acl).to_have_text("none: no policy is attached")
    expect(page.locator("tbody tr").filter(has_text=member).locator("td.text")).to_have_text(
        HOSTILE_EMAIL
    )
    _inert(page)
    # with an ACL, the group's one policy is its level
    _ok(admin.post(f"/auth/groups/{hostile_group}/acl", json={"permission": "Write"}))
    page.reload()
    expect(acl.locator(".badge.acl")).to_have_text("Write")
    # Admins's several policies are no ACL: lakeFS's answer says so
    page.goto(f"{server.url}/ui/auth/groups/Admins/members")
    expect(acl).to_have_text("none: Multiple policies attached to group - no ACL")
    # deleting a group asks first
    page.goto(f"{server.url}/ui/auth/groups/{hostile_group}/delete")
    page.get_by_role("button", name="Delete group").click()
    expect(page.get_by_role("status")).to_have_text(f"Group {hostile_group} was deleted.")
    assert admin.get(f"/auth/groups/{hostile_group}").status_code == 404


def test_a_policy_shows_its_statements_and_is_edited_and_deleted(
    page: Page, server: Server, admin: httpx.Client
) -> None:
    policy = unique("Hostile")
    statements = [
        {"effect": "allow", "action": ["fs:ReadObject", "fs:ListObjects"], "resource": "*"},
        {"effect": "deny", "action": ["fs:ReadObject"], "resource": HOSTILE_RESOURCE},
    ]
    _ok(admin.post("/auth/policies", json={"id": policy, "statement": statements}))
    sign_in_admin(page, server, f"/ui/auth/policies?prefix={policy}")
    assert _rows(page) == [policy]
    assert_accessible(page)
    fits_phone(page)
    screenshot(page, "admin-policies")
    page.get_by_role("link", name=policy, exact=True).click()
    rows = page.locator("table.statements tbody tr")
    expect(rows.nth(0)).to_contain_text("fs:ReadObject, fs:ListObjects")
    expect(rows.nth(1).locator("code.resource")).to_have_text(HOSTILE_RESOURCE)
    expect(rows.nth(1).locator(".effect-deny")).to_have_text("deny")
    _inert(page)
    assert_accessible(page)
    fits_phone(page)
    screenshot(page, "admin-policy")
    # the server judges an edit: an unknown effect is refused with its message
    _open(page, "Edit")
    editor = page.get_by_label("Statements (a JSON document)")
    assert json.loads(editor.input_value()) == {"statement": statements}
    wrong = json.dumps({"statement": [{**statements[0], "effect": "maybe"}]})
    editor.fill(wrong)
    page.get_by_role("button", name="Save policy").click()
    expect(page.locator("#edit-error")).to_have_text(
        "invalid request: statement.0.effect: Input should be 'allow' or 'deny'"
    )
    expect(editor).to_have_value(wrong)
    editor.fill(json.dumps({"statement": statements[:1]}))
    page.get_by_role("button", name="Save policy").click()
    expect(page.get_by_role("status")).to_have_text(f"Policy {policy} was saved.")
    expect(rows).to_have_count(1)
    assert _ok(admin.get(f"/auth/policies/{policy}")).json()["statement"] == statements[:1]
    page.get_by_role("link", name=f"Delete policy {policy}").click()
    page.get_by_role("button", name="Delete policy").click()
    expect(page.get_by_role("status")).to_have_text(f"Policy {policy} was deleted.")
    assert admin.get(f"/auth/policies/{policy}").status_code == 404


def test_someone_who_may_not_list_users_gets_no_administration(
    page: Page, server: Server, admin: httpx.Client
) -> None:
    reader = make_user(admin, "Readers")
    sign_in(page, server, reader.key, reader.secret, "/ui/repositories")
    main_nav = page.get_by_role("navigation", name="Main")
    expect(main_nav.get_by_role("link", name="Repositories")).to_be_visible()
    expect(main_nav.get_by_role("link", name="Administration")).to_have_count(0)
    for path in ("/ui/auth/users", "/ui/auth/groups", "/ui/auth/policies/FSReadAll"):
        answer = page.goto(server.url + path)
        assert answer is not None and answer.status == 403, path
        expect(page.get_by_role("alert")).to_contain_text("insufficient permissions")
    # /ui/auth leads them to their own access keys, which they may manage
    page.goto(server.url + "/ui/auth")
    expect(page).to_have_url(server.url + "/ui/auth/credentials")
    expect(page.get_by_role("navigation", name="Administration")).to_have_count(0)
    expect(page.get_by_role("heading", level=1)).to_have_text("Your access keys")
    # the administrator sees the link
    page.context.clear_cookies()
    sign_in_admin(page, server, "/ui/repositories")
    expect(main_nav.get_by_role("link", name="Administration")).to_be_visible()
