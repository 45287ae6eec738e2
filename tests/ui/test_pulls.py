"""A repository's Pull Requests tab in a real browser: list, open, its page, merge, close.

Titles and descriptions hold markup that would run script if a page did not escape it; every
page must show them as text, open no dialog and break no content security policy (the ``page``
fixture fails the test otherwise). Each flow's outcome is checked through the REST API; readers
and mirrors get no write control.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

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

TITLE = HOSTILE[1]
DESCRIPTION = f"First line {HOSTILE[0]}\nsecond line {HOSTILE[1]}"


@dataclass(frozen=True)
class Desk:
    """The module's repository, and the REST API to set it up and check it."""

    name: str
    api: httpx.Client

    @property
    def url(self) -> str:
        return f"/ui/repositories/{self.name}/pulls"

    def branch_with(self, path: str, data: bytes, *, source: str = "main") -> str:
        """Return a new branch from ``source`` whose commit writes ``path``."""
        branch = unique("topic")
        repo = f"/repositories/{self.name}"
        _ok(self.api.post(f"{repo}/branches", json={"name": branch, "source": source}))
        _ok(self.api.post(f"{repo}/branches/{branch}/objects", params={"path": path}, content=data))
        _ok(self.api.post(f"{repo}/branches/{branch}/commits", json={"message": f"add {path}"}))
        return branch

    def open(self, source: str, title: str, destination: str = "main") -> str:
        body = {"title": title, "source_branch": source, "destination_branch": destination}
        pull_id: str = _ok(self.api.post(f"/repositories/{self.name}/pulls", json=body)).json()[
            "id"
        ]
        return pull_id

    def pull(self, pull_id: str) -> dict[str, str]:
        found: dict[str, str] = _ok(
            self.api.get(f"/repositories/{self.name}/pulls/{pull_id}")
        ).json()
        return found

    def head(self, branch: str) -> str:
        found = self.api.get(f"/repositories/{self.name}/branches/{branch}")
        commit_id: str = _ok(found).json()["commit_id"]
        return commit_id


def _ok(answer: httpx.Response) -> httpx.Response:
    assert answer.status_code < 300, answer.text
    return answer


@pytest.fixture(scope="module")
def desk(admin: httpx.Client) -> Desk:
    name = unique("desk")
    _ok(admin.post("/repositories", json={"name": name, "storage_namespace": f"local://{name}"}))
    return Desk(name, admin)


def _titles(page: Page) -> list[str]:
    return page.locator("tbody th").all_inner_texts()


def _no_markup(page: Page) -> None:
    """Check no element came from the hostile text, and no script but the UI's own."""
    assert page.locator("main img").count() == 0
    assert all(
        (s.get_attribute("src") or "inline").startswith("/ui/static/")
        for s in page.locator("script").all()
    )


def test_open_a_pull_request_then_merge_it(page: Page, server: Server, desk: Desk) -> None:
    source = desk.branch_with("data/new.csv", b"a,b\n")
    sign_in_admin(page, server, desk.url)
    page.get_by_role("link", name="Create pull request").click()
    expect(page.get_by_label("Destination branch")).to_have_value("main")
    page.get_by_label("Source branch").fill(source)
    page.get_by_label("Title").fill(TITLE)
    page.get_by_label("Description").fill(DESCRIPTION)
    assert_accessible(page)
    fits_phone(page)
    screenshot(page, "pull-create")
    page.get_by_role("button", name="Create pull request").click()
    expect(page.get_by_role("status")).to_have_text("The pull request was opened.")
    pull_id = page.url.rsplit("/", 1)[-1].split("?")[0]
    made = desk.pull(pull_id)
    assert (made["title"], made["description"], made["status"]) == (TITLE, DESCRIPTION, "open")
    assert (made["source_branch"], made["destination_branch"]) == (source, "main")
    expect(page.locator("h2.pull-title")).to_have_text(TITLE)
    expect(page.locator(".description")).to_have_text(DESCRIPTION)
    expect(page.locator(".heading .badge")).to_have_text("Open")
    expect(page.get_by_text(f"wants to merge {source} into main")).to_be_visible()
    diff = page.locator("table.diff tbody tr")
    expect(diff).to_have_count(1)
    expect(diff).to_contain_text("data/")
    diff.get_by_role("link", name="data/").click()
    expect(page.locator("table.diff tbody tr")).to_contain_text("new.csv")
    _no_markup(page)
    assert_accessible(page)
    fits_phone(page)
    screenshot(page, "pull")
    page.get_by_role("button", name="Merge pull request").click()
    expect(page.get_by_role("status")).to_have_text("The pull request was merged.")
    merged = desk.pull(pull_id)
    assert merged["status"] == "merged"
    assert merged["merged_commit_id"] == desk.head("main")
    expect(page.locator(".heading .badge")).to_have_text("Merged")
    expect(page.locator(".merge-commit")).to_have_text(merged["merged_commit_id"])
    expect(page.get_by_role("button", name=re.compile("pull request"))).to_have_count(0)
    found = desk.api.get(
        f"/repositories/{desk.name}/refs/main/objects", params={"path": "data/new.csv"}
    )
    assert _ok(found).content == b"a,b\n"
    # a merged request is listed with the closed ones
    page.get_by_role("link", name="Pull requests", exact=True).click()
    assert TITLE not in _titles(page)
    page.get_by_role("link", name="Closed").click()
    row = page.locator("tbody tr").filter(has_text=source)
    expect(row.locator(".badge")).to_have_text("Merged")
    expect(row.locator("th")).to_have_text(TITLE)
    _no_markup(page)


def test_open_a_pull_request_then_close_it(page: Page, server: Server, desk: Desk) -> None:
    source = desk.branch_with("close-me.txt", b"x")
    pull_id = desk.open(source, "to be closed")
    sign_in_admin(page, server, desk.url)
    follow(page.get_by_role("link", name="to be closed"))
    # a close without the session's CSRF token is refused, and closes nothing
    forged = page.request.post(f"{page.url}/close", form={"status": "closed"})
    assert forged.status == 403 and "Request refused" in forged.text()
    assert desk.pull(pull_id)["status"] == "open"
    page.get_by_role("button", name="Close pull request").click()
    expect(page.get_by_role("status")).to_have_text("The pull request was closed.")
    closed = desk.pull(pull_id)
    assert closed["status"] == "closed" and closed.get("closed_date")
    expect(page.locator(".heading .badge")).to_have_text("Closed")
    expect(page.get_by_role("button", name=re.compile("pull request"))).to_have_count(0)
    assert desk.head("main") != desk.head(source)
    page.get_by_role("link", name="Pull requests", exact=True).click()
    assert "to be closed" not in _titles(page)


def test_refusals_show_the_servers_messages(page: Page, server: Server, desk: Desk) -> None:
    sign_in_admin(page, server, f"{desk.url}/new")
    page.get_by_label("Source branch").fill("main")
    page.get_by_label("Title").fill("same")
    page.get_by_role("button", name="Create pull request").click()
    expect(page.locator("#create-error")).to_contain_text(
        "source and destination branches are the same"
    )
    expect(page.get_by_label("Title")).to_have_value("same")
    page.get_by_label("Source branch").fill("no-such-branch")
    page.get_by_role("button", name="Create pull request").click()
    expect(page.locator("#create-error")).to_contain_text("branch not found")
    # two requests changing one path differently: the second one's merge conflicts
    first = desk.open(desk.branch_with("shared.txt", b"one"), "first")
    second = desk.open(desk.branch_with("shared.txt", b"two"), "second")
    _ok(desk.api.put(f"/repositories/{desk.name}/pulls/{first}/merge"))
    before = desk.head("main")
    page.goto(f"{server.url}{desk.url}/{second}")
    page.get_by_role("button", name="Merge pull request").click()
    expect(page.locator("#pull-error")).to_contain_text("conflict found")
    expect(page.locator("#pull-error")).to_contain_text("shared.txt")
    assert desk.pull(second)["status"] == "open" and desk.head("main") == before
    expect(page.get_by_role("button", name="Merge pull request")).to_be_visible()
    page.goto(f"{server.url}{desk.url}/{unique('nope')}")
    expect(page.get_by_role("alert")).to_contain_text("pull request id: invalid value")


def test_compare_leads_to_a_filled_in_pull_request(page: Page, server: Server, desk: Desk) -> None:
    source = desk.branch_with("from-compare.txt", b"c")
    sign_in_admin(page, server, f"/ui/repositories/{desk.name}/compare?ref=main&compare={source}")
    page.get_by_role("link", name=f"Open a pull request for {source} into main").click()
    expect(page.get_by_label("Source branch")).to_have_value(source)
    expect(page.get_by_label("Destination branch")).to_have_value("main")


def test_open_and_closed_lists_are_paged(page: Page, server: Server, admin: httpx.Client) -> None:
    name = unique("busy")
    _ok(admin.post("/repositories", json={"name": name, "storage_namespace": f"local://{name}"}))
    busy = Desk(name, admin)
    source = busy.branch_with("x", b"x")
    titles = [f"request {i:03d}" for i in range(110)]
    for title in titles:
        busy.open(source, title)
    done = busy.open(source, "already closed")
    _ok(admin.patch(f"/repositories/{name}/pulls/{done}", json={"status": "closed"}))
    newest_first = titles[::-1]
    sign_in_admin(page, server, busy.url)
    assert _titles(page) == newest_first[:100]
    expect(page.get_by_role("link", name="Back to start")).to_have_count(0)
    lists = page.get_by_role("navigation", name="Pull request status")
    expect(lists.get_by_role("link", name="Open")).to_have_attribute("aria-current", "page")
    assert_accessible(page)
    fits_phone(page)
    screenshot(page, "pulls")
    page.get_by_role("link", name="Next page").click()
    assert _titles(page) == newest_first[100:]
    expect(page.get_by_role("link", name="Next page")).to_have_count(0)
    page.get_by_role("link", name="Back to start").click()
    assert _titles(page) == newest_first[:100]
    lists.get_by_role("link", name="Closed").click()
    assert _titles(page) == ["already closed"]


def test_a_reader_sees_no_write_controls(
    page: Page, server: Server, admin: httpx.Client, desk: Desk
) -> None:
    pull_id = desk.open(desk.branch_with("read.txt", b"r"), "for readers")
    reader = make_user(admin, "Readers")
    # lakeFS's Readers group holds no pr: action; the page shows the server's refusal
    sign_in(page, server, reader.key, reader.secret, desk.url)
    expect(page.get_by_role("alert")).to_contain_text("insufficient permissions")
    policy = {
        "id": unique("ReadPulls"),
        "statement": [
            {
                "effect": "allow",
                "action": ["pr:ListPullRequests", "pr:ReadPullRequest"],
                "resource": "*",
            }
        ],
    }
    _ok(admin.post("/auth/policies", json=policy))
    _ok(admin.put(f"/auth/users/{reader.id}/policies/{policy['id']}"))
    page.goto(server.url + desk.url)
    assert "for readers" in _titles(page)
    expect(page.get_by_role("link", name="Create pull request")).to_have_count(0)
    page.get_by_role("link", name="for readers").click()
    expect(page.locator(".heading .badge")).to_have_text("Open")
    expect(page.get_by_role("button", name=re.compile("pull request"))).to_have_count(0)
    expect(page.locator("table.diff tbody tr")).to_contain_text("read.txt")
    assert_accessible(page)
    page.goto(f"{server.url}{desk.url}/new")
    expect(page.get_by_text("Your policies do not allow opening pull requests")).to_be_visible()
    expect(page.get_by_role("button", name="Create pull request")).to_have_count(0)
    assert desk.pull(pull_id)["status"] == "open"


def test_a_mirror_offers_no_pull_requests(
    page: Page, server: Server, admin: httpx.Client, desk: Desk
) -> None:
    name = unique("copy")
    body = {
        "name": name,
        "storage_namespace": f"local://{name}",
        "mirror_of": f"us-east-1/{desk.name}",
    }
    _ok(admin.post("/mirror/repositories", json=body))
    sign_in_admin(page, server, f"/ui/repositories/{name}/pulls")
    expect(page.locator(".heading .badge")).to_have_text(f"Mirror of {desk.name} in us-east-1")
    expect(page.get_by_text("No open pull requests.")).to_be_visible()
    expect(page.get_by_role("link", name="Create pull request")).to_have_count(0)
    page.goto(f"{server.url}/ui/repositories/{name}/pulls/new")
    expect(page.get_by_text("A mirror takes no pull requests.")).to_be_visible()
    assert_accessible(page)
