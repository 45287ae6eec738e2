"""What every route needs: the catalog, the auth store, and the authenticated caller."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Concatenate, ParamSpec, TypeVar

from fastapi import Depends, Request
from fastapi.security import HTTPBasic, HTTPBasicCredentials
from starlette.concurrency import run_in_threadpool

from mirror.api.hidden import HiddenBranches
from mirror.api.listing_rows import ListingRows
from mirror.auth.caller import Caller
from mirror.auth.errors import AuthenticationError, SignInThrottledError
from mirror.auth.store import AuthStore
from mirror.auth.throttle import Door, sign_in_attempt
from mirror.auth.tokens import carries_token, login_user
from mirror.block.resolver import is_local_namespace
from mirror.config import GCSettings
from mirror.core.catalog import Catalog
from mirror.core.model import Repository
from mirror.errors import LakeMirrorError
from mirror.httputil.errors import UNAUTHENTICATED
from mirror.httputil.request_log import note_user
from mirror.kv import reads_locally

__all__ = [
    "ApiState",
    "Caller",
    "CallerDep",
    "OptionalCallerDep",
    "StateDep",
    "basic_credentials",
    "client_address",
    "door",
    "get_caller",
    "get_optional_caller",
    "get_state",
    "inline_repository",
    "run_read",
]

P = ParamSpec("P")
T = TypeVar("T")

basic_credentials = HTTPBasic(auto_error=False, description="access key ID and secret access key")
"""Reads a request's HTTP Basic credentials (``None``: none; undecodable ones: FastAPI's 401)."""


@dataclass
class ApiState:
    """Everything the routes share.

    Attributes:
        catalog: The versioning core.
        auth: Users, keys, groups and policies.
        version: The lakeFS-compatible version reported by ``/config``.
        local_root: Where relative ``local://`` namespaces live (``None``: not served).
        namespace_schemes: The namespace schemes new repositories may use.
        gc: Garbage collection's settings (grace period, page size).
        logout_redirect_url: Where ``GET /logout`` sends the browser.
        hidden: Hidden-branch marks.
        inline_reads: The KV's reads are local and quick enough to run on the event loop.
        listing_rows: The encoded listing rows of recently listed committed ranges.
    """

    catalog: Catalog
    auth: AuthStore
    version: str
    local_root: Path | None = None
    namespace_schemes: frozenset[str] = frozenset({"local"})
    gc: GCSettings = field(default_factory=GCSettings)
    logout_redirect_url: str = "/auth/login"
    hidden: HiddenBranches = field(init=False)
    inline_reads: bool = field(init=False)
    listing_rows: ListingRows = field(default_factory=ListingRows)

    def __post_init__(self) -> None:
        self.hidden = HiddenBranches(self.catalog.kv)
        # a local KV answers a read in microseconds and never waits for a writer (SQLite in
        # WAL mode): such reads may run on the event loop (see get_caller)
        self.inline_reads = reads_locally(self.catalog.kv)


def inline_repository(state: ApiState, repository: str) -> Repository | None:
    """Return the repository's record when reads of it may run on the event loop, else ``None``.

    They may on a local KV (:attr:`ApiState.inline_reads`) when the repository's namespace is a
    local directory: a stat, a listing page or a small read is then CPU work on local files
    that holds the GIL anyway, and a worker thread would add a hop (two thread switches) and
    no parallelism. With a remote KV or object store a read waits on the network, so it runs
    on a worker thread and the event loop keeps serving. This look-up never raises: any error
    is left for the read to answer, after its permission check.
    """
    if not state.inline_reads:
        return None
    try:
        repo = state.catalog.get_repository(repository)
    except LakeMirrorError:
        return None
    return repo if is_local_namespace(repo.storage_namespace) else None


async def run_read(
    state: ApiState,
    repository: str,
    read: Callable[Concatenate[str | Repository, P], T],
    /,
    *args: P.args,
    **kwargs: P.kwargs,
) -> T:
    """Return ``read(repo, *args, **kwargs)``, inline when :func:`inline_repository` allows.

    On the event loop ``repo`` is the repository's record, read once for both the choice and
    the read; on a worker thread it is the name ``repository``, and the read looks it up.
    """
    repo = inline_repository(state, repository)
    if repo is not None:
        return read(repo, *args, **kwargs)
    return await run_in_threadpool(read, repository, *args, **kwargs)


async def get_state(request: Request) -> ApiState:
    """Return the shared state of the app serving ``request``.

    A coroutine, so that FastAPI runs it on the event loop instead of a worker thread: it only
    reads an attribute, and the hop would cost more than the call.
    """
    state: ApiState = request.app.state.api
    return state


StateDep = Annotated[ApiState, Depends(get_state)]


def login_token_caller(state: ApiState, request: Request, *, basic: bool) -> Caller | None:
    """Return the caller a login token signs in (Bearer, or the session cookie), if any.

    lakeFS's order: a Bearer token, then HTTP Basic (``basic``: the request has it), then the
    ``internal_auth_session`` cookie; ``None`` lets Basic decide. See
    :mod:`mirror.auth.tokens`.

    Raises:
        AuthenticationError: a token that does not verify (no fallback to other schemes).
    """
    tokens = getattr(request.app.state, "login_tokens", None)
    if tokens is None:
        return None
    user = login_user(tokens, state.auth, request.headers, request.cookies, basic=basic)
    if user is None:
        return None
    note_user(user.id)
    return Caller(state.auth, user)


async def get_caller(
    state: StateDep,
    request: Request,
    credentials: Annotated[HTTPBasicCredentials | None, Depends(basic_credentials)],
) -> Caller:
    """Authenticate the request: a login token, or HTTP Basic credentials.

    A coroutine: on a local KV (:attr:`ApiState.inline_reads`) a sign-in whose secret this
    process already verified is a few microsecond reads, done on the event loop; the hop to a
    worker thread cost more than the sign-in. Otherwise (the first request of a key, whose
    scrypt verification takes milliseconds, or a remote KV) it runs on a worker thread.

    Raises:
        AuthenticationError: no credentials, or wrong ones.
    """
    if state.inline_reads:
        caller = _authenticate(state, request, credentials, remembered_only=True)
        if caller is not None:
            return caller
    caller = await run_in_threadpool(_authenticate, state, request, credentials)
    assert caller is not None  # only remembered_only declines
    return caller


def _authenticate(
    state: ApiState,
    request: Request,
    credentials: HTTPBasicCredentials | None,
    *,
    remembered_only: bool = False,
) -> Caller | None:
    """Return the request's caller (``None``: ``remembered_only`` and scrypt would have to run)."""
    token_caller = login_token_caller(state, request, basic=credentials is not None)
    if token_caller is not None:
        return token_caller
    if credentials is None:
        raise AuthenticationError("error authenticating request: no credentials (HTTP Basic)")
    key_id = credentials.username
    with sign_in_attempt(state.auth.throttle, key_id, client_address(request), API) as attempt:
        if remembered_only:
            signed_in = state.auth.sign_in_remembered(key_id, credentials.password)
            if signed_in is None:
                return None
        else:
            signed_in = state.auth.sign_in(key_id, credentials.password)
        attempt.succeeded()
    note_user(signed_in.user.id)
    return Caller(state.auth, signed_in.user, signed_in.policies)


def client_address(request: Request) -> str:
    """Return the client's address as the server sees it.

    That is the connection's peer, or, when the peer is a proxy uvicorn trusts (127.0.0.1 and
    ::1 by default; ``FORWARDED_ALLOW_IPS`` names others), the last address in
    ``X-Forwarded-For`` that is not a trusted proxy.
    """
    return request.client.host if request.client is not None else "unknown"


def door(name: str) -> Door[AuthenticationError]:
    """Return how the REST API's door ``name`` answers the sign-in throttle.

    A refusal is a 401 with lakeFS's text and the wait after it; a failure that starts one
    keeps its answer and gains ``Retry-After`` (:class:`SignInThrottledError`).
    """
    return Door(
        name,
        AuthenticationError,
        refused=lambda refusal: SignInThrottledError(
            f"{UNAUTHENTICATED}: {refusal.reason}", refusal.seconds
        ),
        delayed=lambda exc, refusal: SignInThrottledError(str(exc), refusal.seconds),
    )


API = door("api")
"""HTTP Basic on every API request."""


CallerDep = Annotated[Caller, Depends(get_caller)]


async def get_optional_caller(
    state: StateDep,
    request: Request,
    credentials: Annotated[HTTPBasicCredentials | None, Depends(basic_credentials)],
) -> Caller | None:
    """Authenticate the request as :func:`get_caller` does; ``None`` when it presents nothing.

    For lakeFS's few calls that answer an anonymous request (``GET /user``): a request with no
    HTTP Basic credentials, no Bearer token and no session cookie is anonymous, while any
    credentials it does present must sign someone in.

    Raises:
        AuthenticationError: credentials that do not sign anyone in.
    """
    if credentials is None and not carries_token(request.headers, request.cookies):
        return None
    return await get_caller(state, request, credentials)


OptionalCallerDep = Annotated[Caller | None, Depends(get_optional_caller)]
