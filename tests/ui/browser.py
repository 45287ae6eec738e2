"""The web UI as a person uses it: headless Chromium (Debian's) driven by Playwright.

One browser per test session; each test gets a fresh context (no cookies) and page at
1280x800. Helpers sign in through the sign-in page, run axe-core in the page, and take the
screenshots docs/ui.md shows. ``make tools`` installs chromium (apt) and axe-core (npm).
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import Locator, Page

from tests.integration.harness import Server

ROOT = Path(__file__).resolve().parents[2]
CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
AXE = ROOT / ".tools" / "axe-core" / "node_modules" / "axe-core" / "axe.min.js"
SCREENSHOTS = ROOT / "docs" / "ui"
DESKTOP = {"width": 1280, "height": 800}
PHONE = {"width": 390, "height": 844}
HOSTILE = ("<img src=x onerror=alert(1)>", '"><script>alert(1)</script>')
"""Values that would run script if a page did not escape them."""


def require(path: Path, what: str) -> Path:
    """Return ``path``, failing the test (never skipping it) when ``make tools`` did not run."""
    if not path.exists():
        pytest.fail(f"{what} is missing at {path}: run `make tools`")
    return path


@functools.cache
def _axe_source() -> str:
    return require(AXE, "axe-core").read_text()


def follow(target: Locator) -> Page:
    """Click a link or button that loads another page, and wait for that page's load event.

    A click returns once the browser has acted on it; rows read right after it may come from
    the page before or from a part of the next one. Reads through ``expect`` retry on their
    own; plain reads (``all_inner_texts``, ``count``) come after ``follow``.
    """
    page = target.page
    with page.expect_navigation():
        target.click()
    return page


def sign_in(page: Page, server: Server, key: str, secret: str, path: str = "/ui/") -> None:
    """Open ``path``, sign in on the sign-in page it leads to, and wait to be back."""
    page.goto(server.url + path)
    page.get_by_label("Access key ID").fill(key)
    page.get_by_label("Secret access key").fill(secret)
    page.get_by_role("button", name="Sign in").click()
    page.wait_for_url(lambda url: "/ui/login" not in url)


def sign_in_admin(page: Page, server: Server, path: str = "/ui/") -> None:
    """Sign in as the server's administrator."""
    sign_in(page, server, server.access_key_id, server.secret_access_key, path)


def assert_accessible(page: Page) -> None:
    """Run axe-core in the page: no serious or critical violation may be reported.

    axe is evaluated through the DevTools protocol, which the page's CSP (no inline script)
    does not govern, so the page is checked with its real policy in force.
    """
    if not page.evaluate("() => typeof window.axe !== 'undefined'"):
        page.evaluate(_axe_source() + "\n;undefined")
    result: dict[str, Any] = page.evaluate("() => axe.run(document, {resultTypes: ['violations']})")
    bad = [v for v in result["violations"] if v.get("impact") in ("serious", "critical")]
    described = [
        f"{v['id']} ({v['impact']}): {v['help']} at {[n['target'] for n in v['nodes']][:3]}"
        for v in bad
    ]
    assert not bad, "\n".join(described)


def fits_phone(page: Page) -> None:
    """Check the page at 390x844: nothing wider than the screen outside a scrolling box."""
    page.set_viewport_size(PHONE)
    width = page.evaluate("() => document.documentElement.scrollWidth")
    wide = page.evaluate(
        """() => [...document.querySelectorAll('body *')]
            .filter(e => e.getBoundingClientRect().right > window.innerWidth + 0.5)
            .filter(e => !e.closest('.scroll'))
            .map(e => e.tagName + '.' + e.className).slice(0, 5)"""
    )
    page.set_viewport_size(DESKTOP)
    assert width <= PHONE["width"], f"the page is {width}px wide on a 390px screen: {wide}"


def screenshot(page: Page, name: str) -> None:
    """Save the page at 1280x800 as docs/ui/<name>.png (docs/ui.md shows them)."""
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page.set_viewport_size(DESKTOP)
    page.screenshot(path=str(SCREENSHOTS / f"{name}.png"))
