"""What a browser transfers to show a page on a cold load: the HTML and every asset it names.

The HTML is fetched as a browser would (redirects followed, ``Accept-Encoding`` offered), then
every asset it references: stylesheets, scripts, icons, images (``src``, ``srcset``, ``href``
of ``<link>``), and what each stylesheet names in turn (``url(...)``, ``@import``). ``data:``
URLs cost nothing more than the HTML that holds them; an asset of another origin is counted
as missing, since the UI loads nothing from anywhere but its server. Bytes are as transferred:
the status line, the headers and the body as it came over the wire (compressed if the server
compressed it).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from html.parser import HTMLParser
from urllib.parse import urljoin, urlsplit

import httpx

__all__ = ["PageWeight", "asset_urls", "css_urls", "page_weight"]

_CSS_URL = re.compile(r"""url\(\s*(['"]?)([^'")\s]+)\1\s*\)|@import\s+(['"])([^'"]+)\3""")
_LINK_RELS = {"stylesheet", "icon", "preload", "modulepreload", "manifest", "apple-touch-icon"}
_CSS = "text/css"


class _Assets(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.urls: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        found = {k: v or "" for k, v in attrs}
        if tag == "link" and _LINK_RELS & set(found.get("rel", "").lower().split()):
            self.urls.append(found.get("href", ""))
        elif tag in ("script", "img", "source", "audio", "video", "iframe", "embed"):
            self.urls.append(found.get("src", ""))
            self.urls.append(found.get("poster", ""))
        if "srcset" in found:
            self.urls += [part.split()[0] for part in found["srcset"].split(",") if part.split()]
        if tag == "object":
            self.urls.append(found.get("data", ""))


def asset_urls(html: str) -> list[str]:
    """Return the URLs of the assets ``html`` makes a browser load, in order, without blanks."""
    parser = _Assets()
    parser.feed(html)
    parser.close()
    return [u for u in parser.urls if u.strip()]


def css_urls(css: str) -> list[str]:
    """Return the URLs a stylesheet makes a browser load (``url(...)`` and ``@import``)."""
    return [m.group(2) or m.group(4) for m in _CSS_URL.finditer(css)]


def _transferred(response: httpx.Response) -> int:
    status = len(f"HTTP/1.1 {response.status_code} {response.reason_phrase}\r\n")
    headers = sum(len(k) + len(v) + 4 for k, v in response.headers.raw)
    return status + headers + 2 + response.num_bytes_downloaded


@dataclass
class PageWeight:
    """A cold load of one page.

    Attributes:
        html_bytes: The HTML's transfer (redirects on the way included).
        assets: Each asset's URL and transfer, in the order first referenced.
        encoding: The HTML's ``Content-Encoding`` (``identity`` when not compressed).
        missing: Assets that failed to load, or of another origin, with why.
    """

    html_bytes: int
    assets: dict[str, int] = field(default_factory=dict)
    encoding: str = "identity"
    missing: list[str] = field(default_factory=list)

    @property
    def asset_bytes(self) -> int:
        """Return the assets' transfer."""
        return sum(self.assets.values())

    @property
    def total(self) -> int:
        """Return the whole transfer: HTML and assets."""
        return self.html_bytes + self.asset_bytes


def page_weight(client: httpx.Client, url: str) -> PageWeight:
    """Load ``url`` and everything it references, once each, with ``client``; return the bytes.

    ``client`` should be new (no connection, no cache: httpx keeps none) and carry the
    session's cookie.

    Raises:
        RuntimeError: the page itself did not load.
    """
    response = client.get(url, follow_redirects=True)
    if response.status_code != 200:
        raise RuntimeError(f"GET {url} answered {response.status_code}")
    origin = urlsplit(str(response.url))[:2]
    weight = PageWeight(
        sum(_transferred(r) for r in (*response.history, response)),
        encoding=response.headers.get("content-encoding", "identity"),
    )
    pending = [urljoin(str(response.url), u) for u in asset_urls(response.text)]
    while pending:
        asset = pending.pop(0)
        if asset.startswith("data:") or asset in weight.assets:
            continue
        if urlsplit(asset)[:2] != origin:
            weight.missing.append(f"{asset} (another origin)")
            continue
        loaded = client.get(asset, follow_redirects=True)
        weight.assets[asset] = sum(_transferred(r) for r in (*loaded.history, loaded))
        if loaded.status_code != 200:
            weight.missing.append(f"{asset} ({loaded.status_code})")
            continue
        if loaded.headers.get("content-type", "").startswith(_CSS):
            pending += [urljoin(asset, u) for u in css_urls(loaded.text)]
    return weight
