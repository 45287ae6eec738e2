"""A repository's Compare tab: the differences between any two refs, and merging one into the other.

As lakeFS's UI (``compare?ref=<base>&compare=<source>``, each a branch, a tag, a commit ID or a
ref expression; both the default branch when not given): ``GET
/api/v1/repositories/{r}/refs/{base}/diff/{source}?delimiter=/&prefix&after&amount`` lists what
merging the source into the base would bring, one folder level and 100 rows at a time
(:mod:`mirror.ui.difftree`). Merging goes through the asynchronous merge API
(``POST …/refs/{source}/merge/{base}/async`` ``{strategy, message, metadata}``), whose progress
:mod:`mirror.ui.views.merges` shows; a refusal the API makes up front (a dirty or protected
base, a bad strategy) is shown next to the form with what was typed. The merge form, and the
link to open a pull request, appear only when the base is a branch the person may commit to,
the refs differ, and the repository is not a mirror (lakeFS's rule: two refs with changes).
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field
from typing import Any

from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import BaseRoute, Route

from mirror.auth.permissions import Action, Permission, branch_arn, repository_arn
from mirror.ui.api import ApiError
from mirror.ui.difftree import DiffListing, load_diff
from mirror.ui.forms import text
from mirror.ui.metadata_form import ADD_ROW, MetadataRow, blank_rows, metadata_of, rows_from
from mirror.ui.page import Page
from mirror.ui.render import page_url, urlpart
from mirror.ui.views.commits import branch_names
from mirror.ui.views.merges import merge_status_url
from mirror.ui.views.repository import (
    load_repository,
    repository_api,
    repository_context,
    repository_url,
)

__all__ = ["STRATEGIES", "compare_url", "routes"]

_TAB = "compare"
_TAG_CHOICES = 100
"""Tags offered by name in a ref field (any other ref can be typed)."""

STRATEGIES = (
    ("", "Default: stop at a conflict"),
    ("source-wins", "source-wins: a conflict takes the source's version"),
    ("dest-wins", "dest-wins: a conflict keeps the base's version"),
)
"""The merge strategies lakeFS offers (``strategy`` values), with what the form says of each."""


@dataclass(slots=True)
class MergeForm:
    """What the merge form shows: what was typed, and the server's refusal if any."""

    strategy: str = ""
    message: str = ""
    rows: list[MetadataRow] = field(default_factory=blank_rows)
    error: str = ""
    open: bool = False


def compare_url(repository: str, base: str, source: str, prefix: str = "", after: str = "") -> str:
    """Return the UI path comparing ``source`` with ``base`` (lakeFS's ``ref`` and ``compare``)."""
    return page_url(
        repository_url(repository, _TAB), ref=base, compare=source, prefix=prefix, after=after
    )


def _diff_path(repository: str, base: str, source: str) -> str:
    return repository_api(repository, "refs", urlpart(base), "diff", urlpart(source))


async def _is_branch(page: Page, repository: str, ref: str) -> bool:
    try:
        await page.get(repository_api(repository, "branches", urlpart(ref)))
    except ApiError:
        return False  # a tag, a commit ID or an expression: nothing can be merged into it
    return True


async def _ref_names(page: Page, repository: str) -> list[str]:
    branches, tags = await asyncio.gather(
        branch_names(page, repository),
        page.get(repository_api(repository, "tags"), amount=_TAG_CHOICES),
    )
    return [*branches, *(t["id"] for t in tags["results"])]


async def _differs(page: Page, repository: str, base: str, source: str) -> bool:
    listing: dict[str, Any] = await page.get(
        _diff_path(repository, base, source), amount=1, delimiter="/"
    )
    return bool(listing["results"])


async def _compare(
    page: Page, base: str, source: str, merge: MergeForm | None = None, status: int = 200
) -> Response:
    repository = page.request.path_params["repository"]
    repo, names = await asyncio.gather(
        load_repository(page, repository), _ref_names(page, repository)
    )
    base = base or repo["default_branch"]
    source = source or repo["default_branch"]
    query = page.request.query_params
    prefix, after = query.get("prefix", ""), query.get("after", "")
    diff: DiffListing | None = None
    error = ""
    changed = False
    if base != source:
        try:
            diff = await load_diff(
                page,
                _diff_path(repository, base, source),
                prefix=prefix,
                after=after,
                url=lambda p, a: compare_url(repository, base, source, p, a),
            )
            at_top = not prefix and not after
            changed = bool(diff.rows) if at_top else await _differs(page, repository, base, source)
        except ApiError as refused:
            error, status = refused.message, refused.status if status == 200 else status
    can_merge = can_pull = False
    if changed and not repo.get("read_only", False):
        base_branch, source_branch = await asyncio.gather(
            _is_branch(page, repository, base), _is_branch(page, repository, source)
        )
        if base_branch:
            may_merge, may_pull = await page.allowed(
                [
                    Permission(Action.CREATE_COMMIT, branch_arn(repository, base)),
                    Permission(Action.WRITE_PULL_REQUEST, repository_arn(repository)),
                ]
            )
            can_merge, can_pull = may_merge, may_pull and source_branch
    here = repository_url(repository, _TAB)
    return page.render(
        "repository/compare.html",
        status,
        **repository_context(repo, _TAB),
        tab_url=here,
        base=base,
        source=source,
        ref_names=names,
        swap_url=compare_url(repository, source, base),
        diff=diff,
        error=error,
        changed=changed,
        can_merge=can_merge,
        can_pull=can_pull,
        merge=merge or MergeForm(),
        merge_url=f"{here}/merge",
        strategies=STRATEGIES,
        pull_url=page_url(
            f"{repository_url(repository, 'pulls')}/new", source=source, destination=base
        ),
    )


async def show_compare(request: Request) -> Response:
    """Show what merging the ``compare`` ref into the ``ref`` ref would bring."""
    query = request.query_params
    return await _compare(await Page.open(request), query.get("ref", ""), query.get("compare", ""))


async def start_merge(request: Request) -> Response:
    """Start merging the source into the base; follow its progress on the merge's page."""
    page = await Page.open(request)
    form = await page.form()
    base, source = text(form, "ref").strip(), text(form, "compare").strip()
    # browsers send a textarea's lines CRLF-separated; lakeFS's UI sends them as typed
    message = text(form, "message").replace("\r\n", "\n")
    merge = MergeForm(text(form, "strategy"), message, rows_from(form), open=True)
    if ADD_ROW in form:
        merge.rows = [*merge.rows, *blank_rows()]
        return await _compare(page, base, source, merge)
    try:
        metadata = metadata_of(merge.rows)
    except ValueError as bad:
        merge.error = str(bad)
        return await _compare(page, base, source, merge, 400)
    body: dict[str, Any] = {"metadata": metadata}
    if merge.message.strip():
        body["message"] = merge.message
    if merge.strategy:
        body["strategy"] = merge.strategy
    repository = request.path_params["repository"]
    path = repository_api(repository, "refs", urlpart(source), "merge", urlpart(base), "async")
    try:
        started = await page.send("POST", path, json=body)
    except ApiError as refused:
        merge.error = refused.message
        return await _compare(page, base, source, merge, refused.status)
    task_id: str = started.json()["id"]
    return RedirectResponse(
        merge_status_url(repository, task_id, source, base, started=int(time.time())),
        status_code=303,
    )


routes: list[BaseRoute] = [
    Route("/ui/repositories/{repository}/compare", show_compare, methods=["GET"]),
    Route("/ui/repositories/{repository}/compare/merge", start_merge, methods=["POST"]),
]
