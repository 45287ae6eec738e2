"""Uploading files to a branch from the Objects tab, one or several at a time.

Each file goes to ``POST /api/v1/repositories/{r}/branches/{b}/objects?path=<prefix><name>`` as
``multipart/form-data`` with the field ``content``, as lakeFS's UI uploads when it does not
presign; the file's type is the one the browser gave it. Without script the upload form posts
every chosen file at once and the browser returns to the folder, which names what was uploaded,
or shows the server's refusal next to the form. With script (``static/objects.js``), each file
is posted on its own with the CSRF token in ``X-CSRF-Token`` and ``Accept: application/json``,
so the page draws a progress bar per file; the answer is then JSON: ``{"path": …}`` (201) or
``{"message": …}`` with the API's status.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlencode

from starlette.datastructures import UploadFile
from starlette.requests import Request
from starlette.responses import JSONResponse, RedirectResponse, Response
from starlette.routing import BaseRoute, Route

from mirror.ui.api import ApiError
from mirror.ui.page import Page
from mirror.ui.render import urlpart
from mirror.ui.views.objects import objects_page, objects_url

__all__ = ["FILES_FIELD", "destination", "routes"]

FILES_FIELD = "files"
"""The form field holding the files."""
_DEFAULT_TYPE = "application/octet-stream"


def destination(prefix: str) -> str:
    """Return the folder files go to: ``prefix`` without a leading ``/``, ending with one."""
    folder = prefix.strip().lstrip("/")
    return folder if not folder or folder.endswith("/") else folder + "/"


def _file_name(upload: UploadFile) -> str:
    # some browsers send a path; the object is named after the file alone
    name = (upload.filename or "").replace("\\", "/")
    return name.rsplit("/", 1)[-1]


def _wants_json(request: Request) -> bool:
    return "application/json" in request.headers.get("accept", "")


async def _send(page: Page, repository: str, branch: str, path: str, upload: UploadFile) -> Any:
    content_type = upload.content_type or _DEFAULT_TYPE
    answer = await page.send(
        "POST",
        f"/repositories/{urlpart(repository)}/branches/{urlpart(branch)}/objects",
        params={"path": path},
        files={"content": (_file_name(upload), upload.file, content_type)},
    )
    return answer.json()


async def upload_files(request: Request) -> Response:
    """Upload the form's files to ``branch`` under ``prefix``."""
    page = await Page.open(request)
    form = await page.form()
    repository = request.path_params["repository"]
    branch = str(form.get("branch") or "")
    prefix = destination(str(form.get("prefix") or ""))
    files = [f for f in form.getlist(FILES_FIELD) if isinstance(f, UploadFile) and _file_name(f)]
    as_json = _wants_json(request)
    if not files:
        message = "Choose at least one file to upload."
        if as_json:
            return JSONResponse({"message": message}, status_code=400)
        return await objects_page(page, upload_error=message, status=400, ref=branch, prefix=prefix)
    uploaded: list[str] = []
    for upload in files:
        path = prefix + _file_name(upload)
        try:
            await _send(page, repository, branch, path, upload)
        except ApiError as refused:
            if as_json:
                return JSONResponse(
                    {"message": refused.message, "path": path}, status_code=refused.status
                )
            done = f" (uploaded before it: {', '.join(uploaded)})" if uploaded else ""
            return await objects_page(
                page,
                upload_error=f"{path}: {refused.message}{done}",
                status=refused.status,
                ref=branch,
                prefix=prefix,
            )
        finally:
            await upload.close()
        uploaded.append(path)
    if as_json:
        return JSONResponse({"path": uploaded[0], "paths": uploaded}, status_code=201)
    listing = objects_url(repository, branch, prefix)
    joiner = "&" if "?" in listing else "?"
    names = urlencode([("uploaded", p) for p in uploaded])
    return RedirectResponse(f"{listing}{joiner}{names}", status_code=303)


routes: list[BaseRoute] = [
    Route("/ui/repositories/{repository}/objects/upload", upload_files, methods=["POST"]),
]
