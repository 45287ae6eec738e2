"""Importing objects that already lie in storage into a branch: the form that starts an import.

As lakeFS's import dialog: ``POST /api/v1/repositories/{r}/branches/{b}/import`` with
``paths`` (each ``{type: common_prefix|object, path: <source URI>, destination}``) and
``commit: {message, metadata}`` answers 202 with the import's ID, and the browser goes to its
progress page (:mod:`mirror.ui.views.import_status`). The form holds one row per source
(**Add source** adds one, in place with script) and the commit's message and metadata rows; a
refusal the API makes at once (a source inside the repository's namespace, a dirty branch, an
unknown branch) shows next to the form with what was typed.

The import is offered (:func:`import_offer`; the Objects tab links to it on a branch) only when
the server imports (``GET /api/v1/config`` → ``storage_config.import_support``, as lakeFS's UI
decides; read once per process), the repository is not a mirror, and the person's policies allow
it: reading storage (``fs:ImportFromStorage``), writing objects and committing to the branch,
asked with the Objects page's own permissions.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from starlette.datastructures import FormData
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import BaseRoute, Route

from mirror.auth.permissions import Action, Permission, branch_arn, namespace_arn, object_arn
from mirror.ui.api import ApiError
from mirror.ui.forms import text, texts
from mirror.ui.metadata_form import ADD_ROW, MetadataRow, blank_rows, metadata_of, rows_from
from mirror.ui.page import Page
from mirror.ui.render import page_url, urlpart
from mirror.ui.views.commits import branch_names
from mirror.ui.views.import_status import import_status_url
from mirror.ui.views.repository import load_repository, repository_context, repository_url

__all__ = [
    "ADD_SOURCE",
    "IMPORT_FROM_STORAGE",
    "SOURCE_TYPES",
    "ImportOffer",
    "import_offer",
    "import_permissions",
    "routes",
]

IMPORT_FROM_STORAGE = "fs:ImportFromStorage"
"""lakeFS's action for reading a storage location to import it."""
ADD_SOURCE = "add_source"
"""The name of the button that asks for one more source row."""
SOURCE_TYPES = (
    ("common_prefix", "Prefix: every object under it"),
    ("object", "Object: exactly this one"),
)
"""lakeFS's source types (``paths[].type``), with what the form says of each."""

_TAB = "objects"


@dataclass(frozen=True, slots=True)
class SourceRow:
    """One source as the form holds it."""

    type: str
    path: str
    destination: str


@dataclass(slots=True)
class ImportForm:
    """What the import form shows: what was typed, and the server's refusal if any."""

    branch: str
    sources: list[SourceRow]
    message: str = ""
    rows: list[MetadataRow] = field(default_factory=blank_rows)
    error: str = ""


def import_url(repository: str, branch: str, prefix: str = "") -> str:
    """Return the UI path of the import form into ``branch``, ``prefix`` the destination."""
    return page_url(f"{repository_url(repository)}/import", ref=branch, path=prefix)


def import_permissions(repository: str, branch: str) -> list[Permission]:
    """Return what an import into ``branch`` needs: reading storage, writing objects, committing."""
    return [
        Permission(IMPORT_FROM_STORAGE, namespace_arn("*")),
        Permission(Action.WRITE_OBJECT, object_arn(repository, "*")),
        Permission(Action.CREATE_COMMIT, branch_arn(repository, branch)),
    ]


def _refusal(repo: dict[str, Any], storage: dict[str, Any], allowed: list[bool] | None) -> str:
    """Return why an import is not offered here (``allowed``: :func:`import_permissions`'s)."""
    if repo.get("read_only", False):
        return "A mirror takes no import: it changes only as its source's commits arrive."
    if not storage.get("import_support"):
        return "This server does not import from storage."
    if allowed is None or not all(allowed):
        return "Your policies do not allow importing into this branch."
    return ""


async def _why_not(page: Page, repo: dict[str, Any], branch: str, storage: dict[str, Any]) -> str:
    """Return why ``branch`` cannot take an import from this person here, or ``""``."""
    if repo.get("read_only", False) or not storage.get("import_support"):
        return _refusal(repo, storage, None)
    allowed = await page.allowed(import_permissions(repo["id"], branch))
    return _refusal(repo, storage, allowed)


@dataclass(frozen=True, slots=True)
class ImportOffer:
    """Whether a page links to the import form: the permissions to ask with the page's own.

    Made by :func:`import_offer`; the page asks :attr:`permissions` in its own
    ``page.allowed`` call (one call for the page) and hands the answers to :meth:`url`.
    """

    repo: dict[str, Any]
    branch: str
    prefix: str
    storage: dict[str, Any]
    permissions: list[Permission]

    def url(self, allowed: list[bool]) -> str:
        """Return the import form's path if offered, given the answers to :attr:`permissions`."""
        if not self.permissions or _refusal(self.repo, self.storage, allowed):
            return ""
        return import_url(self.repo["id"], self.branch, self.prefix)


async def import_offer(
    page: Page, repo: dict[str, Any], branch: str, prefix: str = ""
) -> ImportOffer:
    """Return the import offer of ``branch``: no permission to ask when none could be offered.

    The server's storage configuration comes from ``GET /config`` read once per process
    (:class:`~mirror.ui.server_config.ServerConfig`); a mirror asks nothing at all.
    """
    if repo.get("read_only", False):
        return ImportOffer(repo, branch, prefix, {}, [])
    storage = await page.storage_config()
    asked = import_permissions(repo["id"], branch) if storage.get("import_support") else []
    return ImportOffer(repo, branch, prefix, storage, asked)


def _sources_from(form: FormData) -> list[SourceRow]:
    types, paths = texts(form, "source_type", strip=True), texts(form, "source_path", strip=True)
    destinations = texts(form, "source_destination", strip=True)
    count = max(len(types), len(paths), len(destinations))
    rows = [
        SourceRow(
            types[i] if i < len(types) else SOURCE_TYPES[0][0],
            paths[i] if i < len(paths) else "",
            destinations[i] if i < len(destinations) else "",
        )
        for i in range(count)
    ]
    return rows or [SourceRow(SOURCE_TYPES[0][0], "", "")]


async def _form_page(
    page: Page, form: ImportForm, status: int = 200, *, repo: dict[str, Any] | None = None
) -> Response:
    repository = page.request.path_params["repository"]
    repo = repo or await load_repository(page, repository)
    storage = await page.storage_config()
    refused = await _why_not(page, repo, form.branch, storage)
    return page.render(
        "repository/import.html",
        status,
        **repository_context(repo, _TAB),
        form=form,
        refused=refused,
        source_types=SOURCE_TYPES,
        branch_names=await branch_names(page, repository),
        example=storage.get("blockstore_namespace_example", ""),
        action=f"{repository_url(repository)}/import",
        objects_url=page_url(repository_url(repository, _TAB), ref=form.branch),
    )


async def show_form(request: Request) -> Response:
    """Show the import form into the branch ``ref``, ``path`` the first destination."""
    page = await Page.open(request)
    query = request.query_params
    repo = await load_repository(page, request.path_params["repository"])
    branch = query.get("ref", "") or repo["default_branch"]
    source = SourceRow(SOURCE_TYPES[0][0], "", query.get("path", ""))
    return await _form_page(page, ImportForm(branch, [source]), repo=repo)


async def start_import(request: Request) -> Response:
    """Start an import (or add a row to the form); follow it on its progress page."""
    page = await Page.open(request)
    form = await page.form()
    typed = ImportForm(
        text(form, "branch").strip(),
        _sources_from(form),
        # browsers send a textarea's lines CRLF-separated; the commit keeps them as typed
        text(form, "message").replace("\r\n", "\n"),
        rows_from(form),
    )
    if ADD_SOURCE in form:
        typed.sources.append(SourceRow(SOURCE_TYPES[0][0], "", ""))
        return await _form_page(page, typed)
    if ADD_ROW in form:
        typed.rows = [*typed.rows, *blank_rows()]
        return await _form_page(page, typed)
    try:
        metadata = metadata_of(typed.rows)
    except ValueError as bad:
        typed.error = str(bad)
        return await _form_page(page, typed, 400)
    body = {
        "paths": [
            {"type": s.type, "path": s.path, "destination": s.destination}
            for s in typed.sources
            if s.path or s.destination
        ],
        "commit": {"message": typed.message, "metadata": metadata},
    }
    repository = request.path_params["repository"]
    path = f"/repositories/{urlpart(repository)}/branches/{urlpart(typed.branch)}/import"
    try:
        started = await page.send("POST", path, json=body)
    except ApiError as refused:
        typed.error = refused.message
        return await _form_page(page, typed, refused.status)
    import_id: str = started.json()["id"]
    return RedirectResponse(import_status_url(repository, typed.branch, import_id), status_code=303)


routes: list[BaseRoute] = [
    Route("/ui/repositories/{repository}/import", show_form, methods=["GET"]),
    Route("/ui/repositories/{repository}/import", start_import, methods=["POST"]),
]
