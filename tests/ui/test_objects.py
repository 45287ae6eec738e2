"""The Objects tab and an object's page in a real browser.

Browsing any ref by folder with paging; uploading (file input, drag and drop, and without
script) with a progress bar per file; deleting; the object page's facts, metadata and previews
(CSV, JSON, Parquet, PNG, text). Markup a user controls (paths, file contents, metadata keys
and values, HTML and SVG objects with scripts) must stay text: the ``page`` fixture fails a test
in which a dialog opened or the content security policy was broken. Readers, tags, commits and
mirrors get no upload or delete control. Data is set up through the REST API.
"""

from __future__ import annotations

import io
import re
import struct
import zlib
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from urllib.parse import quote

import httpx
import pyarrow as pa
import pyarrow.parquet as pq
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

pytestmark = pytest.mark.ui

SCRIPT_HTML = b"<html><body><script>alert(1)</script><img src=x onerror=alert(2)></body></html>"
SCRIPT_SVG = (
    b'<svg xmlns="http://www.w3.org/2000/svg" onload="alert(3)">'
    b"<script>alert(4)</script><circle r='5'/></svg>"
)
HOSTILE_TEXT = "\n".join([*HOSTILE, "<b>bold?</b> & <i>more</i>"])
HOSTILE_METADATA = {HOSTILE[0]: HOSTILE[1], "owner": HOSTILE[0], HOSTILE[1]: "plain"}
CSV = 'id,name,note\n1,Ada,<b>first</b>\n2,Grace,second\n3,Linus,"quoted, with comma"\n'
JSON_ROWS = [{"id": 1, "name": "Ada", "tags": ["x"]}, {"id": 2, "name": HOSTILE[0]}]


def _ok(answer: httpx.Response) -> httpx.Response:
    assert answer.status_code < 300, answer.text
    return answer


def _png(width: int = 240, height: int = 120) -> bytes:
    """Return a valid PNG image of a colour gradient, written by hand (no imaging library)."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        body = kind + data
        return struct.pack(">I", len(data)) + body + struct.pack(">I", zlib.crc32(body))

    rows = b"".join(
        b"\x00" + b"".join(bytes([x * 255 // width, y * 255 // height, 160]) for x in range(width))
        for y in range(height)
    )
    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", header)
        + chunk(b"IDAT", zlib.compress(rows))
        + chunk(b"IEND", b"")
    )


def _parquet() -> bytes:
    table = pa.table(
        {
            "id": list(range(50)),
            "city": [f"city-{i}" for i in range(50)],
            "note": [HOSTILE[i % 2] for i in range(50)],
        }
    )
    out = io.BytesIO()
    pq.write_table(table, out, row_group_size=30)
    return out.getvalue()


def upload(
    admin: httpx.Client, repo: str, path: str, data: bytes, content_type: str, branch: str = "main"
) -> None:
    """Upload ``data`` at ``path`` on ``branch`` through the REST API."""
    _ok(
        admin.post(
            f"/repositories/{repo}/branches/{branch}/objects",
            params={"path": path},
            content=data,
            headers={"Content-Type": content_type},
        )
    )


def _repository(admin: httpx.Client, stem: str) -> str:
    name = unique(stem)
    _ok(admin.post("/repositories", json={"name": name, "storage_namespace": f"local://{name}"}))
    return name


@dataclass(frozen=True)
class Shop:
    """The module's repository, its objects committed on main."""

    name: str

    def tab(self, query: str = "") -> str:
        return f"/ui/repositories/{self.name}/objects" + (f"?{query}" if query else "")

    def object(self, path: str, ref: str = "main") -> str:
        return f"/ui/repositories/{self.name}/object?ref={ref}&path={quote(path, safe='')}"

    def raw(self, path: str, ref: str = "main") -> str:
        return f"/ui/repositories/{self.name}/object/raw?ref={ref}&path={quote(path, safe='')}"


@pytest.fixture(scope="module")
def shop(admin: httpx.Client) -> Iterator[Shop]:
    name = _repository(admin, "objects")
    files = {
        "README.md": (b"# The shop\n\nData for the browser tests.\n", "text/markdown"),
        "data/people.csv": (CSV.encode(), "text/csv"),
        "data/people.json": (httpx.Response(200, json=JSON_ROWS).content, "application/json"),
        "data/events.parquet": (_parquet(), "application/octet-stream"),
        "data/2024/jan.csv": (b"a,b\n1,2\n", "text/csv"),
        "images/gradient.png": (_png(), "image/png"),
        "web/index.html": (SCRIPT_HTML, "text/html"),
        "web/logo.svg": (SCRIPT_SVG, "image/svg+xml"),
        "notes/hostile.txt": (HOSTILE_TEXT.encode(), "text/plain"),
        HOSTILE[0]: (b"named with markup", "text/plain"),
        HOSTILE[1]: (b"named with markup too", "text/plain"),
    }
    for path, (data, content_type) in files.items():
        upload(admin, name, path, data, content_type)
    _ok(
        admin.put(
            f"/repositories/{name}/branches/main/objects/stat/user_metadata",
            params={"path": "notes/hostile.txt"},
            json={"set": HOSTILE_METADATA},
        )
    )
    _ok(admin.post(f"/repositories/{name}/branches/main/commits", json={"message": "the shop"}))
    yield Shop(name)


def _names(page: Page) -> list[str]:
    page.wait_for_load_state()
    return [t.strip() for t in page.locator("#listing tbody th").all_inner_texts()]


def _only_own_scripts(page: Page) -> None:
    """No element came from a user's markup: no image, and no script but the UI's own."""
    assert page.locator("main img").count() == 0
    sources = page.locator("script").evaluate_all("all => all.map(s => s.getAttribute('src'))")
    assert sources and all(s and s.startswith("/ui/static/") for s in sources), sources


def test_the_repository_opens_on_objects_folders_first_with_breadcrumbs(
    page: Page, server: Server, shop: Shop
) -> None:
    sign_in_admin(page, server, f"/ui/repositories/{shop.name}")
    expect(page).to_have_url(f"{server.url}{shop.tab()}")
    tabs = page.get_by_role("navigation", name="Repository")
    expect(tabs.get_by_role("link", name="Objects")).to_have_attribute("aria-current", "page")
    expect(page.locator(".ref-shown")).to_contain_text("Branch main at commit")
    # folders first, each page in path order; markup in names is text
    hostile_folder = HOSTILE[1].rsplit("/", 1)[0] + "/"
    assert _names(page) == [
        hostile_folder,
        "data/",
        "images/",
        "notes/",
        "web/",
        HOSTILE[0],
        "README.md",
    ]
    _only_own_scripts(page)
    assert_accessible(page)
    fits_phone(page)
    screenshot(page, "objects")
    follow(page.get_by_role("link", name="data/", exact=True))
    assert _names(page) == ["2024/", "events.parquet", "people.csv", "people.json"]
    follow(page.get_by_role("link", name="2024/", exact=True))
    assert _names(page) == ["jan.csv"]
    crumbs = page.get_by_role("navigation", name="Folders")
    expect(crumbs).to_have_text(f"{shop.name} / data/2024/")
    expect(crumbs.locator("[aria-current=page]")).to_have_text("2024/")
    crumbs.get_by_role("link", name="data/", exact=True).click()
    expect(page).to_have_url(f"{server.url}{shop.tab('ref=main&path=data%2F')}")
    crumbs = page.get_by_role("navigation", name="Folders")
    follow(crumbs.get_by_role("link", name=shop.name))
    assert _names(page)[-1] == "README.md"
    # a folder of hostile name opens and shows its object
    follow(page.get_by_role("link", name=hostile_folder, exact=True))
    assert _names(page) == [HOSTILE[1].rsplit("/", 1)[1]]
    _only_own_scripts(page)


def test_browse_at_a_tag_a_commit_and_an_expression(
    page: Page, server: Server, admin: httpx.Client
) -> None:
    name = _repository(admin, "history")
    upload(admin, name, "first.txt", b"1", "text/plain")
    first = _ok(
        admin.post(f"/repositories/{name}/branches/main/commits", json={"message": "one"})
    ).json()["id"]
    _ok(admin.post(f"/repositories/{name}/tags", json={"id": "v1", "ref": first}))
    upload(admin, name, "second.txt", b"2", "text/plain")
    _ok(admin.post(f"/repositories/{name}/branches/main/commits", json={"message": "two"}))
    upload(admin, name, "staged.txt", b"3", "text/plain")
    sign_in_admin(page, server, f"/ui/repositories/{name}/objects")
    assert _names(page) == ["first.txt", "second.txt", "staged.txt"]
    expect(page.get_by_text("Upload objects")).to_have_count(1)
    # the picker's list: a tag
    page.get_by_label("Ref", exact=True).select_option("v1")
    page.get_by_role("button", name="Show").click()
    expect(page.locator(".ref-shown")).to_contain_text(f"Tag v1 at commit {first[:12]}")
    assert _names(page) == ["first.txt"]
    expect(page.get_by_text("Upload objects")).to_have_count(0)
    expect(page.get_by_role("link", name=re.compile("^Delete"))).to_have_count(0)
    # the field: a commit ID, then an expression
    for ref in (first, "main~1"):
        page.get_by_label("Commit ID or ref expression").fill(ref)
        page.get_by_role("button", name="Go").click()
        expect(page.locator(".ref-shown")).to_contain_text(f"at commit {first[:12]}")
        assert _names(page) == ["first.txt"], ref
        expect(page.get_by_text("Upload objects")).to_have_count(0)
    page.get_by_role("link", name="first.txt", exact=True).click()
    expect(page.locator(".object-name")).to_have_text("first.txt")
    expect(page.locator(".ref-shown")).to_contain_text("main~1")
    expect(page.get_by_role("link", name="Delete")).to_have_count(0)
    assert_accessible(page)
    # back on the branch through the list
    page.goto(f"{server.url}/ui/repositories/{name}/objects?ref=v1")
    page.get_by_label("Ref", exact=True).select_option("main")
    follow(page.get_by_role("button", name="Show"))
    assert _names(page) == ["first.txt", "second.txt", "staged.txt"]
    # a ref that names nothing shows the server's message
    page.get_by_label("Commit ID or ref expression").fill("no-such-ref")
    page.get_by_role("button", name="Go").click()
    expect(page.locator("#listing-error")).to_contain_text("not found")
    assert_accessible(page)


def test_paging_through_250_objects_of_one_folder(
    page: Page, server: Server, admin: httpx.Client
) -> None:
    name = _repository(admin, "many")
    paths = [f"many/obj-{i:03d}.txt" for i in range(250)]
    with ThreadPoolExecutor(8) as pool:
        list(pool.map(lambda p: upload(admin, name, p, p.encode(), "text/plain"), paths))
    upload(admin, name, "other.txt", b"x", "text/plain")
    sign_in_admin(page, server, f"/ui/repositories/{name}/objects?path=many%2F")
    shown = [p.removeprefix("many/") for p in paths]
    assert _names(page) == shown[:100]
    expect(page.get_by_role("link", name="Back to start")).to_have_count(0)
    follow(page.get_by_role("link", name="Next page"))
    assert _names(page) == shown[100:200]
    follow(page.get_by_role("link", name="Next page"))
    assert _names(page) == shown[200:]
    expect(page.get_by_role("link", name="Next page")).to_have_count(0)
    follow(page.get_by_role("link", name="Back to start"))
    assert _names(page) == shown[:100]
    expect(page.get_by_role("navigation", name="Folders")).to_have_text(f"{name} / many/")


def _done(page: Page, count: int) -> None:
    """Wait for ``count`` progress lines marked uploaded, each bar full."""
    lines = page.locator("#upload-progress li")
    expect(lines).to_have_count(count)
    expect(page.locator('#upload-progress li[data-state="done"]')).to_have_count(count)
    for line in lines.all():
        expect(line.locator(".upload-status")).to_have_text("Uploaded")
        bar = line.locator("progress")
        assert bar.evaluate("b => b.value === b.max && b.max > 0")


def test_upload_two_files_with_a_progress_bar_each(
    page: Page, server: Server, admin: httpx.Client
) -> None:
    name = _repository(admin, "upload")
    sign_in_admin(page, server, f"/ui/repositories/{name}/objects")
    forged = page.request.post(
        f"{server.url}/ui/repositories/{name}/objects/upload",
        multipart={
            "branch": "main",
            "files": {"name": "x.txt", "mimeType": "text/plain", "buffer": b"x"},
        },
    )
    assert forged.status == 403 and "security token" in forged.text()
    page.get_by_text("Upload objects").click()
    expect(page.get_by_label("Destination folder")).to_have_value("")
    page.get_by_label("Destination folder").fill("incoming")
    page.get_by_label("Files").set_input_files(
        [
            {"name": "a.csv", "mimeType": "text/csv", "buffer": b"x,y\n1,2\n"},
            {"name": "big.bin", "mimeType": "application/octet-stream", "buffer": bytes(3 << 20)},
        ]
    )
    page.get_by_role("button", name="Upload").click()
    # another folder than the one shown: the page moves there and names what arrived
    expect(page.get_by_role("status")).to_have_text("Uploaded incoming/a.csv, incoming/big.bin.")
    assert _names(page) == ["a.csv", "big.bin"]
    stat = admin.get(
        f"/repositories/{name}/refs/main/objects/stat", params={"path": "incoming/a.csv"}
    ).json()
    assert (stat["size_bytes"], stat["content_type"]) == (8, "text/csv")
    got = admin.get(f"/repositories/{name}/refs/main/objects", params={"path": "incoming/big.bin"})
    assert got.content == bytes(3 << 20)
    # into the folder shown: each file's bar fills, and the listing is read again in place
    page.get_by_text("Upload objects").click()
    expect(page.get_by_label("Destination folder")).to_have_value("incoming/")
    page.get_by_label("Files").set_input_files(
        [
            {"name": "c.txt", "mimeType": "text/plain", "buffer": b"c"},
            {"name": "d.json", "mimeType": "application/json", "buffer": b"[1]"},
        ]
    )
    page.get_by_role("button", name="Upload").click()
    _done(page, 2)
    expect(page.locator("#listing tbody th")).to_have_count(4)
    assert _names(page) == ["a.csv", "big.bin", "c.txt", "d.json"]
    missing = admin.get(f"/repositories/{name}/refs/main/objects/stat", params={"path": "x.txt"})
    assert missing.status_code == 404
    assert_accessible(page)
    fits_phone(page)
    screenshot(page, "objects-upload")


def test_upload_by_dropping_files(page: Page, server: Server, admin: httpx.Client) -> None:
    name = _repository(admin, "drop")
    sign_in_admin(page, server, f"/ui/repositories/{name}/objects")
    page.get_by_text("Upload objects").click()
    expect(page.locator("#drop-zone")).to_be_visible()
    dropped = page.evaluate_handle(
        """() => {
            const data = new DataTransfer();
            data.items.add(new File(["one\\n"], "one.txt", {type: "text/plain"}));
            data.items.add(new File(["a,b\\n"], "two.csv", {type: "text/csv"}));
            return data;
        }"""
    )
    page.locator("details.upload").dispatch_event("drop", {"dataTransfer": dropped})
    _done(page, 2)
    # the listing is fetched again once every upload is done
    expect(page.locator("#listing tbody th")).to_have_count(2)
    assert _names(page) == ["one.txt", "two.csv"]
    got = admin.get(f"/repositories/{name}/refs/main/objects", params={"path": "two.csv"})
    assert (got.content, got.headers["content-type"]) == (b"a,b\n", "text/csv")


def test_upload_without_script_and_the_servers_refusals(
    browser: Browser, server: Server, admin: httpx.Client
) -> None:
    name = _repository(admin, "plain")
    _ok(admin.put(f"/repositories/{name}/settings/branch_protection", json=[{"pattern": "locked"}]))
    _ok(admin.post(f"/repositories/{name}/branches", json={"name": "locked", "source": "main"}))
    context = browser.new_context(viewport=DESKTOP, java_script_enabled=False)
    try:
        page = context.new_page()
        sign_in_admin(page, server, f"/ui/repositories/{name}/objects")
        expect(page.locator("#drop-zone")).to_be_hidden()
        page.get_by_text("Upload objects").click()
        page.get_by_role("button", name="Upload").click()
        expect(page.locator("#upload-error")).to_have_text("Choose at least one file to upload.")
        page.get_by_label("Destination folder").fill("/docs")
        page.get_by_label("Files").set_input_files(
            [
                {"name": "one.md", "mimeType": "text/markdown", "buffer": b"# one"},
                {"name": "two.md", "mimeType": "text/markdown", "buffer": b"# two"},
            ]
        )
        page.get_by_role("button", name="Upload").click()
        expect(page.get_by_role("status")).to_have_text("Uploaded docs/one.md, docs/two.md.")
        assert _names(page) == ["one.md", "two.md"]
        assert page.locator("#upload-progress li").count() == 0
        # a protected branch: the server's message next to the form
        page.goto(f"{server.url}/ui/repositories/{name}/objects?ref=locked")
        page.get_by_text("Upload objects").click()
        page.get_by_label("Files").set_input_files(
            [{"name": "no.txt", "mimeType": "text/plain", "buffer": b"no"}]
        )
        page.get_by_role("button", name="Upload").click()
        expect(page.locator("#upload-error")).to_contain_text("no.txt: cannot write to protected")
    finally:
        context.close()
    missing = admin.get(f"/repositories/{name}/refs/locked/objects/stat", params={"path": "no.txt"})
    assert missing.status_code == 404


def test_delete_asks_first(page: Page, server: Server, admin: httpx.Client, shop: Shop) -> None:
    branch = unique("gone").replace("-", "_")
    _ok(admin.post(f"/repositories/{shop.name}/branches", json={"name": branch, "source": "main"}))
    sign_in_admin(page, server, shop.tab(f"ref={branch}&path=data%2F"))
    page.get_by_role("link", name="Delete people.csv").click()
    expect(page.get_by_role("heading", level=2)).to_have_text("Delete data/people.csv")
    assert_accessible(page)
    fits_phone(page)
    screenshot(page, "object-delete")
    page.get_by_role("link", name="Cancel").click()
    expect(page.locator(".object-name")).to_have_text("people.csv")
    # the session's cookie alone, without the page's CSRF token, deletes nothing
    forged = page.request.post(
        f"{server.url}/ui/repositories/{shop.name}/object/delete?ref={branch}&path=data%2Fpeople.csv"
    )
    assert forged.status == 403 and "security token" in forged.text()
    page.get_by_role("link", name="Delete").click()
    page.get_by_role("button", name="Delete object").click()
    expect(page.get_by_role("status")).to_have_text("Deleted data/people.csv.")
    assert "people.csv" not in _names(page)
    stat = f"/repositories/{shop.name}/refs/{branch}/objects/stat"
    assert admin.get(stat, params={"path": "data/people.csv"}).status_code == 404
    assert (
        admin.get(
            f"/repositories/{shop.name}/refs/main/objects/stat", params={"path": "data/people.csv"}
        ).status_code
        == 200
    )


def _scroll_to_preview(page: Page) -> None:
    """Scroll the preview to the top of the window, for a screenshot that shows it."""
    page.locator("section.preview").evaluate("e => e.scrollIntoView()")


def _fact(page: Page, label: str) -> str:
    return (
        page.locator(".object-facts div")
        .filter(has=page.get_by_text(label, exact=True))
        .locator("dd")
        .inner_text()
    )


def _table(page: Page, region: str) -> list[list[str]]:
    table = page.get_by_role("region", name=region).locator("table")
    head = [table.locator("thead th").all_inner_texts()]
    return head + [row.locator("td").all_inner_texts() for row in table.locator("tbody tr").all()]


def test_csv_and_json_show_as_tables(
    page: Page, server: Server, admin: httpx.Client, shop: Shop
) -> None:
    sign_in_admin(page, server, shop.object("data/people.csv"))
    stat = admin.get(
        f"/repositories/{shop.name}/refs/main/objects/stat", params={"path": "data/people.csv"}
    ).json()
    expect(page.locator(".object-name")).to_have_text("people.csv")
    assert _fact(page, "Size") == f"{len(CSV)} bytes"
    assert _fact(page, "Checksum") == stat["checksum"]
    assert _fact(page, "Content type") == "text/csv"
    assert _fact(page, "Physical address") == stat["physical_address"]
    assert re.fullmatch(r"\d{4}-\d\d-\d\d \d\d:\d\d UTC", _fact(page, "Last modified"))
    assert _table(page, "First rows") == [
        ["id", "name", "note"],
        ["1", "Ada", "<b>first</b>"],
        ["2", "Grace", "second"],
        ["3", "Linus", "quoted, with comma"],
    ]
    _only_own_scripts(page)
    assert_accessible(page)
    fits_phone(page)
    _scroll_to_preview(page)
    screenshot(page, "object-csv")
    page.goto(server.url + shop.object("data/people.json"))
    assert _table(page, "First rows") == [
        ["id", "name", "tags"],
        ["1", "Ada", '["x"]'],
        ["2", HOSTILE[0], ""],
    ]
    _only_own_scripts(page)


def test_parquet_shows_its_schema_and_first_rows(page: Page, server: Server, shop: Shop) -> None:
    sign_in_admin(page, server, shop.object("data/events.parquet"))
    size = len(_parquet())
    assert _fact(page, "Size") == f"{size / 1024:.1f} KiB ({size:,} bytes)"
    preview = page.locator("section.preview")
    expect(preview.locator(".facts")).to_contain_text("Rows50")
    expect(preview.locator(".facts")).to_contain_text("Row groups2")
    schema = page.get_by_role("region", name="Schema").locator("tbody tr")
    assert [
        [r.locator("th").inner_text(), *r.locator("td").all_inner_texts()] for r in schema.all()
    ] == [
        ["id", "int64", "yes"],
        ["city", "string", "yes"],
        ["note", "string", "yes"],
    ]
    rows = _table(page, "First rows")
    assert rows[0] == ["id", "city", "note"]
    assert rows[1:] == [[str(i), f"city-{i}", HOSTILE[i % 2]] for i in range(20)]
    expect(preview).to_contain_text("Showing the first 20 of 50 rows (row group 1 of 2).")
    _only_own_scripts(page)
    assert_accessible(page)
    fits_phone(page)
    _scroll_to_preview(page)
    screenshot(page, "object-parquet")


def test_a_png_shows_through_the_raw_route(page: Page, server: Server, shop: Shop) -> None:
    sign_in_admin(page, server, shop.object("images/gradient.png"))
    image = page.locator("section.preview img")
    expect(image).to_have_attribute("alt", "gradient.png")
    expect(image).to_have_attribute("src", shop.raw("images/gradient.png"))
    page.wait_for_function("() => document.querySelector('section.preview img').complete")
    assert image.evaluate("i => [i.naturalWidth, i.naturalHeight]") == [240, 120]
    raw = page.request.get(server.url + shop.raw("images/gradient.png"))
    assert raw.status == 200 and raw.body() == _png()
    headers = raw.headers
    assert headers["content-type"] == "image/png"
    assert headers["x-content-type-options"] == "nosniff"
    assert headers["content-security-policy"].startswith("default-src 'none'")
    assert "content-disposition" not in headers
    assert_accessible(page)
    screenshot(page, "object-image")


def test_text_and_metadata_with_markup_show_as_text(page: Page, server: Server, shop: Shop) -> None:
    sign_in_admin(page, server, shop.object("notes/hostile.txt"))
    expect(page.locator("pre.preview-text")).to_have_text(HOSTILE_TEXT)
    metadata = page.locator("table.metadata tbody tr")
    expect(metadata).to_have_count(len(HOSTILE_METADATA))
    shown = {
        row.locator("th").inner_text(): row.locator("td").inner_text() for row in metadata.all()
    }
    assert shown == HOSTILE_METADATA
    _only_own_scripts(page)
    assert page.locator("main b, main i").count() == 0
    assert_accessible(page)
    fits_phone(page)
    _scroll_to_preview(page)
    screenshot(page, "object-text")
    # objects named with markup open as text too
    page.goto(server.url + shop.object(HOSTILE[0]))
    expect(page.locator(".object-name")).to_have_text(HOSTILE[0])
    expect(page.locator("pre.preview-text")).to_have_text("named with markup")
    _only_own_scripts(page)


@pytest.mark.parametrize(
    ("path", "content"),
    [("web/index.html", SCRIPT_HTML), ("web/logo.svg", SCRIPT_SVG)],
    ids=["html", "svg"],
)
def test_html_and_svg_are_inert_text_and_downloads(
    page: Page, server: Server, shop: Shop, path: str, content: bytes
) -> None:
    sign_in_admin(page, server, shop.object(path))
    expect(page.locator("pre.preview-text")).to_have_text(content.decode())
    expect(page.get_by_text("Shown as text: this is markup or script")).to_be_visible()
    _only_own_scripts(page)
    assert page.locator("main svg, main iframe, main object, main embed").count() == 0
    name = path.rsplit("/", 1)[1]
    for url in (shop.raw(path), shop.raw(path) + "&download=1"):
        raw = page.request.get(server.url + url)
        assert raw.status == 200 and raw.body() == content
        assert raw.headers["content-disposition"] == f"attachment; filename={name}"
        assert raw.headers["x-content-type-options"] == "nosniff"
        assert raw.headers["content-security-policy"].startswith("default-src 'none'")
    with page.expect_download() as download:
        page.get_by_role("link", name="Download").click()
    assert download.value.suggested_filename == name
    # opening the raw route itself saves the file instead of rendering it
    with page.expect_download() as opened:
        page.evaluate("url => { window.location.href = url; }", shop.raw(path))
    assert opened.value.suggested_filename == name
    assert_accessible(page)
    if path.endswith(".html"):
        _scroll_to_preview(page)
        screenshot(page, "object-html")


def test_a_reader_sees_no_upload_or_delete(
    page: Page, server: Server, admin: httpx.Client, shop: Shop
) -> None:
    reader = make_user(admin, "Readers")
    sign_in(page, server, reader.key, reader.secret, shop.tab("path=data%2F"))
    assert "people.json" in _names(page)
    expect(page.get_by_text("Upload objects")).to_have_count(0)
    expect(page.get_by_role("link", name=re.compile("^Delete"))).to_have_count(0)
    expect(page.get_by_role("link", name="Download people.json")).to_have_count(1)
    page.get_by_role("link", name="people.json", exact=True).click()
    expect(page.get_by_role("link", name="Download")).to_have_count(1)
    expect(page.get_by_role("link", name="Delete")).to_have_count(0)
    assert_accessible(page)


def test_a_mirror_shows_no_upload_or_delete(
    page: Page, server: Server, admin: httpx.Client, shop: Shop
) -> None:
    name = unique("copy")
    body = {
        "name": name,
        # the source's namespace: its ranges and data are readable here as they arrived
        "storage_namespace": f"local://{shop.name}",
        "mirror_of": f"us-east-1/{shop.name}",
    }
    _ok(admin.post("/mirror/repositories", json=body))
    head = _ok(admin.get(f"/repositories/{shop.name}/commits/main")).json()
    parent = _ok(admin.get(f"/repositories/{shop.name}/commits/{head['parents'][0]}")).json()
    _ok(admin.post(f"/repositories/{name}/mirror/commits", json=parent))
    _ok(admin.post(f"/repositories/{name}/mirror/commits", json=head))
    _ok(admin.put(f"/repositories/{name}/mirror/branches/main", json={"commit_id": head["id"]}))
    sign_in_admin(page, server, f"/ui/repositories/{name}/objects?path=data%2F")
    expect(page.locator(".heading .badge")).to_have_text(f"Mirror of {shop.name} in us-east-1")
    assert "people.csv" in _names(page)
    expect(page.get_by_text("Upload objects")).to_have_count(0)
    expect(page.get_by_role("link", name=re.compile("^Delete"))).to_have_count(0)
    page.get_by_role("link", name="people.csv", exact=True).click()
    expect(page.get_by_role("link", name="Delete")).to_have_count(0)
    assert len(_table(page, "First rows")) == 4
    assert_accessible(page)
    fits_phone(page)
    screenshot(page, "mirror-objects")
