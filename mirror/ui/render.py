"""Rendering pages: the Jinja2 templates under ``mirror/ui/templates``, autoescaped.

Every template extends ``base.html``. Autoescaping is on for every template whatever its name, so
each value a page shows (a commit message, a metadata value, an error text) is text, never
markup; nothing is marked safe. Undefined names fail loudly instead of rendering empty.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any
from urllib.parse import quote, urlencode

import jinja2
from starlette.responses import HTMLResponse

from mirror import __version__

__all__ = ["STATIC_PREFIX", "Templates", "page_url", "urlpart"]

STATIC_PREFIX = "/ui/static/"


def urlpart(value: object) -> str:
    """Return ``value`` percent-encoded as one path segment (a ``/`` in it included)."""
    return quote(str(value), safe="")


def page_url(path: str, /, **params: object) -> str:
    """Return ``path`` with the query ``params`` that are not empty (``path`` may be one)."""
    kept = {k: str(v) for k, v in params.items() if v not in (None, "")}
    return f"{path}?{urlencode(kept)}" if kept else path


def _when(seconds: object) -> str:
    if not isinstance(seconds, int | float) or seconds <= 0:
        return ""
    return datetime.fromtimestamp(seconds, tz=UTC).strftime("%Y-%m-%d %H:%M UTC")


def _static(name: str) -> str:
    # the version in the query makes a release's browsers fetch its own assets
    return f"{STATIC_PREFIX}{name}?v={quote(__version__)}"


class Templates:
    """The UI's Jinja2 environment, rendering templates into HTML answers."""

    def __init__(self) -> None:
        self.env = jinja2.Environment(
            loader=jinja2.PackageLoader("mirror.ui", "templates"),
            autoescape=True,
            undefined=jinja2.StrictUndefined,
            trim_blocks=True,
            lstrip_blocks=True,
        )
        self.env.filters["urlpart"] = urlpart
        self.env.filters["when"] = _when
        self.env.globals["static"] = _static
        self.env.globals["page_url"] = page_url

    def render(self, name: str, context: dict[str, Any], status: int = 200) -> HTMLResponse:
        """Return the template ``name`` rendered with ``context``; pages are never cached."""
        html = self.env.get_template(name).render(context)
        return HTMLResponse(html, status_code=status, headers={"Cache-Control": "no-store"})
