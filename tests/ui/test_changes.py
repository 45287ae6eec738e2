"""A branch's uncommitted changes in a real browser: the tree, revert, commit.

Each test stages its changes on a branch of its own (through the REST API) over the module's
repository, whose ``main`` holds a few committed objects, and checks what the UI did through the
API. Paths holding markup that would run script if the page did not escape it must show as text
(the ``page`` fixture fails a test on any dialog or content security policy violation).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import httpx
import pytest
from playwright.sync_api import Browser, Page, expect

from tests.integration.harness import Server, unique
from tests.ui.browser import (
    DESKTOP,
    HOSTILE,
    assert_accessible,
    fits_phone,
    follow,
    screenshot,
    sign_in,
    sign_in_admin,
)
from tests.ui.conftest import make_mirror, make_user
from tests.webhooks import Receiver, webhook_receiver

pytestmark = pytest.mark.ui

COMMITTED = ("data/a.csv", "data/b.csv", "keep.txt", "docs/guide.md")
SCRIPT_FOLDER = HOSTILE[1][: HOSTILE[1].index("/") + 1]


def _ok(answer: httpx.Response) -> httpx.Response:
    assert answer.status_code < 300, answer.text
    return answer


@dataclass(frozen=True)
class Repo:
    """The module's repository and the API to stage changes in it."""

    name: str
    admin: httpx.Client

    def branch(self) -> str:
        """Create a branch from main for one test; return its name."""
        name = unique("work")
        body = {"name": name, "source": "main"}
        _ok(self.admin.post(f"/repositories/{self.name}/branches", json=body))
        return name

    def put(self, branch: str, path: str, data: bytes = b"new") -> None:
        url = f"/repositories/{self.name}/branches/{branch}/objects"
        _ok(self.admin.post(url, params={"path": path}, content=data))

    def delete(self, branch: str, path: str) -> None:
        url = f"/repositories/{self.name}/branches/{branch}/objects"
        _ok(self.admin.delete(url, params={"path": path}))

    def diff(self, branch: str) -> list[tuple[str, str]]:
        """Return the branch's uncommitted changes as (type, path), all of them."""
        url = f"/repositories/{self.name}/branches/{branch}/diff"
        found = _ok(self.admin.get(url, params={"amount": 1000})).json()["results"]
        return [(d["type"], d["path"]) for d in found]

    def head(self, branch: str) -> dict[str, Any]:
        found: dict[str, Any] = _ok(
            self.admin.get(f"/repositories/{self.name}/commits/{branch}")
        ).json()
        return found

    def changes_url(self, branch: str, prefix: str = "") -> str:
        query = f"?ref={branch}" + (f"&prefix={prefix}" if prefix else "")
        return f"/ui/repositories/{self.name}/changes{query}"


@pytest.fixture(scope="module")
def repo(admin: httpx.Client) -> Repo:
    name = unique("changes")
    _ok(admin.post("/repositories", json={"name": name, "storage_namespace": f"local://{name}"}))
    made = Repo(name, admin)
    for path in COMMITTED:
        made.put("main", path, b"committed")
    _ok(admin.post(f"/repositories/{name}/branches/main/commits", json={"message": "base"}))
    return made


@pytest.fixture(scope="module")
def receiver() -> Iterator[Receiver]:
    with webhook_receiver() as received:
        yield received


def _tree(page: Page) -> list[tuple[str, str]]:
    """Return the listed rows as (mark, name)."""
    page.wait_for_load_state()
    rows = page.locator("table.diff tbody tr")
    return [
        (row.locator(".mark").inner_text(), row.locator("th").inner_text()) for row in rows.all()
    ]


def _stage_a_bit_of_everything(repo: Repo, branch: str) -> None:
    repo.put(branch, "new.txt")
    repo.put(branch, "keep.txt", b"changed")
    repo.delete(branch, "data/a.csv")
    repo.put(branch, "data/sub/deep.csv")
    repo.put(branch, HOSTILE[0])
    repo.put(branch, f"{HOSTILE[0]}/inner.txt")
    repo.put(branch, HOSTILE[1])  # its "/" makes a folder of what comes before


def test_changes_show_as_a_marked_tree_with_hostile_paths_inert(
    page: Page, server: Server, repo: Repo
) -> None:
    branch = repo.branch()
    _stage_a_bit_of_everything(repo, branch)
    sign_in_admin(page, server, repo.changes_url(branch))
    expect(page.get_by_role("heading", level=2)).to_have_text("Uncommitted changes")
    tabs = page.get_by_role("navigation", name="Repository")
    expect(tabs.get_by_role("link", name="Uncommitted Changes")).to_have_attribute(
        "aria-current", "page"
    )
    assert _tree(page) == sorted(
        [
            ("Changes inside", SCRIPT_FOLDER),
            ("Added", HOSTILE[0]),
            ("Changes inside", f"{HOSTILE[0]}/"),
            ("Changes inside", "data/"),
            ("Changed", "keep.txt"),
            ("Added", "new.txt"),
        ],
        key=lambda row: row[1],
    )
    # the markup stayed text: no element came from it, and no script but the UI's own
    assert page.locator("img").count() == 0
    assert all(
        src.startswith("/ui/static/")
        for src in page.locator("script").evaluate_all("s => s.map(e => e.getAttribute('src'))")
    )
    head = repo.head(branch)["id"]
    expect(page.locator("main p.muted code")).to_have_text(head[:12])
    assert_accessible(page)
    fits_phone(page)
    screenshot(page, "changes")
    follow(page.get_by_role("link", name="data/", exact=True))
    assert _tree(page) == [("Removed", "a.csv"), ("Changes inside", "sub/")]
    follow(page.get_by_role("link", name="sub/", exact=True))
    assert _tree(page) == [("Added", "deep.csv")]
    crumbs = page.get_by_role("navigation", name="Folder")
    assert crumbs.get_by_role("link").all_inner_texts() == ["(top)", "data/"]
    expect(crumbs.locator("[aria-current=location]")).to_have_text("sub/")
    follow(crumbs.get_by_role("link", name="data/"))
    assert _tree(page)[0] == ("Removed", "a.csv")
    page.get_by_role("navigation", name="Folder").get_by_role("link", name="(top)").click()
    follow(page.get_by_role("link", name=f"{HOSTILE[0]}/", exact=True))
    assert _tree(page) == [("Added", "inner.txt")]
    page.get_by_role("navigation", name="Folder").get_by_role("link", name="(top)").click()
    follow(page.get_by_role("link", name=SCRIPT_FOLDER, exact=True))
    assert _tree(page) == [("Added", HOSTILE[1][len(SCRIPT_FOLDER) :])]
    assert page.locator("img").count() == 0


def test_revert_one_path_then_a_folder_then_everything(
    page: Page, server: Server, repo: Repo
) -> None:
    branch = repo.branch()
    _stage_a_bit_of_everything(repo, branch)
    sign_in_admin(page, server, repo.changes_url(branch))
    page.get_by_role("link", name="Revert keep.txt").click()
    expect(page.get_by_role("heading", level=2)).to_have_text("Revert changes")
    expect(page.locator(".card p").first).to_contain_text(
        "Revert the uncommitted change of keep.txt?"
    )
    assert_accessible(page)
    fits_phone(page)
    screenshot(page, "changes-revert")
    page.get_by_role("link", name="Cancel").click()
    assert ("changed", "keep.txt") in repo.diff(branch)
    page.get_by_role("link", name="Revert keep.txt").click()
    page.get_by_role("button", name="Revert").click()
    expect(page.get_by_role("status")).to_have_text("Reverted the uncommitted changes of keep.txt.")
    assert "keep.txt" not in [name for _, name in _tree(page)]
    assert [p for _, p in repo.diff(branch) if p == "keep.txt"] == []
    # a folder, from inside its parent, with the hostile one shown as text on the way
    page.get_by_role("link", name=f"Revert {HOSTILE[0]}/").click()
    expect(page.locator(".card p").first).to_contain_text(
        f"every uncommitted change under {HOSTILE[0]}/"
    )
    page.get_by_role("button", name="Revert").click()
    expect(page.get_by_role("status")).to_contain_text(f"{HOSTILE[0]}/")
    assert not [p for _, p in repo.diff(branch) if p.startswith(f"{HOSTILE[0]}/")]
    page.get_by_role("link", name=f"Revert {SCRIPT_FOLDER}", exact=True).click()
    page.get_by_role("button", name="Revert").click()
    page.get_by_role("link", name="data/", exact=True).click()
    page.get_by_role("link", name="Revert data/sub/").click()
    follow(page.get_by_role("button", name="Revert"))
    assert _tree(page) == [("Removed", "a.csv")]
    assert sorted(repo.diff(branch)) == [
        ("added", HOSTILE[0]),
        ("added", "new.txt"),
        ("removed", "data/a.csv"),
    ]
    page.get_by_role("link", name=f"Revert all changes of {branch}").click()
    expect(page.locator(".card p").first).to_contain_text(
        f"all uncommitted changes of branch {branch}"
    )
    page.get_by_role("button", name="Revert").click()
    expect(page.get_by_role("status")).to_have_text(
        f"Reverted all uncommitted changes of {branch}."
    )
    expect(page.get_by_text("No uncommitted changes.")).to_be_visible()
    assert repo.diff(branch) == []
    assert page.locator("img").count() == 0


def test_commit_with_a_message_and_metadata_lands_in_the_log(
    page: Page, server: Server, repo: Repo
) -> None:
    branch = repo.branch()
    repo.put(branch, "new.txt")
    sign_in_admin(page, server, repo.changes_url(branch))
    page.get_by_label("Commit message").fill(HOSTILE[1])
    page.locator("#meta-key-1").fill("owner")
    page.locator("#meta-value-1").fill(HOSTILE[0])
    # the script adds the row in place, focused, keeping what was typed
    page.get_by_role("button", name="Add metadata row").click()
    expect(page.locator("#meta-key-2")).to_be_focused()
    expect(page.locator("#meta-value-1")).to_have_value(HOSTILE[0])
    page.locator("#meta-key-2").fill(HOSTILE[1])
    page.locator("#meta-value-2").fill("v2")
    assert_accessible(page)
    fits_phone(page)
    screenshot(page, "changes-commit")
    page.get_by_role("button", name="Commit changes").click()
    status = page.get_by_role("status")
    expect(status).to_contain_text("Committed ")
    made = repo.head(branch)
    expect(status.locator("code")).to_have_text(made["id"][:12])
    assert made["message"] == HOSTILE[1]
    assert made["metadata"] == {"owner": HOSTILE[0], HOSTILE[1]: "v2"}
    assert made["committer"] == "admin"
    assert repo.diff(branch) == []
    expect(page.get_by_text("No uncommitted changes.")).to_be_visible()
    page.get_by_role("navigation", name="Repository").get_by_role("link", name="Commits").click()
    page.get_by_label("Ref").fill(branch)
    page.get_by_role("button", name="Show").click()
    first = page.locator("table.commits tbody tr").first
    expect(first.locator(".message")).to_have_text(HOSTILE[1])
    expect(first.locator("code")).to_have_text(made["id"][:12])
    expect(first.locator(".count")).to_have_text("2 keys")
    assert page.locator("img").count() == 0


def test_the_metadata_rows_work_without_script(
    browser: Browser, server: Server, repo: Repo
) -> None:
    branch = repo.branch()
    repo.put(branch, "plain.txt")
    context = browser.new_context(viewport=DESKTOP, java_script_enabled=False)
    try:
        page = context.new_page()
        sign_in_admin(page, server, repo.changes_url(branch))
        page.get_by_label("Commit message").fill("without script")
        page.locator("#meta-key-1").fill("k1")
        page.locator("#meta-value-1").fill("v1")
        page.get_by_role("button", name="Add metadata row").click()
        # the server sent the form back with one more row and what was typed
        expect(page.locator("#meta-key-2")).to_have_value("")
        expect(page.locator("#meta-key-1")).to_have_value("k1")
        expect(page.get_by_label("Commit message")).to_have_value("without script")
        page.locator("#meta-key-2").fill("k1")
        page.locator("#meta-value-2").fill("again")
        page.get_by_role("button", name="Commit changes").click()
        expect(page.locator("#commit-error")).to_have_text("The metadata key “k1” is given twice.")
        page.locator("#meta-key-2").fill("k2")
        page.get_by_role("button", name="Commit changes").click()
        expect(page.get_by_role("status")).to_contain_text("Committed ")
    finally:
        context.close()
    made = repo.head(branch)
    assert (made["message"], made["metadata"]) == ("without script", {"k1": "v1", "k2": "again"})


def test_commit_with_nothing_staged_shows_the_servers_message(
    page: Page, server: Server, repo: Repo
) -> None:
    branch = repo.branch()
    before = repo.head(branch)["id"]
    sign_in_admin(page, server, repo.changes_url(branch))
    expect(page.get_by_text("No uncommitted changes.")).to_be_visible()
    page.get_by_text("Commit changes", exact=True).first.click()
    page.get_by_label("Commit message").fill("nothing")
    page.get_by_role("button", name="Commit changes").click()
    expect(page.locator("#commit-error")).to_contain_text("no changes")
    expect(page.get_by_label("Commit message")).to_have_value("nothing")
    assert repo.head(branch)["id"] == before


def test_a_failing_pre_commit_hook_shows_its_message(
    page: Page, server: Server, repo: Repo, receiver: Receiver
) -> None:
    branch = repo.branch()
    action = (
        "name: Deny\non:\n  pre-commit:\nhooks:\n  - id: deny\n    type: webhook\n"
        f"    properties:\n      url: {receiver.url}/fail\n"
    )
    repo.put(branch, "_lakefs_actions/deny.yaml", action.encode())
    before = repo.head(branch)["id"]
    sign_in_admin(page, server, repo.changes_url(branch))
    page.get_by_label("Commit message").fill("blocked")
    page.get_by_role("button", name="Commit changes").click()
    error = page.locator("#commit-error")
    expect(error).to_contain_text("pre-commit hook aborted, run id '")
    expect(error).to_contain_text("webhook request failed (status code: 500)")
    assert repo.head(branch)["id"] == before
    assert ("added", "_lakefs_actions/deny.yaml") in repo.diff(branch)


def test_paging_through_the_changes(page: Page, server: Server, repo: Repo) -> None:
    branch = repo.branch()
    paths = [f"many/f{i:03d}" for i in range(105)]
    for path in paths:
        repo.put(branch, path)
    sign_in_admin(page, server, repo.changes_url(branch, "many/"))
    names = [f"f{i:03d}" for i in range(105)]
    assert [name for _, name in _tree(page)] == names[:100]
    expect(page.get_by_role("link", name="Back to start")).to_have_count(0)
    follow(page.get_by_role("link", name="Next page"))
    assert _tree(page) == [("Added", name) for name in names[100:]]
    expect(page.get_by_role("link", name="Next page")).to_have_count(0)
    follow(page.get_by_role("link", name="Back to start"))
    assert [name for _, name in _tree(page)] == names[:100]


def test_an_unknown_branch_shows_the_servers_message(
    page: Page, server: Server, repo: Repo
) -> None:
    sign_in_admin(page, server, repo.changes_url("no-such-branch"))
    expect(page.locator("#branch-error")).to_contain_text("not found")
    expect(page.get_by_role("button", name="Commit changes")).to_have_count(0)


def test_a_reader_sees_the_changes_and_no_write_controls(
    page: Page, server: Server, admin: httpx.Client, repo: Repo
) -> None:
    branch = repo.branch()
    _stage_a_bit_of_everything(repo, branch)
    reader = make_user(admin, "Readers")
    sign_in(page, server, reader.key, reader.secret, repo.changes_url(branch))
    assert ("Added", "new.txt") in _tree(page)
    expect(page.get_by_role("link", name="Revert")).to_have_count(0)
    expect(page.get_by_text("Commit changes")).to_have_count(0)
    expect(page.get_by_label("Commit message")).to_have_count(0)
    assert_accessible(page)


def test_a_mirror_shows_no_write_controls(
    page: Page, server: Server, admin: httpx.Client, repo: Repo
) -> None:
    name = make_mirror(admin, repo.name)
    sign_in_admin(page, server, f"/ui/repositories/{name}/changes")
    expect(page.locator(".heading .badge")).to_have_text(f"Mirror of {repo.name} in us-east-1")
    expect(page.get_by_text("No uncommitted changes: a mirror's branches")).to_be_visible()
    expect(page.get_by_role("link", name="Revert")).to_have_count(0)
    expect(page.get_by_text("Commit changes")).to_have_count(0)
    assert_accessible(page)
