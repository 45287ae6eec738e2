"""A repository's Branches tab in a real browser: list, page, create, delete, reset, protection.

The module's repository has a branch whose head commit message holds markup that would run
script if the page did not escape it; the page must show it as text, open no dialog and break no
content security policy (the ``page`` fixture fails the test otherwise). Readers and mirrors get
no write control. The tab is also used with the keyboard alone, from signing in to confirming a
deletion, every link and button it passes showing where the focus is.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import httpx
import pytest
from playwright.sync_api import Page, expect

from mirror.ui.views import repository
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

MESSAGE = " ".join(HOSTILE)
TABS = [
    "Objects",
    "Uncommitted Changes",
    "Commits",
    "Branches",
    "Tags",
    "Compare",
    "Pull Requests",
    "Actions",
    "Settings",
]


@dataclass(frozen=True)
class Shop:
    """The module's repository: main, a protected release-1, and a branch with a hostile head."""

    name: str
    hostile_head: str

    @property
    def url(self) -> str:
        return f"/ui/repositories/{self.name}/branches"


def _ok(answer: httpx.Response) -> httpx.Response:
    assert answer.status_code < 300, answer.text
    return answer


@pytest.fixture(scope="module")
def shop(admin: httpx.Client) -> Iterator[Shop]:
    name = unique("shop")
    _ok(admin.post("/repositories", json={"name": name, "storage_namespace": f"local://{name}"}))
    branches = f"/repositories/{name}/branches"
    _ok(admin.post(branches, json={"name": "hostile", "source": "main"}))
    _ok(admin.post(branches, json={"name": "release-1", "source": "main"}))
    _ok(admin.post(f"{branches}/hostile/objects", params={"path": HOSTILE[0]}, content=b"x"))
    commit = {"message": MESSAGE, "metadata": {"note": HOSTILE[1]}}
    head = _ok(admin.post(f"{branches}/hostile/commits", json=commit)).json()["id"]
    _ok(admin.post(f"/repositories/{name}/tags", json={"id": "v1", "ref": "main"}))
    rules = [{"pattern": "release-*"}]
    _ok(admin.put(f"/repositories/{name}/settings/branch_protection", json=rules))
    yield Shop(name, head)


def _open_create(page: Page) -> None:
    """Open the "Create branch" form unless it is open (it stays open showing an error)."""
    if page.locator("details.card").get_attribute("open") is None:
        page.get_by_text("Create branch").first.click()


def _rows(page: Page) -> list[str]:
    page.wait_for_load_state()
    return [t.split(" ")[0] for t in page.locator("tbody th").all_inner_texts()]


def test_branches_show_heads_defaults_and_protection_with_hostile_text_inert(
    page: Page, server: Server, shop: Shop
) -> None:
    sign_in_admin(page, server, shop.url)
    assert _rows(page) == ["hostile", "main", "release-1"]
    hostile = page.locator("tbody tr").filter(has_text="hostile")
    expect(hostile.locator(".message")).to_have_text(MESSAGE)
    expect(hostile.locator("code")).to_have_text(shop.hostile_head[:12])
    # the markup stayed text: no element came from it, and no script but the UI's own
    assert page.locator("img").count() == 0
    assert page.locator("script").count() == 1
    assert page.locator("script").get_attribute("src", timeout=1000).startswith("/ui/static/")
    main = page.locator("tbody tr").filter(has_text="main")
    expect(main.locator(".badge")).to_have_text("default")
    expect(main.get_by_role("link", name="Delete")).to_have_count(0)
    release = page.locator("tbody tr").filter(has_text="release-1")
    expect(release.locator(".badge.protected")).to_have_text("Protected")
    # protection guards a branch's contents; lakeFS lets it be deleted
    expect(release.get_by_role("link", name="Delete release-1")).to_have_count(1)
    expect(hostile.get_by_role("link", name="Delete hostile")).to_have_count(1)
    assert_accessible(page)
    fits_phone(page)
    screenshot(page, "branches")


def test_the_tabs_are_lakefs(page: Page, server: Server, shop: Shop) -> None:
    # a repository opens on Objects (tests/ui/test_objects.py); its Branches tab is this page
    sign_in_admin(page, server, shop.url)
    expect(page).to_have_url(server.url + shop.url)
    tabs = page.get_by_role("navigation", name="Repository")
    assert tabs.locator("li").all_inner_texts() == TABS
    # every tab a view serves is a link, and only those
    expect(tabs.get_by_role("link")).to_have_text([t.label for t in repository.TABS if t.served])
    expect(tabs.get_by_role("link", name="Branches")).to_have_attribute("aria-current", "page")
    page.goto(f"{server.url}/ui/repositories/{unique('absent')}/branches")
    expect(page.get_by_role("alert")).to_contain_text("repository not found")
    assert_accessible(page)


def test_create_from_any_ref_with_the_servers_messages(
    page: Page, server: Server, admin: httpx.Client, shop: Shop
) -> None:
    sign_in_admin(page, server, shop.url)
    _open_create(page)
    name, source = page.get_by_label("Branch name"), page.get_by_label("Create from")
    expect(source).to_have_value("main")
    name.fill(HOSTILE[0])
    page.get_by_role("button", name="Create branch").click()
    expect(page.locator("#create-error")).to_contain_text(f"invalid branch name '{HOSTILE[0]}'")
    assert page.locator("img").count() == 0
    name.fill("from-nowhere")
    source.fill("no-such-ref")
    page.get_by_role("button", name="Create branch").click()
    expect(page.locator("#create-error")).to_contain_text("not found")
    for new, ref, expected in (
        ("from-tag", "v1", "main"),
        ("from-commit", shop.hostile_head, "hostile"),
        ("from-expression", "hostile~1", "main"),
    ):
        _open_create(page)
        name.fill(new)
        source.fill(ref)
        page.get_by_role("button", name="Create branch").click()
        expect(page.get_by_role("status")).to_have_text(f"Branch {new} was created.")
        made = admin.get(f"/repositories/{shop.name}/branches/{new}").json()["commit_id"]
        wanted = admin.get(f"/repositories/{shop.name}/branches/{expected}").json()["commit_id"]
        assert made == wanted, (new, ref)


def test_delete_asks_first(page: Page, server: Server, admin: httpx.Client, shop: Shop) -> None:
    branch = unique("old").replace("-", "_")
    _ok(admin.post(f"/repositories/{shop.name}/branches", json={"name": branch, "source": "v1"}))
    sign_in_admin(page, server, shop.url)
    page.get_by_role("link", name=f"Delete {branch}").click()
    expect(page.get_by_role("heading", level=2)).to_have_text(f"Delete branch {branch}")
    assert_accessible(page)
    fits_phone(page)
    screenshot(page, "branch-delete")
    page.get_by_role("link", name="Cancel").click()
    expect(page).to_have_url(server.url + shop.url)
    page.get_by_role("link", name=f"Delete {branch}").click()
    page.get_by_role("button", name="Delete branch").click()
    expect(page.get_by_role("status")).to_have_text(f"Branch {branch} was deleted.")
    assert branch not in _rows(page)
    assert admin.get(f"/repositories/{shop.name}/branches/{branch}").status_code == 404
    # deleting the default branch anyway shows the server's refusal
    page.goto(f"{server.url}{shop.url}/main/delete")
    page.get_by_role("button", name="Delete branch").click()
    expect(page.locator("#delete-error")).to_contain_text("cannot delete repository default branch")
    assert admin.get(f"/repositories/{shop.name}/branches/main").status_code == 200


def test_paging_through_branches(page: Page, server: Server, admin: httpx.Client) -> None:
    name = unique("many")
    _ok(admin.post("/repositories", json={"name": name, "storage_namespace": f"local://{name}"}))
    made = [f"b{i:03d}" for i in range(120)]
    for branch in made:
        _ok(admin.post(f"/repositories/{name}/branches", json={"name": branch, "source": "main"}))
    everything = [*made, "main"]
    sign_in_admin(page, server, f"/ui/repositories/{name}/branches")
    assert _rows(page) == everything[:100]
    expect(page.get_by_role("link", name="Back to start")).to_have_count(0)
    follow(page.get_by_role("link", name="Next page"))
    assert _rows(page) == everything[100:]
    expect(page.get_by_role("link", name="Next page")).to_have_count(0)
    follow(page.get_by_role("link", name="Back to start"))
    assert _rows(page) == everything[:100]
    page.get_by_label("Branches starting with").fill("b11")
    follow(page.get_by_role("button", name="Search"))
    assert _rows(page) == [f"b11{i}" for i in range(10)]


def test_a_reader_sees_no_write_controls(
    page: Page, server: Server, admin: httpx.Client, shop: Shop
) -> None:
    reader = make_user(admin, "Readers")
    sign_in(page, server, reader.key, reader.secret, shop.url)
    assert _rows(page) == sorted(_rows(page)) and "main" in _rows(page)
    expect(page.get_by_text("Create branch")).to_have_count(0)
    expect(page.get_by_role("link", name="Delete")).to_have_count(0)
    expect(page.get_by_role("link", name="Reset")).to_have_count(0)
    # readers may not read protection rules: the page says so instead of showing none
    expect(page.get_by_text("Branch protection is not shown")).to_be_visible()
    expect(page.locator(".message").first).to_be_visible()
    assert_accessible(page)
    # the reset page, opened anyway, offers nothing
    page.goto(f"{server.url}{shop.url}/hostile/reset?ref=main")
    expect(page.get_by_text("Your policies do not allow resetting this branch.")).to_be_visible()
    expect(page.get_by_role("button", name="Reset branch")).to_have_count(0)
    expect(page.get_by_label("Reset to")).to_have_count(0)


def test_a_mirror_is_marked_and_shows_no_write_controls(
    page: Page, server: Server, admin: httpx.Client, shop: Shop
) -> None:
    name = unique("copy")
    body = {
        "name": name,
        "storage_namespace": f"local://{name}",
        "mirror_of": f"us-east-1/{shop.name}",
    }
    _ok(admin.post("/mirror/repositories", json=body))
    head = _ok(admin.get(f"/repositories/{shop.name}/commits/main")).json()
    _ok(admin.post(f"/repositories/{name}/mirror/commits", json=head))
    _ok(admin.put(f"/repositories/{name}/mirror/branches/main", json={"commit_id": head["id"]}))
    sign_in_admin(page, server, f"/ui/repositories/{name}/branches")
    expect(page.locator(".heading .badge")).to_have_text(f"Mirror of {shop.name} in us-east-1")
    expect(page.get_by_text("A read-only mirror")).to_be_visible()
    assert _rows(page) == ["main"]
    expect(page.get_by_text("Create branch")).to_have_count(0)
    expect(page.get_by_role("link", name="Delete")).to_have_count(0)
    expect(page.get_by_role("link", name="Reset")).to_have_count(0)
    assert_accessible(page)
    fits_phone(page)
    screenshot(page, "mirror-branches")
    page.goto(f"{server.url}/ui/repositories/{name}/branches/main/reset?ref=main")
    expect(page.get_by_text("none can be reset")).to_be_visible()
    expect(page.get_by_role("button", name="Reset branch")).to_have_count(0)


@dataclass(frozen=True)
class Rewind:
    """A repository whose main has two commits after its first, main~1's message hostile."""

    name: str
    main: list[str]
    """main's commits, newest first."""

    def url(self, branch: str = "") -> str:
        base = f"/ui/repositories/{self.name}/branches"
        return f"{base}/{branch}/reset" if branch else base


@pytest.fixture(scope="module")
def rewind(admin: httpx.Client) -> Iterator[Rewind]:
    name = unique("rewind")
    _ok(admin.post("/repositories", json={"name": name, "storage_namespace": f"local://{name}"}))
    main = f"/repositories/{name}/branches/main"
    for path, message in (("a", MESSAGE), ("b", "second")):
        _ok(admin.post(f"{main}/objects", params={"path": path}, content=b"x"))
        _ok(admin.post(f"{main}/commits", json={"message": message}))
    log = _ok(admin.get(f"/repositories/{name}/refs/main/commits")).json()["results"]
    yield Rewind(name, [c["id"] for c in log])


def _head(admin: httpx.Client, repository: str, branch: str) -> str:
    head: str = _ok(admin.get(f"/repositories/{repository}/branches/{branch}")).json()["commit_id"]
    return head


def test_reset_a_branch_to_a_ref_expression(
    page: Page, server: Server, admin: httpx.Client, rewind: Rewind
) -> None:
    branch = unique("work").replace("-", "_")
    branches = f"/repositories/{rewind.name}/branches"
    _ok(admin.post(branches, json={"name": branch, "source": "main"}))
    sign_in_admin(page, server, rewind.url())
    page.get_by_role("link", name=f"Reset {branch}").click()
    expect(page.get_by_role("heading", level=2)).to_have_text(f"Reset branch {branch}")
    expect(page.locator("#reset-head")).to_contain_text(rewind.main[0])
    expect(page.locator("#reset-head .message")).to_have_text("second")
    # a page opened without the header's permissions asks them with its own: the link is there
    nav = page.get_by_role("navigation", name="Main")
    expect(nav.get_by_role("link", name="Administration")).to_be_visible()
    expect(page.get_by_role("button", name="Reset branch")).to_have_count(0)
    target = page.get_by_label("Reset to")
    target.fill("no-such-ref")
    page.get_by_role("button", name="Show the target").click()
    expect(page.locator("#target-error")).to_contain_text("not found")
    expect(page.get_by_role("button", name="Reset branch")).to_have_count(0)
    target.fill("main~1")
    page.get_by_role("button", name="Show the target").click()
    expect(page.locator("#reset-target")).to_contain_text(rewind.main[1])
    # main~1's message holds markup: text, no element made of it
    expect(page.locator("#reset-target .message")).to_have_text(MESSAGE)
    assert page.locator("img").count() == 0
    expect(page.get_by_text("Commits made on the branch after it are no longer")).to_be_visible()
    expect(page.locator("#reset-dirty")).to_have_count(0)
    assert_accessible(page)
    fits_phone(page)
    screenshot(page, "branch-reset")
    page.get_by_role("button", name="Reset branch").click()
    expect(page).to_have_url(server.url + rewind.url() + f"?reset={branch}&to=main~1")
    expect(page.get_by_role("status")).to_have_text(f"Branch {branch} was reset to main~1.")
    assert _head(admin, rewind.name, branch) == rewind.main[1]
    row = page.locator("tbody tr").filter(has_text=branch)
    expect(row.locator("code")).to_have_text(rewind.main[1][:12])
    # Cancel goes back without changing anything
    page.goto(f"{server.url}{rewind.url(branch)}?ref=main")
    page.get_by_role("link", name="Cancel").click()
    expect(page).to_have_url(server.url + rewind.url())
    assert _head(admin, rewind.name, branch) == rewind.main[1]


def test_reset_refusals_show_the_servers_message(
    page: Page, server: Server, admin: httpx.Client, shop: Shop, rewind: Rewind
) -> None:
    # a protection rule (release-*) covers release-1: lakeFS's 403 "protected branch"
    before = _head(admin, shop.name, "release-1")
    sign_in_admin(page, server, shop.url)
    release = page.locator("tbody tr").filter(has_text="release-1")
    release.get_by_role("link", name="Reset release-1").click()
    page.get_by_label("Reset to").fill("hostile")
    page.get_by_role("button", name="Show the target").click()
    page.get_by_role("button", name="Reset branch").click()
    expect(page.locator("#reset-error")).to_contain_text("protected branch")
    assert _head(admin, shop.name, "release-1") == before
    # uncommitted changes: the page warns, and the server refuses rather than drop them
    dirty = unique("dirty").replace("-", "_")
    branches = f"/repositories/{rewind.name}/branches"
    _ok(admin.post(branches, json={"name": dirty, "source": "main"}))
    _ok(admin.post(f"{branches}/{dirty}/objects", params={"path": HOSTILE[1]}, content=b"x"))
    page.goto(f"{server.url}{rewind.url(dirty)}?ref=main~2")
    expect(page.locator("#reset-dirty")).to_contain_text("uncommitted changes")
    page.get_by_role("button", name="Reset branch").click()
    expect(page.locator("#reset-error")).to_contain_text("uncommitted changes (dirty branch)")
    assert _head(admin, rewind.name, dirty) == rewind.main[0]
    diff = _ok(admin.get(f"{branches}/{dirty}/diff")).json()["results"]
    assert [d["path"] for d in diff] == [HOSTILE[1]]
    assert_accessible(page)


FOCUSED = r"""() => {
  const e = document.activeElement;
  if (!e || e === document.body) { return null; }
  const style = getComputedStyle(e);
  const outline = style.outlineStyle !== 'none' && parseFloat(style.outlineWidth) > 0;
  return {
    tag: e.tagName,
    text: (e.innerText || e.value || '').replace(/\s+/g, ' ').trim(),
    label: e.labels && e.labels.length ? e.labels[0].innerText.replace(/\s+/g, ' ').trim() : '',
    shown: outline || style.boxShadow !== 'none',
  };
}"""
"""What has the focus: its tag, text, label, and whether its focus shows (outline or shadow)."""


def _tab_to(page: Page, wanted: Callable[[dict[str, Any]], bool], passed: list[str]) -> None:
    """Press Tab until ``wanted`` holds for the focused element; every one passed shows focus."""
    for _ in range(400):
        page.keyboard.press("Tab")
        focused: dict[str, Any] | None = page.evaluate(FOCUSED)
        if focused is None:
            continue
        passed.append(f"{focused['tag']} {focused['text'] or focused['label']}")
        assert focused["shown"], f"the focus does not show on {focused}"
        if wanted(focused):
            return
    pytest.fail(f"Tab never reached the element wanted; passed {passed[-20:]}")


def _text(text: str) -> Callable[[dict[str, Any]], bool]:
    return lambda focused: focused["text"] == text


def _label(label: str) -> Callable[[dict[str, Any]], bool]:
    return lambda focused: focused["label"].startswith(label)


def test_without_a_mouse(page: Page, server: Server, admin: httpx.Client, shop: Shop) -> None:
    branch = unique("keys").replace("-", "_")
    passed: list[str] = []
    page.goto(f"{server.url}/ui/repositories")
    _tab_to(page, _text("Skip to content"), passed)
    _tab_to(page, _label("Access key ID"), passed)
    page.keyboard.type(server.access_key_id)
    _tab_to(page, _label("Secret access key"), passed)
    page.keyboard.type(server.secret_access_key)
    page.keyboard.press("Enter")
    expect(page.get_by_role("heading", level=1)).to_have_text("Repositories")
    # the skip link leads past the header, to the page's own content
    _tab_to(page, _text("Skip to content"), passed)
    page.keyboard.press("Enter")
    _tab_to(page, lambda focused: True, passed)
    assert page.evaluate("() => document.querySelector('main').contains(document.activeElement)")
    _tab_to(page, _text(shop.name), passed)
    page.keyboard.press("Enter")
    expect(page).to_have_url(re.compile(f"/ui/repositories/{shop.name}/objects$"))
    # the Objects page asks the header's links with its own permissions: they are all there
    nav = page.get_by_role("navigation", name="Main")
    expect(nav.get_by_role("link", name="Administration")).to_be_visible()
    _tab_to(page, _text("Branches"), passed)
    page.keyboard.press("Enter")
    expect(page.get_by_role("heading", level=2)).to_have_text("Branches")
    _tab_to(page, _text("Create branch"), passed)  # the folded form's summary
    page.keyboard.press("Enter")
    _tab_to(page, _label("Branch name"), passed)
    page.keyboard.type(branch)
    _tab_to(page, _label("Create from"), passed)
    page.keyboard.press("Control+A")
    page.keyboard.type("v1")
    _tab_to(page, lambda f: f["tag"] == "BUTTON" and f["text"] == "Create branch", passed)
    page.keyboard.press("Enter")
    expect(page.get_by_role("status")).to_have_text(f"Branch {branch} was created.")
    assert _head(admin, shop.name, branch) == _head(admin, shop.name, "main")
    _tab_to(page, _text(f"Delete {branch}"), passed)
    page.keyboard.press("Enter")
    expect(page.get_by_role("heading", level=2)).to_have_text(f"Delete branch {branch}")
    _tab_to(page, _text("Delete branch"), passed)
    page.keyboard.press("Enter")
    expect(page.get_by_role("status")).to_have_text(f"Branch {branch} was deleted.")
    assert admin.get(f"/repositories/{shop.name}/branches/{branch}").status_code == 404
    links_and_buttons = [p for p in passed if p.startswith(("A ", "BUTTON ", "SUMMARY "))]
    assert len(links_and_buttons) > 10, passed
