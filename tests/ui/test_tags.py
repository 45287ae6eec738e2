"""A repository's Tags tab in a real browser: list, search, page, create from any ref, delete.

The module's repository has a tag whose name and whose commit's message hold markup that would run
script if the page did not escape it; the page must show both as text, open no dialog and break
no content security policy (the ``page`` fixture fails the test otherwise). Readers and mirrors
get no write control.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import httpx
import pytest
from playwright.sync_api import Page, expect

from tests.integration.harness import Server, unique
from tests.ui.browser import (
    HOSTILE,
    assert_accessible,
    fits_phone,
    screenshot,
    sign_in,
    sign_in_admin,
)
from tests.ui.conftest import make_user

pytestmark = pytest.mark.ui

MESSAGE = " ".join(HOSTILE)
# a valid tag name (no space, no "/", as lakeFS requires) that is markup if not escaped
HOSTILE_TAG = '"><script>alert(1)<!--'
"""A valid tag name (no blank, none of ``^:?*[\\``) that is markup."""


@dataclass(frozen=True)
class Shelf:
    """The module's repository: main, a branch with a hostile head, tags v1 and the hostile one."""

    name: str
    main_head: str
    hostile_head: str

    @property
    def url(self) -> str:
        return f"/ui/repositories/{self.name}/tags"


def _ok(answer: httpx.Response) -> httpx.Response:
    assert answer.status_code < 300, answer.text
    return answer


@pytest.fixture(scope="module")
def shelf(admin: httpx.Client) -> Iterator[Shelf]:
    name = unique("shelf")
    _ok(admin.post("/repositories", json={"name": name, "storage_namespace": f"local://{name}"}))
    branches = f"/repositories/{name}/branches"
    _ok(admin.post(branches, json={"name": "hostile", "source": "main"}))
    _ok(admin.post(f"{branches}/hostile/objects", params={"path": "a"}, content=b"a"))
    commit = {"message": MESSAGE, "metadata": {"note": HOSTILE[0]}}
    hostile_head = _ok(admin.post(f"{branches}/hostile/commits", json=commit)).json()["id"]
    main_head = _ok(admin.get(f"{branches}/main")).json()["commit_id"]
    tags = f"/repositories/{name}/tags"
    _ok(admin.post(tags, json={"id": "v1", "ref": "main"}))
    _ok(admin.post(tags, json={"id": HOSTILE_TAG, "ref": "hostile"}))
    yield Shelf(name, main_head, hostile_head)


def _tags(page: Page) -> list[str]:
    return page.locator("tbody th").all_inner_texts()


def _open_create(page: Page) -> None:
    """Open the "Create tag" form unless it is open (it stays open showing an error)."""
    if page.locator("details.card").get_attribute("open") is None:
        page.get_by_text("Create tag").first.click()


def test_tags_show_their_commits_with_hostile_names_and_messages_inert(
    page: Page, server: Server, shelf: Shelf
) -> None:
    sign_in_admin(page, server, shelf.url)
    assert _tags(page) == sorted([HOSTILE_TAG, "v1"])
    hostile = page.locator("tbody tr").filter(has_text="alert(1)</script>")
    expect(hostile.locator("th")).to_have_text(HOSTILE_TAG)
    expect(hostile.locator(".message")).to_have_text(MESSAGE)
    # each tag's commit links to the commit's page
    link = hostile.get_by_role("link", name=shelf.hostile_head[:12])
    expect(link).to_have_attribute(
        "href", f"/ui/repositories/{shelf.name}/commits/{shelf.hostile_head}"
    )
    v1 = page.locator("tbody tr").filter(has_text="v1")
    expect(v1.get_by_role("link", name=shelf.main_head[:12])).to_have_count(1)
    expect(v1.get_by_role("link", name="Delete v1")).to_have_count(1)
    # the markup stayed text: no element came from it, and no script but the UI's own
    assert page.locator("img").count() == 0
    assert all(s.startswith("/ui/static/") for s in _script_sources(page))
    tabs = page.get_by_role("navigation", name="Repository")
    expect(tabs.get_by_role("link", name="Tags")).to_have_attribute("aria-current", "page")
    assert_accessible(page)
    fits_phone(page)
    screenshot(page, "tags")


def _script_sources(page: Page) -> list[str]:
    return [s.get_attribute("src") or "inline" for s in page.locator("script").all()]


def test_create_from_any_ref_with_the_servers_messages(
    page: Page, server: Server, admin: httpx.Client, shelf: Shelf
) -> None:
    sign_in_admin(page, server, shelf.url)
    _open_create(page)
    name, ref = page.get_by_label("Tag name"), page.get_by_label("Tag (a branch")
    expect(ref).to_have_value("main")
    # the server's message echoes the refused name: markup in it stays text
    name.fill(HOSTILE[0])
    page.get_by_role("button", name="Create tag").click()
    expect(page.locator("#create-error")).to_contain_text(f"invalid tag name '{HOSTILE[0]}'")
    expect(name).to_have_value(HOSTILE[0])
    assert page.locator("main img").count() == 0
    name.fill("from-nowhere")
    ref.fill("no-such-ref")
    page.get_by_role("button", name="Create tag").click()
    expect(page.locator("#create-error")).to_contain_text("not found")
    name.fill("v1")
    ref.fill("main")
    page.get_by_role("button", name="Create tag").click()
    expect(page.locator("#create-error")).to_contain_text("tag already exists")
    for new, source, expected in (
        ("from-branch", "hostile", shelf.hostile_head),
        ("from-commit", shelf.hostile_head, shelf.hostile_head),
        ("from-expression", "hostile~1", shelf.main_head),
        ("from-tag", "v1", shelf.main_head),
    ):
        _open_create(page)
        name.fill(new)
        ref.fill(source)
        page.get_by_role("button", name="Create tag").click()
        expect(page.get_by_role("status")).to_have_text(f"Tag {new} was created.")
        made = _ok(admin.get(f"/repositories/{shelf.name}/tags/{new}")).json()["commit_id"]
        assert made == expected, (new, source)
        assert new in _tags(page)


def test_delete_asks_first(page: Page, server: Server, admin: httpx.Client, shelf: Shelf) -> None:
    tag = unique("old")
    _ok(admin.post(f"/repositories/{shelf.name}/tags", json={"id": tag, "ref": "main"}))
    sign_in_admin(page, server, shelf.url)
    page.get_by_role("link", name=f"Delete {tag}").click()
    expect(page.get_by_role("heading", level=2)).to_have_text(f"Delete tag {tag}")
    expect(page.get_by_role("link", name=shelf.main_head)).to_have_count(1)
    assert_accessible(page)
    fits_phone(page)
    screenshot(page, "tag-delete")
    page.get_by_role("link", name="Cancel").click()
    expect(page).to_have_url(server.url + shelf.url)
    assert _ok(admin.get(f"/repositories/{shelf.name}/tags/{tag}")).status_code == 200
    page.get_by_role("link", name=f"Delete {tag}").click()
    page.get_by_role("button", name="Delete tag").click()
    expect(page.get_by_role("status")).to_have_text(f"Tag {tag} was deleted.")
    assert tag not in _tags(page)
    assert admin.get(f"/repositories/{shelf.name}/tags/{tag}").status_code == 404


def test_deleting_a_tag_gone_meanwhile_shows_the_servers_message(
    page: Page, server: Server, admin: httpx.Client, shelf: Shelf
) -> None:
    tag = unique("gone")
    _ok(admin.post(f"/repositories/{shelf.name}/tags", json={"id": tag, "ref": "main"}))
    sign_in_admin(page, server, shelf.url)
    page.get_by_role("link", name=f"Delete {tag}").click()
    _ok(admin.delete(f"/repositories/{shelf.name}/tags/{tag}"))
    page.get_by_role("button", name="Delete tag").click()
    expect(page.get_by_role("alert")).to_contain_text("not found")


def test_paging_and_searching_tags(page: Page, server: Server, admin: httpx.Client) -> None:
    name = unique("many")
    _ok(admin.post("/repositories", json={"name": name, "storage_namespace": f"local://{name}"}))
    made = [f"t{i:03d}" for i in range(120)]
    for tag in made:
        _ok(admin.post(f"/repositories/{name}/tags", json={"id": tag, "ref": "main"}))
    sign_in_admin(page, server, f"/ui/repositories/{name}/tags")
    assert _tags(page) == made[:100]
    expect(page.get_by_role("link", name="Back to start")).to_have_count(0)
    page.get_by_role("link", name="Next page").click()
    assert _tags(page) == made[100:]
    expect(page.get_by_role("link", name="Next page")).to_have_count(0)
    page.get_by_role("link", name="Back to start").click()
    assert _tags(page) == made[:100]
    page.get_by_label("Tags starting with").fill("t11")
    page.get_by_role("button", name="Search").click()
    assert _tags(page) == [f"t11{i}" for i in range(10)]
    page.get_by_label("Tags starting with").fill("zzz")
    page.get_by_role("button", name="Search").click()
    expect(page.get_by_text("No tag starts with “zzz”.")).to_be_visible()


def test_a_reader_sees_no_write_controls(
    page: Page, server: Server, admin: httpx.Client, shelf: Shelf
) -> None:
    reader = make_user(admin, "Readers")
    sign_in(page, server, reader.key, reader.secret, shelf.url)
    assert "v1" in _tags(page)
    expect(page.get_by_text("Create tag")).to_have_count(0)
    expect(page.get_by_role("link", name="Delete")).to_have_count(0)
    assert_accessible(page)


def test_a_mirror_shows_its_tags_and_no_write_controls(
    page: Page, server: Server, admin: httpx.Client, shelf: Shelf
) -> None:
    name = unique("copy")
    body = {
        "name": name,
        "storage_namespace": f"local://{name}",
        "mirror_of": f"us-east-1/{shelf.name}",
    }
    _ok(admin.post("/mirror/repositories", json=body))
    head = _ok(admin.get(f"/repositories/{shelf.name}/commits/main")).json()
    _ok(admin.post(f"/repositories/{name}/mirror/commits", json=head))
    _ok(admin.put(f"/repositories/{name}/mirror/branches/main", json={"commit_id": head["id"]}))
    _ok(admin.put(f"/repositories/{name}/mirror/tags/v1", json={"commit_id": head["id"]}))
    sign_in_admin(page, server, f"/ui/repositories/{name}/tags")
    expect(page.locator(".heading .badge")).to_have_text(f"Mirror of {shelf.name} in us-east-1")
    assert _tags(page) == ["v1"]
    expect(page.get_by_text("Create tag")).to_have_count(0)
    expect(page.get_by_role("link", name="Delete")).to_have_count(0)
    assert_accessible(page)
