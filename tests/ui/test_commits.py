"""The Commits tab and a commit's page in a real browser: log paging, metadata, diff, revert, pick.

The module's repository has a commit on ``dev`` whose message, metadata keys and values and one
path hold markup that would run script if a page did not escape it; the pages must show them as
text and open no dialog (the ``page`` fixture fails a test otherwise). A second repository holds
250 commits to page through. What revert and cherry-pick did is checked through the REST API.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

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
from tests.ui.conftest import make_mirror, make_user

pytestmark = pytest.mark.ui

MESSAGE = " ".join(HOSTILE)
METADATA = {HOSTILE[0]: HOSTILE[1], "owner": HOSTILE[0]}
LONG_HISTORY = 250


def _ok(answer: httpx.Response) -> httpx.Response:
    assert answer.status_code < 300, answer.text
    return answer


@dataclass(frozen=True)
class Shop:
    """The module's repository: ``main`` with a base commit, ``dev`` one hostile commit ahead."""

    name: str
    admin: httpx.Client
    base: str
    hostile: str

    def url(self, commit_id: str) -> str:
        return f"/ui/repositories/{self.name}/commits/{commit_id}"

    def put(self, branch: str, path: str, data: bytes = b"new") -> None:
        url = f"/repositories/{self.name}/branches/{branch}/objects"
        _ok(self.admin.post(url, params={"path": path}, content=data))

    def commit(self, branch: str, message: str, **metadata: str) -> str:
        body = {"message": message, "metadata": metadata}
        made = _ok(
            self.admin.post(f"/repositories/{self.name}/branches/{branch}/commits", json=body)
        )
        commit_id: str = made.json()["id"]
        return commit_id

    def branch(self, source: str) -> str:
        name = unique("to")
        body = {"name": name, "source": source}
        _ok(self.admin.post(f"/repositories/{self.name}/branches", json=body))
        return name

    def get_commit(self, ref: str) -> dict[str, Any]:
        found: dict[str, Any] = _ok(
            self.admin.get(f"/repositories/{self.name}/commits/{ref}")
        ).json()
        return found

    def exists(self, ref: str, path: str) -> bool:
        url = f"/repositories/{self.name}/refs/{ref}/objects/stat"
        return self.admin.get(url, params={"path": path}).status_code == 200


@pytest.fixture(scope="module")
def shop(admin: httpx.Client) -> Shop:
    name = unique("history")
    _ok(admin.post("/repositories", json={"name": name, "storage_namespace": f"local://{name}"}))
    shop = Shop(name, admin, "", "")
    for path in ("data/a.csv", "data/b.csv", "keep.txt"):
        shop.put("main", path, b"committed")
    base = shop.commit("main", "base")
    _ok(admin.post(f"/repositories/{name}/branches", json={"name": "dev", "source": "main"}))
    shop.put("dev", "keep.txt", b"changed")
    _ok(admin.delete(f"/repositories/{name}/branches/dev/objects", params={"path": "data/a.csv"}))
    shop.put("dev", "data/sub/new.csv")
    shop.put("dev", HOSTILE[0])
    hostile = shop.commit("dev", MESSAGE, **METADATA)
    return Shop(name, admin, base, hostile)


@pytest.fixture(scope="module")
def long_history(admin: httpx.Client) -> tuple[str, list[str]]:
    """Return a repository of 250 commits on main (and its first) and their IDs, newest first."""
    name = unique("long")
    _ok(admin.post("/repositories", json={"name": name, "storage_namespace": f"local://{name}"}))
    commits = f"/repositories/{name}/branches/main/commits"
    for i in range(LONG_HISTORY):
        _ok(admin.post(commits, json={"message": f"step {i}", "allow_empty": True}))
    log = _ok(admin.get(f"/repositories/{name}/refs/main/commits", params={"amount": 1000}))
    ids = [c["id"] for c in log.json()["results"]]
    assert len(ids) == LONG_HISTORY + 1
    return name, ids


def _log_ids(page: Page) -> list[str]:
    return page.locator("table.commits tbody th code").evaluate_all(
        "codes => codes.map(c => c.getAttribute('title'))"
    )


def _diff(page: Page) -> list[tuple[str, str]]:
    rows = page.locator("table.diff tbody tr")
    return [(r.locator(".mark").inner_text(), r.locator("th").inner_text()) for r in rows.all()]


def test_paging_through_250_commits(
    page: Page, server: Server, long_history: tuple[str, list[str]]
) -> None:
    name, ids = long_history
    sign_in_admin(page, server, f"/ui/repositories/{name}/commits")
    assert _log_ids(page) == ids[:100]
    first = page.locator("table.commits tbody tr").first
    expect(first.locator("code")).to_have_text(ids[0][:12])
    expect(first.locator(".message")).to_have_text(f"step {LONG_HISTORY - 1}")
    expect(first.locator("td").nth(1)).to_have_text("admin")
    expect(first.locator(".count")).to_have_text("none")
    expect(page.get_by_role("link", name="Back to start")).to_have_count(0)
    assert_accessible(page)
    fits_phone(page)
    screenshot(page, "commits")
    page.get_by_role("link", name="Next page").click()
    assert _log_ids(page) == ids[100:200]
    page.get_by_role("link", name="Next page").click()
    assert _log_ids(page) == ids[200:]
    expect(page.locator("table.commits tbody tr").last.locator(".message")).to_have_text(
        "Repository created"
    )
    expect(page.get_by_role("link", name="Next page")).to_have_count(0)
    page.get_by_role("link", name="Back to start").click()
    assert _log_ids(page) == ids[:100]


def test_the_log_of_any_ref_and_a_ref_that_is_not_there(
    page: Page, server: Server, shop: Shop, long_history: tuple[str, list[str]]
) -> None:
    name, ids = long_history
    sign_in_admin(page, server, f"/ui/repositories/{name}/commits?ref=main~2")
    assert _log_ids(page)[:2] == ids[2:4]
    page.get_by_label("Ref").fill(ids[150])
    page.get_by_role("button", name="Show").click()
    assert _log_ids(page) == ids[150:250]
    page.goto(f"{server.url}/ui/repositories/{shop.name}/commits?ref=dev")
    assert _log_ids(page) == [shop.hostile, shop.base, shop.get_commit(f"{shop.base}~1")["id"]]
    hostile = page.locator("table.commits tbody tr").first
    expect(hostile.locator(".message")).to_have_text(MESSAGE)
    expect(hostile.locator(".count")).to_have_text("2 keys")
    assert page.locator("img").count() == 0
    page.get_by_label("Ref").fill("no-such-ref")
    page.get_by_role("button", name="Show").click()
    expect(page.locator("#ref-error")).to_contain_text("not found")
    expect(page.locator("table.commits")).to_have_count(0)


def test_a_commit_shows_its_metadata_parents_and_diff_as_text(
    page: Page, server: Server, shop: Shop
) -> None:
    commit = shop.get_commit(shop.hostile)
    sign_in_admin(page, server, f"/ui/repositories/{shop.name}/commits?ref=dev")
    page.get_by_role("link", name=shop.hostile[:12]).click()
    expect(page).to_have_url(server.url + shop.url(shop.hostile))
    expect(page.locator(".commit-message")).to_have_text(MESSAGE)
    expect(page.locator(".commit-id")).to_have_text(shop.hostile)
    expect(page.locator(".metarange-id")).to_have_text(commit["meta_range_id"])
    keys = page.locator("table.metadata .meta-key").all_inner_texts()
    values = page.locator("table.metadata .meta-value").all_inner_texts()
    assert dict(zip(keys, values, strict=True)) == METADATA
    assert _diff(page) == [
        ("Added", HOSTILE[0]),
        ("Changes inside", "data/"),
        ("Changed", "keep.txt"),
    ]
    browse = page.get_by_role("link", name="Browse objects at this commit")
    expect(browse).to_have_attribute(
        "href", f"/ui/repositories/{shop.name}/objects?ref={shop.hostile}"
    )
    # no element came from the markup, and no script but the UI's own
    assert page.locator("img").count() == 0
    assert page.locator("main script").count() == 0
    assert_accessible(page)
    fits_phone(page)
    screenshot(page, "commit")
    page.get_by_role("link", name="data/", exact=True).click()
    assert _diff(page) == [("Removed", "a.csv"), ("Changes inside", "sub/")]
    page.get_by_role("link", name="sub/", exact=True).click()
    assert _diff(page) == [("Added", "new.csv")]
    page.get_by_role("navigation", name="Folder").get_by_role("link", name="(top)").click()
    assert len(_diff(page)) == 3
    # the parent is a link; the repository's first commit has none to compare with
    page.locator(".parents").get_by_role("link", name=shop.base[:12]).click()
    expect(page.locator(".commit-id")).to_have_text(shop.base)
    expect(page.locator(".commit-message")).to_have_text("base")
    assert _diff(page) == [("Changes inside", "data/"), ("Added", "keep.txt")]
    page.locator(".parents a").click()
    expect(page.locator(".commit-message")).to_have_text("Repository created")
    expect(page.locator(".parents")).to_have_text("none")
    expect(page.get_by_text("The repository's first commit")).to_be_visible()
    expect(page.get_by_text("No metadata.")).to_be_visible()


def test_a_commit_diff_pages(page: Page, server: Server, shop: Shop) -> None:
    branch = shop.branch("main")
    for i in range(105):
        shop.put(branch, f"bulk/f{i:03d}")
    made = shop.commit(branch, "bulk")
    sign_in_admin(page, server, shop.url(made) + "?prefix=bulk/")
    names = [f"f{i:03d}" for i in range(105)]
    assert [name for _, name in _diff(page)] == names[:100]
    page.get_by_role("link", name="Next page").click()
    assert _diff(page) == [("Added", name) for name in names[100:]]
    page.get_by_role("link", name="Back to start").click()
    assert [name for _, name in _diff(page)] == names[:100]


def test_revert_commits_the_inverse_onto_a_branch(page: Page, server: Server, shop: Shop) -> None:
    target = shop.branch("dev")
    sign_in_admin(page, server, shop.url(shop.hostile))
    form = page.locator("#revert-form")
    expect(form.get_by_label("Branch")).to_have_value("main")
    # a branch that is not there: the server's message, next to the form
    form.get_by_label("Branch").fill("no-such-branch")
    form.get_by_role("button", name="Revert commit").click()
    expect(page.locator("#revert-error")).to_contain_text("not found")
    expect(page.locator("#revert-form").get_by_label("Branch")).to_have_value("no-such-branch")
    page.locator("#revert-form").get_by_label("Branch").fill(target)
    page.locator("#revert-form").get_by_role("button", name="Revert commit").click()
    status = page.get_by_role("status")
    expect(status).to_contain_text(f"Reverted onto {target}: new commit ")
    made = shop.get_commit(target)
    expect(status.locator("code")).to_have_text(made["id"][:12])
    assert made["parents"] == [shop.hostile]
    assert shop.exists(target, "data/a.csv")
    assert not shop.exists(target, HOSTILE[0])
    assert not shop.exists(target, "data/sub/new.csv")
    status.get_by_role("link").click()
    expect(page.locator(".commit-id")).to_have_text(made["id"])


def test_cherry_pick_applies_the_commit_onto_a_branch(
    page: Page, server: Server, shop: Shop
) -> None:
    target = shop.branch("main")
    before = shop.get_commit(target)["id"]
    sign_in_admin(page, server, shop.url(shop.hostile))
    expect(page.locator(".commit-id")).to_have_text(shop.hostile)
    form = page.locator("#cherry-pick-form")
    form.get_by_label("Branch").fill(target)
    form.get_by_role("button", name="Cherry-pick commit").click()
    status = page.get_by_role("status")
    expect(status).to_contain_text(f"Cherry-picked onto {target}: new commit ")
    made = shop.get_commit(target)
    expect(status.locator("code")).to_have_text(made["id"][:12])
    assert made["parents"] == [before]
    assert made["message"] == MESSAGE
    assert shop.exists(target, HOSTILE[0]) and shop.exists(target, "data/sub/new.csv")
    assert not shop.exists(target, "data/a.csv")


def test_a_merge_commit_is_reverted_and_picked_against_a_chosen_parent(
    page: Page, server: Server, shop: Shop
) -> None:
    merged_into = shop.branch("main")
    shop.put(merged_into, "other.txt")
    shop.commit(merged_into, "other")
    merge = _ok(
        shop.admin.post(f"/repositories/{shop.name}/refs/dev/merge/{merged_into}", json={})
    ).json()["reference"]
    parents = shop.get_commit(merge)["parents"]
    sign_in_admin(page, server, f"/ui/repositories/{shop.name}/commits?ref={merged_into}")
    first = page.locator("table.commits tbody tr").first
    expect(first.locator(".badge")).to_have_text("merge")
    first.get_by_role("link").click()
    expect(page.locator(".commit-id")).to_have_text(merge)
    select = page.locator("#revert-form").get_by_label("Against parent")
    assert select.locator("option").all_inner_texts() == [
        f"1: {parents[0][:12]}",
        f"2: {parents[1][:12]}",
    ]
    expect(select).to_have_value("1")
    assert_accessible(page)
    page.locator("#revert-form").get_by_label("Branch").fill(merged_into)
    page.locator("#revert-form").get_by_role("button", name="Revert commit").click()
    expect(page.get_by_role("status")).to_contain_text(f"Reverted onto {merged_into}")
    reverted = shop.get_commit(merged_into)
    assert reverted["parents"] == [merge]
    # against parent 1, the merge brought dev's changes: reverting takes them away again
    assert not shop.exists(merged_into, HOSTILE[0])
    assert shop.exists(merged_into, "other.txt")
    picked_onto = shop.branch("main")
    form = page.locator("#cherry-pick-form")
    form.get_by_label("Branch").fill(picked_onto)
    form.get_by_label("Against parent").select_option("2")
    form.get_by_role("button", name="Cherry-pick commit").click()
    expect(page.get_by_role("status")).to_contain_text(f"Cherry-picked onto {picked_onto}")
    # against parent 2 (dev), the merge brought other.txt
    assert shop.exists(picked_onto, "other.txt")
    assert not shop.exists(picked_onto, HOSTILE[0])


def test_a_reader_sees_no_revert_or_cherry_pick(
    page: Page, server: Server, admin: httpx.Client, shop: Shop
) -> None:
    reader = make_user(admin, "Readers")
    sign_in(page, server, reader.key, reader.secret, shop.url(shop.hostile))
    expect(page.locator(".commit-message")).to_have_text(MESSAGE)
    assert len(_diff(page)) == 3
    expect(page.locator("#revert-form")).to_have_count(0)
    expect(page.locator("#cherry-pick-form")).to_have_count(0)
    expect(page.locator("main button")).to_have_count(0)
    assert_accessible(page)


def test_a_mirror_shows_its_commits_and_no_write_controls(
    page: Page, server: Server, admin: httpx.Client, shop: Shop
) -> None:
    name = make_mirror(admin, shop.name)
    sign_in_admin(page, server, f"/ui/repositories/{name}/commits")
    expect(page.locator(".heading .badge")).to_have_text(f"Mirror of {shop.name} in us-east-1")
    assert _log_ids(page)[:2] == [shop.base, shop.get_commit(f"{shop.base}~1")["id"]]
    page.get_by_role("link", name=shop.base[:12]).click()
    expect(page.locator(".commit-message")).to_have_text("base")
    # only the commits were mirrored here, not their data: the diff says so in its place
    expect(page.locator("#diff-error")).to_contain_text("not yet replicated to this region")
    expect(page.locator("#revert-form")).to_have_count(0)
    expect(page.locator("#cherry-pick-form")).to_have_count(0)
    assert_accessible(page)
    fits_phone(page)
    screenshot(page, "mirror-commit")
