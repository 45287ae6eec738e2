"""Objects read by ref: download with ranges, HEAD, stat, listing.

The routes whose paths are a ref's (``/repositories/{repository}/refs/{ref}/...``); writes on a
branch are :mod:`mirror.api.routers.object_writes`'s.
"""

from __future__ import annotations

import itertools
import time
from dataclasses import dataclass
from typing import Annotated, Any

from fastapi import APIRouter, Header, Request, Response
from fastapi.responses import StreamingResponse
from starlette.concurrency import run_in_threadpool

from mirror.api.convert import (
    common_prefix_row,
    json_response,
    object_row,
    object_rows,
)
from mirror.api.deps import (
    ApiState,
    Caller,
    CallerDep,
    StateDep,
    inline_repository,
    run_read,
)
from mirror.api.fast_reads import REQUIRED, FastRoutes, QueryParam, QueryValues
from mirror.api.listing_rows import listing_body
from mirror.api.models import (
    ObjectStats,
    ObjectStatsList,
)
from mirror.api.paging import page_fields, page_size
from mirror.api.routing import (
    BINARY_BODY,
    AfterQuery,
    AmountQuery,
    DelimiterQuery,
    LakeFSRoute,
    ObjectPathQuery,
    PrefixQuery,
)
from mirror.auth.permissions import Action, Permission, object_arn, repository_arn
from mirror.block.errors import InvalidRangeError
from mirror.block.resolver import is_local_namespace
from mirror.core.model import AddressType, ObjectStat, Repository
from mirror.httputil.disposition import attachment, path_base
from mirror.httputil.errors import error_response
from mirror.httputil.streams import CHUNK, iter_block, parse_range

__all__ = ["FAST_READS", "router"]

router = APIRouter(route_class=LakeFSRoute, tags=["objects"])

_REF = "/repositories/{repository}/refs/{ref}"


def _headers(stat: ObjectStat) -> dict[str, str]:
    entry = stat.entry
    return {
        "content-type": entry.content_type,
        "etag": f'"{entry.checksum}"',
        "last-modified": time.strftime("%a, %d %b %Y %H:%M:%S GMT", time.gmtime(entry.mtime)),
        "accept-ranges": "bytes",
    }


def _content_headers(stat: ObjectStat) -> dict[str, str]:
    # as lakeFS: a browser opening the URL saves the object instead of rendering it (an HTML
    # object would otherwise run in the server's origin)
    return {**_headers(stat), "content-disposition": attachment(path_base(stat.path))}


def _range_error(exc: InvalidRangeError, size: int, head: bool) -> Response:
    response = Response(status_code=416) if head else error_response(416, str(exc))
    # the official client looks the header up case-sensitively: send it exactly so
    response.raw_headers.append((b"Content-Range", f"bytes */{size}".encode()))
    return response


@router.head(_REF + "/objects", status_code=200, response_class=Response)
def head_object(
    repository: str,
    ref: str,
    state: StateDep,
    caller: CallerDep,
    path: ObjectPathQuery,
    range_: Annotated[str | None, Header(alias="Range")] = None,
) -> Response:
    """Answer whether an object exists, with its size and type, and no body."""
    caller.require(Permission(Action.READ_OBJECT, object_arn(repository, path)))
    stat = state.catalog.stat_object(repository, ref, path)
    size = stat.entry.size
    try:
        span = parse_range(range_, size)
    except InvalidRangeError as exc:
        return _range_error(exc, size, head=True)
    start, end = span or (0, size)
    headers = {**_headers(stat), "content-length": str(end - start)}
    response = Response(status_code=206 if span else 200, headers=headers)
    if span:
        response.raw_headers.append((b"Content-Range", f"bytes {start}-{end - 1}/{size}".encode()))
    return response


@router.get(
    _REF + "/objects",
    response_class=Response,
    responses={
        200: {"description": "the object's bytes", **BINARY_BODY},
        206: {"description": "a range of the object's bytes", **BINARY_BODY},
        416: {"description": "range not satisfiable"},
    },
)
async def get_object(
    repository: str,
    ref: str,
    state: StateDep,
    caller: CallerDep,
    path: ObjectPathQuery,
    presign: bool | None = None,
    range_: Annotated[str | None, Header(alias="Range")] = None,
    if_none_match: Annotated[str | None, Header()] = None,
) -> Response:
    """Return an object's bytes: all (200), or one ``Range`` (206; 416 past the end)."""
    return await _read_object(state, caller, _Read(repository, ref, path, range_, if_none_match))


@dataclass(frozen=True)
class _Read:
    """What a read of an object asks for: where, which bytes, unless which ETag."""

    repository: str
    ref: str
    path: str
    range_: str | None
    if_none_match: str | None


async def _read_object(state: ApiState, caller: Caller, read: _Read) -> Response:
    repo = inline_repository(state, read.repository)
    if repo is None:
        return await run_in_threadpool(_get_object, state, caller, read)
    _require_read(caller, read)
    stat = state.catalog.stat_object(repo, read.ref, read.path)
    args = (state, repo, stat, read.range_, read.if_none_match)
    if stat.entry.address_type is AddressType.FULL and not is_local_namespace(stat.entry.address):
        # the bytes are in another store (an imported object): read them on a worker thread
        return await run_in_threadpool(_serve_object, *args)
    return _serve_object(*args)


def _require_read(caller: Caller, read: _Read) -> None:
    """Refuse ``read`` unless the caller may read its object."""
    caller.require(Permission(Action.READ_OBJECT, object_arn(read.repository, read.path)))


def _get_object(state: ApiState, caller: Caller, read: _Read) -> Response:
    _require_read(caller, read)
    # read once: the stat and the bytes' store both start from it
    repo = state.catalog.get_repository(read.repository)
    stat = state.catalog.stat_object(repo, read.ref, read.path)
    return _serve_object(state, repo, stat, read.range_, read.if_none_match)


def _serve_object(
    state: ApiState,
    repo: Repository,
    stat: ObjectStat,
    range_: str | None,
    if_none_match: str | None,
) -> Response:
    """Answer a read of ``stat``'s bytes, an object of repository ``repo``."""
    catalog = state.catalog
    size = stat.entry.size
    headers = _content_headers(stat)
    if if_none_match and if_none_match.strip() in (headers["etag"], stat.entry.checksum):
        return Response(status_code=304, headers={"etag": headers["etag"]})
    try:
        span = parse_range(range_, size)
    except InvalidRangeError as exc:
        return _range_error(exc, size, head=False)
    start, end = span or (0, size)
    store, key = catalog.open_entry(repo, stat.entry)
    chunks = iter_block(store, key, start, end)
    # read the first chunk now, so that missing data is an error status, not a cut stream
    first = list(itertools.islice(chunks, 1))
    headers["content-length"] = str(end - start)
    status = 206 if span else 200
    response: Response
    if end - start <= CHUNK:
        # one chunk is the whole answer: no streaming, which would hop to a worker thread
        # once per chunk and once more to find the end
        response = Response(b"".join(first), status_code=status, headers=headers)
    else:
        response = StreamingResponse(
            itertools.chain(first, chunks), status_code=status, headers=headers
        )
    if span:
        response.raw_headers.append((b"Content-Range", f"bytes {start}-{end - 1}/{size}".encode()))
    return response


@router.get(_REF + "/objects/stat", response_model=ObjectStats)
async def stat_object(
    repository: str,
    ref: str,
    state: StateDep,
    caller: CallerDep,
    path: ObjectPathQuery,
    user_metadata: bool = True,
    presign: bool | None = None,
) -> Response:
    """Return an object's metadata."""
    return await run_read(
        state, repository, _stat_object, repository, ref, state, caller, path, user_metadata
    )


def _stat_object(
    repo: str | Repository,
    repository: str,
    ref: str,
    state: ApiState,
    caller: Caller,
    path: str,
    user_metadata: bool,
) -> Response:
    """Answer a stat (``repo``: the repository's record when already read, else its name)."""
    caller.require(Permission(Action.READ_OBJECT, object_arn(repository, path)))
    stat = state.catalog.stat_object(repo, ref, path)
    return json_response(object_row(stat, user_metadata=user_metadata))


@router.get(_REF + "/objects/ls", response_model=ObjectStatsList)
async def list_objects(
    repository: str,
    ref: str,
    state: StateDep,
    caller: CallerDep,
    after: AfterQuery = "",
    amount: AmountQuery = 0,
    delimiter: DelimiterQuery = "",
    prefix: PrefixQuery = "",
    user_metadata: bool = True,
    presign: bool | None = None,
) -> Response:
    """List objects by path; with a delimiter, fold deeper paths into ``common_prefix`` rows.

    Answers the :class:`ObjectStatsList` fields as plain rows (:func:`object_row`): one model
    per object, validated again as the response model, cost more than the listing itself.
    """
    return await run_read(
        state,
        repository,
        _list_objects,
        repository,
        ref,
        state,
        caller,
        after,
        amount,
        delimiter,
        prefix,
        user_metadata,
    )


def _list_objects(
    repo: str | Repository,
    repository: str,
    ref: str,
    state: ApiState,
    caller: Caller,
    after: str,
    amount: int,
    delimiter: str,
    prefix: str,
    user_metadata: bool,
) -> Response:
    caller.require(Permission(Action.LIST_OBJECTS, repository_arn(repository)))
    listed = state.catalog.list_objects(
        repo, ref, prefix, after=after, amount=page_size(amount), delimiter=delimiter
    )
    if listed.spans:
        # committed objects only: the page is slices of its ranges' rows, encoded once
        count = sum(span.hi - span.lo for span in listed.spans)
        pagination = page_fields(listed.has_more, listed.next_offset, count)
        body = listing_body(listed, state.listing_rows, user_metadata, pagination)
        return Response(body, media_type="application/json")
    rows = object_rows(listed.rows, user_metadata)
    if listed.common_prefixes:
        rows.extend(common_prefix_row(p) for p in listed.common_prefixes)
        rows.sort(key=_row_path)
    pagination = page_fields(listed.has_more, listed.next_offset, len(rows))
    return json_response({"pagination": pagination, "results": rows})


def _row_path(row: dict[str, Any]) -> str:
    path: str = row["path"]
    return path


# The plain requests of the hottest object reads (stat, read, list), taken before
# FastAPI's dependency resolution (mirror.api.fast_reads): each answers through the same
# function as its route.
_PATH = QueryParam("path", str, REQUIRED)
_USER_METADATA = QueryParam("user_metadata", bool, True)
_PRESIGN = QueryParam("presign", bool, None)


async def _fast_stat(
    state: ApiState, request: Request, caller: Caller, at: dict[str, str], query: QueryValues
) -> Response:
    repository, ref = at["repository"], at["ref"]
    args = (repository, ref, state, caller, query["path"], query["user_metadata"])
    return await run_read(state, repository, _stat_object, *args)


async def _fast_read(
    state: ApiState, request: Request, caller: Caller, at: dict[str, str], query: QueryValues
) -> Response:
    headers = request.headers
    read = _Read(
        at["repository"],
        at["ref"],
        query["path"],
        headers.get("range"),
        headers.get("if-none-match"),
    )
    return await _read_object(state, caller, read)


async def _fast_list(
    state: ApiState, request: Request, caller: Caller, at: dict[str, str], query: QueryValues
) -> Response:
    repository, ref = at["repository"], at["ref"]
    args = (repository, ref, state, caller, query["after"], query["amount"], query["delimiter"])
    return await run_read(
        state, repository, _list_objects, *args, query["prefix"], query["user_metadata"]
    )


FAST_READS: FastRoutes = {
    stat_object: ((_PATH, _USER_METADATA, _PRESIGN), _fast_stat, None),
    get_object: ((_PATH, _PRESIGN), _fast_read, None),
    list_objects: (
        (
            QueryParam("after", str, ""),
            QueryParam("amount", int, 0),
            QueryParam("delimiter", str, ""),
            QueryParam("prefix", str, ""),
            _USER_METADATA,
            _PRESIGN,
        ),
        _fast_list,
        None,
    ),
}
"""The object requests :func:`~mirror.api.fast_reads.install_fast_reads` serves plainly."""
