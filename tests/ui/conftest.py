"""Fixtures of the web UI's browser tests: a server per module, one browser for them all.

Each module starts one live ``lakemirror server`` (tests/integration/harness.py) whose
administrator sets data up through the REST API; each test gets a fresh browser context, so
no cookie leaks between tests, and fails if any JavaScript dialog opened or the page broke its
content security policy.
"""

from __future__ import annotations

import secrets
from collections.abc import Iterator
from dataclasses import dataclass

import httpx
import pytest
from playwright.sync_api import Browser, Dialog, Page, sync_playwright

from tests.integration.harness import Server, running_server, unique
from tests.ui.browser import CHROMIUM, CHROMIUM_ARGS, DESKTOP, require


@pytest.fixture(scope="package")
def browser() -> Iterator[Browser]:
    """One browser for all the UI tests; closed after them, because Playwright's synchronous API
    keeps an event loop running while it is open, which async tests run later would trip on."""
    require(CHROMIUM, "Debian's chromium")
    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        yield launched
        launched.close()


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    root = tmp_path_factory.mktemp("ui-server")
    with running_server(
        root / "data",
        root / "server.log",
        access_key_id="AKIAJ" + secrets.token_hex(8).upper()[:15],
        secret_access_key=secrets.token_urlsafe(30),
    ) as running:
        yield running


@pytest.fixture(scope="module")
def admin(server: Server) -> Iterator[httpx.Client]:
    """The REST API as the administrator, to set data up and check what the UI did."""
    with httpx.Client(
        base_url=f"{server.url}/api/v1",
        auth=(server.access_key_id, server.secret_access_key),
        timeout=30.0,
    ) as client:
        yield client


@dataclass(frozen=True)
class User:
    """A user made for a test, with its access key."""

    id: str
    key: str
    secret: str


def make_user(admin: httpx.Client, group: str) -> User:
    """Create a user in ``group`` (Readers, Writers, ...) with an access key."""
    user_id = unique("user")
    admin.post("/auth/users", json={"id": user_id}).raise_for_status()
    admin.put(f"/auth/groups/{group}/members/{user_id}").raise_for_status()
    made = admin.post(f"/auth/users/{user_id}/credentials")
    made.raise_for_status()
    key = made.json()
    return User(user_id, key["access_key_id"], key["secret_access_key"])


@dataclass
class Watch:
    """What a page did that it must not: dialogs opened, CSP violations reported."""

    dialogs: list[str]
    csp: list[str]


@pytest.fixture
def watch() -> Watch:
    return Watch([], [])


@pytest.fixture
def page(browser: Browser, watch: Watch) -> Iterator[Page]:
    context = browser.new_context(viewport=DESKTOP)
    opened = context.new_page()

    def on_dialog(dialog: Dialog) -> None:
        watch.dialogs.append(dialog.message)
        dialog.dismiss()

    opened.on("dialog", on_dialog)
    opened.on(
        "console",
        lambda m: watch.csp.append(m.text) if "Content Security Policy" in m.text else None,
    )
    yield opened
    context.close()
    assert not watch.dialogs, f"a page opened dialogs: {watch.dialogs}"
    assert not watch.csp, f"a page broke its content security policy: {watch.csp}"


def make_mirror(admin: httpx.Client, source: str, region: str = "us-east-1") -> str:
    """Create a mirror of ``source`` whose main holds source's main: its commits, oldest first."""
    name = unique("copy")
    body = {
        "name": name,
        "storage_namespace": f"local://{name}",
        "mirror_of": f"{region}/{source}",
    }
    admin.post("/mirror/repositories", json=body).raise_for_status()
    log = admin.get(f"/repositories/{source}/refs/main/commits", params={"amount": 1000})
    log.raise_for_status()
    commits = log.json()["results"]
    for commit in reversed(commits):
        admin.post(f"/repositories/{name}/mirror/commits", json=commit).raise_for_status()
    head = {"commit_id": commits[0]["id"]}
    admin.put(f"/repositories/{name}/mirror/branches/main", json=head).raise_for_status()
    return name
