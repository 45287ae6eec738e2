"""Access keys in a real browser: a new secret is shown once, signs in, and goes with its key.

An administrator creates a key for a user whose group's policy lets it read one repository: the
key's page shows the secret with a warning and copy buttons, answered ``Cache-Control:
no-store``; reloading the page, or coming back to it, shows no secret. The user then signs in
with the new key in another browser and sees what the policy allows (the repository, and no
other, and no administration); once the key is deleted, it signs nobody in. Anyone manages
their own keys at /ui/auth/credentials the same way.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass

import httpx
import pytest
from playwright.sync_api import Browser, Page, Response, expect

from tests.integration.harness import Server, unique
from tests.ui.browser import (
    DESKTOP,
    assert_accessible,
    fits_phone,
    screenshot,
    sign_in,
    sign_in_admin,
)
from tests.ui.conftest import Watch, make_user

pytestmark = pytest.mark.ui

_KEY_PAGE = re.compile(r"/credentials/AKIA[A-Z0-9]+$")


def _ok(answer: httpx.Response) -> httpx.Response:
    assert answer.status_code < 300, answer.text
    return answer


@dataclass(frozen=True)
class Reader:
    """A user whose group's policy lets it list repositories and read one: ``shop``."""

    user: str
    shop: str
    other: str


@pytest.fixture(scope="module")
def reader(admin: httpx.Client) -> Iterator[Reader]:
    user, group, policy = unique("ana"), unique("shoppers"), unique("ReadShop")
    shop, other = unique("shop"), unique("other")
    for name in (shop, other):
        _ok(
            admin.post("/repositories", json={"name": name, "storage_namespace": f"local://{name}"})
        )
    statements = [
        {"effect": "allow", "action": ["fs:ListRepositories"], "resource": "*"},
        {
            "effect": "allow",
            "action": ["fs:Read*", "fs:List*"],
            "resource": f"arn:lakefs:fs:::repository/{shop}",
        },
    ]
    _ok(admin.post("/auth/policies", json={"id": policy, "statement": statements}))
    _ok(admin.post("/auth/users", json={"id": user}))
    _ok(admin.post("/auth/groups", json={"id": group}))
    _ok(admin.put(f"/auth/groups/{group}/members/{user}"))
    _ok(admin.put(f"/auth/groups/{group}/policies/{policy}"))
    yield Reader(user, shop, other)


def _create_key(page: Page) -> tuple[str, str, Response]:
    """Press "Create access key"; return the key's ID, its secret, and its page's answer."""
    with page.expect_response(lambda r: bool(_KEY_PAGE.search(r.url))) as shown:
        page.get_by_role("button", name="Create access key").click()
    expect(page.get_by_role("alert")).to_contain_text("It is shown this once")
    key_id = page.locator("#new-key-id").inner_text()
    secret = page.locator("#new-key-secret").inner_text()
    assert key_id.startswith("AKIA") and len(secret) >= 40, (key_id, len(secret))
    return key_id, secret, shown.value


def _secret_gone(page: Page) -> None:
    expect(page.locator("#secret-gone")).to_contain_text("is not shown again")
    expect(page.locator("#new-key-secret")).to_have_count(0)


def _refused_sign_in(page: Page, server: Server, key: str, secret: str) -> None:
    page.goto(server.url + "/ui/login")
    page.get_by_label("Access key ID").fill(key)
    page.get_by_label("Secret access key").fill(secret)
    page.get_by_role("button", name="Sign in").click()
    expect(page.get_by_role("alert")).to_contain_text("error authenticating request")


def test_a_new_key_shows_its_secret_once_and_signs_the_user_in(
    page: Page, browser: Browser, watch: Watch, server: Server, admin: httpx.Client, reader: Reader
) -> None:
    page.context.grant_permissions(["clipboard-read", "clipboard-write"], origin=server.url)
    sign_in_admin(page, server, f"/ui/auth/users/{reader.user}/credentials")
    expect(page.get_by_text("No access keys.")).to_be_visible()
    key_id, secret, answer = _create_key(page)
    assert answer.status == 200
    assert answer.headers["cache-control"] == "no-store"
    # the cookie that carried the secret to this page is gone with the answer
    assert not [c for c in page.context.cookies() if c["name"] == "lakemirror_new_key"]
    page.get_by_role("button", name="Copy the secret access key").click()
    expect(page.get_by_role("status")).to_have_text("Copied to the clipboard.")
    assert page.evaluate("() => navigator.clipboard.readText()") == secret
    assert_accessible(page)
    fits_phone(page)
    screenshot(page, "access-key-new")

    # reloading shows no secret, and creates no other key
    page.reload()
    _secret_gone(page)
    listed = _ok(admin.get(f"/auth/users/{reader.user}/credentials")).json()["results"]
    assert [k["access_key_id"] for k in listed] == [key_id]
    assert secret not in page.content()
    screenshot(page, "access-key-shown")

    # coming back to the page shows no secret either
    page.goto(f"{server.url}/ui/auth/users/{reader.user}/credentials")
    _, second_secret, _ = _create_key(page)
    page.get_by_role("link", name="All access keys").click()
    page.go_back()
    _secret_gone(page)
    assert second_secret not in page.content()

    # the user signs in with the first key elsewhere and sees what its group's policy allows
    context = browser.new_context(viewport=DESKTOP)
    context.on("dialog", lambda d: (watch.dialogs.append(d.message), d.dismiss()))
    try:
        other = context.new_page()
        sign_in(other, server, key_id, secret, "/ui/repositories")
        expect(other.locator(".current-user")).to_have_text(reader.user)
        names = other.locator("tbody td a").all_inner_texts()
        assert reader.shop in names and reader.other in names
        nav = other.get_by_role("navigation", name="Main")
        expect(nav.get_by_role("link", name="Administration")).to_have_count(0)
        # its policy does not let it manage its own keys: the header does not offer them
        expect(other.get_by_role("link", name="Access keys")).to_have_count(0)
        expect(other.get_by_text("Create repository")).to_have_count(0)
        other.goto(f"{server.url}/ui/repositories/{reader.shop}/branches")
        expect(other.locator("tbody th")).to_have_text(["main default"])
        refused = other.goto(f"{server.url}/ui/repositories/{reader.other}/branches")
        assert refused is not None and refused.status == 403
        expect(other.get_by_role("alert")).to_contain_text("insufficient permissions")

        # the administrator deletes the key: it signs nobody in any more
        page.goto(f"{server.url}/ui/auth/users/{reader.user}/credentials")
        page.get_by_role("link", name=f"Delete {key_id}").click()
        expect(page.get_by_role("heading", level=1)).to_have_text(f"Delete access key {key_id}")
        assert_accessible(page)
        screenshot(page, "access-key-delete")
        page.get_by_role("button", name="Delete access key").click()
        expect(page.get_by_role("status")).to_have_text(f"Access key {key_id} was deleted.")
        other.context.clear_cookies()
        _refused_sign_in(other, server, key_id, secret)
    finally:
        context.close()


def test_anyone_manages_their_own_keys(page: Page, server: Server, admin: httpx.Client) -> None:
    writer = make_user(admin, "Writers")
    sign_in(page, server, writer.key, writer.secret, "/ui/repositories")
    page.get_by_role("link", name="Access keys").click()
    expect(page).to_have_url(server.url + "/ui/auth/credentials")
    expect(page.get_by_role("heading", level=1)).to_have_text("Your access keys")
    expect(page.locator("tbody th")).to_have_text([writer.key])
    key_id, secret, answer = _create_key(page)
    assert answer.url == f"{server.url}/ui/auth/credentials/{key_id}"
    assert answer.headers["cache-control"] == "no-store"
    # the script adds the copy buttons
    expect(page.get_by_role("button", name="Copy the access key ID")).to_be_visible()
    page.get_by_role("link", name="All access keys").click()
    expect(page.locator("tbody th")).to_have_count(2)
    assert_accessible(page)
    fits_phone(page)
    screenshot(page, "access-keys")
    signed = httpx.get(f"{server.url}/api/v1/user", auth=(key_id, secret))
    assert _ok(signed).json()["user"]["id"] == writer.id
    page.get_by_role("link", name=f"Delete {key_id}").click()
    expect(page.get_by_text("This deletes your access key")).to_be_visible()
    page.get_by_role("button", name="Delete access key").click()
    expect(page.get_by_role("status")).to_have_text(f"Access key {key_id} was deleted.")
    assert httpx.get(f"{server.url}/api/v1/user", auth=(key_id, secret)).status_code == 401
    # another user's keys are refused with the server's message
    answer_page = page.goto(f"{server.url}/ui/auth/users/admin/credentials")
    assert answer_page is not None and answer_page.status == 403
    expect(page.get_by_role("alert")).to_contain_text("insufficient permissions")


def test_the_secret_travels_sealed_to_its_page_only(
    server: Server, admin: httpx.Client, reader: Reader
) -> None:
    # over raw HTTP: what the browser is handed between the form and the key's page
    with httpx.Client(base_url=server.url, follow_redirects=True) as client:
        signed = client.post(
            "/ui/login",
            data={
                "access_key_id": server.access_key_id,
                "secret_access_key": server.secret_access_key,
                "next": "/ui/auth/credentials",
            },
        )
        token = re.search(r'name="csrf-token" content="([^"]+)"', signed.text)
        assert token is not None
        keys = f"/ui/auth/users/{reader.user}/credentials"
        before = _ok(admin.get(f"/auth/users/{reader.user}/credentials")).json()["results"]
        # a POST without the CSRF token creates nothing
        assert client.post(keys, data={}).status_code == 403
        made = client.post(keys, data={"csrf_token": token.group(1)}, follow_redirects=False)
        assert made.status_code == 303
        target = made.headers["location"]
        key_id = target.rsplit("/", 1)[1]
        assert target == f"{keys}/{key_id}"
        cookie = made.headers["set-cookie"]
        for attribute in (f"Path={target};", "HttpOnly", "SameSite=strict", "Max-Age=300"):
            assert attribute in cookie, cookie
        after = _ok(admin.get(f"/auth/users/{reader.user}/credentials")).json()["results"]
        assert len(after) == len(before) + 1
        # the list, sent no cookie (its path is the key's page), shows no secret
        assert 'id="new-key-secret"' not in client.get(keys).text
        shown = client.get(target)
        assert shown.headers["cache-control"] == "no-store"
        secret = re.search(r'id="new-key-secret"[^>]*>([^<]+)<', shown.text)
        assert secret is not None and secret.group(1) not in cookie
        assert 'id="new-key-secret"' not in client.get(target).text
