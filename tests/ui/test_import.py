"""Importing from storage in a real browser: the form, the progress page, the commit, cancel.

The server imports ``local://`` sources from its data directory (docs/import.md). A source with
a FIFO among its files holds an import inside its listing until the test opens the FIFO, so the
progress page can be seen running (followed by script, or by a meta refresh without it) and an
import can be canceled. What the import did is checked through the REST API; a commit message
and metadata holding markup show as text (the ``page`` fixture fails a test on any dialog or
content security policy violation). Readers, writers (lakeFS's Writers may not import from
storage) and mirrors get no import. Offering it costs an Objects page no call of its own: its
permissions go with the page's, and the server's ``/config`` is read once per process (counted
with the server's request metrics, which count the UI's in-process API calls too).
"""

from __future__ import annotations

import os
import re
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
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
    screenshot,
    sign_in,
    sign_in_admin,
)
from tests.ui.conftest import make_mirror, make_user

pytestmark = pytest.mark.ui

SETTLED = 30_000
"""How long (ms) a page may take to show an import's end (the page polls every 3 s)."""
HELD_FILES = 200
HELD_AT = 150
"""A held source's files, and the index of its FIFO."""


def _ok(answer: httpx.Response) -> httpx.Response:
    assert answer.status_code < 300, answer.text
    return answer


@dataclass(frozen=True)
class Repo:
    """The module's repository, the server's data directory, and the API."""

    name: str
    api: httpx.Client
    data_dir: Path

    def branch(self) -> str:
        name = unique("into")
        body = {"name": name, "source": "main"}
        _ok(self.api.post(f"/repositories/{self.name}/branches", json=body))
        return name

    def head(self, branch: str) -> dict[str, Any]:
        found: dict[str, Any] = _ok(
            self.api.get(f"/repositories/{self.name}/commits/{branch}")
        ).json()
        return found

    def paths(self, branch: str) -> list[str]:
        url = f"/repositories/{self.name}/refs/{branch}/objects/ls"
        listed = _ok(self.api.get(url, params={"amount": 1000})).json()["results"]
        return [o["path"] for o in listed]

    def objects_url(self, branch: str) -> str:
        return f"/ui/repositories/{self.name}/objects?ref={branch}"

    def source(self, files: dict[str, bytes]) -> str:
        """Write ``files`` under the data directory, outside every namespace; return their URI."""
        prefix = unique("landing")
        for key, data in files.items():
            (self.data_dir / prefix / key).parent.mkdir(parents=True, exist_ok=True)
            (self.data_dir / prefix / key).write_bytes(data)
        return f"local://{prefix}/"


@pytest.fixture(scope="module")
def repo(admin: httpx.Client, server: Server) -> Repo:
    name = unique("imports")
    _ok(admin.post("/repositories", json={"name": name, "storage_namespace": f"local://{name}"}))
    _ok(admin.post(f"/repositories/{name}/branches/main/objects", params={"path": "keep"}))
    _ok(admin.post(f"/repositories/{name}/branches/main/commits", json={"message": "base"}))
    return Repo(name, admin, server.data_dir)


@pytest.fixture
def held(repo: Repo) -> Iterator[tuple[str, Path]]:
    """A source whose listing waits at a FIFO until the test opens it."""
    files = {f"f{i:03d}": b"x" for i in range(HELD_FILES) if i != HELD_AT}
    source = repo.source(files)
    fifo = repo.data_dir / source.removeprefix("local://") / f"f{HELD_AT:03d}"
    os.mkfifo(fifo)
    yield source, fifo
    try:  # a listing still waiting gets its end of file and goes on
        os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
    except OSError:
        pass  # nobody waits


def _release(fifo: Path) -> None:
    with open(fifo, "wb"):
        pass


def _fill_source(page: Page, row: int, kind: str, path: str, destination: str) -> None:
    page.locator(f"#source-type-{row}").select_option(kind)
    page.locator(f"#source-path-{row}").fill(path)
    page.locator(f"#source-destination-{row}").fill(destination)


def test_import_a_prefix_and_an_object_into_one_commit(
    page: Page, server: Server, repo: Repo
) -> None:
    branch = repo.branch()
    source = repo.source({"t1/a.csv": b"a", "t1/b.csv": b"bb", "t2/c.csv": b"c", "one.bin": b"1"})
    sign_in_admin(page, server, repo.objects_url(branch))
    page.get_by_role("link", name="Import from storage").click()
    expect(page.get_by_role("heading", level=2)).to_have_text("Import from storage")
    expect(page.get_by_label("Into branch")).to_have_value(branch)
    _fill_source(page, 1, "common_prefix", source, "tables/")
    # with script "Add source" adds a row in place
    page.get_by_role("button", name="Add source").click()
    expect(page.locator("#source-type-2")).to_be_focused()
    expect(page.locator("#source-path-1")).to_have_value(source)
    _fill_source(page, 2, "object", source + "one.bin", "single/one.bin")
    page.get_by_label("Commit message").fill(HOSTILE[1])
    page.locator("#meta-key-1").fill("origin")
    page.locator("#meta-value-1").fill(HOSTILE[0])
    assert_accessible(page)
    fits_phone(page)
    page.get_by_role("heading", level=2).evaluate("h => h.scrollIntoView()")
    screenshot(page, "import-form")
    before = repo.head(branch)["id"]
    page.get_by_role("button", name="Import", exact=True).click()

    done = page.locator("#import-status").get_by_role("status")
    expect(done).to_contain_text(f"Imported 5 objects into {branch}", timeout=SETTLED)
    head = repo.head(branch)
    assert head["parents"] == [before]
    assert head["message"] == HOSTILE[1]
    assert head["metadata"] == {"origin": HOSTILE[0], ".lakefs.merge.strategy": "source-wins"}
    expect(page.locator(".import-commit")).to_have_text(head["id"])
    expect(page.get_by_role("link", name=head["id"])).to_have_attribute(
        "href", f"/ui/repositories/{repo.name}/commits/{head['id']}"
    )
    expect(page.locator("#import-status .message")).to_have_text(HOSTILE[1])
    assert page.locator("main img").count() == 0
    assert sorted(repo.paths(branch)) == [
        "keep",
        "single/one.bin",
        "tables/one.bin",
        "tables/t1/a.csv",
        "tables/t1/b.csv",
        "tables/t2/c.csv",
    ]
    assert_accessible(page)
    fits_phone(page)
    screenshot(page, "import-done")


def test_progress_then_cancel(
    page: Page, server: Server, repo: Repo, held: tuple[str, Path]
) -> None:
    source, fifo = held
    branch = repo.branch()
    before = repo.head(branch)["id"]
    sign_in_admin(page, server, f"/ui/repositories/{repo.name}/import?ref={branch}")
    _fill_source(page, 1, "common_prefix", source, "held/")
    page.get_by_role("button", name="Import", exact=True).click()
    running = page.locator("#import-status").get_by_role("status")
    expect(running).to_contain_text("Importing")
    # the page follows the import as it lists up to the FIFO (the count the import saves
    # trails its listing by the few records not yet passed on)
    expect(page.locator("#import-status .ingested")).to_have_text(
        re.compile(r"^(1[4-9]\d)$"), timeout=SETTLED
    )
    assert int(page.locator("#import-status .ingested").inner_text()) <= HELD_AT
    expect(page.locator("#import-status progress")).to_be_visible()
    assert_accessible(page)
    fits_phone(page)
    screenshot(page, "import-running")
    page.get_by_role("button", name="Cancel the import").click()
    expect(page.get_by_role("status")).to_contain_text("The import was canceled")
    expect(page.locator("#import-failure")).to_have_text("import error: Canceled")
    expect(page.get_by_role("button", name="Cancel the import")).to_have_count(0)
    _release(fifo)
    # it never commits afterwards
    page.reload()
    expect(page.locator("#import-failure")).to_have_text("import error: Canceled")
    assert repo.head(branch)["id"] == before
    assert "held/f000" not in repo.paths(branch)


def test_without_script_the_progress_page_refreshes_until_the_import_ends(
    browser: Browser, server: Server, repo: Repo, held: tuple[str, Path]
) -> None:
    source, fifo = held
    branch = repo.branch()
    context = browser.new_context(viewport=DESKTOP, java_script_enabled=False)
    try:
        page = context.new_page()
        sign_in_admin(page, server, f"/ui/repositories/{repo.name}/import?ref={branch}")
        _fill_source(page, 1, "common_prefix", source, "held/")
        # without script the server draws the new rows, keeping what was typed
        page.get_by_role("button", name="Add source").click()
        expect(page.locator("#source-path-1")).to_have_value(source)
        expect(page.locator("#source-path-2")).to_have_value("")
        page.locator("#meta-key-1").fill("first")
        page.locator("#meta-value-1").fill("1")
        page.get_by_role("button", name="Add metadata row").click()
        expect(page.locator("#meta-key-1")).to_have_value("first")
        page.locator("#meta-key-2").fill("second")
        page.locator("#meta-value-2").fill("2")
        page.get_by_role("button", name="Import", exact=True).click()
        expect(page.locator("#import-status")).to_contain_text("Importing")
        first = page.url
        _release(fifo)
        expect(page.locator("#import-status")).to_contain_text(
            f"Imported {HELD_FILES} objects into {branch}", timeout=SETTLED
        )
        assert page.url == first
        head = repo.head(branch)
        assert head["message"] == "Import objects"  # the server's, as lakeFS's
        assert head["metadata"]["first"] == "1" and head["metadata"]["second"] == "2"
        assert len([p for p in repo.paths(branch) if p.startswith("held/")]) == HELD_FILES
    finally:
        context.close()


def test_refusals_show_next_to_the_form_with_what_was_typed(
    page: Page, server: Server, repo: Repo
) -> None:
    branch = repo.branch()
    sign_in_admin(page, server, f"/ui/repositories/{repo.name}/import?ref={branch}")
    inside = f"local://{repo.name}/data/"
    _fill_source(page, 1, "common_prefix", inside, "x/")
    page.get_by_label("Commit message").fill("kept")
    page.get_by_role("button", name="Import", exact=True).click()
    error = page.locator("#import-error")
    expect(error).to_contain_text(f"import path ({inside}) in repository namespace")
    expect(error).to_contain_text("invalid import source")
    expect(page.locator("#source-path-1")).to_have_value(inside)
    expect(page.get_by_label("Commit message")).to_have_value("kept")
    assert_accessible(page)
    # an uncommitted change on the branch: lakeFS's dirty-branch refusal
    url = f"/repositories/{repo.name}/branches/{branch}/objects"
    _ok(repo.api.post(url, params={"path": "staged"}, content=b"x"))
    _fill_source(page, 1, "common_prefix", repo.source({"a": b"a"}), "x/")
    page.get_by_role("button", name="Import", exact=True).click()
    expect(error).to_contain_text("uncommitted changes (dirty branch)")
    page.get_by_label("Into branch").fill("no-such-branch")
    page.get_by_role("button", name="Import", exact=True).click()
    expect(error).to_contain_text("not found")
    assert repo.head(branch)["message"] == "base"


def test_only_those_allowed_to_import_get_it(
    page: Page, server: Server, admin: httpx.Client, repo: Repo
) -> None:
    # lakeFS's Writers may write objects and commit, but not read storage to import it
    for group in ("Readers", "Writers"):
        user = make_user(admin, group)
        page.context.clear_cookies()
        sign_in(page, server, user.key, user.secret, repo.objects_url("main"))
        expect(page.get_by_role("link", name="keep", exact=True)).to_be_visible()
        expect(page.get_by_role("link", name="Import from storage")).to_have_count(0)
        page.goto(f"{server.url}/ui/repositories/{repo.name}/import?ref=main")
        expect(page.locator("#import-refused")).to_have_text(
            "Your policies do not allow importing into this branch."
        )
        expect(page.locator("main form[method=post]")).to_have_count(0)
    assert_accessible(page)


def test_a_mirror_takes_no_import(
    page: Page, server: Server, admin: httpx.Client, repo: Repo
) -> None:
    mirror = make_mirror(admin, repo.name)
    sign_in_admin(page, server, f"/ui/repositories/{mirror}/objects?ref=main")
    expect(page.locator(".heading .badge")).to_contain_text("Mirror of")
    expect(page.get_by_role("link", name="Import from storage")).to_have_count(0)
    page.goto(f"{server.url}/ui/repositories/{mirror}/import?ref=main")
    expect(page.locator("#import-refused")).to_contain_text("A mirror takes no import")
    expect(page.locator("main form[method=post]")).to_have_count(0)
    assert_accessible(page)


def _api_calls(server: Server) -> Counter[tuple[str, str]]:
    """Return the API's requests answered so far, by method and route (``GET /metrics``)."""
    counted: Counter[tuple[str, str]] = Counter()
    metrics = httpx.get(f"{server.url}/metrics", timeout=30.0)
    metric = re.compile(r"^lakemirror_http_requests_total\{(.*)\} ([0-9.e+]+)$")
    for line in _ok(metrics).text.splitlines():
        if found := metric.match(line):
            labels = dict(re.findall(r'(\w+)="([^"]*)"', found.group(1)))
            counted[labels["method"], labels["route"]] += int(float(found.group(2)))
    return counted


def test_the_import_offer_costs_the_objects_page_no_call_of_its_own(
    server: Server, repo: Repo
) -> None:
    keys = {"access_key_id": server.access_key_id, "secret_access_key": server.secret_access_key}
    with httpx.Client(base_url=server.url, timeout=30.0) as browser:
        _ok(browser.post("/api/v1/auth/login", json=keys))
        _ok(browser.get(repo.objects_url("main")))  # /config may be read here, once
        for _ in range(2):
            before = _api_calls(server)
            objects = _ok(browser.get(repo.objects_url("main")))
            calls = _api_calls(server) - before
            assert "Import from storage" in objects.text
            assert calls["POST", "/api/v1/user/permissions"] == 1, calls
            assert calls["GET", "/api/v1/config"] == 0, calls
        # a repository's URL checks the session and sends the browser on: no permission asked
        before = _api_calls(server)
        home = browser.get(f"/ui/repositories/{repo.name}")
        calls = _api_calls(server) - before
        assert home.status_code == 302, home.text
        assert home.headers["location"] == f"/ui/repositories/{repo.name}/objects"
        assert calls["GET", "/api/v1/user"] == 1, calls
        assert calls["POST", "/api/v1/user/permissions"] == 0, calls
