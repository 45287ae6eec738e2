"""A repository's Compare tab in a real browser: two refs' differences, and merging them.

The module's repository holds a pre-merge webhook action that holds merges into branch ``held``
until the test releases it (``tests/webhooks.py``'s ``/slow``), so a merge's progress page is
seen while the merge runs, then seen to end, with script (``follow.js`` polls) and without (a
meta refresh). Merges go through the asynchronous merge API; a conflict shows its paths, one of
them markup; each strategy's outcome is checked through the REST API. Hostile paths, messages
and metadata show as text; readers and mirrors get no merge control.
"""

from __future__ import annotations

import re
import shutil
from collections.abc import Iterator
from dataclasses import dataclass

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
from tests.ui.conftest import make_user
from tests.webhooks import Receiver, webhook_receiver

pytestmark = pytest.mark.ui

HOSTILE_PATH = HOSTILE[0]
"""An object path that is markup."""
HELD = "held"
"""Merges into this branch wait for the test to release the webhook."""
SETTLED = 20_000
"""Milliseconds a merge may take to end once released."""


@dataclass(frozen=True)
class Yard:
    """The module's repository: main with data, ``feature`` changing it, tag ``v1`` at main."""

    name: str
    api: httpx.Client

    @property
    def url(self) -> str:
        return f"/ui/repositories/{self.name}/compare"

    def compare(self, base: str, source: str) -> str:
        return f"{self.url}?ref={base}&compare={source}"

    def put(self, branch: str, path: str, data: bytes) -> None:
        _ok(
            self.api.post(
                f"/repositories/{self.name}/branches/{branch}/objects",
                params={"path": path},
                content=data,
            )
        )

    def delete(self, branch: str, path: str) -> None:
        _ok(
            self.api.delete(
                f"/repositories/{self.name}/branches/{branch}/objects", params={"path": path}
            )
        )

    def commit(self, branch: str, message: str) -> str:
        made = self.api.post(
            f"/repositories/{self.name}/branches/{branch}/commits", json={"message": message}
        )
        commit_id: str = _ok(made).json()["id"]
        return commit_id

    def branch(self, name: str, source: str = "main") -> str:
        _ok(
            self.api.post(
                f"/repositories/{self.name}/branches", json={"name": name, "source": source}
            )
        )
        return name

    def head(self, branch: str) -> str:
        found = self.api.get(f"/repositories/{self.name}/branches/{branch}")
        commit_id: str = _ok(found).json()["commit_id"]
        return commit_id

    def read(self, ref: str, path: str) -> bytes:
        found = self.api.get(f"/repositories/{self.name}/refs/{ref}/objects", params={"path": path})
        return _ok(found).content

    def conflicting(self) -> tuple[str, str]:
        """Return a new (base, source) pair changing ``f`` and the hostile path differently."""
        base, source = self.branch(unique("base")), self.branch(unique("source"))
        for branch in (base, source):
            self.put(branch, "f", branch.encode())
            self.put(branch, HOSTILE_PATH, branch.encode())
            self.put(branch, f"only-{branch}", b"x")
            self.commit(branch, f"on {branch}")
        return base, source


def _ok(answer: httpx.Response) -> httpx.Response:
    assert answer.status_code < 300, answer.text
    return answer


@pytest.fixture(scope="module")
def receiver() -> Iterator[Receiver]:
    with webhook_receiver() as running:
        yield running


@pytest.fixture(scope="module")
def yard(admin: httpx.Client, receiver: Receiver) -> Yard:
    name = unique("yard")
    _ok(admin.post("/repositories", json={"name": name, "storage_namespace": f"local://{name}"}))
    found = Yard(name, admin)
    action = (
        f"name: Hold merges\non:\n  pre-merge:\n    branches: [{HELD}]\nhooks:\n"
        f"  - id: hold\n    type: webhook\n    properties:\n"
        f"      url: {receiver.url}/slow\n      timeout: 30s\n"
    )
    found.put("main", "_lakefs_actions/hold.yaml", action.encode())
    for path in ("data/a.csv", "data/b.csv", "docs/readme", "top.txt"):
        found.put("main", path, path.encode())
    found.commit("main", "base data")
    _ok(admin.post(f"/repositories/{name}/tags", json={"id": "v1", "ref": "main"}))
    found.branch("feature")
    found.put("feature", "data/a.csv", b"changed")
    found.put("feature", "data/new/1.csv", b"new")
    found.put("feature", HOSTILE_PATH, b"hostile")
    found.delete("feature", "docs/readme")
    found.commit("feature", " ".join(HOSTILE))
    found.branch(HELD)
    return found


def _held_calls(receiver: Receiver, yard: Yard) -> int:
    return sum(c.path == "/slow" for c in receiver.of(yard.name))


def _rows(page: Page) -> list[tuple[str, str]]:
    """Return the diff's rows as (mark, name)."""
    page.wait_for_load_state()
    marks = page.locator("table.diff tbody td .mark").all_inner_texts()
    names = page.locator("table.diff tbody th").all_inner_texts()
    return list(zip(marks, names, strict=True))


def _merge(page: Page, *, strategy: str = "", message: str = "", meta: dict[str, str]) -> None:
    """Fill the merge form and send it."""
    if page.locator("details#merge").get_attribute("open") is None:
        page.locator("details#merge > summary").click()
    if strategy:
        page.get_by_label("Strategy").select_option(strategy)
    page.get_by_label("Commit message").fill(message)
    for n, (key, value) in enumerate(meta.items()):
        if n:
            page.get_by_role("button", name="Add metadata row").click()
        page.locator(f"#meta-key-{n + 1}").fill(key)
        page.locator(f"#meta-value-{n + 1}").fill(value)
    page.get_by_role("button", name="Merge", exact=True).click()


def test_compare_two_branches_and_browse_a_prefix(page: Page, server: Server, yard: Yard) -> None:
    sign_in_admin(page, server, yard.compare("main", "feature"))
    expect(page.get_by_label("Base")).to_have_value("main")
    expect(page.get_by_label("Compare", exact=True)).to_have_value("feature")
    assert _rows(page) == [
        ("Added", HOSTILE_PATH),
        ("Changes inside", "data/"),
        ("Changes inside", "docs/"),
    ]
    # the hostile path stayed text: no element came from it, and no script but the UI's own
    assert page.locator("main img").count() == 0
    assert all(
        (s.get_attribute("src") or "inline").startswith("/ui/static/")
        for s in page.locator("script").all()
    )
    expect(page.locator("details#merge > summary")).to_have_text("Merge feature into main")
    pull = page.get_by_role("link", name="Open a pull request for feature into main")
    expect(pull).to_be_visible()
    page.locator("details#merge > summary").click()
    expect(page.get_by_label("Strategy")).to_have_value("")
    assert_accessible(page)
    fits_phone(page)
    screenshot(page, "compare")
    follow(page.get_by_role("link", name="data/"))
    assert _rows(page) == [("Changed", "a.csv"), ("Changes inside", "new/")]
    follow(page.get_by_role("link", name="new/"))
    assert _rows(page) == [("Added", "1.csv")]
    folder = page.get_by_role("navigation", name="Folder")
    expect(folder.locator("[aria-current]")).to_have_text("new/")
    follow(folder.get_by_role("link", name="data/"))
    assert _rows(page) == [("Changed", "a.csv"), ("Changes inside", "new/")]
    # browsing a prefix keeps the merge offered: the refs still differ
    expect(page.locator("details#merge")).to_have_count(1)
    # main brings feature nothing it lacks (the diff is three-dot, as lakeFS's)
    page.get_by_role("link", name="Swap").click()
    expect(page.get_by_label("Base")).to_have_value("feature")
    expect(page.get_by_text("merging main into feature would bring nothing")).to_be_visible()
    expect(page.locator("details#merge")).to_have_count(0)


def test_any_refs_compare_and_only_a_branch_base_offers_a_merge(
    page: Page, server: Server, yard: Yard
) -> None:
    feature_parent = "feature~1"
    sign_in_admin(page, server, yard.compare("v1", "feature"))
    assert len(_rows(page)) == 3
    expect(page.locator("details#merge")).to_have_count(0)
    expect(page.get_by_role("link", name=re.compile("Open a pull request"))).to_have_count(0)
    for base, source in ((yard.head("main"), "feature"), (feature_parent, "feature")):
        page.get_by_label("Base").fill(base)
        page.get_by_label("Compare", exact=True).fill(source)
        follow(page.get_by_role("button", name="Compare", exact=True))
        assert len(_rows(page)) == 3, base
        expect(page.locator("details#merge")).to_have_count(0)
    page.goto(server.url + yard.compare("main", "main"))
    expect(page.get_by_text("Choose two different refs to compare.")).to_be_visible()
    page.goto(server.url + yard.compare("main", "no-such-ref"))
    expect(page.locator("#compare-error")).to_contain_text("not found")
    assert_accessible(page)
    # two refs with nothing to bring: no merge offered
    page.goto(server.url + yard.compare("feature", "main~1"))
    expect(page.get_by_text("would bring nothing")).to_be_visible()
    expect(page.locator("details#merge")).to_have_count(0)


def test_the_diff_is_paged(page: Page, server: Server, yard: Yard) -> None:
    wide = yard.branch(unique("wide"))
    made = [f"w{i:03d}" for i in range(120)]
    for path in made:
        yard.put(wide, path, b"w")
    yard.commit(wide, "many")
    sign_in_admin(page, server, yard.compare("main", wide))
    assert [name for _, name in _rows(page)] == made[:100]
    expect(page.get_by_role("link", name="Back to start")).to_have_count(0)
    follow(page.get_by_role("link", name="Next page"))
    assert [name for _, name in _rows(page)] == made[100:]
    expect(page.get_by_role("link", name="Next page")).to_have_count(0)
    follow(page.get_by_role("link", name="Back to start"))
    assert [name for _, name in _rows(page)] == made[:100]


def test_a_conflict_shows_its_paths_as_text(page: Page, server: Server, yard: Yard) -> None:
    base, source = yard.conflicting()
    before = yard.head(base)
    sign_in_admin(page, server, yard.compare(base, source))
    _merge(page, meta={})
    expect(page).to_have_url(re.compile(r"/merges/MA"))
    alert = page.locator("#merge-status").get_by_role("alert")
    expect(alert).to_contain_text("conflict found", timeout=SETTLED)
    conflicts = page.locator("ul.conflicts li")
    expect(conflicts).to_have_text([HOSTILE_PATH, "f"])
    assert page.locator("main img").count() == 0
    expect(page.get_by_text("Nothing was merged.")).to_be_visible()
    assert yard.head(base) == before
    assert_accessible(page)
    fits_phone(page)
    screenshot(page, "merge-conflict")
    page.get_by_role("link", name=f"Back to comparing {base} with {source}").click()
    expect(page.get_by_label("Base")).to_have_value(base)


@pytest.mark.parametrize("strategy", ["source-wins", "dest-wins"])
def test_a_strategy_settles_the_conflict(
    page: Page, server: Server, yard: Yard, strategy: str
) -> None:
    base, source = yard.conflicting()
    sign_in_admin(page, server, yard.compare(base, source))
    _merge(page, strategy=strategy, meta={})
    status = page.locator("#merge-status").get_by_role("status")
    expect(status).to_contain_text(f"Merged {source} into {base}", timeout=SETTLED)
    merged = yard.head(base)
    expect(page.locator(".merge-commit")).to_have_text(merged)
    winner = source if strategy == "source-wins" else base
    assert yard.read(base, "f") == winner.encode()
    assert yard.read(base, HOSTILE_PATH) == winner.encode()
    assert yard.read(base, f"only-{source}") == b"x"
    made = _ok(yard.api.get(f"/repositories/{yard.name}/commits/{merged}")).json()
    assert len(made["parents"]) == 2 and made["message"] == f"Merge '{source}' into '{base}'"


def test_an_async_merge_shows_its_progress_then_its_commit(
    page: Page, server: Server, yard: Yard, receiver: Receiver
) -> None:
    receiver.release.clear()
    calls, base = _held_calls(receiver, yard), HELD
    source = yard.branch(unique("ready"))
    yard.put(source, "ready.csv", b"ready")
    source_head = yard.commit(source, "ready")
    before = yard.head(base)
    sign_in_admin(page, server, yard.compare(base, source))
    message = HOSTILE[1]
    _merge(page, message=message, meta={"note": HOSTILE[0], "team": "data"})
    receiver.wait_for(yard.name, lambda _: _held_calls(receiver, yard) > calls)
    running = page.locator("#merge-status").get_by_role("status")
    expect(running).to_contain_text("Merging")
    expect(page.locator("#merge-status progress")).to_be_visible()
    assert yard.head(base) == before
    assert_accessible(page)
    screenshot(page, "merge-running")
    receiver.release.set()
    done = page.locator("#merge-status").get_by_role("status")
    expect(done).to_contain_text(f"Merged {source} into {base}", timeout=SETTLED)
    merged = yard.head(base)
    assert merged != before
    expect(page.locator(".merge-commit")).to_have_text(merged)
    expect(page.locator("#merge-status .message")).to_have_text(message)
    expect(page.get_by_role("link", name=merged)).to_have_attribute(
        "href", f"/ui/repositories/{yard.name}/commits/{merged}"
    )
    made = _ok(yard.api.get(f"/repositories/{yard.name}/commits/{merged}")).json()
    assert made["parents"] == [before, source_head]
    assert made["message"] == message
    strategy = {".lakefs.merge.strategy": "default"}  # lakeFS's own key
    assert made["metadata"] == {"note": HOSTILE[0], "team": "data", **strategy}
    assert yard.read(base, "ready.csv") == b"ready"
    assert page.locator("main img").count() == 0
    fits_phone(page)
    screenshot(page, "merge-done")


def test_without_script_the_merge_page_refreshes_until_the_merge_ends(
    browser: Browser, server: Server, yard: Yard, receiver: Receiver
) -> None:
    receiver.release.clear()
    calls = _held_calls(receiver, yard)
    source = yard.branch(unique("plain"))
    yard.put(source, f"{source}.csv", b"plain")
    yard.commit(source, "plain")
    context = browser.new_context(viewport=DESKTOP, java_script_enabled=False)
    try:
        page = context.new_page()
        sign_in_admin(page, server, yard.compare(HELD, source))
        page.locator("details#merge > summary").click()
        page.locator("#meta-key-1").fill("first")
        page.locator("#meta-value-1").fill("1")
        # without script the server draws the new row, keeping what was typed
        page.get_by_role("button", name="Add metadata row").click()
        expect(page.locator("#meta-key-1")).to_have_value("first")
        page.locator("#meta-key-2").fill("second")
        page.locator("#meta-value-2").fill("2")
        page.get_by_role("button", name="Merge", exact=True).click()
        receiver.wait_for(yard.name, lambda _: _held_calls(receiver, yard) > calls)
        expect(page.locator("#merge-status")).to_contain_text("Merging")
        first = page.url
        receiver.release.set()
        expect(page.locator("#merge-status")).to_contain_text(
            f"Merged {source} into {HELD}", timeout=SETTLED
        )
        assert page.url == first
        assert yard.read(HELD, f"{source}.csv") == b"plain"
        made = _ok(yard.api.get(f"/repositories/{yard.name}/commits/{yard.head(HELD)}")).json()
        assert made["metadata"]["first"] == "1" and made["metadata"]["second"] == "2"
    finally:
        context.close()


def test_refusals_show_next_to_the_form_with_what_was_typed(
    page: Page, server: Server, yard: Yard
) -> None:
    base, source = yard.branch(unique("dirty")), yard.branch(unique("clean"))
    yard.put(source, "clean.csv", b"c")
    yard.commit(source, "clean")
    sign_in_admin(page, server, yard.compare(base, source))
    # a merge without the session's CSRF token is refused, and starts nothing
    forged = page.request.post(
        f"{server.url}{yard.url}/merge", form={"ref": base, "compare": source}
    )
    assert forged.status == 403 and "Request refused" in forged.text()
    page.locator("details#merge > summary").click()
    page.locator("#meta-value-1").fill("no key")
    page.get_by_label("Commit message").fill("kept")
    page.get_by_role("button", name="Merge", exact=True).click()
    expect(page.locator("#merge-error")).to_have_text("The metadata value “no key” has no key.")
    expect(page.get_by_label("Commit message")).to_have_value("kept")
    expect(page.locator("#meta-value-1")).to_have_value("no key")
    page.locator("#meta-value-1").fill("")
    # a dirty destination fails in the background: the merge's page shows lakeFS's text
    yard.put(base, "staged", b"s")
    page.get_by_role("button", name="Merge", exact=True).click()
    expect(page.locator("#merge-status").get_by_role("alert")).to_contain_text(
        "uncommitted changes (dirty branch)", timeout=SETTLED
    )
    assert yard.head(base) == yard.head("main")
    expect(page.locator("ul.conflicts")).to_have_count(0)
    # a strategy the API does not know is refused up front, next to the form
    page.goto(server.url + yard.compare(base, source))
    page.locator("details#merge > summary").click()
    page.locator("#strategy option").first.evaluate("o => { o.value = 'sideways'; }")
    page.get_by_role("button", name="Merge", exact=True).click()
    expect(page.locator("#merge-error")).to_contain_text("invalid merge strategy")


def test_a_reader_sees_the_diff_and_no_merge(
    page: Page, server: Server, admin: httpx.Client, yard: Yard
) -> None:
    reader = make_user(admin, "Readers")
    sign_in(page, server, reader.key, reader.secret, yard.compare("main", "feature"))
    assert len(_rows(page)) == 3
    expect(page.locator("details#merge")).to_have_count(0)
    expect(page.get_by_role("link", name=re.compile("Open a pull request"))).to_have_count(0)
    assert_accessible(page)


def test_a_mirror_compares_and_offers_no_merge(
    page: Page, server: Server, admin: httpx.Client, yard: Yard
) -> None:
    name = unique("copy")
    body = {
        "name": name,
        "storage_namespace": f"local://{name}",
        "mirror_of": f"us-east-1/{yard.name}",
    }
    _ok(admin.post("/mirror/repositories", json=body))
    log = _ok(admin.get(f"/repositories/{yard.name}/refs/main/commits")).json()["results"]
    for commit in reversed(log):
        _ok(admin.post(f"/repositories/{name}/mirror/commits", json=commit))
    head = {"commit_id": log[0]["id"]}
    _ok(admin.put(f"/repositories/{name}/mirror/branches/main", json=head))
    _ok(admin.put(f"/repositories/{name}/mirror/branches/older", json={"commit_id": log[1]["id"]}))
    # the metadata files arrive as the replicant would deliver them
    shutil.copytree(server.data_dir / yard.name / "_lakefs", server.data_dir / name / "_lakefs")
    sign_in_admin(page, server, f"/ui/repositories/{name}/compare?ref=older&compare=main")
    expect(page.locator(".heading .badge")).to_have_text(f"Mirror of {yard.name} in us-east-1")
    # the branches differ, and either is a branch: only the mirror keeps the merge away
    assert ("Changes inside", "data/") in _rows(page)
    expect(page.locator("details#merge")).to_have_count(0)
    expect(page.get_by_role("link", name=re.compile("Open a pull request"))).to_have_count(0)
    assert_accessible(page)
