"""Objects written on a branch: raw or form upload, delete, bulk delete, user metadata, copy.

The routes whose paths are a branch's (``/repositories/{repository}/branches/{branch}/...``);
reads by ref (download, HEAD, stat, listing) are :mod:`mirror.api.routers.objects`'s.
"""

from __future__ import annotations

import io
import time
from functools import partial
from tempfile import SpooledTemporaryFile
from typing import Annotated, BinaryIO, cast

from fastapi import APIRouter, Header, Query, Request, Response
from starlette.concurrency import run_in_threadpool
from starlette.datastructures import FormData, UploadFile

from mirror.api.convert import (
    json_response,
    object_model,
    object_row,
)
from mirror.api.deps import (
    ApiState,
    Caller,
    CallerDep,
    StateDep,
    run_read,
)
from mirror.api.errors import read_only_message
from mirror.api.fast_reads import REQUIRED, FastRoutes, QueryParam, QueryValues
from mirror.api.models import (
    ObjectCopyCreation,
    ObjectError,
    ObjectErrorList,
    ObjectStats,
    PathList,
    UpdateObjectUserMetadata,
)
from mirror.api.routing import (
    BINARY_BODY,
    LakeFSRoute,
    ObjectPathQuery,
)
from mirror.auth.permissions import Action, Permission, object_arn
from mirror.core.catalog import Catalog
from mirror.core.errors import (
    ObjectNotFoundError,
    ProtectedBranchError,
    RepositoryReadOnlyError,
)
from mirror.core.model import Entry, Repository
from mirror.core.protection import check_staging_write
from mirror.core.validate import validate_path
from mirror.errors import InvalidValueError, PreconditionFailedError
from mirror.httputil.errors import message_for
from mirror.httputil.streams import CHUNK, BlockReader

__all__ = ["FAST_ROUTES", "router"]

router = APIRouter(route_class=LakeFSRoute, tags=["objects"])

_BRANCH = "/repositories/{repository}/branches/{branch}"
_META = "x-lakefs-meta-"
_SPOOL_IN_MEMORY = 8 << 20
_MAX_BULK = 1000


def _check_writable(
    catalog: Catalog, repository: str | Repository, branch: str, path: str, exclusive: bool
) -> None:
    """Refuse an upload before its body is read (this only reads).

    Refused: a read-only repository, a bad path, no such branch, a protected branch, or
    (``exclusive``) an existing object. ``repository``: a name, or its record just read
    (:func:`inline_repository`).
    """
    repo = repository if isinstance(repository, Repository) else catalog.get_repository(repository)
    if repo.read_only:
        raise RepositoryReadOnlyError(repo.id)
    validate_path(path)
    catalog.get_branch(repo, branch)
    # refuse before the body is read and written to the store
    check_staging_write(catalog.kv, repo, branch)
    if exclusive:
        try:
            catalog.stat_object(repo, branch, path)
        except ObjectNotFoundError:
            return
        raise PreconditionFailedError(f"object {path!r} already exists on branch {branch!r}")


@router.post(
    _BRANCH + "/objects",
    status_code=201,
    response_model=ObjectStats,
    openapi_extra={"requestBody": {"required": False, **BINARY_BODY}},
)
async def upload_object(
    repository: str,
    branch: str,
    request: Request,
    state: StateDep,
    caller: CallerDep,
    path: ObjectPathQuery,
    storage_class: str | None = None,
    force: bool = False,
    if_none_match: Annotated[str | None, Header()] = None,
) -> Response:
    """Store the request body at ``path`` on the branch (raw bytes or a form's ``content``).

    User metadata comes from ``x-lakefs-meta-<key>`` headers; ``If-None-Match: *`` refuses to
    overwrite an existing object (412).
    """
    return await _upload(state, request, caller, repository, branch, path, if_none_match)


async def _upload(
    state: ApiState,
    request: Request,
    caller: Caller,
    repository: str,
    branch: str,
    path: str,
    if_none_match: str | None,
) -> Response:
    """Answer an upload as :func:`upload_object` describes."""
    permission = Permission(Action.WRITE_OBJECT, object_arn(repository, path))
    if caller.policies_known:
        # signing in read the policies: the check is a computation, not worth a thread hop
        caller.require(permission)
    else:
        await run_in_threadpool(caller.require, permission)
    exclusive = (if_none_match or "").strip() == "*"
    catalog = state.catalog
    # reads only: on the event loop when reads of the repository may run there (deps.run_read)
    await run_read(state, repository, partial(_check_writable, catalog), branch, path, exclusive)
    content_type = request.headers.get("content-type")
    metadata = {
        k[len(_META) :].lower(): v
        for k, v in request.headers.items()
        if k.lower().startswith(_META) and len(k) > len(_META)
    }
    body: BinaryIO
    spooled = not (content_type and content_type.lower().startswith("multipart/form-data"))
    form: FormData | None = None
    if not spooled:
        form = await request.form()
        part = form.get("content")
        if not isinstance(part, UploadFile):
            # the form's other files are spooled too: close them
            await form.close()
            raise InvalidValueError("multipart upload: missing form field 'content'")
        body = part.file
        content_type = part.content_type
    else:
        body = cast(BinaryIO, SpooledTemporaryFile(max_size=_SPOOL_IN_MEMORY))
    try:
        if spooled:
            async for chunk in request.stream():
                body.write(chunk)
            body.seek(0)
        stat = await run_in_threadpool(
            catalog.upload_object,
            repository,
            branch,
            path,
            body,
            content_type=content_type or None,
            metadata=metadata,
        )
    finally:
        body.close()
        if form is not None:
            await form.close()
    return json_response(object_row(stat), 201)


@router.delete(_BRANCH + "/objects", status_code=204, response_class=Response)
def delete_object(
    repository: str,
    branch: str,
    state: StateDep,
    caller: CallerDep,
    path: ObjectPathQuery,
    force: bool = False,
    no_tombstone: bool = False,
) -> Response:
    """Stage the deletion of an object."""
    caller.require(Permission(Action.DELETE_OBJECT, object_arn(repository, path)))
    state.catalog.delete_object(repository, branch, path)
    return Response(status_code=204)


@router.post(_BRANCH + "/objects/delete", response_model=ObjectErrorList)
def delete_objects(
    repository: str,
    branch: str,
    body: PathList,
    state: StateDep,
    caller: CallerDep,
    force: bool = False,
    no_tombstone: bool = False,
) -> ObjectErrorList:
    """Stage the deletion of up to 1000 paths; paths that do not exist are ignored.

    As in lakeFS, a protected branch or a read-only repository answers 200 with a 403 error
    for each path.
    """
    if len(body.paths) > _MAX_BULK:
        raise InvalidValueError(f"delete: {len(body.paths)} paths, at most {_MAX_BULK} allowed")
    caller.require(
        *(Permission(Action.DELETE_OBJECT, object_arn(repository, p)) for p in body.paths)
    )
    try:
        state.catalog.delete_objects(repository, branch, body.paths)
    except ObjectNotFoundError:
        if len(body.paths) != 1:
            raise
    except (ProtectedBranchError, RepositoryReadOnlyError) as exc:
        message = message_for(exc)
        if isinstance(exc, RepositoryReadOnlyError):
            message = read_only_message(state.catalog.get_repository(repository))
        return ObjectErrorList(
            errors=[ObjectError(path=p, status_code=403, message=message) for p in body.paths]
        )
    return ObjectErrorList(errors=[])


@router.put(_BRANCH + "/objects/stat/user_metadata", status_code=204, response_class=Response)
def update_object_user_metadata(
    repository: str,
    branch: str,
    body: UpdateObjectUserMetadata,
    state: StateDep,
    caller: CallerDep,
    path: ObjectPathQuery,
) -> Response:
    """Replace an existing object's user metadata, as a staged change (204, as lakeFS)."""
    caller.require(Permission(Action.WRITE_OBJECT, object_arn(repository, path)))
    state.catalog.update_user_metadata(repository, branch, path, body.set)
    return Response(status_code=204)


@router.post(_BRANCH + "/objects/copy", status_code=201, response_model=ObjectStats)
def copy_object(
    repository: str,
    branch: str,
    body: ObjectCopyCreation,
    state: StateDep,
    caller: CallerDep,
    dest_path: Annotated[str, Query(description="the destination path")],
) -> ObjectStats:
    """Copy an object (from any ref of the repository) to ``dest_path`` on the branch."""
    caller.require(
        Permission(Action.READ_OBJECT, object_arn(repository, body.src_path)),
        Permission(Action.WRITE_OBJECT, object_arn(repository, dest_path)),
    )
    catalog = state.catalog
    _check_writable(catalog, repository, branch, dest_path, exclusive=False)
    repo = catalog.get_repository(repository)
    src = catalog.stat_object(repository, body.src_ref or branch, body.src_path)
    store, key = catalog.open_entry(repo, src.entry)
    address = catalog.paths.new_path()
    reader = io.BufferedReader(BlockReader(store, key, src.entry.size), CHUNK)
    info = catalog.block_store(repo).put(address, reader)
    entry = Entry(
        address=address,
        size=info.size,
        checksum=info.etag,
        mtime=int(time.time()),
        content_type=src.entry.content_type,
        metadata=dict(src.entry.metadata),
    )
    return object_model(catalog.stage_object(repository, branch, dest_path, entry))


# A plain upload, taken before FastAPI's dependency resolution (mirror.api.fast_reads): it
# answers through the same function as its route.
async def _fast_upload(
    state: ApiState, request: Request, caller: Caller, at: dict[str, str], query: QueryValues
) -> Response:
    if_none_match = request.headers.get("if-none-match")
    return await _upload(
        state, request, caller, at["repository"], at["branch"], query["path"], if_none_match
    )


FAST_ROUTES: FastRoutes = {
    upload_object: (
        (
            QueryParam("path", str, REQUIRED),
            QueryParam("storage_class", str, None),
            QueryParam("force", bool, False),
        ),
        _fast_upload,
        None,
    ),
}
"""The plain uploads :func:`~mirror.api.fast_reads.install_fast_reads` serves (see there)."""
