"""The mirroring pages in a real browser, over two live regions and a live replicant.

Region ``a`` holds the source repository; region ``b`` its mirror (of the same name, as
docs/disaster-recovery.md names them), worked by a ``lakemirror replicant`` process whose URL
region ``b``'s server has as ``ui.replicant_url``. Files travel by the replication simulator,
which a test stalls to hold the mirror back while the source commits: the mirrors page must show
the lag rise and the health mark change (by the alerts' thresholds: a commit dated 1,000 seconds
ago is past LakeMirrorMirrorLagging's 15 minutes at once), then fall back once replication is
released, and the mirror's page must chart it. A planned promotion is done from the UI last: it
ends the mirror. The held commit's message is markup that must show as text.
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import lakefs
import pytest
from playwright.sync_api import Locator, Page, expect

from mirror.simulate import ReplicationSimulator
from tests.e2e.regions import RegionBackend, Replicant, TwoRegions, two_regions, wait_for
from tests.integration.harness import free_port, unique
from tests.ui.browser import (
    HOSTILE,
    assert_accessible,
    fits_phone,
    screenshot,
    sign_in,
    sign_in_admin,
)
from tests.ui.conftest import make_user

pytestmark = pytest.mark.ui

MESSAGE = " ".join(HOSTILE)
PAGE_WAIT = 60.0
"""Seconds a test reloads a page for until it shows what the replicant must come to."""


@dataclass
class Mirrored:
    """The two regions, the replicant, replication, and the mirror between them."""

    world: TwoRegions
    replicant: Replicant
    simulator: ReplicationSimulator
    source: lakefs.Repository

    @property
    def name(self) -> str:
        """The mirror's name: the source's, as in the usual set-up of one name per region."""
        return str(self.source.id)

    @property
    def url(self) -> str:
        return f"/ui/mirrors/{self.name}/{self.name}"


@pytest.fixture(scope="module")
def mirrored(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Mirrored]:
    tmp: Path = tmp_path_factory.mktemp("ui-mirrors")
    port = free_port()
    ui = RegionBackend(env={"LAKEMIRROR_UI__REPLICANT_URL": f"http://127.0.0.1:{port}"})
    with two_regions(tmp, backend_b=ui) as world, world.replicant("ui", port=port) as replicant:
        source, namespace = world.source_repo("origin")
        main = source.branch("main")
        main.object("tables/people.csv").upload(b"id,name\n1,ada\n")
        main.commit("first table")
        simulator = world.simulator(namespace, world.b.namespace(source.id))
        created = world.create_mirror(
            replicant, source.id, source.id, world.b.namespace(source.id), branches=["main"]
        )
        assert created.status_code == 201, created.text
        head = main.get_commit().id
        wait_for(lambda: world.b.head(source.id, "main") == head, 30, "the mirror synced")
        yield Mirrored(world, replicant, simulator, source)


def _reload_until(page: Page, condition: Locator, what: str) -> None:
    """Reload ``page`` until ``condition`` matches an element, for up to :data:`PAGE_WAIT`."""

    def shown() -> bool:
        page.reload()
        return condition.count() > 0

    wait_for(shown, PAGE_WAIT, what, interval=0.5)


def _card(page: Page, mirrored: Mirrored) -> Locator:
    return page.locator("section.card.mirror").filter(
        has=page.get_by_role("link", name=mirrored.name, exact=True)
    )


def _lag(card: Locator) -> float:
    return float(card.locator(".lag-seconds").first.get_attribute("data-seconds") or "nan")


def test_the_mirrors_page_shows_the_lag_rise_and_fall_with_the_health_mark(
    page: Page, mirrored: Mirrored
) -> None:
    world, b = mirrored.world, mirrored.world.b.server
    sign_in_admin(page, b, "/ui/mirrors")
    expect(page.get_by_role("heading", level=1)).to_have_text("Mirrors in region b")
    card = _card(page, mirrored)
    expect(card.locator(".heading .badge.health")).to_have_text("Healthy")
    expect(card).to_contain_text(f"mirror of {mirrored.name} in region a")
    row = card.locator("tbody tr").filter(has_text="main")
    expect(row.locator(".lag-commits")).to_have_text("0 commits")
    expect(row.locator(".state")).to_have_text("synced")

    # replication held back while the source commits (dated 1,000 s ago: past 15 minutes)
    mirrored.simulator.stall()
    try:
        branches = f"/repositories/{mirrored.name}/branches/main"
        world.a.http.post(
            f"{branches}/objects", params={"path": "tables/held.csv"}, content=b"id\n2\n"
        ).raise_for_status()
        commit = {"message": MESSAGE, "date": int(time.time()) - 1000}
        world.a.http.post(f"{branches}/commits", json=commit).raise_for_status()
        _reload_until(
            page,
            card.locator(".heading .badge.health-lagging"),
            "the mirror marked lagging",
        )
        expect(row.locator(".lag-commits")).to_have_text(re.compile(r"^(at least )?1 commit$"))
        first = _lag(card)
        assert first > 900, first
        expect(row.locator(".state")).to_have_text(re.compile("waiting|validating"))
        expect(card.locator(".reasons")).to_contain_text("LakeMirrorMirrorLagging")
        _reload_until(page, card.locator(".lag-commits", has_text=re.compile("^1 commit$")), "1")
        wait_for(lambda: page.reload() or _lag(card) > first, PAGE_WAIT, "the lag to grow", 0.5)
        expect(row).to_contain_text("of the newest source head")
        assert_accessible(page)
        fits_phone(page)
        screenshot(page, "mirrors")

        # a forced promotion now would lose that commit, and says so before anything is done
        page.goto(b.url + mirrored.url)
        page.get_by_role("link", name="Promote with force (failover)").click()
        loss = page.locator("#expected-loss")
        expect(loss).to_contain_text("1 commit")
        expect(loss).to_contain_text("ago")
        expect(page.locator("table tbody tr").filter(has_text="main")).to_contain_text("1 commit")
        assert_accessible(page)
        fits_phone(page)
        screenshot(page, "mirror-promote-forced")
        page.get_by_role("link", name="Cancel").click()
        expect(page).to_have_url(b.url + mirrored.url)
    finally:
        mirrored.simulator.resume()

    page.goto(b.url + "/ui/mirrors")
    _reload_until(page, card.locator(".heading .badge.health-healthy"), "healthy again")
    expect(row.locator(".lag-commits")).to_have_text("0 commits")
    assert _lag(card) == 0
    # the markup of the held commit's message stayed text, on the mirror's page too
    page.goto(b.url + mirrored.url)
    expect(page.locator(".mirror-branches .message").first).to_have_text(MESSAGE)
    assert page.locator("img").count() == 0
    assert page.locator("script").count() == 1


def test_the_mirrors_page_charts_the_last_hour(page: Page, mirrored: Mirrored) -> None:
    b = mirrored.world.b.server
    sign_in_admin(page, b, mirrored.url)
    seconds = page.locator("figure.lag-chart svg").first
    # the slot of the held commit keeps its lag; a later slot shows it gone
    newest = page.locator("details.card tbody tr").first.locator("td").nth(2)
    _reload_until(page, page.locator("details.card tbody tr td", has_text=re.compile(r"^1$")), "1")
    _reload_until(page, newest.filter(has_text=re.compile("^0$")), "a sample back at 0")
    assert int(seconds.get_attribute("data-samples") or 0) >= 2
    assert seconds.locator("circle").count() >= 2
    expect(page.locator("figure.lag-chart figcaption").first).to_contain_text("Lag in seconds")
    expect(page.locator(".facts")).to_contain_text(f"{mirrored.name} in region a")
    hour = seconds.locator("text.axis").all_text_contents()
    assert "0 s" in hour, hour
    page.get_by_role("link", name="Last 10 minutes").click()
    expect(page.get_by_role("link", name="Last 10 minutes")).to_have_attribute(
        "aria-current", "page"
    )
    expect(page.locator("figure.lag-chart figcaption").first).to_contain_text("last 10 minutes")
    assert seconds.locator("circle").count() >= 2
    assert seconds.locator("text.axis").all_text_contents() != hour, "a time axis of its own"
    assert_accessible(page)
    fits_phone(page)
    # the screenshot shows the branches and the charts under them
    page.evaluate("() => document.querySelector('h2').scrollIntoView()")
    screenshot(page, "mirror")


def test_create_and_stop_a_mirror_with_the_replicants_messages(
    page: Page, mirrored: Mirrored
) -> None:
    world, b = mirrored.world, mirrored.world.b.server
    spare = unique("spare")
    sign_in_admin(page, b, "/ui/mirrors")
    page.get_by_text("Create mirror").first.click()
    page.get_by_label("Source repository").fill(mirrored.name)
    page.get_by_label("Mirror repository in b").fill(HOSTILE[0])
    page.get_by_label("Storage namespace").fill(HOSTILE[1])
    page.get_by_role("button", name="Create mirror").click()
    expect(page.locator("#create-error")).to_contain_text(f"invalid repository name '{HOSTILE[0]}'")
    assert page.locator("img").count() == 0
    page.get_by_label("Mirror repository in b").fill(spare)
    page.get_by_role("button", name="Create mirror").click()
    expect(page.locator("#create-error")).to_contain_text("is not a URI")
    page.get_by_label("Source repository").fill("no-such-source")
    page.get_by_label("Storage namespace").fill(world.b.namespace(spare))
    page.get_by_role("button", name="Create mirror").click()
    expect(page.locator("#create-error")).to_contain_text(
        "source repository 'no-such-source' not found"
    )
    page.get_by_label("Source repository").fill(mirrored.name)
    page.get_by_label("Branches").fill("main, release-*")
    page.get_by_role("button", name="Create mirror").click()
    expect(page).to_have_url(re.compile(f"/ui/mirrors/{mirrored.name}/{spare}"))
    expect(page.get_by_role("status")).to_contain_text(f"Mirror {spare} created")
    expect(page.locator(".facts")).to_contain_text("main, release-*, and tags")
    made = mirrored.replicant.http.get(
        f"/service/replication/v1/repositories/{mirrored.name}/mirrors/{spare}"
    )
    assert made.status_code == 200 and made.json()["branches"] == ["main", "release-*"]

    page.get_by_role("link", name="Stop mirroring").click()
    expect(page.get_by_role("heading", level=1)).to_have_text(f"Stop mirroring into {spare}")
    assert_accessible(page)
    fits_phone(page)
    page.get_by_role("link", name="Cancel").click()
    page.get_by_role("link", name="Stop mirroring").click()
    page.get_by_role("button", name="Stop mirroring").click()
    expect(page.get_by_role("status").first).to_contain_text(f"Mirroring into {spare} stopped")
    gone = mirrored.replicant.http.get(
        f"/service/replication/v1/repositories/{mirrored.name}/mirrors/{spare}"
    )
    assert gone.status_code == 404
    # the repository stays, read-only
    assert world.b.http.get(f"/repositories/{spare}").json()["read_only"] is True


def test_a_repositorys_page_lists_the_mirrors_known_here(page: Page, mirrored: Mirrored) -> None:
    world = mirrored.world
    sign_in_admin(page, world.b.server, f"/ui/repositories/{mirrored.name}")
    panel = page.locator("section.mirrors-panel")
    expect(panel.get_by_role("heading")).to_have_text("Mirrors known to this region's replicant")
    expect(panel.get_by_role("link", name=mirrored.name)).to_have_attribute("href", mirrored.url)
    expect(panel).to_contain_text(f"in b, mirror of {mirrored.name} in a")
    expect(panel.locator(".badge.health")).to_have_count(1)
    expect(
        page.get_by_role("navigation", name="Main").get_by_role("link", name="Mirrors")
    ).to_be_visible()
    assert_accessible(page)
    # region a has no replicant configured: no mirroring pages, no panel, no link
    sign_in_admin(page, world.a.server, f"/ui/repositories/{mirrored.name}")
    expect(page.locator("section.mirrors-panel")).to_have_count(0)
    expect(page.get_by_role("link", name="Mirrors")).to_have_count(0)
    page.goto(world.a.server.url + "/ui/mirrors")
    expect(page.get_by_role("heading", level=1)).to_have_text("Not found")


def test_a_reader_sees_the_mirrors_but_no_controls(page: Page, mirrored: Mirrored) -> None:
    world = mirrored.world
    reader = make_user(world.b.http, "Readers")
    b = world.b.server
    sign_in(page, b, reader.key, reader.secret, "/ui/mirrors")
    expect(_card(page, mirrored)).to_be_visible()
    expect(page.get_by_text("Create mirror")).to_have_count(0)
    expect(page.get_by_role("link", name=re.compile("Stop mirroring"))).to_have_count(0)
    page.get_by_role("link", name=mirrored.name, exact=True).click()
    expect(page.get_by_role("link", name=re.compile("Promote"))).to_have_count(0)
    # sent anyway, the promotion is refused with the replicant's message
    page.goto(b.url + mirrored.url + "/promote")
    page.get_by_role("button", name="Promote").click()
    expect(page.locator("#promote-error")).to_contain_text(
        f"insufficient permissions: user '{reader.id}' may not fs:MirrorRepository"
    )
    assert world.b.http.get(f"/repositories/{mirrored.name}").json()["read_only"] is True


def test_a_planned_promotion_from_the_ui(page: Page, mirrored: Mirrored) -> None:
    world, b = mirrored.world, mirrored.world.b.server
    head = mirrored.source.branch("main").get_commit().id
    wait_for(lambda: world.b.head(mirrored.name, "main") == head, 30, "the mirror synced")
    sign_in_admin(page, b, mirrored.url)
    page.get_by_role("link", name="Promote (planned switchover)").click()
    expect(page.locator("#expected-loss")).to_contain_text("None expected.")
    expect(page.get_by_label("Wait for the mirror to catch up for (seconds)")).to_have_value("60")
    assert_accessible(page)
    fits_phone(page)
    screenshot(page, "mirror-promote")
    page.get_by_role("button", name="Promote").click()
    expect(page).to_have_url(b.url + mirrored.url + "/promotion")
    expect(page.get_by_role("heading", level=1)).to_have_text(f"{mirrored.name} was promoted")
    expect(page.locator(".kind")).to_have_text("planned (switchover)")
    heads = page.locator("table.report-heads tbody tr")
    expect(heads).to_have_count(1)
    expect(heads.first.locator("code")).to_have_attribute("title", head)
    expect(page.locator(".missing-none")).to_be_visible()
    expect(page.locator(".writes-refused")).to_have_text(re.compile(r"^\d+\.\d\d s$"))
    assert_accessible(page)
    fits_phone(page)
    screenshot(page, "mirror-promotion-report")
    # the mirror became the writable repository; the source was demoted to a mirror of it
    promoted = world.b.http.get(f"/repositories/{mirrored.name}").json()
    assert promoted["read_only"] is False
    demoted = world.a.http.get(f"/repositories/{mirrored.name}").json()
    assert demoted["read_only"] is True and demoted["mirror_of"] == f"b/{mirrored.name}"
    answer = world.b.http.post(
        f"/repositories/{mirrored.name}/branches/main/objects",
        params={"path": "after-promotion.csv"},
        content=b"x\n",
    )
    assert answer.status_code == 201, answer.text
    # the mirror is gone from the mirrors page
    page.goto(b.url + "/ui/mirrors")
    expect(_card(page, mirrored)).to_have_count(0)


def test_without_a_session_the_mirroring_pages_lead_to_sign_in(
    page: Page, mirrored: Mirrored
) -> None:
    b = mirrored.world.b.server
    page.goto(b.url + mirrored.url)
    expect(page).to_have_url(re.compile(r"/ui/login\?next=/ui/mirrors/"))
    answer = httpx.post(b.url + "/ui/mirrors", data={"source_repo": "x"}, timeout=30.0)
    assert answer.status_code == 303
    assert answer.headers["location"] == "/ui/login?next=/ui/mirrors"
