"""Promoting a mirror from the UI: a confirmation stating the expected data loss, the report.

``POST …/mirrors/{name}/promote`` of this region's replicant (docs/disaster-recovery.md) makes
the mirror its region's writable repository. The confirmation page states what the promotion
is expected to lose (the recovery point), from the mirror's current status:

- planned (a switchover): nothing; the source is demoted first and the mirror promoted once it
  shows every source head and tag, writes being refused meanwhile, about as long as the lag;
- forced (a failover): per branch behind its source, the commits (a count, or "at least" a
  bound) and the seconds of commits the promoted repository would lack.

The promotion's report (``GET …/mirrors/{name}/promotion``, kept by the replicant after the
mirror's configuration is gone) is shown after. Refusals (a planned promotion that did not
catch up, a source that cannot be reached) are shown on the confirmation page with the
replicant's own message.
"""

from __future__ import annotations

from typing import Any

from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import BaseRoute, Route

from mirror.ui.api import ApiError
from mirror.ui.mirror_status import BranchView, MirrorView, commits_text, duration
from mirror.ui.mirroring import MIRRORS_URL, load_mirror, mirror_url, replicant_call
from mirror.ui.page import Page
from mirror.ui.render import urlpart
from mirror.ui.replicant import mirror_path

__all__ = ["expected_loss", "routes"]

DEFAULT_TIMEOUT = 60
"""Seconds a planned promotion waits for the mirror to catch up (the replicant's default)."""
_MAX_TIMEOUT = 3600
_HTTP_MARGIN = 30.0
"""Seconds the UI waits for the replicant's answer beyond the promotion's own timeout."""


def _behind(branch: BranchView) -> bool:
    return branch.lag_commits > 0 or branch.source_head != branch.mirror_head


def expected_loss(view: MirrorView) -> dict[str, Any]:
    """Return what a forced promotion of ``view`` would leave behind, from its status.

    ``branches`` lists each branch behind its source with its commits (a count or "at least")
    and seconds; ``commits`` adds them up (``at_least`` when one is a bound).
    """
    behind = [b for b in view.branches if _behind(b)]
    total = sum(b.lag_commits for b in behind)
    exact = all(b.exact for b in behind)
    return {
        "branches": behind,
        "commits": commits_text(total if exact else None, None if exact else total),
        "seconds": duration(max((b.lag_seconds for b in behind), default=0.0)),
        "none": not behind,
    }


def _timeout(text: str) -> int | None:
    try:
        value = int(text)
    except ValueError:
        return None
    return value if 0 < value <= _MAX_TIMEOUT else None


async def _confirmation(
    page: Page,
    view: MirrorView,
    force: bool,
    *,
    timeout: str = str(DEFAULT_TIMEOUT),
    error: str = "",
    status: int = 200,
) -> Response:
    return page.render(
        "mirrors/promote.html",
        status,
        mirror=view,
        force=force,
        loss=expected_loss(view),
        writes_paused=duration(view.lag_seconds),
        timeout=timeout,
        max_timeout=_MAX_TIMEOUT,
        action=mirror_url(view.source_repo, view.name, "promote"),
        cancel_url=mirror_url(view.source_repo, view.name),
        error=error,
    )


async def confirm_promotion(request: Request) -> Response:
    """Ask the person to confirm a promotion, stating the data it is expected to lose."""
    page = await Page.open(request)
    source, name = request.path_params["source"], request.path_params["name"]
    force = request.query_params.get("force", "") == "1"
    return await _confirmation(page, await load_mirror(page, source, name), force)


async def promote(request: Request) -> Response:
    """Promote the mirror; show the report, or the replicant's refusal on the confirmation."""
    page = await Page.open(request)
    form = await page.form()
    source, name = request.path_params["source"], request.path_params["name"]
    force = form.get("force") == "1"
    given = str(form.get("timeout") or DEFAULT_TIMEOUT).strip()
    timeout = DEFAULT_TIMEOUT if force else _timeout(given)
    if timeout is None:
        view = await load_mirror(page, source, name)
        error = f"The timeout must be a whole number of seconds from 1 to {_MAX_TIMEOUT}."
        return await _confirmation(page, view, force, timeout=given, error=error, status=400)
    try:
        await replicant_call(
            page,
            "POST",
            mirror_path(source, name, "promote"),
            json={"force": force, "timeout": timeout},
            timeout=timeout + _HTTP_MARGIN,
        )
    except ApiError as refused:
        view = await load_mirror(page, source, name)
        return await _confirmation(
            page, view, force, timeout=given, error=refused.message, status=refused.status
        )
    return RedirectResponse(mirror_url(source, name, "promotion"), status_code=303)


async def show_report(request: Request) -> Response:
    """Show the report of the mirror's newest promotion."""
    page = await Page.open(request)
    source, name = request.path_params["source"], request.path_params["name"]
    report: dict[str, Any] = await replicant_call(
        page, "GET", mirror_path(source, name, "promotion")
    )
    missing = [
        {
            "branch": branch,
            "mirror_head": item.get("mirror_head") or "",
            "source_head": item.get("source_head") or "",
            "commits": commits_text(item.get("lag_commits"), item.get("lag_commits_at_least")),
        }
        for branch, item in sorted((report.get("missing") or {}).items())
    ]
    refused = report.get("writes_refused_seconds")
    return page.render(
        "mirrors/report.html",
        report=report,
        source=source,
        name=name,
        heads=sorted((report.get("heads") or {}).items()),
        tags=sorted((report.get("tags") or {}).items()),
        missing=missing,
        writes_refused=None if refused is None else f"{float(refused):.2f} s",
        repository_url=f"/ui/repositories/{urlpart(name)}",
    )


_PROMOTE = MIRRORS_URL + "/{source}/{name}/promote"

routes: list[BaseRoute] = [
    Route(_PROMOTE, confirm_promotion, methods=["GET"]),
    Route(_PROMOTE, promote, methods=["POST"]),
    Route(MIRRORS_URL + "/{source}/{name}/promotion", show_report, methods=["GET"]),
]
