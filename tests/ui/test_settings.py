"""A repository's Settings tab in a real browser: general facts, GC rules, branch protection.

Every change made in the browser is checked through the REST API; a change made through the API
while a page is open makes the page's next change answer 412, which the page shows with the
rules as they are now. Markup in a protected pattern shows as text (the ``page`` fixture fails
a test on any dialog or content security policy violation). Readers, people who may read the
settings but not change them, and mirrors see no write control.
"""

from __future__ import annotations

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
from tests.ui.conftest import User, make_mirror, make_user

pytestmark = pytest.mark.ui


def _ok(answer: httpx.Response) -> httpx.Response:
    assert answer.status_code < 300, answer.text
    return answer


@dataclass(frozen=True)
class Repo:
    """A repository of the module, and the API to check what the pages did."""

    name: str
    api: httpx.Client

    def url(self, section: str = "") -> str:
        base = f"/ui/repositories/{self.name}/settings"
        return f"{base}/{section}" if section else base

    def gc_rules(self) -> dict[str, Any] | None:
        answer = self.api.get(f"/repositories/{self.name}/settings/gc_rules")
        if answer.status_code == 404:
            return None
        rules: dict[str, Any] = _ok(answer).json()
        return rules

    def patterns(self) -> list[str]:
        found = _ok(self.api.get(f"/repositories/{self.name}/settings/branch_protection"))
        return [r["pattern"] for r in found.json()]

    def protect(self, patterns: list[str]) -> None:
        body = [{"pattern": p} for p in patterns]
        _ok(self.api.put(f"/repositories/{self.name}/settings/branch_protection", json=body))


def _repository(admin: httpx.Client, prefix: str) -> Repo:
    name = unique(prefix)
    _ok(admin.post("/repositories", json={"name": name, "storage_namespace": f"local://{name}"}))
    _ok(admin.post(f"/repositories/{name}/branches", json={"name": "dev", "source": "main"}))
    return Repo(name, admin)


@pytest.fixture
def repo(admin: httpx.Client) -> Repo:
    """A repository of the test's own (its rules change in every test)."""
    return _repository(admin, "settings")


@pytest.fixture(scope="module")
def viewer(admin: httpx.Client) -> User:
    """A person whose policies allow reading every setting and changing none."""
    group, policy = unique("viewers"), unique("read-settings")
    statement = {
        "effect": "allow",
        "action": ["fs:Read*", "fs:List*", "ci:Read*", "retention:Get*", "branches:Get*"],
        "resource": "*",
    }
    _ok(admin.post("/auth/policies", json={"id": policy, "statement": [statement]}))
    _ok(admin.post("/auth/groups", json={"id": group}))
    _ok(admin.put(f"/auth/groups/{group}/policies/{policy}"))
    return make_user(admin, group)


def _rule_rows(page: Page) -> list[tuple[str, str]]:
    page.wait_for_load_state()
    rows = page.locator(".rule-row")
    return [
        (
            row.locator("input[name=rule_branch]").input_value(),
            row.locator("input[name=rule_days]").input_value(),
        )
        for row in rows.all()
    ]


def test_general_settings_and_deleting_with_the_typed_name(
    page: Page, server: Server, admin: httpx.Client, repo: Repo
) -> None:
    sign_in_admin(page, server, repo.url())
    tabs = page.get_by_role("navigation", name="Repository")
    expect(tabs.get_by_role("link", name="Settings")).to_have_attribute("aria-current", "page")
    sections = page.get_by_role("navigation", name="Settings")
    expect(sections.get_by_role("link")).to_have_text(
        ["General", "Garbage collection", "Branch protection"]
    )
    facts = page.locator("dl.settings-facts")
    expect(facts).to_contain_text(repo.name)
    expect(facts).to_contain_text(f"local://{repo.name}")
    expect(facts.locator(".repo-status")).to_have_text("Writable")
    created = _ok(admin.get(f"/repositories/{repo.name}")).json()["creation_date"]
    assert created > 0
    expect(facts).to_contain_text("main")
    assert_accessible(page)
    fits_phone(page)
    screenshot(page, "settings")
    # the repositories page's confirmation: the name must be typed
    page.get_by_role("link", name="Delete repository").click()
    expect(page.get_by_role("heading", level=1)).to_have_text(f"Delete repository {repo.name}")
    page.get_by_label("Type the repository's name").fill(repo.name)
    page.get_by_role("button", name="Delete repository").click()
    expect(page.get_by_role("status")).to_contain_text(repo.name)
    assert admin.get(f"/repositories/{repo.name}").status_code == 404


def test_gc_rules_set_edited_and_removed(page: Page, server: Server, repo: Repo) -> None:
    sign_in_admin(page, server, repo.url("gc"))
    expect(page.locator("#no-rules")).to_be_visible()
    page.get_by_label("Default retention (days)").fill("7")
    page.locator("#rule-branch-1").fill("main")
    page.locator("#rule-days-1").fill("14")
    # with script the new row is added in place, keeping what was typed
    page.get_by_role("button", name="Add branch rule").click()
    expect(page.locator("#rule-branch-2")).to_be_focused()
    assert page.locator("#rule-branch-1").input_value() == "main"
    page.locator("#rule-branch-2").fill("dev")
    page.locator("#rule-days-2").fill("3")
    page.get_by_role("button", name="Save rules").click()
    expect(page.get_by_role("status")).to_have_text("The rules were saved.")
    assert repo.gc_rules() == {
        "default_retention_days": 7,
        "branches": [
            {"branch_id": "dev", "retention_days": 3},
            {"branch_id": "main", "retention_days": 14},
        ],
    }
    expect(page.locator("table.gc-rules tbody tr")).to_have_count(3)
    assert _rule_rows(page) == [("dev", "3"), ("main", "14")]
    assert_accessible(page)
    fits_phone(page)
    screenshot(page, "settings-gc")

    # a value the server refuses: its message, with the rows as typed
    page.get_by_label("Default retention (days)").fill("3000000000")
    page.locator("#rule-branch-1").fill("")
    page.locator("#rule-days-1").fill("")
    page.get_by_role("button", name="Save rules").click()
    expect(page.locator("#rules-error")).to_contain_text(
        "default_retention_days: 3000000000 days is out of range"
    )
    expect(page.get_by_label("Default retention (days)")).to_have_value("3000000000")
    assert _rule_rows(page) == [("", ""), ("main", "14")]
    assert repo.gc_rules() is not None and repo.gc_rules()["default_retention_days"] == 7

    # the blank row is dropped
    page.get_by_label("Default retention (days)").fill("10")
    page.get_by_role("button", name="Save rules").click()
    expect(page.get_by_role("status")).to_have_text("The rules were saved.")
    assert repo.gc_rules() == {
        "default_retention_days": 10,
        "branches": [{"branch_id": "main", "retention_days": 14}],
    }

    page.get_by_role("button", name="Remove the rules").click()
    expect(page.get_by_role("status")).to_have_text("The rules were removed.")
    expect(page.locator("#no-rules")).to_be_visible()
    assert repo.gc_rules() is None


def test_gc_rule_rows_without_script(browser: Browser, server: Server, repo: Repo) -> None:
    context = browser.new_context(viewport=DESKTOP, java_script_enabled=False)
    try:
        page = context.new_page()
        sign_in_admin(page, server, repo.url("gc"))
        page.get_by_label("Default retention (days)").fill("5")
        page.locator("#rule-branch-1").fill("main")
        page.locator("#rule-days-1").fill("9")
        # without script the server draws the new row, keeping what was typed
        follow(page.get_by_role("button", name="Add branch rule"))
        assert _rule_rows(page) == [("main", "9"), ("", "")]
        expect(page.get_by_label("Default retention (days)")).to_have_value("5")
        page.locator("#rule-branch-2").fill("dev")
        page.locator("#rule-days-2").fill("1")
        page.get_by_role("button", name="Save rules").click()
        expect(page.get_by_role("status")).to_have_text("The rules were saved.")
        assert repo.gc_rules() == {
            "default_retention_days": 5,
            "branches": [
                {"branch_id": "dev", "retention_days": 1},
                {"branch_id": "main", "retention_days": 9},
            ],
        }
    finally:
        context.close()


def test_branch_protection_added_and_removed(page: Page, server: Server, repo: Repo) -> None:
    sign_in_admin(page, server, repo.url("branches"))
    expect(page.locator("#no-patterns")).to_be_visible()
    for pattern in ("release-*", HOSTILE[0]):
        page.get_by_label("Branch name pattern").fill(pattern)
        page.get_by_role("button", name="Add rule").click()
        expect(page.get_by_role("status")).to_have_text(
            f"Branches matching {pattern} are protected."
        )
    # the server keeps the patterns sorted
    assert repo.patterns() == [HOSTILE[0], "release-*"]
    expect(page.locator("code.pattern")).to_have_text([HOSTILE[0], "release-*"])
    assert page.locator("main img").count() == 0
    assert_accessible(page)
    fits_phone(page)
    screenshot(page, "settings-protection")

    # a pattern protected already: nothing changes, and the page says so
    page.get_by_label("Branch name pattern").fill("release-*")
    page.get_by_role("button", name="Add rule").click()
    expect(page.locator("#rules-error")).to_have_text(
        "The pattern “release-*” is protected already."
    )
    # a pattern the server refuses shows its message, with what was typed
    page.get_by_label("Branch name pattern").fill("[")
    page.get_by_role("button", name="Add rule").click()
    expect(page.locator("#rules-error")).to_contain_text("invalid branch pattern syntax")
    expect(page.get_by_label("Branch name pattern")).to_have_value("[")
    assert repo.patterns() == [HOSTILE[0], "release-*"]

    page.get_by_role("button", name=f"Remove {HOSTILE[0]}").click()
    expect(page.get_by_role("status")).to_have_text(
        f"Branches matching {HOSTILE[0]} are no longer protected."
    )
    assert repo.patterns() == ["release-*"]
    page.get_by_role("button", name="Remove release-*").click()
    expect(page.locator("#no-patterns")).to_be_visible()
    assert repo.patterns() == []


def test_a_concurrent_change_answers_412_and_shows_the_rules_now(
    page: Page, server: Server, repo: Repo
) -> None:
    repo.protect(["release-*"])
    sign_in_admin(page, server, repo.url("branches"))
    expect(page.locator("code.pattern")).to_have_text(["release-*"])
    # someone else changes the rules while the page is open
    repo.protect(["release-*", "hotfix-*"])
    page.get_by_label("Branch name pattern").fill("stable")
    page.get_by_role("button", name="Add rule").click()
    error = page.locator("#rules-error")
    expect(error).to_contain_text("Precondition failed")
    expect(error).to_contain_text("The rules changed since this page was read")
    expect(page.locator("code.pattern")).to_have_text(["hotfix-*", "release-*"])
    expect(page.get_by_label("Branch name pattern")).to_have_value("stable")
    assert repo.patterns() == ["hotfix-*", "release-*"]
    assert_accessible(page)
    # the page now carries the rules' new version: the same change goes through
    page.get_by_role("button", name="Add rule").click()
    expect(page.get_by_role("status")).to_have_text("Branches matching stable are protected.")
    assert repo.patterns() == ["hotfix-*", "release-*", "stable"]
    # a removal from a page read before another change is refused too
    repo.protect(["release-*", "stable"])
    page.get_by_role("button", name="Remove stable").click()
    expect(page.locator("#rules-error")).to_contain_text("Precondition failed")
    expect(page.locator("code.pattern")).to_have_text(["release-*", "stable"])
    assert repo.patterns() == ["release-*", "stable"]


def test_a_change_without_the_csrf_token_is_refused(page: Page, server: Server, repo: Repo) -> None:
    repo.protect(["release-*"])
    sign_in_admin(page, server, repo.url("branches"))
    etag = page.locator("input[name=etag]").first.input_value()
    # the session cookie alone, as another site's form would send it
    for path, form in (
        ("branches/add", {"pattern": "main", "etag": etag}),
        ("branches/remove", {"pattern": "release-*", "etag": etag}),
        ("gc", {"default_retention_days": "1"}),
        ("gc/delete", {}),
    ):
        refused = page.request.post(server.url + repo.url(path), form=form)
        assert refused.status == 403, (path, refused.status)
        assert "security token is missing" in refused.text(), refused.text()
    assert repo.patterns() == ["release-*"]
    assert repo.gc_rules() is None


def test_a_reader_sees_the_general_settings_only(
    page: Page, server: Server, admin: httpx.Client, repo: Repo
) -> None:
    reader = make_user(admin, "Readers")
    sign_in(page, server, reader.key, reader.secret, repo.url())
    expect(page.locator(".repo-status")).to_have_text("Writable")
    expect(page.get_by_role("link", name="Delete repository")).to_have_count(0)
    page.get_by_role("link", name="Garbage collection").click()
    expect(page.get_by_text("The rules are not shown")).to_be_visible()
    expect(page.locator("main form")).to_have_count(0)
    page.get_by_role("link", name="Branch protection").click()
    expect(page.get_by_text("The rules are not shown")).to_be_visible()
    expect(page.locator("main form")).to_have_count(0)
    assert_accessible(page)


def test_a_person_who_may_only_read_settings_sees_no_write_controls(
    page: Page, server: Server, repo: Repo, viewer: User
) -> None:
    _ok(
        repo.api.put(
            f"/repositories/{repo.name}/settings/gc_rules",
            json={"default_retention_days": 21, "branches": []},
        )
    )
    repo.protect(["main"])
    sign_in(page, server, viewer.key, viewer.secret, repo.url("gc"))
    expect(page.locator("table.gc-rules")).to_contain_text("21 days")
    expect(page.locator("main form")).to_have_count(0)
    page.get_by_role("link", name="Branch protection").click()
    expect(page.locator("code.pattern")).to_have_text(["main"])
    expect(page.locator("main form")).to_have_count(0)
    expect(page.get_by_role("button")).to_have_count(1)  # signing out
    page.get_by_role("link", name="General").click()
    expect(page.get_by_role("link", name="Delete repository")).to_have_count(0)


def test_a_mirror_shows_its_settings_without_controls(
    page: Page, server: Server, admin: httpx.Client, repo: Repo
) -> None:
    repo.protect(["main"])
    mirror = make_mirror(admin, repo.name)
    sign_in_admin(page, server, f"/ui/repositories/{mirror}/settings")
    expect(page.locator(".repo-status")).to_have_text(
        f"Read-only: a mirror of {repo.name} in us-east-1"
    )
    expect(page.get_by_role("link", name="Delete repository")).to_have_count(0)
    assert_accessible(page)
    fits_phone(page)
    screenshot(page, "mirror-settings")
    page.get_by_role("link", name="Garbage collection").click()
    expect(page.locator("#no-rules")).to_be_visible()
    expect(page.locator("main form")).to_have_count(0)
    page.get_by_role("link", name="Branch protection").click()
    expect(page.locator("main form")).to_have_count(0)
