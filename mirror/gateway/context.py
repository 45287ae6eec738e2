"""What a gateway operation receives: the shared state and one authenticated S3 request.

The gateway app (:mod:`mirror.gateway.app`) parses the addressing (path or virtual-host style),
authenticates the signature (:mod:`mirror.gateway.auth`) and hands each operation an
:class:`S3Request`; an operation is a :data:`Handler` answering a Starlette response or raising
:class:`~mirror.gateway.errors.S3Error`.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, TypeVar

import anyio.to_thread

from mirror.auth.errors import PermissionDeniedError
from mirror.auth.permissions import Permission
from mirror.block.resolver import is_local_namespace
from mirror.errors import LakeMirrorError
from mirror.gateway.errors import S3Code, S3Error
from mirror.httputil.range_rows import RangeRows
from mirror.kv import reads_locally

if TYPE_CHECKING:
    from starlette.datastructures import Headers, QueryParams
    from starlette.requests import Request
    from starlette.responses import Response

    from mirror.auth.caller import Caller
    from mirror.auth.store import AuthStore
    from mirror.auth.tokens import LoginTokens
    from mirror.config import GatewaySettings
    from mirror.core.catalog import Catalog
    from mirror.core.model import Repository

__all__ = ["GatewayState", "Handler", "S3Request"]

T = TypeVar("T")


@dataclass(frozen=True)
class GatewayState:
    """What every gateway operation shares.

    Attributes:
        catalog: The versioning core (the same one the REST API serves).
        auth: Users, keys and policies.
        settings: The ``gateway`` configuration section.
        login_tokens: The installation's login tokens, which verify the web UI's session
            cookie on reads (``None``: the cookie authenticates nothing).
        listing_rows: The ``<Contents>`` elements of recently listed committed ranges.
    """

    catalog: Catalog
    auth: AuthStore
    settings: GatewaySettings
    login_tokens: LoginTokens | None = None
    listing_rows: RangeRows = field(default_factory=RangeRows)

    @property
    def inline_reads(self) -> bool:
        """Whether the KVs of the catalog and of the keys read in-process (``local_reads``).

        Their reads then cost microseconds and never wait for a writer: a read of keys, or of a
        repository whose namespace is a local directory, may run on the event loop, where a
        worker thread would add a hop and no parallelism (the REST API's rule, see
        :func:`mirror.api.deps.inline_repository`).
        """
        return reads_locally(self.catalog.kv) and reads_locally(self.auth.kv)


@dataclass
class S3Request:
    """One authenticated S3 request, addressed.

    Attributes:
        http: The Starlette request (headers, query, method); never read its body directly.
        state: The shared state.
        request_id: The ``x-amz-request-id`` of the answer (also in error bodies).
        bucket: The bucket (a repository name), ``None`` for service-level calls (ListBuckets).
        key: The decoded object key ``<ref>/<path>``, ``None`` for bucket-level calls.
        caller: The authenticated user, with its policies.
        body: The request body, decoded (aws-chunked) and verified as it is read.
        content_length: The decoded body length when the request states it.
    """

    http: Request
    state: GatewayState
    request_id: str
    bucket: str | None
    key: str | None
    caller: Caller
    body: AsyncIterator[bytes]
    content_length: int | None
    _inline: bool | None = field(default=None, init=False, repr=False)
    _record: Repository | None = field(default=None, init=False, repr=False)

    def reads_inline(self) -> bool:
        """Whether this request's reads of its bucket may run on the event loop.

        They may when :attr:`GatewayState.inline_reads` holds and the bucket is a repository
        whose storage namespace is a local directory: a stat, or the read of a small object,
        is then CPU work on local files. Decided once a request; never raises (an unknown
        bucket reads on a worker thread, which answers its error).
        """
        if self._inline is None:
            if self.bucket is not None and self.state.inline_reads:
                self._record = _record_of(self.state, self.bucket)
            local = self._record is not None and is_local_namespace(self._record.storage_namespace)
            self._inline = local
        return self._inline

    def repository(self) -> str | Repository:
        """Return the bucket's repository as this request's reads take it.

        The record :meth:`reads_inline` read to decide where the reads run, when it read one
        (a local KV): the catalog's reads take a record as well as a name, so the record is
        read once a request. Else the bucket's name (each read reads the record itself).
        """
        assert self.bucket is not None
        self.reads_inline()
        return self._record if self._record is not None else self.bucket

    @property
    def query(self) -> QueryParams:
        """Return the query parameters."""
        return self.http.query_params

    @property
    def headers(self) -> Headers:
        """Return the request headers."""
        return self.http.headers

    @property
    def method(self) -> str:
        """Return the HTTP method."""
        return self.http.method

    def ref_and_path(self) -> tuple[str, str]:
        """Split the key into its ref and the object path (which may be empty).

        Raises:
            S3Error: NoSuchKey when the request has no key (a bucket-level call).
        """
        if self.key is None:
            raise S3Error(S3Code.NO_SUCH_KEY, bucket=self.bucket)
        ref, _, path = self.key.partition("/")
        return ref, path

    def require(self, action: str, resource: str) -> None:
        """Return if the caller may take ``action`` on ``resource`` (lakeFS's names and ARNs).

        Raises:
            S3Error: AccessDenied, naming the missing permission after S3's text.
        """
        try:
            self.caller.require(Permission(action, resource))
        except PermissionDeniedError as exc:
            raise S3Error(
                S3Code.ACCESS_DENIED,
                f"{S3Code.ACCESS_DENIED.description}: {exc}",
                bucket=self.bucket,
                key=self.key,
            ) from exc

    async def run_sync(self, fn: Callable[..., T], *args: object) -> T:
        """Run a blocking call (the catalog, the KV, a block store) in a worker thread."""
        return await anyio.to_thread.run_sync(fn, *args)


Handler = Callable[[S3Request], Awaitable["Response"]]
"""An S3 operation: answers a response or raises :class:`~mirror.gateway.errors.S3Error`."""


def _record_of(state: GatewayState, bucket: str) -> Repository | None:
    """Return the record of repository ``bucket``, ``None`` if it cannot be read."""
    try:
        return state.catalog.get_repository(bucket)
    except LakeMirrorError:
        return None
