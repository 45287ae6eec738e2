"""A repository's Actions tab in a real browser: runs, filters, paging, a run's hooks and logs.

The module's repository holds action files with lua hooks that print markup which would run
script if a page did not escape it; the hooks run on commits of four branches (one hook's log
is longer than a page shows, one hook fails), so runs of every kind exist. The log must show as
text (the ``page`` fixture fails a test on any dialog or content security policy violation), and
its download must be the API's whole log, as an attachment.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import httpx
import pytest
from playwright.sync_api import Page, expect

from mirror.ui.views.actions import LOG_BOUND
from tests.e2e.regions import wait_for
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

RUNS_WAIT = 30.0
"""Post-commit hooks run in the background: how long their runs may take to be recorded."""
LONG_LINES = 1500
"""Lines of 100 bytes the verbose hook prints: more than a page shows of a log."""


def _ok(answer: httpx.Response) -> httpx.Response:
    assert answer.status_code < 300, answer.text
    return answer


def _action(name: str, events: str, script: str, branches: list[str]) -> bytes:
    """Return an action file of one lua hook; its ``args`` carry the markup (JSON is YAML)."""
    args = json.dumps({"first": HOSTILE[0], "second": HOSTILE[1]})
    on = "".join(f"  {event}:\n    branches: {json.dumps(branches)}\n" for event in events.split())
    body = "".join(f"        {line}\n" for line in script.strip().splitlines())
    return (
        f"name: {name}\non:\n{on}hooks:\n  - id: {name.lower().replace(' ', '_')}\n"
        f"    type: lua\n    properties:\n      args: {args}\n      script: |\n{body}"
    ).encode()


@dataclass(frozen=True)
class Works:
    """The module's repository: its runs' commits, by branch."""

    name: str
    api: httpx.Client
    commits: dict[str, str]

    @property
    def url(self) -> str:
        return f"/ui/repositories/{self.name}/actions"

    def runs(self, **params: str) -> list[dict[str, Any]]:
        found = _ok(self.api.get(f"/repositories/{self.name}/actions/runs", params=params))
        results: list[dict[str, Any]] = found.json()["results"]
        return results

    def run_of(self, branch: str, event: str) -> dict[str, Any]:
        return next(r for r in self.runs(branch=branch) if r["event_type"] == event)

    def commit(self, branch: str, path: str, message: str) -> httpx.Response:
        branches = f"/repositories/{self.name}/branches"
        _ok(self.api.post(f"{branches}/{branch}/objects", params={"path": path}, content=b"x"))
        return self.api.post(f"{branches}/{branch}/commits", json={"message": message})


@pytest.fixture(scope="module")
def works(admin: httpx.Client) -> Works:
    name = unique("works")
    _ok(admin.post("/repositories", json={"name": name, "storage_namespace": f"local://{name}"}))
    branches = f"/repositories/{name}/branches"
    files = {
        "log.yaml": _action(
            "Log markup",
            "pre-commit post-commit",
            "print(args.first)\nprint(args.second)",
            ["main", "feature"],
        ),
        "verbose.yaml": _action(
            "Verbose",
            "pre-commit",
            'for i = 1, 1500 do print(string.rep("x", 99)) end',
            ["verbose"],
        ),
        "deny.yaml": _action(
            "Deny", "pre-commit", 'print("checking")\nerror("refused: " .. args.first)', ["blocked"]
        ),
    }
    for file, content in files.items():
        path = f"_lakefs_actions/{file}"
        _ok(admin.post(f"{branches}/main/objects", params={"path": path}, content=content))
    made = Works(name, admin, {})
    commits = {"main": _ok(admin.post(f"{branches}/main/commits", json={"message": "actions"}))}
    for branch in ("feature", "verbose", "blocked"):
        _ok(admin.post(branches, json={"name": branch, "source": "main"}))
        commits[branch] = made.commit(branch, f"{branch}.txt", f"work on {branch}")
    assert commits["blocked"].status_code == 412, commits["blocked"].text
    made.commits.update({b: c.json()["id"] for b, c in commits.items() if b != "blocked"})
    # pre-commit runs are recorded in the request; post-commit runs in the background
    wait_for(lambda: len(made.runs()) == 6, RUNS_WAIT, "the post-commit runs recorded")
    return made


def _runs_shown(page: Page) -> list[tuple[str, str, str]]:
    """Return the listed runs as (event, branch, status)."""
    rows = page.locator("table.runs tbody tr")
    return [
        (
            row.locator("td").nth(0).inner_text(),
            row.locator("td").nth(1).inner_text(),
            row.locator(".badge").inner_text(),
        )
        for row in rows.all()
    ]


def _only_own_scripts(page: Page) -> None:
    assert page.locator("main img").count() == 0
    sources = page.locator("script").evaluate_all("s => s.map(e => e.getAttribute('src'))")
    assert sources and all(src and src.startswith("/ui/static/") for src in sources), sources


def test_the_runs_newest_first_filtered_by_branch_or_commit(
    page: Page, server: Server, works: Works
) -> None:
    sign_in_admin(page, server, works.url)
    expected = [(r["event_type"], r["branch"], r["status"]) for r in works.runs()]
    assert _runs_shown(page) == expected
    assert ("pre-commit", "blocked", "failed") in expected
    assert sorted(b for _, b, _ in expected) == sorted(
        ["main", "main", "feature", "feature", "verbose", "blocked"]
    )
    feature = (
        page.locator("table.runs tbody tr")
        .filter(has_text="post-commit")
        .filter(has_text="feature")
    )
    expect(feature.get_by_role("link", name=works.commits["feature"][:12])).to_have_attribute(
        "href", f"/ui/repositories/{works.name}/commits/{works.commits['feature']}"
    )
    assert_accessible(page)
    fits_phone(page)
    screenshot(page, "actions")

    page.get_by_label("Branch").fill("feature")
    page.get_by_role("button", name="Filter").click()
    assert sorted(_runs_shown(page)) == [
        ("post-commit", "feature", "completed"),
        ("pre-commit", "feature", "completed"),
    ]

    page.get_by_label("Branch").fill("")
    page.get_by_label("Commit ID").fill(works.commits["main"])
    page.get_by_role("button", name="Filter").click()
    assert sorted(_runs_shown(page)) == [
        ("post-commit", "main", "completed"),
        ("pre-commit", "main", "completed"),
    ]

    # lakeFS refuses both filters at once: the page shows the server's message
    page.get_by_label("Branch").fill("main")
    page.get_by_role("button", name="Filter").click()
    expect(page.locator("#runs-error")).to_contain_text("parameters conflict")
    page.get_by_role("link", name="All runs").click()
    assert len(_runs_shown(page)) == 6

    page.goto(f"{server.url}{works.url}?branch=nothing-ran-here")
    expect(page.get_by_text("No runs on branch nothing-ran-here.")).to_be_visible()


def test_a_run_its_hooks_and_a_log_with_markup_as_text(
    page: Page, server: Server, works: Works
) -> None:
    run = works.run_of("main", "pre-commit")
    sign_in_admin(page, server, works.url + "?branch=main")
    page.locator("table.runs tbody tr").filter(has_text="pre-commit").get_by_role(
        "link"
    ).first.click()
    expect(page.get_by_role("heading", level=2)).to_contain_text(f"Run {run['run_id']}")
    facts = page.locator("dl.run-facts")
    expect(facts).to_contain_text("pre-commit")
    expect(facts.get_by_role("link", name="main")).to_be_visible()
    expect(facts.get_by_role("link", name=works.commits["main"])).to_be_visible()
    hooks = page.locator("table.hooks tbody tr")
    expect(hooks).to_have_count(1)
    expect(hooks.first).to_contain_text("Log markup")
    expect(hooks.first.locator(".badge")).to_have_text("completed")
    hooks.first.get_by_role("link", name="Show log of 0000_0000").click()
    log = page.locator("pre.log-text")
    expect(log).to_have_text(f"{HOSTILE[0]}\n{HOSTILE[1]}\n")
    expect(page.locator("table.hooks tr.open")).to_have_count(1)
    _only_own_scripts(page)
    assert_accessible(page)
    fits_phone(page)
    screenshot(page, "action-run")

    output = f"/repositories/{works.name}/actions/runs/{run['run_id']}/hooks/0000_0000/output"
    whole = _ok(works.api.get(output)).content
    link = page.locator("#log").get_by_role("link", name="Download")
    raw = page.request.get(server.url + link.get_attribute("href"))
    assert raw.status == 200 and raw.body() == whole
    assert raw.headers["content-disposition"] == "attachment; filename=0000_0000.log"
    assert raw.headers["content-security-policy"].startswith("default-src 'none'")
    with page.expect_download() as download:
        link.click()
    assert download.value.suggested_filename == "0000_0000.log"


def test_a_long_log_shows_its_start_and_downloads_whole(
    page: Page, server: Server, works: Works
) -> None:
    run = works.run_of("verbose", "pre-commit")
    sign_in_admin(page, server, f"{works.url}/runs/{run['run_id']}?hook=0000_0000")
    size = LONG_LINES * 100
    expect(page.locator("#log")).to_contain_text(f"The first 64 KiB of {size} bytes")
    shown = page.locator("pre.log-text").inner_text()
    assert len(shown) == LOG_BOUND and set(shown) == {"x", "\n"}
    link = page.locator("#log").get_by_role("link", name="download the whole log")
    raw = page.request.get(server.url + link.get_attribute("href"))
    assert raw.status == 200 and len(raw.body()) == size


def test_a_failed_hook_shows_its_error_in_its_log(page: Page, server: Server, works: Works) -> None:
    run = works.run_of("blocked", "pre-commit")
    assert run["status"] == "failed"
    sign_in_admin(page, server, f"{works.url}/runs/{run['run_id']}")
    expect(page.get_by_role("heading", level=2).locator(".badge")).to_have_text("failed")
    expect(page.get_by_text("none", exact=True)).to_be_visible()  # it made no commit
    page.get_by_role("link", name="Show log of 0000_0000").click()
    log = page.locator("pre.log-text")
    expect(log).to_contain_text("checking\n")
    expect(log).to_contain_text(f"refused: {HOSTILE[0]}")
    _only_own_scripts(page)
    assert_accessible(page)


def test_paging_through_runs(page: Page, server: Server, admin: httpx.Client) -> None:
    name = unique("busy")
    _ok(admin.post("/repositories", json={"name": name, "storage_namespace": f"local://{name}"}))
    branches = f"/repositories/{name}/branches"
    action = _action("Count", "pre-create-branch", "print(action.branch_id)", [])
    path = "_lakefs_actions/count.yaml"
    _ok(admin.post(f"{branches}/main/objects", params={"path": path}, content=action))
    _ok(admin.post(f"{branches}/main/commits", json={"message": "count"}))
    for i in range(102):
        _ok(admin.post(branches, json={"name": f"b{i:03d}", "source": "main"}))
    listed = _ok(admin.get(f"/repositories/{name}/actions/runs", params={"amount": 1000})).json()
    ids = [r["run_id"] for r in listed["results"]]
    assert len(ids) == 102
    sign_in_admin(page, server, f"/ui/repositories/{name}/actions")

    def shown() -> list[str]:
        return page.locator("table.runs tbody th").all_inner_texts()

    assert shown() == ids[:100]
    expect(page.get_by_role("link", name="Back to start")).to_have_count(0)
    page.get_by_role("link", name="Next page").click()
    assert shown() == ids[100:]
    expect(page.get_by_role("link", name="Next page")).to_have_count(0)
    page.get_by_role("link", name="Back to start").click()
    assert shown() == ids[:100]


def test_a_reader_sees_the_servers_refusal(
    page: Page, server: Server, admin: httpx.Client, works: Works
) -> None:
    # lakeFS's Readers may not read action runs (ci:ReadAction)
    reader = make_user(admin, "Readers")
    sign_in(page, server, reader.key, reader.secret, works.url)
    expect(page.locator("#runs-error")).to_contain_text("insufficient permissions")
    expect(page.locator("#runs-error")).to_contain_text("ci:ReadAction")
    assert page.locator("table.runs").count() == 0
    assert_accessible(page)


def test_a_mirror_has_no_runs(
    page: Page, server: Server, admin: httpx.Client, works: Works
) -> None:
    mirror = make_mirror(admin, works.name)
    sign_in_admin(page, server, f"/ui/repositories/{mirror}/actions")
    # hooks never run on a mirror: its source's runs stay in the source
    expect(page.get_by_text("No runs.")).to_be_visible()
    expect(page.locator("main form[method=post]")).to_have_count(0)
