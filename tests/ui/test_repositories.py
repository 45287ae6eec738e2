"""The repositories page in a real browser: create, search, page, delete; mirrors and readers.

Data is set up through the REST API as the administrator; the browser signs in through the
sign-in page. Every page is checked with axe-core and at a phone's width.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest
from playwright.sync_api import Page, expect

from tests.integration.harness import Server, unique
from tests.ui.browser import (
    assert_accessible,
    fits_phone,
    follow,
    screenshot,
    sign_in,
    sign_in_admin,
)
from tests.ui.conftest import make_user

pytestmark = pytest.mark.ui


def _create(admin: httpx.Client, name: str) -> None:
    made = admin.post("/repositories", json={"name": name, "storage_namespace": f"local://{name}"})
    assert made.status_code == 201, made.text


def _mirror(admin: httpx.Client, name: str, source: str) -> None:
    body = {"name": name, "storage_namespace": f"local://{name}", "mirror_of": source}
    made = admin.post("/mirror/repositories", json=body)
    assert made.status_code == 201, made.text


def _names(page: Page) -> list[str]:
    page.wait_for_load_state()
    return page.locator("tbody tr td:first-child a").all_inner_texts()


def test_create_shows_the_servers_messages_then_opens_the_repository(
    page: Page, server: Server, admin: httpx.Client
) -> None:
    sign_in_admin(page, server, "/ui/repositories")
    page.get_by_text("Create repository").first.click()
    page.get_by_label("Repository ID").fill("Not_A_Name")
    page.get_by_label("Storage namespace").fill("local://not-a-name")
    page.get_by_role("button", name="Create repository").click()
    expect(page.locator("#create-error")).to_have_text(
        "invalid value: validation error: invalid repository name 'Not_A_Name': use 3-63 "
        "characters of a-z, 0-9 and '-', starting with a letter or digit"
    )
    # the form stays open with what was typed
    expect(page.get_by_label("Repository ID")).to_have_value("Not_A_Name")
    assert_accessible(page)
    screenshot(page, "repository-create-error")
    name = unique("made")
    page.get_by_label("Repository ID").fill(name)
    page.get_by_label("Storage namespace").fill("ftp://elsewhere")
    page.get_by_role("button", name="Create repository").click()
    expect(page.locator("#create-error")).to_contain_text("scheme 'ftp' is not served here")
    page.get_by_label("Storage namespace").fill(f"local://{name}")
    page.get_by_label("Default branch").fill("trunk")
    page.get_by_role("button", name="Create repository").click()
    expect(page).to_have_url(f"{server.url}/ui/repositories/{name}/objects")
    expect(page.get_by_role("heading", level=1)).to_have_text(name)
    created = admin.get(f"/repositories/{name}").json()
    assert (created["default_branch"], created["storage_namespace"]) == ("trunk", f"local://{name}")


def test_search_finds_by_prefix(page: Page, server: Server, admin: httpx.Client) -> None:
    stem = unique("find")
    for suffix in ("alpha", "beta", "gamma"):
        _create(admin, f"{stem}-{suffix}")
    _create(admin, unique("other"))
    sign_in_admin(page, server, "/ui/repositories")
    page.get_by_label("Repositories starting with").fill(f"{stem}-")
    page.get_by_role("button", name="Search").click()
    expect(page).to_have_url(f"{server.url}/ui/repositories?search={stem}-")
    assert _names(page) == [f"{stem}-alpha", f"{stem}-beta", f"{stem}-gamma"]
    page.get_by_label("Repositories starting with").fill(f"{stem}-b")
    page.get_by_label("Repositories starting with").press("Enter")
    expect(page.locator("tbody tr")).to_have_count(1)
    page.get_by_label("Repositories starting with").fill(f"{stem}-zzz")
    page.get_by_role("button", name="Search").click()
    expect(page.get_by_text(f"No repository starts with “{stem}-zzz”.")).to_be_visible()


def test_paging_through_250_repositories(page: Page, server: Server, admin: httpx.Client) -> None:
    stem = unique("pg")
    names = [f"{stem}-{i:03d}" for i in range(250)]
    with ThreadPoolExecutor(4) as pool:
        list(pool.map(lambda n: _create(admin, n), names))
    sign_in_admin(page, server, f"/ui/repositories?search={stem}-")
    seen: list[str] = []
    for expected in (100, 100, 50):
        rows = _names(page)
        assert len(rows) == expected
        seen += rows
        if expected == 100:
            expect(page.get_by_role("link", name="Back to start")).to_have_count(
                0 if not seen[:-100] else 1
            )
            follow(page.get_by_role("link", name="Next page"))
    assert seen == names
    expect(page.get_by_role("link", name="Next page")).to_have_count(0)
    follow(page.get_by_role("link", name="Back to start"))
    assert _names(page) == names[:100]
    assert_accessible(page)


def test_delete_asks_for_the_name(page: Page, server: Server, admin: httpx.Client) -> None:
    name = unique("gone")
    _create(admin, name)
    sign_in_admin(page, server, f"/ui/repositories?search={name}")
    page.get_by_role("link", name=f"Delete {name}").click()
    expect(page).to_have_url(f"{server.url}/ui/repositories/{name}/delete")
    button = page.get_by_role("button", name="Delete repository")
    expect(button).to_be_disabled()
    confirm = page.get_by_label("Type the repository's name")
    confirm.fill(name[:-1])
    expect(button).to_be_disabled()
    assert_accessible(page)
    fits_phone(page)
    screenshot(page, "repository-delete")
    # the server checks the name too, whatever the script allowed
    page.evaluate("() => document.querySelector('button[type=submit].danger').disabled = false")
    button.click()
    expect(page.locator("#delete-error")).to_contain_text("does not match")
    assert admin.get(f"/repositories/{name}").status_code == 200
    page.get_by_label("Type the repository's name").fill(name)
    page.get_by_role("button", name="Delete repository").click()
    expect(page.get_by_role("status")).to_have_text(f"Repository {name} was deleted.")
    assert admin.get(f"/repositories/{name}").status_code == 404


def test_a_mirror_is_marked_and_offers_no_delete(
    page: Page, server: Server, admin: httpx.Client
) -> None:
    stem = unique("mk")
    _create(admin, f"{stem}-local")
    _mirror(admin, f"{stem}-mirror", "eu-west-1/sales")
    sign_in_admin(page, server, f"/ui/repositories?search={stem}-")
    rows = page.locator("tbody tr")
    mirror = rows.filter(has_text=f"{stem}-mirror")
    expect(mirror.locator(".badge")).to_have_text("Mirror of sales in eu-west-1")
    expect(mirror.get_by_role("link", name="Delete")).to_have_count(0)
    local = rows.filter(has_text=f"{stem}-local")
    expect(local.locator(".badge")).to_have_count(0)
    expect(local.get_by_role("link", name=f"Delete {stem}-local")).to_have_count(1)
    assert_accessible(page)
    fits_phone(page)
    screenshot(page, "repositories")


def test_a_reader_sees_no_write_controls(page: Page, server: Server, admin: httpx.Client) -> None:
    name = unique("seen")
    _create(admin, name)
    reader = make_user(admin, "Readers")
    sign_in(page, server, reader.key, reader.secret, f"/ui/repositories?search={name}")
    expect(page.locator(".current-user")).to_have_text(reader.id)
    assert _names(page) == [name]
    expect(page.get_by_text("Create repository")).to_have_count(0)
    expect(page.get_by_role("link", name="Delete")).to_have_count(0)
    # a reader who opens the deletion anyway gets the server's refusal
    page.goto(f"{server.url}/ui/repositories/{name}/delete")
    page.get_by_label("Type the repository's name").fill(name)
    page.get_by_role("button", name="Delete repository").click()
    expect(page.locator("#delete-error")).to_contain_text("insufficient permissions")
    assert admin.get(f"/repositories/{name}").status_code == 200
